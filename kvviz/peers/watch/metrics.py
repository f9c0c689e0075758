"""One scrape of a vLLM server's Prometheus `/metrics`, parsed with prometheus_client's own text parser into a
frozen MetricSample (the figures kvviz watch shows); counters are totals as the server reports them, summed
over its engines (data-parallel ranks). Knows no socket and no clock.
"""
from __future__ import annotations

import math

import msgspec

# vLLM's metric names (the family names prometheus_client gives: a counter's `_total` dropped).
USAGE = "vllm:kv_cache_usage_perc"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
COUNTERS = {"preemptions": "vllm:num_preemptions", "prefix_queries": "vllm:prefix_cache_queries",
            "prefix_hits": "vllm:prefix_cache_hits", "generation_tokens": "vllm:generation_tokens",
            "prompt_tokens": "vllm:prompt_tokens"}
HISTOGRAMS = {"ttft": "vllm:time_to_first_token_seconds", "itl": "vllm:inter_token_latency_seconds"}
CACHE_INFO = "vllm:cache_config_info"
START_TIME = "process_start_time_seconds"
MAX_METRICS_BYTES = 16 << 20  # a /metrics page is ~100 KB; more is not a vLLM server's


class MetricSample(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """What one scrape says. NaN where the server does not report a figure."""

    usage: float  # fraction of the KV pool in use (mean over engines)
    running: float
    waiting: float
    preemptions: float  # counters: totals since the server started
    prefix_queries: float  # prompt tokens looked up in the prefix cache
    prefix_hits: float  # of them, found cached
    generation_tokens: float
    prompt_tokens: float
    ttft_sum: float  # histograms: sum (seconds) and count of observations
    ttft_count: float
    itl_sum: float
    itl_count: float
    block_size: int  # from vllm:cache_config_info (0: not reported)
    num_blocks: int  # the pool's blocks over all engines (0: not reported)
    engines: int
    start_time: float  # process_start_time_seconds: a restart changes it
    model: str


def parse_metrics(text: str) -> MetricSample:
    """The figures in a /metrics page; ValueError (one line) when it is not Prometheus text or has no vLLM
    metric at all (the URL is not a vLLM server's)."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, list[tuple[dict, float]]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                values.setdefault(s.name, []).append((s.labels, s.value))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise ValueError(f"not Prometheus text ({str(exc)[:120]})") from None
    if not any(name.startswith("vllm:") for name in values):
        raise ValueError("no vllm: metric in the page (is this a vLLM server's /metrics?)")

    def total(name: str) -> float:
        found = values.get(name)
        return math.fsum(v for _l, v in found) if found else math.nan

    usage = values.get(USAGE)
    info = values.get(CACHE_INFO, [])
    engines = {labels.get("engine", "0") for name, rows in values.items() if name.startswith("vllm:")
               for labels, _v in rows}
    block_size = _int_label(info, "block_size")
    per_engine = _int_label(info, "num_gpu_blocks")
    model = next((labels.get("model_name", "") for labels, _v in values.get(RUNNING, [])), "")
    return MetricSample(
        usage=math.fsum(v for _l, v in usage) / len(usage) if usage else math.nan,
        running=total(RUNNING), waiting=total(WAITING),
        **{k: total(n + "_total") for k, n in COUNTERS.items()},
        ttft_sum=total(HISTOGRAMS["ttft"] + "_sum"), ttft_count=total(HISTOGRAMS["ttft"] + "_count"),
        itl_sum=total(HISTOGRAMS["itl"] + "_sum"), itl_count=total(HISTOGRAMS["itl"] + "_count"),
        block_size=block_size, num_blocks=per_engine * max(1, len(info)), engines=len(engines),
        start_time=total(START_TIME), model=model)


def _int_label(rows: list[tuple[dict, float]], key: str) -> int:
    for labels, _v in rows:
        try:
            return int(labels.get(key, ""))
        except ValueError:
            continue
    return 0
