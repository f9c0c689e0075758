"""A comparison run N times over: RunInfo.repeat and RunInfo.earlier_ms (every engine's step times in the runs
before the one shown) read into totals, medians and their spread, as `kvviz bench --repeat` gives them.

Stdlib only (no numpy, torch or Qt): the session fills the fields, the window's history, the saved trace and the
page read them.
"""
from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kvviz.records.trace import RunInfo


def totals_upto(info: RunInfo, engine: str, shown: Sequence[float], step: int) -> list[float]:
    """The engine's total time over steps 0..step in each run: the earlier runs', then the shown run's
    (`shown`: its step times so far). One total where the run was not repeated."""
    return [sum(run[: step + 1]) for run in info.earlier_ms.get(engine, ())] + [sum(shown[: step + 1])]


@dataclass(frozen=True)
class Spread:
    """An engine's totals over N runs: their median (the figure shown) and range."""

    n: int
    median_ms: float
    low_ms: float
    high_ms: float

    @property
    def relative(self) -> float:
        """Half the range against the median (the "±" a reader sees); 0 for one run or no time."""
        return (self.high_ms - self.low_ms) / 2 / self.median_ms if self.median_ms > 0 else 0.0


def spread(totals: Sequence[float]) -> Spread:
    return Spread(len(totals), statistics.median(totals), min(totals), max(totals))


def check_earlier(info: RunInfo, steps: Mapping[str, int], top: int, most_ms: float) -> None:
    """One-line ValueError where the earlier runs do not fit the run: `repeat` within 1..`top`, repeat - 1 runs of
    each of the run's engines, each as long as the run asked for (or as its steps, where it names no length),
    every time a number within 0..`most_ms`."""
    if not isinstance(info.repeat, int) or isinstance(info.repeat, bool) or not 1 <= info.repeat <= top:
        raise ValueError(f"info.repeat is {info.repeat!r}, not a count within 1..{top:,}")
    if not isinstance(info.earlier_ms, dict) or set(info.earlier_ms) != (set(steps) if info.repeat > 1 else set()):
        raise ValueError("info.earlier_ms must hold the step times of every engine of the run, and only theirs")
    for engine, runs in info.earlier_ms.items():
        length = info.max_new_tokens or steps[engine]
        if not isinstance(runs, (list, tuple)) or len(runs) != info.repeat - 1:
            raise ValueError(f"info.earlier_ms[{engine!r}] must hold {info.repeat - 1} runs")
        for run in runs:
            if not isinstance(run, (list, tuple)) or len(run) != length or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= most_ms for v in run):
                raise ValueError(f"info.earlier_ms[{engine!r}]: each run must be {length} step times within "
                                 f"0..{most_ms:g} ms")
