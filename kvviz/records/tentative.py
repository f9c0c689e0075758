"""A speculative round's tentative cells in the work matrix (kvviz.engines.spec): the drafted rows the round's
forward verified past the sequence, each in its verdict (accepted; rejected and left in place, or freed), the rows
written over rejected slots, a later step's accepted row. From a StepTrace alone: no Qt, no drawing (the window's
work matrix and the page draw these kinds in SPEC_CELL_COLORS).
"""
from __future__ import annotations

from dataclasses import dataclass

from kvviz.records.trace import StepTrace

# The tentative kinds, in the order a pooled pixel keeps them (after the chapter's: empty .. computed), and their
# colours: a drafted row the target accepted, one it rejected and the rule left in place (advance-and-overwrite)
# or cut from the cache (crop/free), a row written over a rejected slot an earlier round left in place.
SPEC_KINDS = ("freed", "stale", "accepted", "overwritten")
SPEC_CELL_COLORS = {"accepted": "#4daf4a", "stale": "#6a3d9a", "freed": "#3b3b3b", "overwritten": "#00bcd4"}


@dataclass(frozen=True)
class Tentative:
    """What a speculative step changes in its work matrix: the matrix's size (its drafted rows stand past the
    sequence), cells set over the chapter's kinds as (row, first key, key stop, kind) runs, rows past the
    sequence not in a run masked, and the rows whose computed cells the round's forward computed (a later step of
    the round: accepted)."""

    size: int
    runs: tuple[tuple[int, int, int, str], ...] = ()
    accepted_rows: tuple[int, int] | None = None


def tentative(trace: StepTrace) -> Tentative | None:
    """The step's tentative cells; None for a step that has none (a plain engine's, a round without drafts)."""
    a, b = trace.pos_start, trace.pos_stop
    if trace.spec_index:
        return Tentative(b, accepted_rows=(a, b))  # its row came from the round's forward, not this step
    slots = trace.spec_slots
    if slots is None and not trace.bytes_overwritten:
        return None
    first, kept, end = slots if slots is not None else (b, b, b)
    rejected = "freed" if trace.bytes_undone else "stale"
    runs = []
    for i in range(first, end):
        if a:
            runs.append((i, 0, a, "cached"))
        runs.append((i, a, i + 1, "accepted" if i < kept else rejected))
    if trace.bytes_overwritten:  # rows written over a rejected slot an earlier round left in place
        per_row = trace.bytes_written // (1 + (trace.spec_rolled_back or 0))
        rows = trace.bytes_overwritten // max(per_row, 1)
        runs += [(i, i, i + 1, "overwritten") for i in range(a, min(end, a + rows))]
    return Tentative(end, tuple(runs))
