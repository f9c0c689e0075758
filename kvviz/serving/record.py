"""The serving record: one frozen `ServeStep` per scheduler step, one `ServeRun` per scheduler run, saved
as JSON (schema "kvviz-serve", docs/serving.md) and validated on load like traces; with them, where vLLM ran
the same workload beside them, vLLM's run (kvviz.peers.vllm.VllmRun: what vLLM reported per step and request);
and what the serving session answers during a live run (ServeStarted, ServeBatch of LaneRecord).

Stdlib only: no torch, no numpy, no Qt; the window's Serve view and the command draw and print these and
nothing else. A phase, a request's state and a block's state are words, never codes. Loading anything
that is not a complete version-1 file is a one-line ValueError.
"""
from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvviz import catalog
from kvviz.peers.vllm import VllmRequest, VllmRun, VllmSettings, VllmStep
from kvviz.records.history import count_steps
from kvviz.serving.workload import Workload, workload_from_dict
from kvviz.serving.workload import is_whole as _is_int

SCHEMA = "kvviz-serve"
VERSION = 1
WORK_KINDS = ("prefill", "decode", "padding", "idle")
REQUEST_STATES = ("waiting", "running", "preempted", "finished")
BLOCK_STATES = ("used", "cached", "free")
SCHEDULERS = catalog.scheduler_keys()
MAX_DEPTH = 12  # doc > runs > [] > run > steps > [] > step > pool > owners > [] > []: 11 in a file kvviz writes
MAX_FILE_BYTES = 4 << 30
MAX_COUNT = 1 << 40  # positions, blocks, bytes on one step: far past any machine


@dataclass(frozen=True)
class Work:
    """What one request put into a step's batch: one run of consecutive slots of one kind."""

    request: int
    """The request's index in the workload."""
    kind: str
    """"prefill" (prompt positions, a chunk or all of them), "decode" (one generated token fed back),
    "padding" (static batching: slots after a shorter prompt, computed and thrown away) or "idle"
    (static batching: a finished request's slot, computed and thrown away)."""
    pos_start: int
    """First position these slots computed (padding and idle: the positions the thrown-away slots took)."""
    pos_stop: int
    """One past the last position: the work fills pos_stop - pos_start slots of the batch."""
    token_id: int | None = None
    """The token this work emitted (sampled from its last position), None when it emitted none (a prefill
    chunk that does not reach the prompt's end, padding, idle)."""

    @property
    def n_slots(self) -> int:
        return self.pos_stop - self.pos_start


@dataclass(frozen=True)
class RequestState:
    """Where one arrived request stands after the step."""

    request: int
    """The request's index in the workload."""
    state: str
    """"waiting" (arrived, not admitted), "running", "preempted" (evicted, waiting to be prefilled again)
    or "finished"."""
    computed: int
    """Positions whose K/V the pool holds for it (0 while waiting, preempted or finished)."""
    generated: int
    """Tokens it has generated so far (kept across a preemption)."""
    block_table: tuple[int, ...] = ()
    """Its block table: logical block i of the request is physical block block_table[i] of the pool.
    A reserving scheduler's table holds blocks not yet filled."""


@dataclass(frozen=True)
class PrefixHit:
    """A request admitted with part of its prompt found in the prefix cache."""

    request: int
    """The request's index in the workload."""
    blocks: tuple[int, ...]
    """The cached physical blocks it reuses (its first len(blocks) logical blocks), shared by ref count."""
    tokens: int
    """Prompt tokens it need not prefill: len(blocks) * block_size (full blocks only)."""


@dataclass(frozen=True)
class Preemption:
    """A running request evicted because the step needed more blocks than the pool had free."""

    request: int
    """The request's index in the workload (the most recently admitted of those running)."""
    blocks: tuple[int, ...]
    """The blocks its table held, returned to the pool (tail first)."""
    tokens_lost: int
    """Positions whose K/V it held and must compute again when it is admitted again."""


@dataclass(frozen=True)
class PoolState:
    """The block pool after the step, one entry per physical block (columns of equal length)."""

    block_size: int
    """Token positions per block."""
    ref_counts: tuple[int, ...]
    """How many block tables hold each block (more than one: a prefix shared by prefix caching)."""
    owners: tuple[tuple[int, ...], ...]
    """The requests whose tables hold each block, in admission order."""
    filled: tuple[int, ...]
    """Positions of each block whose K/V are written (0..block_size; a cached block keeps its content)."""
    hashed: tuple[bool, ...]
    """Whether each block is full and keyed in the prefix cache (prefix scheduler only)."""

    @property
    def n_blocks(self) -> int:
        return len(self.ref_counts)

    def state(self, block: int) -> str:
        """"used" (held by a table), "cached" (held by none, content kept for a prefix hit, evicted
        least recently used first) or "free"."""
        if self.ref_counts[block] > 0:
            return "used"
        return "cached" if self.hashed[block] else "free"

    @property
    def states(self) -> tuple[str, ...]:
        return tuple(self.state(b) for b in range(self.n_blocks))

    @property
    def used_blocks(self) -> int:
        return sum(1 for r in self.ref_counts if r > 0)

    @property
    def cached_blocks(self) -> int:
        return sum(1 for r, h in zip(self.ref_counts, self.hashed) if r == 0 and h)


@dataclass(frozen=True)
class ServeStep:
    """One scheduler step: one batched forward over every request it ran; or, with no request to run, the
    stretch of steps up to the next arrival (`span`)."""

    step: int
    """The scheduler's step number, from 0 (arrivals are counted in these steps)."""
    work: tuple[Work, ...]
    """What each request put into the batch, in batch order (a request may appear twice: a static
    prefill is its prompt then its padding)."""
    requests: tuple[RequestState, ...]
    """Every request that has arrived, after the step, in request order."""
    pool: PoolState
    """The block pool after the step."""
    prefix_hits: tuple[PrefixHit, ...] = ()
    """Requests admitted this step with cached prefix blocks."""
    preemptions: tuple[Preemption, ...] = ()
    """Requests evicted this step."""
    admitted: tuple[int, ...] = ()
    """Requests that started running this step (again, after a preemption)."""
    finished: tuple[int, ...] = ()
    """Requests that emitted their last token this step."""
    latency_ms: float = 0.0
    """Wall time of the step: scheduling, the forward, sampling and bookkeeping."""
    weights_bytes: int = 0
    """Bytes of weights the forward read: every matrix once for the whole batch, plus one embedding row
    per slot (kvviz.costs.wall's convention: the minimum, each byte once)."""
    kv_bytes: int = 0
    """Bytes of K/V attention read: every position each request's queries attended over, all layers."""
    span: int = 1
    """Scheduler steps this record stands for, from `step`: more than one only for a stretch in which no
    arrived request is left to run (none has arrived yet, or every one that has is finished), recorded once
    up to the next arrival. Every step of a stretch is alike: no work, no event, the pool unchanged."""

    @property
    def last_step(self) -> int:
        """The last scheduler step this record stands for."""
        return self.step + self.span - 1

    @property
    def bytes_read(self) -> int:
        return self.weights_bytes + self.kv_bytes

    @property
    def slots(self) -> int:
        """Token slots in the batch (the forward's rows), padding and idle included."""
        return sum(w.n_slots for w in self.work)

    def slots_of(self, kind: str) -> int:
        return sum(w.n_slots for w in self.work if w.kind == kind)

    @property
    def emitted(self) -> tuple[tuple[int, int], ...]:
        """(request, token id) of every token this step emitted."""
        return tuple((w.request, w.token_id) for w in self.work if w.token_id is not None)


PEER_STATES = ("starting", "running", "failed", "done")


@dataclass(frozen=True)
class PeerProgress:
    """Where a peer beside the schedulers (vLLM) stands while the record is made: a state word, the seconds
    waited for it since the run started, and a failure's one line."""

    state: str
    """"starting" (loading the checkpoint and building its engine), "running", "failed" or "done"."""
    waited_s: float = 0.0
    """Seconds since the run asked for it."""
    message: str = ""
    """Why it failed (one line), or what it is doing."""


@dataclass(frozen=True)
class SchedulerSettings:
    """The knobs a scheduler ran with (those it does not read are recorded as given)."""

    max_batch: int
    """Most requests running at once."""
    blocks: int
    """Blocks in the pool."""
    block_size: int
    """Token positions per block."""
    token_budget: int | None = None
    """Tokens one step may compute (chunked); None: no budget."""
    temperature: float = 0.0
    """Sampling temperature (0: greedy)."""
    top_k: int | None = None
    """Sampling top-k."""
    top_p: float | None = None
    """Sampling top-p."""
    seed: int = 0
    """The run's seed: request i without its own seed samples with seed + i."""


@dataclass(frozen=True)
class ModelInfo:
    """What the record says about the model that served it."""

    name: str
    """The model's name (preset or checkpoint)."""
    arch: str
    """Its architecture (kvviz, llama, qwen2, qwen3)."""
    n_layer: int
    """Layers."""
    n_head: int
    """Query heads."""
    n_kv_head: int
    """K/V heads."""
    head_dim: int
    """Width of one head."""
    max_seq_len: int
    """The model's context."""
    dtype: str
    """The weights' and K/V's dtype (float32, bfloat16, float16)."""
    device: str
    """Where it ran (cpu, cuda, mps)."""
    threads: int
    """torch CPU threads."""
    weights_bytes: int
    """Bytes of weights one forward reads whole (kvviz.costs.wall.WallShape.weights_bytes)."""
    kv_bytes_per_token: int
    """K and V of one position, all layers."""


@dataclass(frozen=True)
class RequestResult:
    """One request's outcome under one scheduler."""

    request: int
    """The request's index in the workload."""
    prompt_ids: tuple[int, ...]
    """Its prompt, tokenized."""
    token_ids: tuple[int, ...]
    """The tokens it generated, in order (must equal its own solo run with the static engine)."""
    text: str
    """Those tokens decoded."""
    arrival: int
    """The step it arrived at."""
    admitted_step: int
    """The step it first ran."""
    first_token_step: int
    """The step that emitted its first token."""
    finish_step: int
    """The step that emitted its last token."""
    ttft_ms: float
    """Time to first token: from the start of its arrival step to the end of first_token_step."""
    tpot_ms: float | None
    """Time per output token after the first: (finish - first token) / (tokens - 1); None for one token."""
    preemptions: int = 0
    """Times it was evicted."""
    cached_tokens: int = 0
    """Prompt positions it took from the prefix cache instead of computing (all admissions)."""
    computed_tokens: int = 0
    """Positions it prefilled (all admissions: recomputation after a preemption counts again)."""
    solo_token_ids: tuple[int, ...] | None = None
    """The tokens of its own solo run (the request alone through the exact `static` engine, same sampling and
    seed), kvviz.serving.solo; None when not checked (a record saved without the check)."""


@dataclass(frozen=True)
class SoloCheck:
    """One request's tokens under one scheduler against its own solo run."""

    scheduler: str
    """One of SCHEDULERS."""
    request: int
    """The request's index in the workload (shown from 0, as every panel and message counts requests)."""
    equal: bool
    """Whether every token equals the solo run's (and there are as many)."""
    token: int | None = None
    """Where they first differ: the index of the first token that differs (or is missing from the shorter),
    None when equal."""
    step: int | None = None
    """The scheduler step that emitted that token (None when equal, or when the scheduler emitted no token
    there: it stopped short)."""


def solo_checks(run: ServeRun) -> tuple[SoloCheck, ...] | None:
    """Each request's tokens against its solo run's (RequestResult.solo_token_ids); None when the record
    holds no solo run for some request (not checked)."""
    if any(r.solo_token_ids is None for r in run.results):
        return None
    at = emitted_at(run.steps)
    return tuple(compare_solo(run.scheduler, r.request, r.token_ids, r.solo_token_ids, at.get(r.request, []))
                 for r in run.results)


def emitted_at(steps: Sequence[ServeStep]) -> dict[int, list[int]]:
    """{request: the step of each token it emitted, in order}."""
    at: dict[int, list[int]] = {}
    for s in steps:
        for request, _token in s.emitted:
            at.setdefault(request, []).append(s.step)
    return at


def compare_solo(scheduler: str, request: int, tokens: Sequence[int], solo: Sequence[int],
                 steps: Sequence[int] = ()) -> SoloCheck:
    """One request's check: `steps` are the steps that emitted its tokens, in order (for SoloCheck.step)."""
    tokens, solo = tuple(tokens), tuple(solo)
    if tokens == solo:
        return SoloCheck(scheduler, request, True)
    first = next((i for i, (a, b) in enumerate(zip(tokens, solo)) if a != b), min(len(tokens), len(solo)))
    return SoloCheck(scheduler, request, False, first, steps[first] if first < len(steps) else None)


@dataclass(frozen=True)
class ServeSummary:
    """A run's figures, derived from its steps and results (`summarize`)."""

    steps: int
    """Scheduler steps."""
    wall_ms: float
    """Wall time of the whole run (sum of the steps' latency_ms)."""
    tokens: int
    """Tokens generated, all requests."""
    tokens_per_s: float
    """tokens over wall time."""
    ttft_ms_median: float
    """Median time to first token over the requests."""
    ttft_ms_p90: float
    """90th percentile time to first token."""
    tpot_ms_median: float | None
    """Median time per output token (requests of two tokens or more); None if none."""
    tpot_ms_p90: float | None
    """90th percentile time per output token."""
    prefill_slots: int
    """Slots of prefill work plus padding (static: requests x longest prompt)."""
    padding_slots: int
    """Slots of padding."""
    generation_slots: int
    """Tokens emitted plus idle slots (static: requests x most new tokens)."""
    idle_slots: int
    """Slots of finished requests still in a static batch."""
    pool_blocks: int
    """Blocks in the pool."""
    pool_mean_blocks: float
    """Blocks held by some table, averaged over the steps."""
    pool_peak_blocks: int
    """Most blocks held at once."""
    peak_running: int
    """Most requests running at once (how many fit the pool)."""
    preemptions: int
    """Evictions, all requests."""
    prompt_tokens: int
    """Positions that would be prefilled with no reuse and no preemption: every prompt, once."""
    cached_tokens: int
    """Positions taken from the prefix cache."""
    prefill_computed: int
    """Positions actually prefilled (recomputation after preemption included)."""
    prefix_hit_rate: float
    """cached_tokens / (cached_tokens + prefill_computed): the share of prefill positions the cache served."""
    peak_reserved_bytes: int
    """Most K/V bytes held by block tables at once (reserve: reserved ahead of need)."""
    peak_used_bytes: int
    """Most K/V bytes actually written at once."""

    @property
    def padding_share(self) -> float:
        return self.padding_slots / self.prefill_slots if self.prefill_slots else 0.0

    @property
    def idle_share(self) -> float:
        return self.idle_slots / self.generation_slots if self.generation_slots else 0.0


@dataclass(frozen=True)
class ServeRun:
    """Everything one scheduler did with one workload."""

    scheduler: str
    """One of SCHEDULERS."""
    settings: SchedulerSettings
    """The knobs it ran with."""
    model: ModelInfo
    """The model that served it."""
    workload: Workload
    """The requests (request i of every record is workload.requests[i])."""
    results: tuple[RequestResult, ...]
    """One per request, in request order."""
    steps: tuple[ServeStep, ...] = field(repr=False)
    """In step order, one per scheduler step, except that a stretch with no request to run is one record
    (ServeStep.span): record i + 1 is step steps[i].step + steps[i].span."""
    vllm: VllmRun | None = field(default=None, repr=False, compare=False)
    """vLLM's run of the same workload beside the record's schedulers (the Serve view's "vLLM beside"), or
    None. Every run of a record carries the same one; the file holds it once ("vllm_run")."""

    @property
    def n_steps(self) -> int:
        """Scheduler steps, idle stretches counted step by step."""
        return count_steps(self.steps)

    def summary(self) -> ServeSummary:
        return summarize(self)


# -- a live run: what the serving session (kvviz.serving.session) answers, in this thread or from its process --
@dataclass(frozen=True)
class ServeStarted:
    """A run set up: the workload, the model, each scheduler's settings, the prompts' lengths, whether it starts
    paused, and with vLLM beside the scheduler vLLM's settings follow ("-": none ticked; "": no vLLM beside)."""

    run_id: str
    workload: Workload
    model: ModelInfo
    settings: Mapping[str, SchedulerSettings]  # in the order the schedulers were ticked
    prompt_lens: tuple[int, ...]
    start_paused: bool
    vllm: str = ""


@dataclass(frozen=True)
class LaneRecord:
    """One lane's record in a round: a scheduler's ServeStep, or on the "vllm" lane vLLM's PeerProgress, VllmRun
    or VllmStep; with the text of each token it emitted ({request: text})."""

    lane: str
    record: ServeStep | PeerProgress | VllmRun | VllmStep
    texts: Mapping[int, str]


@dataclass(frozen=True)
class ServeBatch:
    """Rounds run back to back, in step order; once every scheduler has finished, each one's results
    ({scheduler: (RequestResult, ...)}, in request order), else None."""

    records: tuple[LaneRecord, ...]
    results: Mapping[str, tuple[RequestResult, ...]] | None = None


# -- figures ------------------------------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty list, as numpy's default."""
    xs = sorted(values)
    if not xs:
        raise ValueError("percentile of no values")
    k = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summarize(run: ServeRun) -> ServeSummary:
    steps, results = run.steps, run.results
    wall_ms = sum(s.latency_ms for s in steps)
    tokens = sum(len(r.token_ids) for r in results)
    ttft = [r.ttft_ms for r in results]
    tpot = [r.tpot_ms for r in results if r.tpot_ms is not None]
    kv_token = run.model.kv_bytes_per_token
    S = run.settings.block_size
    used = [s.pool.used_blocks for s in steps] or [0]
    spans = [s.span for s in steps] or [1]
    cached = sum(r.cached_tokens for r in results)
    computed = sum(r.computed_tokens for r in results)
    return ServeSummary(
        steps=count_steps(steps), wall_ms=wall_ms, tokens=tokens,
        tokens_per_s=tokens / (wall_ms / 1000.0) if wall_ms > 0 else float("nan"),
        ttft_ms_median=statistics.median(ttft), ttft_ms_p90=percentile(ttft, 90),
        tpot_ms_median=statistics.median(tpot) if tpot else None, tpot_ms_p90=percentile(tpot, 90) if tpot else None,
        prefill_slots=sum(s.slots_of("prefill") + s.slots_of("padding") for s in steps),
        padding_slots=sum(s.slots_of("padding") for s in steps),
        generation_slots=tokens + sum(s.slots_of("idle") for s in steps),
        idle_slots=sum(s.slots_of("idle") for s in steps),
        pool_blocks=run.settings.blocks,
        pool_mean_blocks=sum(u * n for u, n in zip(used, spans)) / sum(spans), pool_peak_blocks=max(used),
        peak_running=max((sum(1 for r in s.requests if r.state == "running") for s in steps), default=0),
        preemptions=sum(len(s.preemptions) for s in steps),
        prompt_tokens=sum(len(r.prompt_ids) for r in results), cached_tokens=cached, prefill_computed=computed,
        prefix_hit_rate=cached / (cached + computed) if cached + computed else 0.0,
        peak_reserved_bytes=max(used) * S * kv_token,
        peak_used_bytes=max((sum(s.pool.filled[b] for b in range(s.pool.n_blocks) if s.pool.ref_counts[b] > 0)
                             * kv_token for s in steps), default=0),
    )


# -- JSON: encode -------------------------------------------------------------------------------
def _plain(obj: Any) -> Any:
    """A record as JSON-ready values (dataclasses as objects, tuples as lists)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (tuple, list)):
        return [_plain(v) for v in obj]
    return obj


def step_to_dict(s: ServeStep) -> dict[str, Any]:
    d = _plain(s)
    d["pool"] = {k: d["pool"][k] for k in ("block_size", "ref_counts", "owners", "filled", "hashed")}
    if s.span == 1:  # a step of its own: the key is written for stretches only
        del d["span"]
    return d


def run_to_dict(run: ServeRun) -> dict[str, Any]:
    return {"scheduler": run.scheduler, "settings": _plain(run.settings), "model": _plain(run.model),
            "workload": run.workload.to_dict(), "summary": _plain(run.summary()),
            "results": [_plain(r) for r in run.results], "steps": [step_to_dict(s) for s in run.steps]}


def runs_to_dict(runs: Sequence[ServeRun]) -> dict[str, Any]:
    doc = {"schema": SCHEMA, "version": VERSION, "runs": [run_to_dict(r) for r in runs]}
    beside = vllm_of(runs)
    if beside is not None:
        doc["vllm_run"] = _plain(beside)
    return doc


def vllm_of(runs: Sequence[ServeRun]) -> VllmRun | None:
    """The vLLM run the record's runs carry (the first one's that has one), or None."""
    return next((r.vllm for r in runs if r.vllm is not None), None)


def with_vllm(runs: Sequence[ServeRun], beside: VllmRun | None) -> tuple[ServeRun, ...]:
    """The runs, each carrying `beside` (ServeRun.vllm)."""
    return tuple(dataclasses.replace(r, vllm=beside) for r in runs)


def dumps_runs(runs: Sequence[ServeRun]) -> str:
    return json.dumps(runs_to_dict(runs), separators=(",", ":")) + "\n"


def save_runs(path: str | Path, runs: Sequence[ServeRun]) -> Path:
    """Written to a temporary name, then renamed; a failure leaves the old file untouched (ValueError)."""
    from kvviz.fileio import write_output

    return write_output(path, dumps_runs(runs))


# -- JSON: decode -------------------------------------------------------------------------------
def _count(v: Any) -> bool:
    return _is_int(v) and 0 <= v <= MAX_COUNT


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _get(doc: Any, key: str, ok: Callable[[Any], bool], what: str, where: str, *, optional: bool = False,
         default: Any = None) -> Any:
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: expected a JSON object")
    if key not in doc or (optional and doc[key] is None):
        if optional:
            return default
        raise ValueError(f"{where}: missing {key}")
    value = doc[key]
    if not ok(value):
        raise ValueError(f"{where}: {key} must be {what}, got {str(value)[:40]}")
    return value


def _list_of(ok: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(ok(x) for x in v)


def _word(choices: tuple[str, ...]) -> Callable[[Any], bool]:
    return lambda v: v in choices


def _record(cls, doc: Any, where: str, checks: dict[str, tuple[Callable[[Any], bool], str]],
            optional: tuple[str, ...] = ()) -> Any:
    """cls(**fields) from doc, each field checked; tuples for lists."""
    kw = {}
    for key, (ok, what) in checks.items():
        value = _get(doc, key, ok, what, where, optional=key in optional)
        if key in optional and key not in doc:
            continue
        kw[key] = tuple(tuple(v) if isinstance(v, list) else v for v in value) if isinstance(value, list) else value
    return cls(**kw)


_INT_OR_NONE = (lambda v: v is None or _count(v), "a whole number or null")
_COUNT = (_count, "a whole number >= 0")
_POS = (lambda v: _is_int(v) and v >= 1, "a whole number >= 1")
_SECS = (_number, "a number >= 0")
_TEXT = (lambda v: isinstance(v, str) and len(v) <= 4096, "a string")
_OBJECT = (lambda v: isinstance(v, dict), "an object")
_LIST = (lambda v: isinstance(v, list), "a list")
_BLOCKS = (_list_of(_count), "a list of block numbers")


def _work(doc: Any, where: str, n_requests: int) -> Work:
    w = _record(Work, doc, where, {"request": _COUNT,
                                   "kind": (_word(WORK_KINDS), "one of " + ", ".join(WORK_KINDS)),
                                   "pos_start": _COUNT, "pos_stop": _COUNT, "token_id": _INT_OR_NONE},
                optional=("token_id",))
    if w.request >= n_requests or w.pos_stop <= w.pos_start:
        raise ValueError(f"{where}: request {w.request} of {n_requests}, positions [{w.pos_start}, {w.pos_stop})")
    return w


def _pool(doc: Any, where: str) -> PoolState:
    p = _record(PoolState, doc, where, {
        "block_size": _POS,
        "ref_counts": (_list_of(_count), "a list of counts"),
        "owners": (_list_of(_list_of(_count)), "a list of lists of requests"),
        "filled": (_list_of(_count), "a list of counts"),
        "hashed": (_list_of(lambda v: isinstance(v, bool)), "a list of true/false")})
    n = len(p.ref_counts)
    if not len(p.owners) == len(p.filled) == len(p.hashed) == n:
        raise ValueError(f"{where}: pool columns of different lengths")
    if any(f > p.block_size for f in p.filled) or any(len(o) != r for o, r in zip(p.owners, p.ref_counts)):
        raise ValueError(f"{where}: a block filled past its size, or owners that do not match its ref count")
    return p


def _step(doc: Any, where: str, n_requests: int) -> ServeStep:
    def items(key: str, make) -> tuple:
        value = _get(doc, key, *_LIST, where, optional=True, default=[])
        return tuple(make(v, f"{where}: {key}[{i}]") for i, v in enumerate(value))

    def req(v, w):
        r = _record(RequestState, v, w, {"request": _COUNT,
                                         "state": (_word(REQUEST_STATES), "one of " + ", ".join(REQUEST_STATES)),
                                         "computed": _COUNT, "generated": _COUNT, "block_table": _BLOCKS})
        if r.request >= n_requests:
            raise ValueError(f"{w}: request {r.request} of {n_requests}")
        return r

    pool = _pool(_get(doc, "pool", *_OBJECT, where), f"{where}: pool")
    step = ServeStep(
        step=_get(doc, "step", _count, "a whole number >= 0", where),
        work=items("work", lambda v, w: _work(v, w, n_requests)),
        requests=items("requests", req), pool=pool,
        prefix_hits=items("prefix_hits", lambda v, w: _record(PrefixHit, v, w, {
            "request": _COUNT, "blocks": _BLOCKS, "tokens": _COUNT})),
        preemptions=items("preemptions", lambda v, w: _record(Preemption, v, w, {
            "request": _COUNT, "blocks": _BLOCKS, "tokens_lost": _COUNT})),
        admitted=tuple(_get(doc, "admitted", _list_of(_count), "a list of requests", where, optional=True, default=[])),
        finished=tuple(_get(doc, "finished", _list_of(_count), "a list of requests", where, optional=True, default=[])),
        latency_ms=float(_get(doc, "latency_ms", _number, "a number >= 0", where)),
        weights_bytes=_get(doc, "weights_bytes", _count, "a whole number >= 0", where),
        kv_bytes=_get(doc, "kv_bytes", _count, "a whole number >= 0", where),
        span=_get(doc, "span", lambda v: _is_int(v) and 1 <= v <= MAX_COUNT, "a whole number >= 1", where,
                  optional=True, default=1))
    if step.span > 1 and (step.work or step.admitted or step.finished or step.preemptions or step.prefix_hits
                          or any(r.state != "finished" for r in step.requests)):
        raise ValueError(f"{where}: a stretch of {step.span} steps with work, an event or a request left to run")
    n_blocks = pool.n_blocks
    tables = [b for r in step.requests for b in r.block_table] + [b for h in step.prefix_hits for b in h.blocks]
    if any(b >= n_blocks for b in tables) or any(o >= n_requests for os in pool.owners for o in os):
        raise ValueError(f"{where}: a block outside the pool of {n_blocks}, or an owner outside the workload")
    return step


def _per_request(doc: Any, key: str, where: str, n: int, make: Callable[[Any, str], Any]) -> tuple:
    """doc[key]: a list of one record per request, in request order (`make(item, where)` reads each)."""
    out = []
    for i, item in enumerate(_get(doc, key, *_LIST, where)):
        w = f"{where}: {key}[{i}]"
        got = make(item, w)
        if got.request != i:
            raise ValueError(f"{w}: request {got.request} at place {i}")
        out.append(got)
    if len(out) != n:
        raise ValueError(f"{where}: {len(out)} {key} for {n} requests")
    return tuple(out)


def run_from_dict(doc: Any, where: str) -> ServeRun:
    scheduler = _get(doc, "scheduler", _word(SCHEDULERS), "one of " + ", ".join(SCHEDULERS), where)
    sdoc = _get(doc, "settings", *_OBJECT, where)
    settings = _record(SchedulerSettings, sdoc, f"{where}: settings", {
        "max_batch": _POS, "blocks": _POS, "block_size": _POS,
        "token_budget": (lambda v: v is None or (_is_int(v) and v >= 1), "a whole number >= 1 or null"),
        "temperature": _SECS, "top_k": _INT_OR_NONE,
        "top_p": (lambda v: v is None or _number(v), "a number or null"), "seed": _COUNT},
        optional=("token_budget", "temperature", "top_k", "top_p", "seed"))
    mdoc = _get(doc, "model", *_OBJECT, where)
    model = _record(ModelInfo, mdoc, f"{where}: model", {
        "name": _TEXT, "arch": _TEXT, "n_layer": _POS, "n_head": _POS, "n_kv_head": _POS, "head_dim": _POS,
        "max_seq_len": _POS, "dtype": _TEXT, "device": _TEXT, "threads": _POS, "weights_bytes": _COUNT,
        "kv_bytes_per_token": _COUNT})
    try:
        workload = workload_from_dict(_get(doc, "workload", *_OBJECT, where), f"{where}: workload")
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    n = len(workload.requests)
    def result(r, w):
        return _record(RequestResult, r, w, {
            "request": _COUNT, "prompt_ids": (_list_of(_count), "a list of token ids"),
            "token_ids": (_list_of(_count), "a list of token ids"), "text": (lambda v: isinstance(v, str), "a string"),
            "arrival": _COUNT, "admitted_step": _COUNT, "first_token_step": _COUNT, "finish_step": _COUNT,
            "ttft_ms": _SECS, "tpot_ms": (lambda v: v is None or _number(v), "a number or null"),
            "preemptions": _COUNT, "cached_tokens": _COUNT, "computed_tokens": _COUNT,
            "solo_token_ids": (lambda v: v is None or _list_of(_count)(v), "a list of token ids or null")},
            optional=("preemptions", "cached_tokens", "computed_tokens", "solo_token_ids"))

    results = _per_request(doc, "results", where, n, result)
    steps: list[ServeStep] = []
    for i, s in enumerate(_get(doc, "steps", *_LIST, where)):
        step = _step(s, f"{where}: steps[{i}]", n)
        if step.step != count_steps(steps):
            raise ValueError(f"{where}: steps[{i}] is step {step.step}, where step {count_steps(steps)} follows")
        if step.pool.block_size != settings.block_size or step.pool.n_blocks != settings.blocks:
            raise ValueError(f"{where}: steps[{i}]: its pool is not the settings' {settings.blocks} blocks of "
                             f"{settings.block_size}")
        steps.append(step)
    if not steps:
        raise ValueError(f"{where}: no steps")
    return ServeRun(scheduler=scheduler, settings=settings, model=model, workload=workload, results=tuple(results),
                    steps=tuple(steps))


def vllm_run_from_dict(doc: Any, where: str, workload: Workload) -> VllmRun:
    """vLLM's run as runs_to_dict writes it (kvviz.peers.vllm.VllmRun), checked against the record's workload:
    a request per workload request, steps in order, requests named inside the workload."""
    n = len(workload.requests)
    requests_of = (_list_of(lambda v: _count(v) and v < n), f"a list of requests below {n}")
    sdoc = _get(doc, "settings", *_OBJECT, where)
    settings = _record(VllmSettings, sdoc, f"{where}: settings", {
        "block_size": _POS, "blocks": _POS, "max_batch": _POS, "token_budget": _POS,
        "prefix_caching": (lambda v: isinstance(v, bool), "true or false"), "max_model_len": _POS,
        "threads": (lambda v: v is None or (_is_int(v) and v >= 1), "a whole number >= 1 or null")},
        optional=("threads",))
    engine = _get(doc, "engine_settings", lambda v: isinstance(v, dict) and all(
        isinstance(k, str) and (v[k] is None or isinstance(v[k], (str, int, float, bool))) for k in v),
        "an object of plain values", where)
    requests = _per_request(doc, "requests", where, n, lambda r, w: _record(VllmRequest, r, w, {
        "request": _COUNT, "token_ids": (_list_of(_count), "a list of token ids"), "text": _TEXT,
        "cached_tokens": _COUNT, "first_token_step": _INT_OR_NONE, "finish_step": _INT_OR_NONE,
        "preemptions": _COUNT}, optional=("first_token_step", "finish_step")))
    steps: list[VllmStep] = []
    for i, s in enumerate(_get(doc, "steps", *_LIST, where)):
        w = f"{where}: steps[{i}]"
        step = _record(VllmStep, s, w, {
            "step": _COUNT, "running": _COUNT, "waiting": _COUNT, "blocks_in_use": _COUNT, "preempted": _COUNT,
            "prompt_computed": _COUNT, "prompt_cached": _COUNT, "added": requests_of, "emitted": requests_of,
            "latency_ms": _SECS})
        if steps and step.step <= steps[-1].step:
            raise ValueError(f"{w}: step {step.step} after step {steps[-1].step}")
        steps.append(step)
    return VllmRun(version=_get(doc, "version", *_TEXT, where),
                   python=_get(doc, "python", *_TEXT, where), settings=settings,
                   engine_settings=dict(engine), requests=tuple(requests), steps=tuple(steps),
                   startup_s=float(_get(doc, "startup_s", *_SECS, where)),
                   run_s=float(_get(doc, "run_s", *_SECS, where)))


def runs_from_dict(doc: Any, where: str = "serve record") -> tuple[ServeRun, ...]:
    from kvviz.fileio import check_depth

    check_depth(doc, MAX_DEPTH, where)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"{where}: not a kvviz serve record (schema {SCHEMA!r} expected)")
    if doc.get("version") != VERSION:
        raise ValueError(f"{where}: version {str(doc.get('version'))[:20]} of the serve record; this kvviz reads "
                         f"{VERSION}")
    runs = _get(doc, "runs", lambda v: isinstance(v, list) and v, "a non-empty list", where)
    out = tuple(run_from_dict(r, f"{where}: runs[{i}]") for i, r in enumerate(runs))
    if doc.get("vllm_run") is not None:  # a record saved without vLLM beside has no key
        out = with_vllm(out, vllm_run_from_dict(doc["vllm_run"], f"{where}: vllm_run", out[0].workload))
    names = [r.scheduler for r in out]
    twice = next((k for i, k in enumerate(names) if k in names[:i]), None)
    if twice is not None:
        raise ValueError(f"{where}: scheduler {twice} is named by runs[{names.index(twice)}] and "
                         f"runs[{names.index(twice, names.index(twice) + 1)}]; a record holds one run per scheduler")
    return out


def load_runs(path: str | Path) -> tuple[ServeRun, ...]:
    """The runs a `kvviz serve --json` file holds; one-line ValueError for anything else."""
    from kvviz.fileio import read_json

    return runs_from_dict(read_json(Path(path), max_depth=MAX_DEPTH, max_bytes=MAX_FILE_BYTES), str(path))
