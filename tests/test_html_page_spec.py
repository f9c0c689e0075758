"""The page of a run with the speculative engines: the work matrix's tentative cells (drafted and accepted, rejected
and left in place, rejected and freed, written over a rejected slot) are the window's cell for cell
(kvviz.ui.panels.work_matrix.classify), drawn in the window's colours in headless Chromium with the network blocked,
and the narration tells each round in the window's words, in English and in Chinese."""
from __future__ import annotations

import dataclasses

import html_page_cdp
import numpy as np
import pytest
import test_spec_ui
from test_html_page import pixels, text_of
from test_spec_ui import round_step

from kvviz.page import page_data, write_page
from kvviz.records.tentative import SPEC_CELL_COLORS

spec_run = test_spec_ui.history  # the window's spec tests' run: static, spec-lookup (overwrite), spec-draft (crop)


def rgb(color: str) -> tuple[int, int, int]:
    return tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))


def drawn(spec_run, engine: str, k: int, cells) -> np.ndarray:
    """The chapter's kinds of the step (the window's classify of the trace without its round) with the page's
    tentative cells over them, as page.js draws them (kvviz/page/page.js cellKinds)."""
    from kvviz.ui.panels import work_matrix as wm

    t = spec_run.traces[engine][k]
    prev = spec_run.traces[engine][k - 1].pos_stop if k else 0
    base = wm.classify(dataclasses.replace(t, spec_index=None), prev)
    if cells is None:
        return base
    n, b = cells["n"], t.pos_stop
    out = np.full((n, n), wm.MASKED, dtype=np.uint8)
    out[:b, :b] = base
    if cells["accepted"] is not None:
        lo, hi = cells["accepted"]
        out[lo:hi][out[lo:hi] == wm.COMPUTED] = wm.ACCEPTED
    for i, c0, c1, kind in cells["runs"]:
        out[i, c0:c1] = wm.KIND_NAMES.index(kind)
    return out


def test_the_pages_tentative_cells_are_the_windows_at_every_step(spec_run):
    from kvviz.ui.panels import work_matrix as wm

    data = page_data(spec_run.info, spec_run.traces)
    seen = set()
    for e in data["engines"]:
        if e["tentative"] is None:
            assert e["name"] == "static"
            continue
        for k, cells in enumerate(e["tentative"]):
            t = spec_run.traces[e["name"]][k]
            window = wm.classify(t, spec_run.traces[e["name"]][k - 1].pos_stop if k else 0)
            page = drawn(spec_run, e["name"], k, cells)
            assert page.shape == window.shape and (page == window).all(), (e["name"], k)
            seen |= {wm.KIND_NAMES[v] for v in np.unique(page)}
    assert {"accepted", "stale", "freed", "overwritten"} <= seen
    assert data["spec_colors"] == wm.SPEC_CELL_COLORS


@pytest.fixture(scope="module")
def browser():
    if html_page_cdp.missing():
        pytest.skip(html_page_cdp.missing())
    b = html_page_cdp.Browser(1600, 1000)
    yield b
    b.close()


def show(browser, step: int) -> None:
    browser.eval(f"window.kvviz.setStep({step})")
    assert browser.eval("document.body.dataset.step") == str(step)


def matrix_of(browser, engine: str) -> tuple[int, int, int, int]:
    """The engine's matrix square in the screenshot (the page's click map of the work matrix's canvas)."""
    x, y, _w, _h = browser.rect("#panel-work_matrix canvas")
    at = browser.eval(f"document.querySelector('#panel-work_matrix canvas')._rows[{engine!r}]")
    return x + int(at["x"]), y + int(at["y"]), int(at["side"]), int(at["side"])


@pytest.mark.parametrize("engine, rejected", [("spec-lookup", "stale"), ("spec-draft", "freed")])
def test_a_rounds_drafted_rows_are_drawn_in_the_windows_colours_and_told_as_the_window_does(
        browser, spec_run, tmp_path, qapp, engine, rejected):
    from kvviz.ui import i18n
    from kvviz.ui.narration import describe

    step = round_step(spec_run, engine)
    colors = (rejected, "accepted") if spec_run.traces[engine][step].spec_accepted else (rejected,)
    page = write_page(tmp_path / "spec.html", spec_run.info, spec_run.traces, step=0)
    browser.problems.clear()
    browser.open(page)
    show(browser, step)
    image, _png = browser.screenshot()
    matrix = matrix_of(browser, engine)
    for kind in colors:
        assert pixels(image, matrix, rgb(SPEC_CELL_COLORS[kind])) > 20, kind
    legend = browser.eval("[...document.querySelectorAll('#panel-work_matrix .legend div')].map(d => d.textContent)")
    assert any("drafted, rejected" in text for text in legend)
    show(browser, 0)  # the prefill: no round, no tentative colour
    image, _png = browser.screenshot()
    matrix = matrix_of(browser, engine)
    assert all(pixels(image, matrix, rgb(SPEC_CELL_COLORS[kind])) == 0 for kind in colors)
    show(browser, step)
    try:
        for lang in ("en", "zh_CN"):
            browser.eval(f"document.querySelector('#langs button[data-lang={lang}]').click()")
            i18n.set_language(lang)
            window = text_of(describe(spec_run, step, lambda e, order: "#000"))
            said = browser.eval("document.getElementById('narration').textContent")
            assert said == window, lang
            t = spec_run.traces[engine][step]
            if lang == "en":
                assert (f"{engine} drafted {t.spec_proposed}, the target accepted {t.spec_accepted}, "
                        f"{t.spec_rolled_back} slots rolled back") in said
    finally:
        i18n.set_language("en")
    assert said != text_of(describe(spec_run, step, lambda e, order: "#000"))  # the Chinese differs
    browser.pump()
    assert browser.problems == []


def test_a_row_written_over_a_rejected_slot_is_drawn_in_its_colour(browser, spec_run, tmp_path):
    step = round_step(spec_run, "spec-lookup", overwritten=True)
    page = write_page(tmp_path / "spec.html", spec_run.info, {"spec-lookup": spec_run.traces["spec-lookup"]})
    browser.open(page)
    show(browser, step)
    image, _png = browser.screenshot()
    assert pixels(image, matrix_of(browser, "spec-lookup"), rgb(SPEC_CELL_COLORS["overwritten"])) > 0
