"""The serving record's JSON (schema kvviz-serve) and the workload reader: round trips, presets, and every
malformed input refused with one line."""
from __future__ import annotations

import json

import pytest

from kvviz.serving import record
from kvviz.serving.block_manager import BlockManager
from kvviz.serving.sequence import Sequence
from kvviz.serving.workload import (
    CHAT_TURNS,
    Request,
    chat,
    course_batch,
    load_workload,
    random_workload,
    read_workload,
    shared_prefix,
)


@pytest.fixture(scope="module")
def saved(torch_cpu, tmp_path_factory):
    from kvviz.models.presets import load_model, load_tokenizer
    from kvviz.serving.engine import serve

    model, tok = load_model("tiny-random", torch_cpu.device("cpu")), load_tokenizer("tiny")
    s = record.SchedulerSettings(max_batch=3, blocks=40, block_size=8, token_budget=16)
    runs = [serve(model, tok, load_workload("shared-prefix"), key, s) for key in ("static", "prefix")]
    runs.append(serve(model, tok, load_workload("course-batch"), "paged",
                      record.SchedulerSettings(max_batch=4, blocks=4, block_size=16)))  # preempts
    path = tmp_path_factory.mktemp("rec") / "serve.json"
    record.save_runs(path, runs)
    return runs, path


def test_round_trip_is_equal(saved):
    runs, path = saved
    back = record.load_runs(path)
    assert back == tuple(runs)
    assert [r.summary() for r in back] == [r.summary() for r in runs]
    assert any(h for s in back[1].steps for h in s.prefix_hits)
    assert any(p for s in back[2].steps for p in s.preemptions)


def _one_line_refusal(doc, match: str):
    with pytest.raises(ValueError, match=match) as err:
        record.runs_from_dict(doc)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.update(schema="kvviz-trace"), "not a kvviz serve record"),
    (lambda d: d.update(version=2), "version 2"),
    (lambda d: d.update(runs=[]), "runs must be a non-empty list"),
    (lambda d: d["runs"][0].update(scheduler="fastest"), "scheduler must be one of"),
    (lambda d: d["runs"][0]["steps"][0]["work"][0].update(kind="wasted"), "kind must be one of"),
    (lambda d: d["runs"][0]["steps"][0]["work"][0].update(pos_start=-1), "pos_start must be a whole number"),
    (lambda d: d["runs"][0]["steps"][0]["work"][0].update(request=99), "request 99 of 10"),
    (lambda d: d["runs"][0]["steps"][0]["requests"][0].update(state="sleeping"), "state must be one of"),
    (lambda d: d["runs"][0]["steps"][0]["requests"][0].update(block_table=[10**6]), "outside the pool"),
    (lambda d: d["runs"][0]["steps"][0]["pool"].update(filled=[0]), "different lengths"),
    (lambda d: d["runs"][0]["steps"][0]["pool"]["ref_counts"].__setitem__(0, 3), "ref count"),
    (lambda d: d["runs"][0]["steps"][0].update(latency_ms="fast"), "latency_ms must be a number"),
    (lambda d: d["runs"][0]["steps"][1].update(step=5), r"steps\[1\] is step 5"),
    (lambda d: d["runs"][0]["results"].pop(), "9 results for 10 requests"),
    (lambda d: d["runs"][0]["results"][0].update(token_ids="abc"), "token_ids must be a list"),
    (lambda d: d["runs"][0]["settings"].update(block_size=0), "block_size must be a whole number >= 1"),
    (lambda d: d["runs"][0]["model"].pop("n_layer"), "missing n_layer"),
    (lambda d: d["runs"][0]["workload"]["requests"][0].update(new_tokens=0), "new_tokens must be"),
    (lambda d: d["runs"][0].update(steps=[]), "no steps"),
])
def test_malformed_record_is_refused_in_one_line(saved, edit, match):
    doc = record.runs_to_dict(saved[0])
    edit(doc)
    _one_line_refusal(doc, match)


def test_bad_files_are_refused_in_one_line(tmp_path):
    cases = {"notjson.json": "{runs:", "deep.json": "[" * 40 + "]" * 40, "list.json": "[]"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError) as err:
            record.load_runs(tmp_path / name)
        assert "\n" not in str(err.value) and name in str(err.value)
    with pytest.raises(ValueError, match="no such file"):
        record.load_runs(tmp_path / "missing.json")


def test_save_leaves_no_partial_file(saved, tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises(ValueError):
        record.save_runs(tmp_path / "nofolder" / "x.json", saved[0])
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_percentile_matches_numpy():
    import numpy as np

    xs = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6]
    for q in (0, 50, 90, 100):
        assert record.percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))


# -- the pool on its own ------------------------------------------------------------------------
def _seq(i, ids):
    return Sequence(i, ids, 4, 0, sampler=None)


def test_only_full_blocks_are_hashed_and_a_hit_needs_the_whole_chain():
    pool = BlockManager(8, 4, caching=True)
    a = _seq(0, list(range(10)))  # blocks [0..3] [4..7] [8, 9]
    pool.allocate(a, pool.needed(a, 10))
    pool.key_full_blocks(a, 10)  # keyed when the step is planned
    a.computed = 10
    pool.written(a)
    assert pool.state().hashed == (True, True, False) + (False,) * 5
    pool.release(a)
    # same first block, different second: only the first is found
    b = _seq(1, [0, 1, 2, 3, 4, 5, 6, 99, 8, 9, 10])
    assert pool.match_prefix(b) == [0]
    # the same second block's tokens after a different first block: no hit (the hash chains)
    c = _seq(2, [9, 9, 9, 9, 4, 5, 6, 7, 1])
    assert pool.match_prefix(c) == []
    # a prompt exactly two blocks long reuses one: its last position must be computed for its logits
    d = _seq(3, list(range(8)))
    assert pool.match_prefix(d) == [0]


def test_release_is_tail_first_and_eviction_least_recently_used():
    pool = BlockManager(4, 2, caching=True)
    a = _seq(0, [1, 2, 3, 4, 5, 6])
    pool.allocate(a, 3)
    pool.key_full_blocks(a, 6)  # keyed when the step is planned
    a.computed = 6
    pool.written(a)
    table = list(a.block_table)
    pool.release(a)
    # free queue: the one never-used block first, then a's blocks tail first
    assert list(pool.free) == [3, table[2], table[1], table[0]]
    assert pool.state().states == ("cached", "cached", "cached", "free")
    b = _seq(1, [7, 8, 9, 10])
    pool.allocate(b, 2)  # takes the free block, then evicts a's tail
    assert b.block_table == [3, table[2]]
    e = _seq(2, [1, 2, 3, 4, 5, 6, 0])
    assert pool.match_prefix(e) == table[:2]  # a's head survives


def test_shared_blocks_are_counted_by_reference():
    pool = BlockManager(6, 2, caching=True)
    a = _seq(0, [1, 2, 3, 4, 5])
    pool.allocate(a, 3)
    pool.key_full_blocks(a, 5)  # keyed when the step is planned
    a.computed = 5
    pool.written(a)
    b = _seq(1, [1, 2, 3, 4, 7])
    hit = pool.match_prefix(b)
    pool.take_cached(b, hit)
    st = pool.state()
    assert hit == a.block_table[:2] and b.computed == 4
    assert [st.ref_counts[x] for x in a.block_table] == [2, 2, 1]
    assert st.owners[a.block_table[0]] == (0, 1)
    pool.release(a)
    assert [pool.state().ref_counts[x] for x in b.block_table] == [1, 1]
    assert pool.n_free == 4


# -- workloads ------------------------------------------------------------------------------------
def test_presets_are_the_courses_workloads():
    cb = course_batch()
    assert [len(r.prompt) for r in cb.requests] == [10, 30, 5, 20]
    assert [r.new_tokens for r in cb.requests] == [15, 10, 20, 12]
    assert {r.arrival for r in cb.requests} == {0}
    assert all(r.prompt.isascii() for r in cb.requests)
    sp = shared_prefix()
    assert len(sp.requests) == 11 - 1 and len({r.prompt for r in sp.requests}) == 10
    common = sp.requests[0].prompt
    for r in sp.requests[1:]:
        while not r.prompt.startswith(common):
            common = common[:-1]
    assert 90 <= len(common) <= 130  # the ~100-token system prompt (bytes) and "Q: "
    turns = chat().requests
    assert len(turns) == len(CHAT_TURNS) == 3
    assert turns[0].prompt in turns[1].prompt[:len(turns[0].prompt)] and turns[1].prompt in turns[2].prompt
    assert turns[0].arrival < turns[1].arrival < turns[2].arrival


def test_random_workload_is_seeded():
    assert random_workload(16, 3) == load_workload("random:16:3") != load_workload("random:16:4")
    assert load_workload("random:16") == random_workload(16, 0)
    assert len(random_workload(5).requests) == 5
    arrivals = [r.arrival for r in random_workload(40, 1).requests]
    assert arrivals == sorted(arrivals) and arrivals[-1] > 0


def test_workload_file_round_trip(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"requests": [{"prompt": "hi there", "new_tokens": 3},
                                             {"prompt_ids": [1, 2, 3], "new_tokens": 2, "arrival": 4, "seed": 9}]}))
    wl = read_workload(path)
    assert wl.requests == (Request(prompt="hi there", new_tokens=3),
                           Request(prompt="", prompt_ids=(1, 2, 3), new_tokens=2, arrival=4, seed=9))
    assert load_workload(str(path)) == wl


@pytest.mark.parametrize("doc, match", [
    ({"requests": []}, "no requests"),
    ([], "an object with a list"),
    ({"requests": [{"prompt": "a"}]}, "new_tokens must be"),
    ({"requests": [{"prompt": "a", "new_tokens": 0}]}, "new_tokens must be"),
    ({"requests": [{"prompt": "a", "new_tokens": True}]}, "new_tokens must be"),
    ({"requests": [{"prompt": "", "new_tokens": 2}]}, "prompt must be non-empty"),
    ({"requests": [{"prompt": "a", "prompt_ids": [1], "new_tokens": 2}]}, "exactly one of"),
    ({"requests": [{"prompt_ids": [1, -2], "new_tokens": 2}]}, "prompt_ids must be"),
    ({"requests": [{"prompt": "a", "new_tokens": 2, "arrival": -1}]}, "arrival must be"),
    ({"requests": [{"prompt": "a", "new_tokens": 2, "tokens": 5}]}, "unknown key"),
    ({"requests": [{"prompt": "a", "new_tokens": 2}], "extra": 1}, "unknown key"),
    ({"requests": ["a"]}, "a request must be a JSON object"),
])
def test_malformed_workload_is_refused_in_one_line(tmp_path, doc, match):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=match) as err:
        read_workload(path)
    assert "\n" not in str(err.value)


def test_unknown_workload_names():
    for spec, match in (("nosuch", "neither a preset"), ("random:x", "random:N"), ("random:0", "1 <= N")):
        with pytest.raises(ValueError, match=match):
            load_workload(spec)
