"""Numbers as kvviz prints and shows them, and the default prompt: shared by the commands and the window.

Plain Python: no Qt, no torch. One style everywhere: bytes in binary units (B, KiB ... PiB, never
"2621420.0 GiB"), counts with thousands separators ("4,152,060"), durations in the unit that keeps
them short (ns ... h, never "1,407,364.1 ms").
"""
from __future__ import annotations

import math

DEFAULT_PROMPT = "The key and value of a token never change once computed, so"

_BYTE_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


def fmt_bytes(n: float) -> str:
    """Bytes in the largest binary unit that keeps the figure at or above 1, one decimal:
    512 -> "512 B", 1536 -> "1.5 KiB", 2.5 * 2**50 -> "2.5 PiB" (beyond that, PiB with separators)."""
    if abs(n) < 1024:
        return f"{int(n)} B"
    value = n / 1024
    for unit in _BYTE_UNITS[:-1]:
        if abs(round(value, 1)) < 1024:  # 1023.96 KiB reads "1.0 MiB", not "1024.0 KiB"
            return f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} {_BYTE_UNITS[-1]}"


def _three_figures(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 99.95 else f"{value:.1f}" if abs(value) >= 9.995 else f"{value:.2f}"


def byte_unit(n: float) -> tuple[str, int]:
    """(unit, bytes in it): the largest binary unit that `n` bytes fill at least once (B below 1 KiB)."""
    unit, size = "B", 1
    for name in _BYTE_UNITS:
        if abs(n) < size * 1024:
            break
        unit, size = name, size * 1024
    return unit, size


def duration_unit(ms: float) -> tuple[str, float]:
    """(unit, ms in it) for a column of durations up to `ms`: ms below a second, then s, min, h."""
    for unit, size, top in _DURATIONS[1:]:
        if ms < size * top:
            return unit, size
    return "h", 3.6e6


def fmt_figure(value: float) -> str:
    """A figure in a column whose unit is named once: three significant figures ("0.25", "6.91",
    "156", "4,123"), "0" for nothing, "<0.01" for a trace of it."""
    if value == 0:
        return "0"
    if abs(value) < 0.01:
        return "<0.01"
    return f"{value:,.0f}" if abs(value) >= 99.95 else _three_figures(value)


def fmt_count(n: int) -> str:
    """A whole count with thousands separators: 4152060 -> "4,152,060"."""
    return f"{int(n):,}"


def fmt_count_short(n: int) -> str:
    """A large count in millions or billions (parameters): 27_530_000 -> "27.53 M"; below 100,000
    the count itself ("98,304")."""
    if n >= 1_000_000_000:
        return f"{n / 1e9:.2f} B"
    if n >= 100_000:
        return f"{n / 1e6:.2f} M"
    return fmt_count(n)


# (unit, size in ms, the next unit from this many on): µs and ms to 1000, s and min to 60, then h.
_DURATIONS = (("µs", 1e-3, 1000), ("ms", 1.0, 1000), ("s", 1e3, 60), ("min", 6e4, 60))


def fmt_ms(ms: float) -> str:
    """A duration given in ms, in the unit that keeps it readable: 0.0000507 -> "51 ns",
    0.2838528 -> "283.9 µs", 28.643328 -> "28.6 ms", 1407364.1 -> "23.5 min", 9e6 -> "2.5 h"."""
    if round(ms * 1e6) < 1000:
        return f"{ms * 1e6:.0f} ns"
    for unit, size, top in _DURATIONS:
        if round(ms / size, 1) < top:
            return f"{ms / size:.1f} {unit}"
    return f"{ms / 3.6e6:,.1f} h"


def share_text(share: float) -> str:
    """A share as a whole percent that never reads 100% (or 0%) unless it is exactly that: one
    disagreement in 200 steps is 99%, not the 100% that rounding gave."""
    percent = 100 * share
    if 0 < share < 1:
        percent = min(99, max(1, math.floor(percent)))
    return f"{percent:.0f}%"
