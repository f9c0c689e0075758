"""StepTrace.of, the engines' way to build a step's record from a dict naming every field: the same record
as the keyword constructor, still frozen, still checked, and nothing missing or extra (never timed)."""
from __future__ import annotations

import dataclasses

import pytest

from kvviz.records.trace import MaskSpec, StepTrace

FIELDS = [f.name for f in dataclasses.fields(StepTrace)]


def _values(**over):
    base = {f.name: f.default for f in dataclasses.fields(StepTrace)}
    base.update(run_id="r1", engine="paged", step=3, phase="decode", token_id=42, token_text="*", pos_start=9,
                pos_stop=10, cache_len=10, cache_capacity=16, cache_bytes=4096, bytes_copied=0, bytes_written=512,
                bytes_gathered=8192, kv_projections=2, latency_ms=0.25, block_table=(3, 1), block_size=8,
                mask_spec=MaskSpec(q_len=1, kv_len=10, past_len=9))
    base.update(over)
    return base


def test_of_gives_the_record_the_keyword_constructor_gives():
    values = _values()
    made, built = StepTrace.of(dict(values)), StepTrace(**values)
    assert made == built and dataclasses.asdict(made) == dataclasses.asdict(built)
    assert [getattr(made, f) for f in FIELDS] == [values[f] for f in FIELDS]
    assert made.bytes_gathered == 8192 and made.block_table == (3, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.token_id = 1
    assert dataclasses.replace(made, token_id=7).token_id == 7  # the keyword path still works from it


def test_of_refuses_a_missing_or_unknown_field_and_checks_as_init_does():
    values = _values()
    del values["top1_agrees"]
    with pytest.raises(TypeError, match=r"StepTrace: fields \['top1_agrees'\] missing or unknown"):
        StepTrace.of(values)
    with pytest.raises(TypeError, match=r"\['colour'\]"):
        StepTrace.of(_values(colour="red"))
    with pytest.raises(ValueError, match="phase must be one of"):
        StepTrace.of(_values(phase="warmup"))
    with pytest.raises(ValueError, match="sinks 9 must be at least 0 and fewer than the window 4"):
        StepTrace.of(_values(window=4, sinks=9))
