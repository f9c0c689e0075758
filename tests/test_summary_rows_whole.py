"""The Summary table before a run shows whole rows only: at 1920x1080, zoom 150, in Chinese (whose row names are
taller than the table's Latin type measures), no row is cut by the table's or the panel's bottom edge."""
from __future__ import annotations

import pytest


@pytest.fixture
def chinese():
    from kvviz.ui import i18n, style

    yield i18n
    i18n.set_language("en")
    style.set_zoom(100)


def cut_rows(panel) -> list[str]:
    """The visible rows whose bottom lies below the table's viewport or the panel's bottom edge."""
    table = panel._table
    viewport = table.viewport()
    bottom = min(viewport.height(), viewport.mapFrom(panel, panel.rect().bottomLeft()).y() + 1)
    header = table.verticalHeader()
    out = []
    for row in range(table.rowCount()):
        if table.isRowHidden(row):
            continue
        top = header.sectionViewportPosition(row)
        if top + header.sectionSize(row) > bottom:
            out.append(f"{table.verticalHeaderItem(row).text()}: {top}+{header.sectionSize(row)} > {bottom}")
    return out


@pytest.mark.parametrize("size,zoom,lang", [((1920, 1080), 150, "zh_CN"), ((1280, 720), 100, "zh_CN"),
                                            ((1920, 1080), 150, "en")])
def test_the_summary_before_a_run_cuts_no_row(qtbot, open_window, chinese, size, zoom, lang):
    window = open_window()
    chinese.set_language(lang)
    window.retranslate_ui()
    window.resize(*size)
    window.grid.set_zoom(zoom)
    for _ in range(4):
        qtbot.wait(40)
        window.grab()
    grid = window.grid
    if "summary" not in grid.laid_out():
        grid.tabs.setCurrentIndex(1 + grid.moved.index("summary"))
        for _ in range(3):
            qtbot.wait(40)
            window.grab()
    panel = grid.panels["summary"]
    assert panel.isVisible()
    assert not cut_rows(panel), (cut_rows(panel), panel.height(), grid.frames["summary"].height())
