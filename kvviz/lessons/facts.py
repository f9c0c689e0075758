"""The figures a caption may quote, {group.name}, each measured in the scene's run or derived from its model's
config: per engine of a compare run, per scheduler of a serve run, of the model of a memory scene. A caption
types no number; it names the figure. Stdlib and the records only: no torch, no Qt.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kvviz import catalog
from kvviz.format import fmt_bytes, fmt_count, fmt_figure

ENGINE_FIGURES = ("kv_projections", "bytes_copied", "bytes_written", "peak_cache", "ms_per_token", "tokens_per_s",
                  "speedup", "decode_speedup", "new_tokens")
RUN_FIGURES = ("prompt_tokens", "new_tokens", "steps", "kv_per_token", "model", "positions", "block_size")
SCHEDULER_FIGURES = ("steps", "padding", "prefill_slots", "padding_share", "idle", "generation_slots", "idle_share",
                     "preemptions", "hit_rate", "cached_tokens", "prefill_computed", "prompt_tokens", "peak_running",
                     "tokens_per_s", "pool_peak", "pool_blocks", "ttft_ms", "tpot_ms", "longest_step_ms", "widest_step")
SERVE_RUN_FIGURES = ("requests", "new_tokens", "block_size")
MODEL_FIGURES = ("kv_per_token", "kv_per_token_bytes", "kv_per_token_layer", "layers", "kv_heads", "head_dim",
                 "dtype_bytes", "crossover_tokens", "weights", "longest", "cache_at_longest", "copy_at_longest",
                 "step_copy_at_longest")
CHAPTER_FIGURES = ("kv_per_token", "kv_per_token_bytes", "head_dim", "copy_at_longest")
ROOFLINE_FIGURES = ("batch", "bandwidth", "tokens_per_s_1", "tokens_per_s_batch", "step_ms_1")


def known_fields(source) -> set[str]:
    """Every {group.name} a caption of this source may name."""
    if source.kind in ("compare", "trace"):
        engines = source.settings["engines"] if source.kind == "compare" else catalog.engine_keys()
        return {f"{e}.{f}" for e in engines for f in ENGINE_FIGURES} | {f"run.{f}" for f in RUN_FIGURES}
    if source.kind in ("serve", "record"):
        schedulers = source.settings["schedulers"] if source.kind == "serve" else catalog.scheduler_keys()
        return ({f"{s}.{f}" for s in schedulers for f in SCHEDULER_FIGURES}
                | {f"run.{f}" for f in SERVE_RUN_FIGURES})
    return ({f"model.{f}" for f in MODEL_FIGURES} | {f"chapter.{f}" for f in CHAPTER_FIGURES}
            | {f"roofline.{f}" for f in ROOFLINE_FIGURES})


def _percent(share: float) -> str:
    return f"{100 * share:.0f}%"


def compare_facts(info, traces) -> dict[str, Any]:
    """Per engine its totals (the Summary table's rows) and its decode steps alone, the prefill apart: the mean
    decode step as the Latency legend gives it (ms_per_token: a decode step makes one token) and the speedup of the
    decode steps over naive's as the Summary's note gives it (decode_speedup); `speedup` is the table's row
    (total over total, the prefill in)."""
    from kvviz.records.trace import RunSummary

    sums = {k: RunSummary.from_traces(v) for k, v in traces.items() if v}
    decode = {k: [t.latency_ms for t in v if t.phase == "decode"] for k, v in traces.items() if v}
    naive = sums.get("naive")
    out: dict[str, Any] = {}
    for k, s in sums.items():
        speedup = naive.total_ms / s.total_ms if naive is not None and s.total_ms > 0 else float("nan")
        mine, slow = sum(decode[k]), sum(decode.get("naive", ()))
        faster = slow / mine if naive is not None and mine > 0 and slow > 0 else float("nan")
        out[k] = SimpleNamespace(
            kv_projections=fmt_count(s.kv_projections), bytes_copied=fmt_bytes(s.bytes_copied),
            bytes_written=fmt_bytes(s.bytes_written), peak_cache=fmt_bytes(s.peak_cache_bytes),
            ms_per_token=f"{mine / len(decode[k]):.2f} ms" if decode[k] else "-",
            tokens_per_s=fmt_figure(s.tokens_per_s), speedup=f"{speedup:.2f}\u00d7" if speedup == speedup else "-",
            decode_speedup=f"{faster:.1f}\u00d7" if faster == faster else "-", new_tokens=fmt_count(s.new_tokens))
    n_steps = max((len(v) for v in traces.values()), default=0)
    positions = max((v[-1].pos_stop for v in traces.values() if v), default=0)
    out["run"] = SimpleNamespace(prompt_tokens=fmt_count(len(info.prompt_ids)), new_tokens=fmt_count(n_steps),
                                 steps=fmt_count(n_steps), kv_per_token=fmt_bytes(info.kv_bytes_per_token),
                                 model=info.model_name, positions=fmt_count(positions),
                                 block_size=fmt_count(info.block_size))
    return out


def serve_facts(runs) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in runs:
        s = r.summary()
        out[r.scheduler] = SimpleNamespace(
            steps=fmt_count(s.steps), padding=fmt_count(s.padding_slots), prefill_slots=fmt_count(s.prefill_slots),
            padding_share=_percent(s.padding_share), idle=fmt_count(s.idle_slots),
            generation_slots=fmt_count(s.generation_slots), idle_share=_percent(s.idle_share),
            preemptions=fmt_count(s.preemptions), hit_rate=_percent(s.prefix_hit_rate),
            cached_tokens=fmt_count(s.cached_tokens), prefill_computed=fmt_count(s.prefill_computed),
            prompt_tokens=fmt_count(s.prompt_tokens), peak_running=fmt_count(s.peak_running),
            tokens_per_s=fmt_figure(s.tokens_per_s), pool_peak=fmt_count(s.pool_peak_blocks),
            pool_blocks=fmt_count(s.pool_blocks), ttft_ms=f"{fmt_figure(s.ttft_ms_median)} ms",
            tpot_ms="-" if s.tpot_ms_median is None else f"{fmt_figure(s.tpot_ms_median)} ms",
            longest_step_ms=f"{fmt_figure(max(st.latency_ms for st in r.steps))} ms",
            widest_step=fmt_count(max(st.slots for st in r.steps)))
    first = runs[0]
    out["run"] = SimpleNamespace(requests=fmt_count(len(first.results)),
                                 new_tokens=fmt_count(sum(len(x.token_ids) for x in first.results)),
                                 block_size=fmt_count(first.settings.block_size))
    return out


def memory_facts(figures) -> dict[str, Any]:
    """`figures`: kvviz.lessons.runs.MemoryFigures."""
    r, chapter, roof = figures.report, figures.chapter, figures.roofline
    c = r.config
    longest = r.lengths[-1]
    model = SimpleNamespace(
        kv_per_token=fmt_bytes(r.bytes_per_token), kv_per_token_bytes=f"{r.bytes_per_token:,} B",
        kv_per_token_layer=fmt_bytes(r.bytes_per_token_per_layer), layers=str(c.n_layer), kv_heads=str(c.n_kv_head),
        head_dim=str(c.head_dim), dtype_bytes=str(r.dtype_bytes), crossover_tokens=fmt_count(r.crossover_tokens),
        weights=fmt_bytes(r.decode_weights_bytes), longest=fmt_count(longest.tokens),
        cache_at_longest=fmt_bytes(longest.cache_bytes), copy_at_longest=fmt_bytes(longest.total_copy_bytes),
        step_copy_at_longest=fmt_bytes(longest.step_copy_bytes))
    ch_longest = chapter.lengths[-1]
    chap = SimpleNamespace(kv_per_token=fmt_bytes(chapter.bytes_per_token),
                           kv_per_token_bytes=f"{chapter.bytes_per_token:,} B", head_dim=str(chapter.config.head_dim),
                           copy_at_longest=fmt_bytes(ch_longest.total_copy_bytes))
    one, many = weights_row(roof)
    line = SimpleNamespace(batch=str(roof.batch), bandwidth=f"{fmt_figure(roof.ceiling_gbps)} GB/s",
                           tokens_per_s_1=fmt_figure(one.tokens_per_s),
                           tokens_per_s_batch=fmt_figure(many.tokens_per_s), step_ms_1=f"{fmt_figure(one.step_ms)} ms")
    return {"model": model, "chapter": chap, "roofline": line}


def weights_row(roof) -> tuple:
    """The roofline's (batch 1, batch B) at its shortest length: a step at one position reads the weights and one
    token's K/V, the least any decode step reads (kvviz.lessons.runs.memory_figures puts that row first)."""
    return min(roof.points, key=lambda pair: pair[0].kv_len)


def fill(text: str, facts: dict[str, Any]) -> str:
    """The caption with its {group.name} fields filled from the run's facts."""
    return text.format_map(facts)
