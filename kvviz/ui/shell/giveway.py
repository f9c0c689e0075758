"""How the panel grid gives way: which shown panels it can give their readable size in the room it has,
in which rows, and how a row's room is shared out. Arithmetic on sizes only: no Qt, no panels; the grid
(kvviz/ui/grid.py, kvviz/ui/shell/grid.py) measures the needs and lays out what this returns."""
from __future__ import annotations

HANDLE_PX = 6  # a splitter handle and the frames' margins between two cells (measured: 5-7 px)


def give_way(shown: list[str], needs: dict[str, tuple[int, int]], priority: dict[str, int],
             room: tuple[int, int], handle: int = HANDLE_PX) -> tuple[list[list[str]], list[str]]:
    """Which shown panels the grid can give their readable size (needs: width, height) in `room`,
    and how: (rows of kept panels, panels moved behind tabs, in the order shown).

    The most important panels (lowest priority number) are kept first. For each number kept, the
    rows tried are: one row for up to three panels, else two rows in the order shown (the first the
    longer), as the grid always began; then two rows with the tallest panels together, so that one
    tall panel does not make both rows tall; then one row. A single panel is always kept: alone it
    has the whole grid."""
    width, height = room
    ranked = sorted(shown, key=lambda k: (priority.get(k, 50), shown.index(k)))

    def fits(rows: list[list[str]]) -> bool:
        return (all(sum(needs[k][0] for k in row) + handle * (len(row) - 1) <= width for row in rows)
                and sum(max(needs[k][1] for k in row) for row in rows) + handle * (len(rows) - 1) <= height)

    for n in range(len(shown), 0, -1):
        kept = [k for k in shown if k in ranked[:n]]
        for rows in _layouts_to_try(kept, needs):
            if fits(rows):
                return rows, [k for k in shown if k not in kept]
    if not shown:
        return [], []
    return [[ranked[0]]], [k for k in shown if k != ranked[0]]


def _layouts_to_try(kept: list[str], needs: dict[str, tuple[int, int]]):
    n = len(kept)
    cols = -(-n // 2)
    if n <= 3:
        yield [kept]
    if n >= 2:
        yield [kept[:cols], kept[cols:]]
        tall = sorted(kept, key=lambda k: -needs[k][1])
        for m in sorted(range(1, n), key=lambda m: abs(2 * m - n)):  # balanced splits first
            first = set(tall[:m])
            rows = [[k for k in kept if k in first], [k for k in kept if k not in first]]
            yield sorted(rows, key=lambda row: kept.index(row[0]))  # the row holding the first panel on top
    if n > 3:
        yield [kept]


def bands(starts: list[int], size: int) -> int:
    """How many columns (or rows) plots starting at these x (or y) make: a start more than half a
    plot past the last band's begins another (views of one column differ by their axes' widths)."""
    count, last = 0, None
    for start in sorted(starts):
        if last is None or start > last + size / 2:
            count, last = count + 1, start
    return count


def share(room: int, needs: list[int], handle: int = HANDLE_PX) -> list[int]:
    """Sizes for cells in a row (or rows in the grid): each its need, and the room left shared out
    equally; where the needs do not fit, in proportion to them."""
    spare = room - sum(needs) - handle * (len(needs) - 1)
    if spare < 0:
        total = max(1, sum(needs))
        return [max(1, n * (room - handle * (len(needs) - 1)) // total) for n in needs]
    return [n + spare // len(needs) + (1 if i < spare % len(needs) else 0) for i, n in enumerate(needs)]
