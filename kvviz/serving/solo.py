"""Each request of a workload alone: its own solo run through the exact `static` engine (kvviz.engines), with
the sampling the serving engine gives it (greedy, or temperature/top-k/top-p with its own seed), so that every
scheduler's tokens for it can be checked against what the request computes with nobody else in the batch.

The reference the tests hold the serving engine to; `kvviz serve` and the Serve view's worker run it after a
run and put the solo tokens into each RequestResult (solo_token_ids), where kvviz.serving.record.solo_checks
compares them. It knows nothing about schedulers, pools or the window.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kvviz.config import SamplingConfig, TraceOptions
from kvviz.serving.record import RequestResult, SchedulerSettings, ServeRun
from kvviz.serving.workload import Workload


def request_sampling(settings: SchedulerSettings, workload: Workload, index: int) -> SamplingConfig:
    """Request `index`'s sampling: the run's, with its own seed or the run's seed + index."""
    seed = workload.requests[index].seed
    return SamplingConfig(temperature=settings.temperature, top_k=settings.top_k, top_p=settings.top_p,
                          seed=seed if seed is not None else settings.seed + index)


def solo_tokens(model, prompt_ids: Sequence[int], new_tokens: int, sampling: SamplingConfig) -> tuple[int, ...]:
    """One request alone through the static engine: its tokens."""
    from kvviz.engines import make_engine

    traces = make_engine("static", model).generate(list(prompt_ids), new_tokens, sampling, TraceOptions(masks=False))
    return tuple(t.token_id for t in traces)


def solo_request(model, prompts: Sequence[Sequence[int]], workload: Workload, settings: SchedulerSettings,
                 index: int) -> tuple[int, ...]:
    """Request `index` of the workload (prompts: the workload tokenized) alone."""
    return solo_tokens(model, prompts[index], workload.requests[index].new_tokens,
                       request_sampling(settings, workload, index))


def solo_runs(model, prompts: Sequence[Sequence[int]], workload: Workload,
              settings: SchedulerSettings) -> tuple[tuple[int, ...], ...]:
    """Every request of the workload alone, in request order."""
    return tuple(solo_request(model, prompts, workload, settings, i) for i in range(len(workload.requests)))


def with_solo(results: Sequence[RequestResult], solo: Sequence[Sequence[int]]) -> tuple[RequestResult, ...]:
    """The results with each request's solo tokens (solo[i] for request i)."""
    return tuple(replace(r, solo_token_ids=tuple(solo[r.request])) for r in results)


def run_with_solo(run: ServeRun, solo: Sequence[Sequence[int]]) -> ServeRun:
    return replace(run, results=with_solo(run.results, solo))
