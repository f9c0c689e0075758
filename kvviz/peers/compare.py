"""kvviz's serve run of a workload beside vLLM's run of the same requests (kvviz.peers.vllm): per request the
tokens (equal, or the first position that differs) and the prompt tokens served from the prefix cache;
per run preemptions, peak blocks, prefill tokens computed and steps. Every difference gets one line saying
where the two schedulers behave differently and why, from vLLM's own source where it says so.

No Qt; torch only to weigh a differing greedy choice on kvviz's model (`greedy_margin`).
"""
from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kvviz.peers.vllm import NOT_REPORTED, Requests, VllmRun, map_settings, run_vllm

# Where vLLM 0.32 says what it does, quoted in the lines that explain a difference.
SAME_STEP = ("vLLM keys a block in its prefix cache when it allocates the block's slots, before the step computes "
             "it (vllm/v1/core/kv_cache_manager.py, KVCacheManager.allocate_slots: cache_blocks up to "
             "num_computed + num_new_tokens), so a request admitted later in the same step reuses blocks an earlier "
             "one computes in that very forward; kvviz keys a block only after the step that wrote it "
             "(kvviz/serving/block_manager.py, BlockManager.written), so requests admitted together share nothing")
FIRST_PREFILL_ONLY = ("vLLM counts a request's cached tokens at its first prefill only (vllm/v1/core/sched/"
                      "scheduler.py: 'Track first scheduled prefill, not post-preemption repeat prefills'); kvviz adds "
                      "the hit of every admission, re-admissions after a preemption included (Scheduler._admit)")
NO_ADMISSION_AFTER_PREEMPTION = ("vLLM admits no waiting request in a step in which it preempted one (vllm/v1/core/"
                                 "sched/scheduler.py, Scheduler.schedule: 'if not preempted_reqs'); kvviz's paged "
                                 "scheduler admits in that step when the pool has room")
RUNNING_ORDER = ("kvviz serves running requests' decode tokens before their prefill chunks; vLLM walks its running "
                 "queue in admission order, whatever each one's phase (Scheduler.schedule: 'First, schedule the "
                 "RUNNING requests'), and preempts the last one in that queue (self.running.pop())")
RECOMPUTED = ("kvviz counts the prompt tokens recomputed after a preemption; vLLM's prompt_token_stats count each "
              "request's first prefill only")
LAST_TOKEN = ("both recompute the last token of a prompt that is wholly cached (vLLM: get_computed_blocks, "
              "max_cache_hit_length = num_tokens - 1; kvviz: BlockManager.match_prefix), so a hit stops one block "
              "short")
NEAR_TIE = 1e-3  # a greedy choice between logits closer than this is a rounding's to flip


@dataclass(frozen=True)
class RequestPair:
    """One request under kvviz's scheduler and under vLLM."""

    request: int
    prompt_tokens: int
    tokens_equal: bool
    first_difference: int | None  # the first generated position where the tokens differ (None: equal)
    kvviz_cached: int
    vllm_cached: int
    kvviz_first_token_step: int
    vllm_first_token_step: int | None
    kvviz_preemptions: int
    vllm_preemptions: int


@dataclass(frozen=True)
class Report:
    """The comparison of one kvviz serve run with vLLM's run of the same requests."""

    scheduler: str
    workload: str
    settings: tuple[tuple[str, str, str], ...]  # (setting, kvviz, vLLM)
    requests: tuple[RequestPair, ...]
    figures: tuple[tuple[str, float, float], ...]  # per run: (figure, kvviz, vLLM)
    differences: tuple[str, ...]  # one line each: where the two differ and why
    notes: tuple[str, ...]  # what holds for both, and what vLLM does not report
    vllm: VllmRun

    @property
    def tokens_equal(self) -> bool:
        return all(r.tokens_equal for r in self.requests)


def run_against(kvviz_run, model, *, checkpoint: str | Path | None = None, vllm_python: str | None = None,
                threads: int | None = None, startup_s: float | None = None) -> Report:
    """vLLM's run of `kvviz_run`'s requests (kvviz.serving.record.ServeRun: the prompt ids it tokenized, its
    arrivals, new tokens and settings as it used them) beside it. `checkpoint`: a Hugging Face folder of
    `model`; None writes `model` as one in a temporary folder (kvviz.peers.hf_export)."""
    from kvviz.peers.hf_export import byte_tokenizer_json, write_checkpoint

    work = requests_of(kvviz_run)
    settings = map_settings(kvviz_run.scheduler, kvviz_run.settings, [list(p) for p in work.prompts],
                            list(work.new_tokens), max_seq_len=model.cfg.max_seq_len, threads=threads)
    kw = {} if startup_s is None else {"startup_s": startup_s}
    with tempfile.TemporaryDirectory(prefix="kvviz-checkpoint-") as tmp:
        if checkpoint is None:
            if model.cfg.tokenizer != "bytes":
                raise ValueError("give the model's Hugging Face folder for vLLM (it was not made with kvviz's "
                                 "byte tokenizer)")
            checkpoint = write_checkpoint(model, Path(tmp) / "model", byte_tokenizer_json())
        run, = run_vllm(checkpoint, [work], settings, head_dim=model.cfg.head_dim, vllm_python=vllm_python, **kw)
    return compare(kvviz_run, run, model=model)


def requests_of(kvviz_run) -> Requests:
    """The requests of a kvviz serve run as vLLM is sent them: the prompt ids kvviz tokenized, arrivals, new tokens."""
    return Requests(prompts=tuple(tuple(r.prompt_ids) for r in kvviz_run.results),
                    new_tokens=tuple(r.new_tokens for r in kvviz_run.workload.requests),
                    arrivals=tuple(r.arrival for r in kvviz_run.workload.requests))


def first_difference(a: tuple[int, ...], b: tuple[int, ...]) -> int | None:
    """The first position where two token lists differ (a shorter list differs where it ends); None if equal."""
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return None if len(a) == len(b) else min(len(a), len(b))


def common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def greedy_margin(model, ids: list[int], ours: int, theirs: int) -> float:
    """logit(ours) - logit(theirs) after `ids`, on kvviz's model in float32: how close greedy's choice was."""
    import torch

    with torch.inference_mode():
        logits = model(torch.tensor([ids], device=next(model.parameters()).device)).logits[0].float()
    return float(logits[ours] - logits[theirs])


def compare(kvviz_run, vllm_run: VllmRun, *, model=None) -> Report:
    """The Report of two runs of the same requests; `model` (kvviz's) weighs a differing greedy choice."""
    pairs, lines = [], []
    results = kvviz_run.results
    for r, v in zip(results, vllm_run.requests):
        diff = first_difference(r.token_ids, v.token_ids)
        pairs.append(RequestPair(request=r.request, prompt_tokens=len(r.prompt_ids), tokens_equal=diff is None,
                                 first_difference=diff, kvviz_cached=r.cached_tokens, vllm_cached=v.cached_tokens,
                                 kvviz_first_token_step=r.first_token_step, vllm_first_token_step=v.first_token_step,
                                 kvviz_preemptions=r.preemptions, vllm_preemptions=v.preemptions))
    for p in pairs:
        if not p.tokens_equal:
            lines.append(_token_line(p, results[p.request], vllm_run.requests[p.request], model))
    same_step: int | None = None  # the first request that same-step sharing explains: the others point to it
    for p in pairs:
        if p.kvviz_cached != p.vllm_cached:
            line, shared = _cached_line(p, results, vllm_run, same_step)
            if shared and same_step is None:
                same_step = p.request
            lines.append(line)
    s = kvviz_run.summary()
    figures = (("preemptions", s.preemptions, vllm_run.preemptions),
               ("peak blocks in use", s.pool_peak_blocks, vllm_run.peak_blocks),
               ("prefill tokens computed", s.prefill_computed, vllm_run.prefill_computed),
               ("prompt tokens from the cache", s.cached_tokens, vllm_run.cached_tokens),
               ("steps", s.steps, vllm_run.n_steps),
               ("tokens/s", round(s.tokens_per_s, 1), round(vllm_run.tokens_per_s, 1)),
               ("decode tokens/s", round(decode_tokens_per_s(kvviz_run), 1), round(vllm_run.decode_tokens_per_s, 1)))
    lines += _run_lines(dict((name, (a, b)) for name, a, b in figures), pairs, same_step is not None,
                        preempted=s.preemptions > 0 or vllm_run.preemptions > 0)
    notes = [LAST_TOKEN] if vllm_run.settings.prefix_caching else []
    notes += [f"vLLM does not report {what}" for what in NOT_REPORTED]
    return Report(scheduler=kvviz_run.scheduler, workload=kvviz_run.workload.name,
                  settings=settings_table(kvviz_run, vllm_run), requests=tuple(pairs), figures=figures,
                  differences=tuple(lines), notes=tuple(notes), vllm=vllm_run)


def decode_tokens_per_s(kvviz_run) -> float:
    """Tokens of kvviz's decode-only steps (every row a decode) over those steps' time, as VllmRun counts vLLM's."""
    steps = [st for st in kvviz_run.steps if st.work and all(w.kind == "decode" for w in st.work)]
    ms = sum(st.latency_ms for st in steps)
    return sum(len(st.work) for st in steps) / (ms / 1000.0) if ms > 0 else float("nan")


def _token_line(p: RequestPair, r, v, model) -> str:
    k = p.first_difference
    ours = r.token_ids[k] if k < len(r.token_ids) else None
    theirs = v.token_ids[k] if k < len(v.token_ids) else None
    head = f"request {p.request}: tokens differ from generated token {k} (kvviz {ours}, vLLM {theirs})"
    if ours is None or theirs is None:
        return f"{head}: one side stopped early"
    if model is None:
        return f"{head}: the tokens before agree, so the two computed different logits there"
    margin = greedy_margin(model, list(r.prompt_ids) + list(r.token_ids[:k]), ours, theirs)
    if abs(margin) < NEAR_TIE:
        return (f"{head}: a near tie on kvviz's model (logit {ours} - logit {theirs} = {margin:.2e}): float32 "
                f"rounds differently in vLLM's CPU attention and kernels, and greedy's choice flips")
    return (f"{head}: kvviz's model prefers {ours} by {margin:.3f} in logits, not a rounding's margin: "
            f"the two computed different logits there (check the checkpoint and dtype)")


def _cached_line(p: RequestPair, results, vllm_run: VllmRun, said: int | None) -> tuple[str, bool]:
    """The line for a request whose cached prompt tokens differ, and whether same-step sharing explains it
    (said in full once; `said`: the request whose line said it)."""
    head = f"request {p.request}: cached prompt tokens kvviz {p.kvviz_cached}, vLLM {p.vllm_cached}"
    r = results[p.request]
    if p.vllm_cached > p.kvviz_cached:
        together = [o for o in results if o.request != p.request and o.admitted_step == r.admitted_step
                    and (o.arrival, o.request) < (r.arrival, r.request)
                    and common_prefix(o.prompt_ids, r.prompt_ids) >= p.vllm_cached]
        if together:
            j = together[0]
            why = SAME_STEP if said is None else f"shared blocks a step computes, as for request {said}"
            return (f"{head}: admitted in the same step as request {j.request}, whose prompt begins with the same "
                    f"{common_prefix(j.prompt_ids, r.prompt_ids)} tokens; {why}"), True
    if p.kvviz_cached > p.vllm_cached and p.kvviz_preemptions > 0:
        return f"{head}: preempted {p.kvviz_preemptions} time(s) in kvviz; {FIRST_PREFILL_ONLY}", False
    return (f"{head}: the cache held different blocks when it was admitted (first token at step "
            f"{p.kvviz_first_token_step} in kvviz, {p.vllm_first_token_step} in vLLM: an earlier difference in "
            f"admission or eviction)"), False


def _run_lines(figures: dict[str, tuple[float, float]], pairs: list[RequestPair], same_step: bool, *,
               preempted: bool) -> list[str]:
    out = []
    a, b = figures["preemptions"]
    if a != b:
        out.append(f"preemptions kvviz {a}, vLLM {b}: {NO_ADMISSION_AFTER_PREEMPTION}; {RUNNING_ORDER}")
    a, b = figures["prefill tokens computed"]
    if a != b:
        why = ["requests admitted together share blocks in vLLM only (see the requests above)"] if same_step else []
        why += [RECOMPUTED] if preempted else []
        why = why or ["the prefix cache served different requests (see the requests above)"]
        out.append(f"prefill tokens computed kvviz {a}, vLLM {b}: {'; '.join(why)}")
    a, b = figures["peak blocks in use"]
    if a != b:
        why = ("the blocks requests admitted together share are held once in vLLM, once per request in kvviz"
               if same_step else "the two held different requests at their busiest step (admission and preemption "
                                 "differ: see the lines above)")
        out.append(f"peak blocks in use kvviz {a}, vLLM {b}: {why}; vLLM's figure is its kv_cache_usage "
                   f"(SchedulerStats) times the usable blocks")
    a, b = figures["steps"]
    if a != b:
        moved = [p for p in pairs if p.vllm_first_token_step != p.kvviz_first_token_step]
        where = (f"request {moved[0].request} got its first token at step {moved[0].kvviz_first_token_step} in "
                 f"kvviz, {moved[0].vllm_first_token_step} in vLLM" if moved else "every first token came at the "
                 "same step; the last tokens did not")
        out.append(f"steps kvviz {a}, vLLM {b}: {where}" + (f"; {RUNNING_ORDER}" if preempted else ""))
    return out


def settings_table(kvviz_run, vllm_run: VllmRun) -> tuple[tuple[str, str, str], ...]:
    """(setting, kvviz, vLLM) for each setting that maps, vLLM's side as its own config reported it."""
    k, v, e = kvviz_run.settings, vllm_run.settings, vllm_run.engine_settings
    budget = "none (whole prompts)" if k.token_budget is None else str(k.token_budget)
    return (
        ("block size", str(k.block_size), f"{e.get('block_size')} (block_size)"),
        ("blocks", str(k.blocks), f"{e.get('num_gpu_blocks')} (num_gpu_blocks_override: {v.blocks} + the null block "
                                  f"vLLM's BlockPool keeps)"),
        ("max batch", str(k.max_batch), f"{e.get('max_num_seqs')} (max_num_seqs)"),
        ("token budget", budget, f"{e.get('max_num_batched_tokens')} (max_num_batched_tokens"
                                 + (", more than any step needs)" if k.token_budget is None else ")")),
        ("dtype", kvviz_run.model.dtype, f"{e.get('dtype')} (dtype)"),
        ("prefix caching", "on" if kvviz_run.scheduler == "prefix" else "off",
         f"{'on' if e.get('enable_prefix_caching') else 'off'} (enable_prefix_caching)"),
        ("chunked prefill", "on" if kvviz_run.scheduler == "chunked" else "off",
         f"{'on' if e.get('enable_chunked_prefill') else 'off'} (enable_chunked_prefill"
         + ("; the budget never binds, so no prompt is split)" if k.token_budget is None else ")")),
        ("threads", str(kvviz_run.model.threads),
         f"{v.threads} (VLLM_CPU_OMP_THREADS_BIND)" if v.threads else "vLLM's own (VLLM_CPU_OMP_THREADS_BIND=auto)"),
        ("sampling", "greedy", "greedy (temperature 0, ignore_eos)"),
    )


def report_lines(report: Report) -> list[str]:
    """What `kvviz serve --against vllm` prints: settings side by side, a row per request, the run's figures,
    then one line per difference and the notes."""
    v = report.vllm
    out = [f"vLLM {v.version} ({v.python}) beside kvviz's {report.scheduler} on {report.workload}: started in "
           f"{v.startup_s:.1f} s, ran in {v.run_s:.1f} s",
           f"{'setting':<16} {'kvviz':<22} vLLM"]
    out += [f"{name:<16} {ours:<22} {theirs}" for name, ours, theirs in report.settings]
    out.append(f"{'request':>7} {'prompt':>6} {'tokens':<18} {'cached kvviz/vLLM':>17} {'first token step':>17} "
               f"{'preempted':>9}")
    for p in report.requests:
        tokens = "equal" if p.tokens_equal else f"differ from {p.first_difference}"
        out.append(f"{p.request:>7} {p.prompt_tokens:>6} {tokens:<18} "
                   f"{f'{p.kvviz_cached}/{p.vllm_cached}':>17} "
                   f"{f'{p.kvviz_first_token_step}/{_dash(p.vllm_first_token_step)}':>17} "
                   f"{f'{p.kvviz_preemptions}/{p.vllm_preemptions}':>9}")
    out.append(f"{'per run':<30} {'kvviz':>10} {'vLLM':>10}")
    out += [f"{name:<30} {ours:>10,} {theirs:>10,}" for name, ours, theirs in report.figures]
    same = sum(p.tokens_equal for p in report.requests)
    out.append(f"tokens: {same} of {len(report.requests)} requests equal")
    out += [f"difference: {line}" for line in report.differences] or ["difference: none"]
    out += [f"note: {line}" for line in report.notes]
    return out


def _dash(v: int | None) -> str:
    return "-" if v is None else str(v)


def report_to_dict(report: Report) -> dict:
    """The report as JSON-ready values (for `kvviz serve --json`), vLLM's run whole."""
    return dataclasses.asdict(report)
