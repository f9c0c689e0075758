"""The Watch narration's counted sentences agree in number: a sample whose prefix-cache hits are one block says
"1 block of a cached prefix reused", more than one says "N blocks"."""
from __future__ import annotations

import pytest

pytest.importorskip("msgspec")

BLOCK = 4


def _sample(t: float, hits: float):
    from kvviz.peers.watch.metrics import MetricSample
    from kvviz.peers.watch.recording import Sample

    metrics = MetricSample(usage=0.1, running=1.0, waiting=0.0, preemptions=0.0, prefix_queries=hits,
                           prefix_hits=hits, generation_tokens=t, prompt_tokens=hits, ttft_sum=0.05 * t,
                           ttft_count=t, itl_sum=0.01 * t, itl_count=t, block_size=BLOCK, num_blocks=64, engines=1,
                           start_time=1.0, model="tiny")
    return Sample(t, 0, metrics)


def test_one_reused_block_is_said_in_the_singular_and_more_in_the_plural():
    from kvviz.peers.watch.history import ServerHistory

    server = ServerHistory(index=0, url="http://127.0.0.1:8000", ranks=1)
    for t, hits in ((1.0, 0), (2.0, BLOCK), (3.0, 3 * BLOCK)):  # hits are a counter: +1 block, then +2 blocks
        server.on_sample(_sample(t, hits))
    said = [str(sentence) for _t, sentence in server.narration]
    reused = [s for s in said if "of a cached prefix reused" in s]
    assert reused == [f"1 block of a cached prefix reused ({BLOCK} prompt tokens not computed again)",
                      f"2 blocks of a cached prefix reused ({2 * BLOCK} prompt tokens not computed again)"]
