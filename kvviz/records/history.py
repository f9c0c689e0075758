"""The one history type every view draws from: typed records per lane (an engine, a scheduler, a server) in
step order, the run they belong to, a version that bumps on every change (the repaint cue) and the reads a view
makes at a step. No Qt, no torch: stdlib and numpy, so windows, exports, replay and the page share it.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

R = TypeVar("R")
T = TypeVar("T")


def first_step(record: Any, place: int) -> int:
    """The step a record starts at: its own `step`, else its place in the lane (a time series' point)."""
    return getattr(record, "step", place)


def count_steps(records: Sequence[Any]) -> int:
    """Steps a lane's records stand for: one past the last one's last step (a record spans `span` steps, one
    unless it says otherwise); 0 for none."""
    if not records:
        return 0
    last = records[-1]
    return first_step(last, len(records) - 1) + getattr(last, "span", 1)


def index_at(records: Sequence[Any], step: int, starts: np.ndarray | None = None) -> int:
    """The place of the record that stands for `step` clamped to the lane's steps: the last one starting at or
    before it (the first one for a step before any); -1 for no records. `starts`: each record's first step, when
    the caller keeps them."""
    n = count_steps(records)
    if not records:
        return -1
    step = max(0, min(step, n - 1))
    if n == len(records):  # one record per step from step 0: the step is the place
        return step
    if starts is None:
        starts = np.array([first_step(r, i) for i, r in enumerate(records)], dtype=np.int64)
    return max(0, int(np.searchsorted(starts[: len(records)], step, side="right")) - 1)


class History(Generic[R]):
    """Records per lane, in step order, of the run `run_id`. A record stands for the steps from its first up to
    the next record's (a stretch: `span` steps). `add` drops a record of another run (one that arrived after its
    run was replaced) and refuses one out of order. With HOLD_LAST, a lane read past its end shows its last record
    (lockstep scrubbing: a lane that finished earlier shows its final state); without, it shows none."""

    HOLD_LAST: ClassVar[bool] = False
    run_id: str

    def __init__(self, lanes: Mapping[Hashable, list[R]] | None = None) -> None:
        self._lanes: dict[Hashable, list[R]] = dict(lanes) if lanes is not None else {}
        self.version = 0
        self._cache: dict[tuple[str, Hashable], tuple[tuple, Any]] = {}

    # -- building ---------------------------------------------------------------------------------
    def reset(self, run_id: str, lanes: Iterable[Hashable]) -> None:
        """Empty lanes for the run `run_id` about to stream in."""
        self.run_id = run_id
        self._lanes = {k: [] for k in lanes}
        self._cache.clear()
        self.version += 1

    def add(self, record: R, run_id: str | None = None) -> bool:
        """Append one record (`run_id`: the run it came from, else its own `run_id`); False when it is a late
        record of an earlier run, dropped."""
        if (record.run_id if run_id is None else run_id) != self.run_id:
            return False
        self.append(self.lane_of(record), record)
        return True

    def lane_of(self, record: R) -> Hashable:
        """The lane a record goes to (a source's records say it their own way)."""
        return record.lane

    def append(self, lane: Hashable, record: R) -> None:
        """The record after the lane's last; ValueError unless it starts where the lane's steps end."""
        records = self._lanes.setdefault(lane, [])
        n = count_steps(records)
        if first_step(record, len(records)) != n:
            raise ValueError(f"{lane}: step {first_step(record, len(records))} arrived after {n} steps")
        records.append(record)
        self.version += 1

    # -- reading ----------------------------------------------------------------------------------
    @property
    def lanes(self) -> tuple[Hashable, ...]:
        return tuple(self._lanes)

    def lane(self, key: Hashable) -> Sequence[R]:
        """The lane's records, in step order (empty for a lane it does not hold)."""
        return self._lanes.get(key, ())

    def n_steps(self, lane: Hashable | None = None) -> int:
        """Steps the lane's records stand for; with no lane, the most of any."""
        if lane is not None:
            return count_steps(self.lane(lane))
        return max((count_steps(self.lane(k)) for k in self.lanes), default=0)

    def clamp(self, lane: Hashable, step: int) -> int:
        return max(0, min(step, self.n_steps(lane) - 1))

    def starts(self, lane: Hashable) -> np.ndarray:
        """Each record's first step, then the step count (int [records + 1])."""
        return self.cached("starts", lane, lambda: np.array(
            [first_step(r, i) for i, r in enumerate(self.lane(lane))] + [self.n_steps(lane)], dtype=np.int64))

    def index(self, lane: Hashable, step: int) -> int:
        """The place in the lane's records of the one that stands for `step` (clamped; -1 for an empty lane)."""
        records = self.lane(lane)
        return self._place(lane, records, count_steps(records), step)

    def _place(self, lane: Hashable, records: Sequence[R], n: int, step: int) -> int:
        if n == len(records):  # one record per step from step 0 (or none: -1): the step is the place
            return min(max(step, 0), n - 1)
        return index_at(records, step, self.starts(lane))

    def at(self, lane: Hashable, step: int) -> R | None:
        """The lane's record that stands for `step`; None for an empty lane and, unless HOLD_LAST, outside its
        steps."""
        records = self.lane(lane)
        n = count_steps(records)
        if not n or (not self.HOLD_LAST and not 0 <= step < n):
            return None
        return records[self._place(lane, records, n, step)]

    def upto(self, lane: Hashable, step: int) -> list[R]:
        """The lane's records up to and including the one that stands for `step` (fewer if it has not got that
        far; none before step 0 unless HOLD_LAST)."""
        records = self.lane(lane)
        n = count_steps(records)
        if not n or (step < 0 and not self.HOLD_LAST):
            return []
        out = records[: self._place(lane, records, n, step) + 1]
        return out if isinstance(out, list) else list(out)

    def cached(self, name: str, lane: Hashable, make: Callable[[], T], *also: Hashable) -> T:
        """make() computed once per state of the lane (and of the lanes it also reads): the lists of records and
        their lengths (the lists are kept with the value, so a list read again is the same list)."""
        state = tuple((r, len(r)) for r in (self.lane(k) for k in (lane, *also)))
        hit = self._cache.get((name, lane))
        if hit is None or len(hit[0]) != len(state) or any(
                a is not b or m != n for (a, m), (b, n) in zip(hit[0], state)):
            hit = (state, make())
            self._cache[(name, lane)] = hit
        return hit[1]
