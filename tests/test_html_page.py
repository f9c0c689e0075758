"""The exported page in a real browser: headless Chromium loads run.html from disk with every host name
unresolvable, keys move the slider (Home, Right, End, Space), and at three steps the test reads what was drawn
(pixels of the work matrix, the block pool, the latency and attention canvases; the DOM text of the narration,
the summary and the step label) against the trace's own numbers and the window's own narration. A console
error, an exception or a request for anything but the file fails the test.

Skips, saying why, where chromium or websocket-client is missing (.ci/run installs chromium).
"""
from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import html_page_cdp
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(bool(html_page_cdp.missing()), reason=html_page_cdp.missing() or "runs")

ENGINES = ("naive", "concat", "static", "paged")
TOKENS = 24
BLOCK = 4
SHOTS = Path(__file__).resolve().parent.parent / "build" / "html-page-shots"


def _keep(name: str, png: bytes) -> None:
    """A screenshot kept for a person to look at (any test may run first, or alone)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    (SHOTS / name).write_bytes(png)


CELL = {"masked": (0xd4, 0xd4, 0xd4), "cached": (0x7f, 0xb3, 0xe0), "recomputed": (0xe4, 0x57, 0x2e),
        "computed": (0xff, 0xb0, 0x00)}
POOL = {"used": (0x1f, 0x77, 0xb4), "new": (0xff, 0xb0, 0x00), "wasted": (0xf4, 0xa5, 0x82)}


@pytest.fixture(scope="module")
def run():
    import kvviz

    # block size 4 over a 13-token prompt: the pool has a partly filled last block at most steps
    return kvviz.compare("KV cache demo", engines=ENGINES, tokens=TOKENS, model="tiny", block_size=BLOCK, threads=1)


@pytest.fixture(scope="module")
def page(run, tmp_path_factory) -> Path:
    from kvviz.page import write_page

    return write_page(tmp_path_factory.mktemp("page") / "run.html", run.info, run.traces, step=0)


@pytest.fixture(scope="module")
def browser():
    b = html_page_cdp.Browser(1600, 1000)
    yield b
    b.close()


def pixels(image: np.ndarray, rect, color) -> int:
    x, y, w, h = rect
    area = image[y:y + h, x:x + w]
    return int(np.all(area == np.array(color, dtype=np.uint8), axis=-1).sum())


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def text_of(rich: str) -> str:
    """The text a browser shows of rich text (a figure "<0.01" is text, not a tag)."""
    parser = _Text()
    parser.feed(rich)
    parser.close()
    return "".join(parser.parts)


def window_narration(run, step: int) -> str:
    """The window's narration of the step (kvviz.ui.narration.describe, the same records)."""
    from kvviz.ui.history import RunHistory
    from kvviz.ui.narration import describe

    history = RunHistory(info=run.info, traces=run.traces)
    return text_of(describe(history, step, lambda engine, order: "#000"))


def summary_cells(browser) -> dict[str, dict[str, str]]:
    return browser.eval("""(() => { const out = {};
      for (const tr of document.querySelectorAll('#panel-summary tr[data-key]')) {
        const row = out[tr.dataset.key] = {};
        for (const td of tr.querySelectorAll('td')) row[td.dataset.engine] = td.textContent; }
      return out; })()""")


def check_step(browser, run, step: int, shot: str) -> None:
    from kvviz.format import byte_unit, duration_unit, fmt_count, fmt_figure

    assert browser.eval("document.body.dataset.step") == str(step)
    browser.pump()
    assert not browser.problems, browser.problems
    assert browser.eval("window.kvviz.errors") == []
    n = run.n_steps
    label = browser.eval("document.getElementById('step-label').textContent")
    assert label == f"step {step} / {n - 1}  {'prefill' if step == 0 else 'decode'}"
    # the narration: the window's own, word for word
    assert browser.eval("document.getElementById('narration').textContent") == window_narration(run, step)
    # the summary against sums of the trace's own fields
    cells = summary_cells(browser)
    heading = browser.eval("document.querySelector('#panel-summary .heading').textContent")
    assert heading == f"Totals over steps 0\u2013{step} ({step + 1} new tokens), decode kernel PyTorch"
    totals = {e: sum(t.latency_ms for t in run.traces[e][: step + 1]) for e in ENGINES}
    unit, size = duration_unit(max(totals.values()))
    for e in ENGINES:
        steps = run.traces[e][: step + 1]
        assert cells["kv_projections"][e] == fmt_count(sum(t.kv_projections for t in steps))
        assert cells["total_ms"][e] == fmt_figure(totals[e] / size)
    copied = {e: sum(t.bytes_copied for t in run.traces[e][: step + 1]) for e in ENGINES}
    size = byte_unit(max(copied.values()))[1]
    assert {e: cells["bytes_copied"][e] for e in ENGINES} == {e: fmt_figure(copied[e] / size) for e in ENGINES}
    row_name = browser.eval("document.querySelector('#panel-summary tr[data-key=total_ms] th').textContent")
    assert row_name == f"time ({unit})"

    image, png = browser.screenshot()
    _keep(shot, png)
    # the work matrix: naive recomputes every decode step (red-orange cells), the caches read theirs
    matrix = browser.rect("#panel-work_matrix canvas")
    assert pixels(image, matrix, CELL["masked"]) > 0
    if step == 0:
        assert pixels(image, matrix, CELL["recomputed"]) == 0 and pixels(image, matrix, CELL["cached"]) == 0
        assert pixels(image, matrix, CELL["computed"]) > 1000  # every engine's prompt block, computed anew
    else:
        assert pixels(image, matrix, CELL["recomputed"]) > 1000
        assert pixels(image, matrix, CELL["cached"]) > 0
    # the block pool: slots holding K/V against reserved empty ones, as the paged engine's step says
    t = run.traces["paged"][step]
    x, y, w, h = browser.rect("#panel-cache_memory canvas")
    pool = (x + int(w * 0.6), y, w - int(w * 0.6), h)
    held = pixels(image, pool, POOL["used"]) + pixels(image, pool, POOL["new"])
    wasted = pixels(image, pool, POOL["wasted"])
    empty_slots = len(t.block_table) * BLOCK - t.cache_len
    assert held > 0
    if empty_slots:
        assert held / wasted == pytest.approx(t.cache_len / empty_slots, rel=0.15)
    else:
        assert wasted == 0
    pool_text = browser.eval("document.querySelector('#panel-cache_memory .pool').textContent")
    assert f"slot holding K/V ({t.cache_len})" in pool_text and f"reserved, empty ({empty_slots})" in pool_text
    # the latency plot draws each engine in its colour; the attention canvas the viridis map
    latency = browser.rect("#panel-latency canvas")
    for color in ((0xd6, 0x27, 0x28), (0xff, 0x7f, 0x0e)):
        assert pixels(image, latency, color) > 20
    attention = browser.rect("#panel-attention canvas")
    viridis_low = (0x44, 0x01, 0x54)  # the map's 0: a weight far below the step's largest
    assert pixels(image, attention, viridis_low) > 0


def test_the_page_in_chromium_at_three_steps(browser, page, run):
    seconds = browser.open(page)
    print(f"page {page.stat().st_size:,} bytes, drawn {seconds:.2f} s after navigation")
    check_step(browser, run, 0, "step0.png")
    for _ in range(7):
        browser.press("ArrowRight")
    check_step(browser, run, 7, "step7.png")
    browser.press("ArrowLeft")
    assert browser.eval("document.body.dataset.step") == "6"
    browser.press("End")
    check_step(browser, run, run.n_steps - 1, "last.png")
    for engine in ENGINES:  # each engine's recorded weights (an engine whose rows equal another's shares them)
        browser.eval(f"(() => {{ const s = document.querySelector('#panel-attention select'); s.value = '{engine}';"
                     " s.dispatchEvent(new Event('change')); })()")
        image, _png = browser.screenshot()
        assert pixels(image, browser.rect("#panel-attention canvas"), (0x44, 0x01, 0x54)) > 0, engine
        caption = browser.eval("document.querySelector('#panel-attention .caption').textContent")
        t = run.traces[engine][-1]
        assert caption.startswith(f"Outlined: the {t.pos_stop - t.pos_start} row(s) computed at this step."), caption
    browser.press("Home")
    assert browser.eval("document.body.dataset.step") == "0"


def test_space_plays_and_pauses(browser, page, run):
    browser.open(page)
    browser.press(" ")
    browser.eval("new Promise(r => setTimeout(r, 600))")
    browser.press(" ")
    stopped = int(browser.eval("document.body.dataset.step"))
    assert stopped > 0
    browser.eval("new Promise(r => setTimeout(r, 400))")
    assert int(browser.eval("document.body.dataset.step")) == stopped  # paused: it stays
    browser.pump()
    assert not browser.problems, browser.problems


def test_the_chinese_page_says_what_the_chinese_window_says(browser, page, run, qapp):
    from kvviz.ui import i18n

    browser.open(page)
    browser.eval("document.querySelector('#langs button[data-lang=zh_CN]').click()")
    for _ in range(3):
        browser.press("ArrowRight")
    assert browser.eval("document.body.dataset.lang") == "zh_CN"
    i18n.set_language("zh_CN")
    try:
        expected = window_narration(run, 3)
        from PySide6.QtCore import QCoreApplication

        title = QCoreApplication.translate("WorkMatrixPanel", "Work matrix")
        model = QCoreApplication.translate("StatusFields", "model {0}").format(run.info.model_name)
        step_label = QCoreApplication.translate("TransportBar", "step {0} / {1}  {2}").format(
            3, run.n_steps - 1, QCoreApplication.translate("TransportBar", "decode"))
    finally:
        i18n.set_language("en")
    assert expected != window_narration(run, 3)  # the window's Chinese differs from its English
    assert browser.eval("document.getElementById('narration').textContent") == expected
    assert browser.eval("document.querySelector('#panel-work_matrix h2').textContent") == title
    assert model != f"model {run.info.model_name}"  # translated
    assert model in browser.eval("document.getElementById('status').textContent")
    assert browser.eval("document.getElementById('step-label').textContent") == step_label
    missing = []
    for key in ("End", "Home"):  # every panel drawn in Chinese at the prefill and the last step
        browser.press(key)
        missing += browser.eval("window.kvviz.untranslated")
    # a string the page shows in English is one the window shows in English too (both read the same .ts)
    i18n.set_language("zh_CN")
    try:
        from PySide6.QtCore import QCoreApplication

        assert [m for m in missing if QCoreApplication.translate(m[0], m[1]) != m[1]] == []
    finally:
        i18n.set_language("en")
    image, png = browser.screenshot()
    _keep("zh.png", png)
    browser.pump()
    assert not browser.problems, browser.problems


def test_bounded_and_quantised_caches_are_told_and_summed_as_the_window_does(browser, tmp_path, qapp):
    """window, sinks and int8 beside concat: the narration's eviction sentences equal the window's, and the
    summary's quality rows hold the mean KL and top-1 agreement of the trace's own per-step figures."""
    import kvviz
    from kvviz.page import write_page
    from kvviz.ui.panels._plots import share_text

    run = kvviz.compare("KV cache demo", engines=("concat", "window", "sinks", "int8"), tokens=14, model="tiny",
                        window=8, sinks=2, threads=1)
    page = write_page(tmp_path / "bounded.html", run.info, run.traces, step=0)
    browser.open(page)
    for step in range(run.n_steps):
        if step:
            browser.press("ArrowRight")
        assert browser.eval("document.getElementById('narration').textContent") == window_narration(run, step)
    assert "Eviction:" in window_narration(run, run.n_steps - 1)
    cells = summary_cells(browser)
    for engine in ("window", "sinks", "int8"):
        kl = [t.kl_to_exact for t in run.traces[engine] if t.kl_to_exact is not None]
        agree = [t.top1_agrees for t in run.traces[engine] if t.top1_agrees is not None]
        assert cells["mean_kl"][engine] == f"{sum(kl) / len(kl):.3g}"
        # the window's share (kvviz/ui/panels/_plots.share_text): a whole percent that reads 100% only when it is
        assert cells["top1_agreement"][engine] == share_text(sum(agree) / len(agree))
    assert cells["mean_kl"]["concat"] == "0" and cells["top1_agreement"]["concat"] == "100%"
    # the quality panel's legend: the window's own QualityPanel.legend_text, engine by engine
    from kvviz.ui.history import RunHistory
    from kvviz.ui.panels.quality import QualityPanel

    history, panel = RunHistory(info=run.info, traces=run.traces), QualityPanel()
    for step in (run.n_steps - 1, 3):
        browser.press("End")
        for _ in range(run.n_steps - 1 - step):
            browser.press("ArrowLeft")
        legend = browser.eval("[...document.querySelectorAll('#panel-quality .legend div')].map(d => d.textContent)")
        assert [text[2:] for text in legend] == [panel.legend_text(e, history, step) for e in run.engines]
    browser.press("End")
    image, png = browser.screenshot()
    _keep("bounded.png", png)
    matrix = browser.rect("#panel-work_matrix canvas")
    assert pixels(image, matrix, (0xb5, 0x17, 0x9e)) > 0  # keys the window and sinks caches evicted
    browser.pump()
    assert not browser.problems, browser.problems


def test_a_canvas_that_gets_its_size_after_a_draw_is_drawn_again(browser, page):
    """A notebook cell's iframe can run the page's script before it is laid out: every canvas measured 0 and
    was drawn 1 px wide, stretched (a solid block, the plots blank), with no window resize to follow. Here
    the work matrix is hidden while a step is drawn and shown again, the window's size unchanged."""
    browser.open(page)
    browser.press("End")
    browser.eval("document.querySelector('#panel-work_matrix').style.display = 'none'")
    browser.press("ArrowLeft")  # drawn while hidden: its canvas measures 0
    assert browser.eval("document.querySelector('#panel-work_matrix canvas').width") == 1
    browser.eval("document.querySelector('#panel-work_matrix').style.display = ''")
    # the ResizeObserver's redraw lands within a frame or two; a loaded headless browser can take a few more
    # (two fixed frames failed once in a fresh-clone CI run): wait frame by frame, up to 3 s
    width = browser.eval("new Promise(r => { const t0 = performance.now(); (function f() {"
                         " const w = document.querySelector('#panel-work_matrix canvas').width;"
                         " if (w > 100 || performance.now() - t0 > 3000) r(w); else requestAnimationFrame(f); })(); })")
    assert width > 100
    image, _ = browser.screenshot()
    assert pixels(image, browser.rect("#panel-work_matrix canvas"), CELL["recomputed"]) > 1000
    browser.pump()
    assert not browser.problems, browser.problems


def test_the_notebook_cells_iframe_draws_the_page(browser, run, tmp_path):
    """Run._repr_html_ (what a notebook cell shows): the page in a sandboxed iframe's srcdoc, drawn there."""
    host = tmp_path / "cell.html"
    host.write_text(f"<!DOCTYPE html><html><body style='margin:0'>{run._repr_html_()}</body></html>", "utf-8")
    browser.open_any(host)
    frame = browser.rect("iframe")
    for _ in range(30):  # the iframe parses and draws its page on its own; a loaded machine takes seconds
        browser.eval("new Promise(r => setTimeout(r, 500))")
        image, png = browser.screenshot()
        if pixels(image, frame, CELL["recomputed"]) > 1000:
            break
    _keep("iframe.png", png)
    assert frame[2] > 1000 and frame[3] == 980
    assert pixels(image, frame, CELL["recomputed"]) > 1000  # naive's work matrix, drawn inside the frame
    assert pixels(image, frame, (0xd6, 0x27, 0x28)) > 20  # naive's colour: its name, its curves
    browser.pump()
    assert not browser.problems, browser.problems


def test_the_legends_are_the_windows(browser, page, run, qapp):
    """Each series panel's legend (latency, bytes copied, cache memory) and the recompute count's, line for line
    the window's own panels' legend_text / kv_computed at three steps."""
    from kvviz.format import fmt_count
    from kvviz.ui.history import RunHistory
    from kvviz.ui.panels.bytes import BytesPanel
    from kvviz.ui.panels.cache_memory import CacheMemoryPanel
    from kvviz.ui.panels.latency import LatencyPanel
    from kvviz.ui.panels.recompute import RecomputePanel

    history = RunHistory(info=run.info, traces=run.traces)
    panels = {"latency": LatencyPanel(), "bytes": BytesPanel(), "cache_memory": CacheMemoryPanel()}
    recompute = RecomputePanel()
    browser.open(page)
    browser.press("Home")
    for step, key in ((0, None), (5, "ArrowRight"), (run.n_steps - 1, "End")):
        if key == "ArrowRight":
            for _ in range(5):
                browser.press(key)
        elif key:
            browser.press(key)
        assert browser.eval("document.body.dataset.step") == str(step)
        for name, panel in panels.items():
            shown = browser.eval(f"[...document.querySelectorAll('#panel-{name} .legend:not(.pool) div')]"
                                 ".map(d => d.textContent)")
            expected = [panel.legend_text(e, history, step) for e in run.engines]
            if name == "cache_memory":
                expected.append("tokens held")
            assert [text[2:] for text in shown] == expected, name
        shown = browser.eval("[...document.querySelectorAll('#panel-recompute .legend div')].map(d => d.textContent)")
        assert [text[2:] for text in shown] == [
            f"{e}: {fmt_count(recompute.kv_computed(history, e, step))} K/V computed" for e in run.engines]


def test_the_summary_is_the_windows_cell_for_cell(browser, page, run, qapp):
    """Every figure of the page's summary, and every row name with its unit, equal the window's SummaryPanel's
    at three steps."""
    from kvviz.ui.history import RunHistory
    from kvviz.ui.panels.summary import COLUMNS, SummaryPanel

    history = RunHistory(info=run.info, traces=run.traces)
    panel = SummaryPanel()
    panel.resize(900, 1200)  # room for every row on one line
    browser.open(page)
    browser.press("Home")
    for step in (0, 1, 2):
        if step:
            browser.press("ArrowRight")
        panel.show_step(history, step)
        cells = summary_cells(browser)
        names = browser.eval("Object.fromEntries([...document.querySelectorAll('#panel-summary tr[data-key]')]"
                             ".map(tr => [tr.dataset.key, tr.querySelector('th').textContent]))")
        table = panel._table
        for row, (key, _higher) in enumerate(COLUMNS):
            if key not in cells:
                continue
            assert names[key] == table.verticalHeaderItem(row).text(), key
            for col, engine in enumerate(run.engines):
                assert cells[key][engine] == table.item(row, col).text(), (key, engine, step)
        assert set(cells) >= {"total_ms", "kv_projections", "bytes_copied", "bytes_read", "read_gbps", "copy_share"}
        # the heading names the run's one decode kernel, as the window's does; a one-kernel run has no note
        heading = browser.eval("document.querySelector('#panel-summary .heading').textContent")
        assert heading.startswith(panel._heading_text) and "decode kernel PyTorch" in heading
        assert not browser.eval("document.querySelector('#panel-summary .note.kernels')")


def drawn(browser) -> None:
    """Wait for the page's redraw of the step just shown (two animation frames), so that a place measured next is
    where the click will land."""
    browser.eval("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(0))))")


def test_a_click_on_a_plot_or_a_token_shows_its_step(browser, page, run):
    """As in the window: a click in a per-step plot shows the step under it, on a generated token the step that
    sampled it, on the prompt the prefill."""
    browser.open(page)
    drawn(browser)
    x, y, w, h = browser.rect("#panel-latency canvas")
    left, width = browser.eval("(() => { const a = document.querySelector('#panel-latency canvas')._steps;"
                               " return [a.left, a.width]; })()")
    last = run.n_steps - 1
    for target in (3, 17):
        browser.click(x + left + width * target / last, y + h / 6)
        assert browser.eval("document.body.dataset.step") == str(target)
    drawn(browser)
    token = browser.rect("#panel-token_stream .engine[data-engine=concat] span[data-step='5']")
    browser.click(token[0] + token[2] / 2, token[1] + token[3] / 2)
    assert browser.eval("document.body.dataset.step") == "5"
    drawn(browser)
    prompt = browser.rect("#panel-token_stream .engine[data-engine=paged] .prompt")
    browser.click(prompt[0] + 5, prompt[1] + 5)
    assert browser.eval("document.body.dataset.step") == "0"
    # a query row of naive's work matrix: the step that first computed that position
    n_prompt = len(run.info.prompt_ids)
    for row in (n_prompt - 1, n_prompt + 8):
        browser.press("End")  # the matrix of the last step holds every row
        drawn(browser)
        cx, cy = browser.rect("#panel-work_matrix canvas")[:2]
        at = browser.eval("document.querySelector('#panel-work_matrix canvas')._rows.naive")
        browser.click(cx + at["x"] + at["side"] / 2, cy + at["y"] + at["side"] * (row + 0.5) / at["n"])
        expected = next(t.step for t in run.traces["naive"] if t.pos_stop > row)
        assert browser.eval("document.body.dataset.step") == str(expected)
    browser.pump()
    assert not browser.problems, browser.problems


def test_a_share_past_the_ceiling_is_explained_as_the_window_explains_it(browser, run, tmp_path, qapp):
    """A step that reads less than the CPU's cache can pass the read ceiling (tiny's do): the page says why in the
    window's words. Here the recorded ceiling is set low so that every cached engine passes it."""
    from dataclasses import replace

    from kvviz.page import write_page

    low = replace(run.info, read_gbps=0.01, cache_bytes=64 << 20)
    page = write_page(tmp_path / "past.html", low, run.traces, step=3)
    browser.open(page)
    shown = browser.eval("document.getElementById('narration').textContent")
    lowrun = type("LowRun", (), {"info": low, "traces": run.traces})
    assert "Above 100%: the " in shown and shown == window_narration(lowrun, 3)
