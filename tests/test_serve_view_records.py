"""Hand-worked serve records for the serve view's tests (no model, no scheduler): the course's static
batch (step 08) and two requests sharing a cached prefix under `prefix` beside `paged`. The tests here
check that the records are valid kvviz-serve files (they round-trip through the library's loader) and
carry the course's counts, worked out from the request lengths alone.
"""
from __future__ import annotations

import json
import math

from kvviz.serving import record as rec
from kvviz.serving.workload import Request, Workload

COURSE_PROMPTS = (10, 30, 5, 20)
COURSE_NEW = (15, 10, 20, 12)
BLOCK = 16
MODEL = rec.ModelInfo(name="tiny-random", arch="kvviz", n_layer=2, n_head=4, n_kv_head=4, head_dim=32,
                      max_seq_len=512, dtype="float32", device="cpu", threads=1, weights_bytes=1_000_000,
                      kv_bytes_per_token=1024)


def _pool(n_blocks: int, tables: dict[int, list[int]], lengths: dict[int, int], cached=()) -> rec.PoolState:
    """A pool whose blocks are held by `tables` (request -> physical blocks), each request's blocks filled
    up to its length; `cached` blocks are full, held by none, keyed in the prefix cache."""
    owners = [[] for _ in range(n_blocks)]
    filled = [0] * n_blocks
    hashed = [False] * n_blocks
    for r, table in tables.items():
        for i, b in enumerate(table):
            owners[b].append(r)
            filled[b] = max(filled[b], min(BLOCK, lengths[r] - i * BLOCK))
    for b in cached:
        filled[b], hashed[b] = BLOCK, True
    return rec.PoolState(block_size=BLOCK, ref_counts=tuple(len(o) for o in owners),
                         owners=tuple(tuple(o) for o in owners), filled=tuple(filled), hashed=tuple(hashed))


def course_batch_static() -> rec.ServeRun:
    """Static batching of the course's four requests: one prefill step padded to 30, then 19 decode steps
    (the prefill emits each request's first token), the finished requests idling until the longest ends."""
    workload = Workload("course-batch", tuple(Request(prompt="x" * p, new_tokens=n)
                                              for p, n in zip(COURSE_PROMPTS, COURSE_NEW)))
    longest, most = max(COURSE_PROMPTS), max(COURSE_NEW)
    n_blocks = 4 * math.ceil((longest + most) / BLOCK)
    tables = {r: list(range(r * 4, r * 4 + 4)) for r in range(4)}
    steps = []
    generated = [0] * 4
    for k in range(most):
        work = []
        for r, (p, n) in enumerate(zip(COURSE_PROMPTS, COURSE_NEW)):
            if k == 0:
                work.append(rec.Work(r, "prefill", 0, p, token_id=65 + r))
                if p < longest:
                    work.append(rec.Work(r, "padding", p, longest))
                generated[r] = 1
            elif generated[r] < n:
                work.append(rec.Work(r, "decode", longest + k - 1, longest + k, token_id=97 + (k + r) % 26))
                generated[r] += 1
            else:
                work.append(rec.Work(r, "idle", longest + k - 1, longest + k))
        done_now = tuple(r for r in range(4) if generated[r] == COURSE_NEW[r] and
                         any(w.request == r and w.token_id is not None for w in work))
        states = tuple(rec.RequestState(r, "finished" if generated[r] >= COURSE_NEW[r] else "running",
                                        computed=longest + k, generated=generated[r], block_table=tuple(tables[r]))
                       for r in range(4))
        lengths = {r: longest + k + 1 for r in range(4)}
        steps.append(rec.ServeStep(step=k, work=tuple(work), requests=states, pool=_pool(n_blocks, tables, lengths),
                                   admitted=(0, 1, 2, 3) if k == 0 else (), finished=done_now,
                                   latency_ms=20.0 if k == 0 else 5.0, weights_bytes=1_000_000, kv_bytes=4096))
    return _run("static", workload, steps, n_blocks)


SYSTEM = "s" * 32  # two full blocks of 16


def shared_prefix_pair(scheduler: str) -> rec.ServeRun:
    """Two requests with one 32-token system prompt and a 4-token question each, 3 new tokens, the second
    arriving at step 1. Under `prefix` the second reuses the first's two full blocks (ref count 2); under
    `paged` it prefills all 36 positions. After both finish, `prefix` keeps the shared blocks cached."""
    workload = Workload("shared-prefix", (Request(prompt=SYSTEM + "q1? ", new_tokens=3, arrival=0),
                                          Request(prompt=SYSTEM + "q2? ", new_tokens=3, arrival=1)))
    n_blocks = 8
    share = scheduler == "prefix"
    t0 = [0, 1, 2]
    t1 = [0, 1, 3] if share else [3, 4, 5]
    steps = []

    def step(k, work, states, tables, lengths, **kw):
        cached = kw.pop("cached", ())
        steps.append(rec.ServeStep(step=k, work=tuple(work), requests=tuple(states),
                                   pool=_pool(n_blocks, tables, lengths, cached), latency_ms=10.0,
                                   weights_bytes=1_000_000, kv_bytes=2048, **kw))

    step(0, [rec.Work(0, "prefill", 0, 36, token_id=65)],
         [rec.RequestState(0, "running", 36, 1, tuple(t0))], {0: t0}, {0: 37}, admitted=(0,))
    hit = (rec.PrefixHit(1, (0, 1), 32),) if share else ()
    step(1, [rec.Work(0, "decode", 36, 37, token_id=66), rec.Work(1, "prefill", 32 if share else 0, 36, token_id=67)],
         [rec.RequestState(0, "running", 37, 2, tuple(t0)), rec.RequestState(1, "running", 36, 1, tuple(t1))],
         {0: t0, 1: t1}, {0: 38, 1: 37}, admitted=(1,), prefix_hits=hit)
    step(2, [rec.Work(0, "decode", 37, 38, token_id=67), rec.Work(1, "decode", 36, 37, token_id=68)],
         [rec.RequestState(0, "finished", 0, 3), rec.RequestState(1, "running", 37, 2, tuple(t1))],
         {1: t1}, {1: 38}, finished=(0,))
    step(3, [rec.Work(1, "decode", 37, 38, token_id=69)],
         [rec.RequestState(0, "finished", 0, 3), rec.RequestState(1, "finished", 0, 3)],
         {}, {}, finished=(1,), cached=(0, 1) if share else ())
    return _run(scheduler, workload, steps, n_blocks)


def _run(scheduler: str, workload: Workload, steps: list[rec.ServeStep], n_blocks: int) -> rec.ServeRun:
    ends, t = [], 0.0
    for s in steps:
        t += s.latency_ms
        ends.append(t)
    results = []
    for i, req in enumerate(workload.requests):
        emitted = [(s.step, tok) for s in steps for r, tok in s.emitted if r == i]
        first, last = emitted[0][0], emitted[-1][0]
        start = ends[req.arrival] - steps[req.arrival].latency_ms
        results.append(rec.RequestResult(
            request=i, prompt_ids=tuple(ord(c) for c in req.prompt), token_ids=tuple(t for _s, t in emitted),
            text="".join(chr(t) for _s, t in emitted), arrival=req.arrival,
            admitted_step=next(s.step for s in steps if i in s.admitted), first_token_step=first, finish_step=last,
            ttft_ms=ends[first] - start, tpot_ms=(ends[last] - ends[first]) / (len(emitted) - 1),
            cached_tokens=sum(h.tokens for s in steps for h in s.prefix_hits if h.request == i),
            computed_tokens=sum(w.n_slots for s in steps for w in s.work if w.request == i and w.kind == "prefill")))
    settings = rec.SchedulerSettings(max_batch=8, blocks=n_blocks, block_size=BLOCK)
    return rec.ServeRun(scheduler=scheduler, settings=settings, model=MODEL, workload=workload,
                        results=tuple(results), steps=tuple(steps))


def round_trip(run: rec.ServeRun) -> rec.ServeRun:
    """The run written as a kvviz-serve file and read back by the library (validated)."""
    return rec.runs_from_dict(json.loads(rec.dumps_runs([run])))[0]


# -- the records themselves ------------------------------------------------------------------------
def test_the_course_batch_record_is_a_valid_serve_file_with_the_course_figures():
    run = course_batch_static()
    again = round_trip(run)
    summary = again.summary()
    # From the lengths alone: prefill pads 10/30/5/20 to 30 (120 slots), decode pads 15/10/20/12 to 20 (80).
    assert (summary.prefill_slots, summary.padding_slots) == (4 * 30, (30 - 10) + 0 + (30 - 5) + (30 - 20))
    assert (summary.generation_slots, summary.idle_slots) == (4 * 20, (20 - 15) + (20 - 10) + 0 + (20 - 12))
    assert (summary.padding_slots, summary.idle_slots) == (55, 23)


def test_the_shared_prefix_pair_reuses_two_blocks_only_under_prefix():
    prefix, paged = (round_trip(shared_prefix_pair(k)) for k in ("prefix", "paged"))
    assert prefix.summary().cached_tokens == 32 and paged.summary().cached_tokens == 0
    assert prefix.steps[1].pool.ref_counts[:2] == (2, 2)
    assert prefix.steps[3].pool.states[:2] == ("cached", "cached")
