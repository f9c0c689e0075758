"""A repeated comparison is a RunInfo with repeat and earlier_ms, and a file saved by the kvviz that wrote those fields
on a subclass of RunInfo (saved_repeated_run_v1.json: tiny-random, concat and static, 3 tokens, repeat 2) loads and
saves again byte for byte.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

OLD_REPEATED = Path(__file__).with_name("saved_repeated_run_v1.json")


def test_a_repeated_run_saved_on_the_subclass_loads_as_a_runinfo_and_saves_the_same_bytes():
    from kvviz.records import traceio
    from kvviz.records.trace import RunInfo

    text = OLD_REPEATED.read_text()
    saved = traceio.loads_run(text)
    assert type(saved.info) is RunInfo and saved.info.repeat == 2
    assert set(saved.info.earlier_ms) == {"concat", "static"}
    assert all(len(runs) == 1 and len(runs[0]) == 3 for runs in saved.info.earlier_ms.values())
    assert traceio.dumps_run(saved.info, saved.traces) == text


def test_a_run_made_once_is_saved_without_repeat_fields_and_loads_with_one_run():
    from kvviz.records import traceio

    doc = json.loads(OLD_REPEATED.read_text())
    del doc["info"]["repeat"], doc["info"]["earlier_ms"]  # the shape of a saved run made once
    text = json.dumps(doc, indent=1) + "\n"
    saved = traceio.loads_run(text)
    assert saved.info.repeat == 1 and saved.info.earlier_ms == {}
    assert traceio.dumps_run(saved.info, saved.traces) == text
    stray = dict(doc, info=dict(doc["info"], earlier_ms={"concat": [[1.0, 1.0, 1.0]]}))
    assert traceio.loads_run(json.dumps(stray)).info.earlier_ms == {}  # read only with a repeat
    bad = dict(doc, info=dict(doc["info"], repeat=2, earlier_ms={}))
    with pytest.raises(ValueError, match="earlier_ms must hold the step times of every engine"):
        traceio.loads_run(json.dumps(bad))
