"""The compare page laid out at a laptop's sizes (1280x900, 1280x720, and 1280x1600 for the read ceiling), in English
and Chinese, measured in headless Chromium's DOM: the summary table fits its panel (or, where it cannot, scrolls
its figures with the row names kept in view), no legend entry is cut, the narration box shows whole lines only,
the status line says the threads the read ceiling was measured at, and the read ceiling's label lies inside its
plot, above the line, and is drawn.

Skips, saying why, where chromium or websocket-client is missing (.ci/run installs chromium).
"""
from __future__ import annotations

from pathlib import Path

import html_page_cdp
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(bool(html_page_cdp.missing()), reason=html_page_cdp.missing() or "runs")

SIZES = ((1280, 900), (1280, 720))
COPY_LINE = (0xc6, 0x28, 0x28)  # page.js COPY_LINE: the read ceiling's line and label


@pytest.fixture(scope="module")
def run():
    import kvviz
    from kvviz.format import DEFAULT_PROMPT

    # what `kvviz export --model tiny --tokens 24 --html --threads 1` runs: four engines, the default prompt
    return kvviz.compare(DEFAULT_PROMPT, tokens=24, model="tiny", threads=1)


@pytest.fixture(scope="module")
def pages(run, tmp_path_factory) -> dict[str, Path]:
    from kvviz.page import write_page

    folder = tmp_path_factory.mktemp("fit")
    return {lang: write_page(folder / f"run_{lang}.html", run.info, run.traces, lang=lang) for lang in ("en", "zh_CN")}


@pytest.fixture(scope="module")
def browser():
    b = html_page_cdp.Browser(1280, 900)
    yield b
    b.close()


def show(browser, page: Path, width: int, height: int, step: int | None = None) -> None:
    """The page opened at width x height (CSS pixels, scale 1), at `step` (default: the page's first, the last)."""
    browser.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
    browser.open(page)
    if step is not None:
        browser.eval(f"window.kvviz.setStep({step})")
    settle(browser)


def settle(browser) -> None:
    """Wait for the redraws a layout change asks for (ResizeObserver, one animation frame each) to end."""
    browser.eval("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(0))))")
    browser.eval("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(0))))")
    browser.pump()
    assert not browser.problems, browser.problems
    assert browser.eval("window.kvviz.errors") == []


def narration_lines(browser) -> dict:
    """The narration box's shown area (its padding box, in the page's coordinates) and its text's line boxes."""
    return browser.eval("""(() => {
      const n = document.getElementById('narration'), r = n.getBoundingClientRect(), range = document.createRange();
      range.selectNodeContents(n);
      const lines = new Map();  // one entry per line box: the text fragments on it share a top
      for (const f of range.getClientRects()) {
        const key = Math.round(f.top);
        const [t, b] = lines.get(key) || [f.top, f.bottom];
        lines.set(key, [Math.min(t, f.top), Math.max(b, f.bottom)]);
      }
      const top = r.top + n.clientTop;
      return { top, bottom: top + n.clientHeight, height: r.height, scroll: n.scrollHeight > n.clientHeight,
               lines: [...lines.values()] }; })()""")


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_summary_table_fits_its_panel(browser, pages, run, size, lang):
    show(browser, pages[lang], *size)
    body = browser.eval("(() => { const b = document.querySelector('#panel-summary .body');"
                        " return [b.scrollWidth, b.clientWidth]; })()")
    assert body[0] <= body[1], f"the summary scrolls sideways: {body[0]} px of content in {body[1]} px"
    # every engine's column whole inside the panel: its right edge within the body's
    edges = browser.eval("""(() => { const b = document.querySelector('#panel-summary .body').getBoundingClientRect();
      const heads = [...document.querySelectorAll('#panel-summary thead th')];
      return [b.right, ...heads.map(t => t.getBoundingClientRect().right)]; })()""")
    assert all(right <= edges[0] + 0.5 for right in edges[1:]), edges
    names = browser.eval("[...document.querySelectorAll('#panel-summary thead th')].slice(1).map(t => t.textContent)")
    assert names == list(run.traces)


def test_a_summary_too_wide_for_its_panel_scrolls_its_figures_under_the_row_names(browser, pages):
    """At 800 px the table cannot fit: its figures scroll sideways in their own box, the row names stay in view and
    the heading and notes stay put."""
    show(browser, pages["en"], 800, 900)
    shown = browser.eval("""(() => {
      const body = document.querySelector('#panel-summary .body');
      const box = document.querySelector('#panel-summary table').parentElement;
      box.scrollLeft = box.scrollWidth;
      const name = document.querySelector('#panel-summary tr[data-key=total_ms] th').getBoundingClientRect();
      const last = [...document.querySelectorAll('#panel-summary tr[data-key=total_ms] td')].pop()
        .getBoundingClientRect();
      const b = box.getBoundingClientRect();
      return { body: [body.scrollWidth, body.clientWidth], box: [box.scrollWidth, box.clientWidth, box.scrollLeft],
               name: [name.left, name.right], last: [last.left, last.right], edges: [b.left, b.right],
               hit: document.elementFromPoint(name.left + 2, (name.top + name.bottom) / 2).closest('th') !== null };
    })()""")
    assert shown["box"][0] > shown["box"][1] and shown["box"][2] > 0, shown  # it does not fit, and it scrolled
    assert shown["body"][0] <= shown["body"][1], shown  # the heading and notes do not scroll with it
    assert shown["edges"][0] - 0.5 <= shown["name"][0] and shown["name"][1] <= shown["edges"][1], shown
    assert shown["hit"], shown  # the row name is on top, not under the scrolled figures
    assert shown["last"][1] <= shown["edges"][1] + 0.5, shown  # the last engine's figure scrolled into view


CUT = """[...document.querySelectorAll('.panel .legend > div')]
  .filter(d => [d, ...d.children].some(t => t.scrollWidth > t.clientWidth + 0.5
                                            || t.scrollHeight > t.clientHeight + 0.5)
               || d.getBoundingClientRect().bottom > d.closest('.panel').getBoundingClientRect().bottom)
  .map(d => [d.closest('.panel').id, d.textContent, d.parentElement.classList.contains('tight')])"""


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_no_legend_entry_is_cut_at_1280x900(browser, pages, lang):
    show(browser, pages[lang], 1280, 900)
    assert browser.eval(CUT) == []
    assert browser.eval("document.querySelectorAll('.panel .legend.tight').length") == 0
    shown = browser.eval("document.querySelectorAll('.panel .legend > div').length")
    assert shown >= 20  # the work matrix's, recompute's, latency's, bytes', cache memory's and the pool's entries


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_at_1280x720_a_legend_is_cut_only_where_wrapped_it_would_crowd_its_panel(browser, pages, lang):
    show(browser, pages[lang], 1280, 720)
    cut = browser.eval(CUT)
    assert all(tight for _panel, _text, tight in cut), cut
    for panel in {panel for panel, _text, _tight in cut}:
        share = browser.eval(f"""(() => {{ const s = document.getElementById('{panel}');
          const legends = [...s.querySelectorAll('.legend')];
          legends.forEach(l => l.classList.remove('tight'));
          const used = legends.reduce((sum, l) => sum + l.offsetHeight, 0);
          return used / (s.clientHeight - s.querySelector('h2').offsetHeight); }})()""")
        assert share > 0.6, (panel, share)  # page.js LEGEND_SHARE
    # the panels whose legends fit keep every entry whole
    assert {panel for panel, _text, _tight in cut} <= {"panel-cache_memory", "panel-work_matrix"}, cut


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_narration_box_shows_whole_lines(browser, pages, run, size, lang):
    heights = set()
    for step in (0, run.n_steps // 2, run.n_steps - 1):
        show(browser, pages[lang], *size, step=step)
        box = narration_lines(browser)
        assert box["lines"], box
        for top, bottom in box["lines"]:
            inside = box["top"] - 0.5 <= top and bottom <= box["bottom"] + 0.5
            outside = top >= box["bottom"] - 0.5
            assert inside or outside, f"step {step}: a line at {top:.1f}..{bottom:.1f} cut by the box's edge " \
                                      f"{box['top']:.1f}..{box['bottom']:.1f}"
        heights.add(round(box["height"], 1))
    assert len(heights) == 1, heights  # the panels keep their place from step to step


def test_the_narration_box_scrolls_by_whole_lines_where_it_is_short(browser, pages):
    """At 1280x720 the English narration takes more lines than the box holds: it scrolls, and scrolled to its end it
    shows whole lines too."""
    show(browser, pages["en"], 1280, 720)
    box = narration_lines(browser)
    assert box["scroll"], box
    browser.eval("(() => { const n = document.getElementById('narration'); n.scrollTop = n.scrollHeight; })()")
    box = narration_lines(browser)
    for top, bottom in box["lines"]:
        assert (box["top"] - 0.5 <= top and bottom <= box["bottom"] + 0.5) or bottom <= box["top"] + 0.5 \
            or top >= box["bottom"] - 0.5, (top, bottom, box)


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_the_status_line_says_the_threads_the_ceiling_was_read_at(browser, pages, run, lang):
    from kvviz.format import fmt_figure
    from kvviz.page.strings import translator

    info = run.info
    assert info.ceiling_kind() == "read" and info.read_threads == 1 and info.device == "cpu"
    tr = translator("StatusFields", lang)
    show(browser, pages[lang], 1280, 900)
    status = browser.eval("document.getElementById('status').textContent")
    assert status.endswith(tr("read {0} GB/s ({1}, 1 thread)").format(fmt_figure(info.bandwidth_gbps()), "cpu"))
    assert "1 thread" in status if lang == "en" else "1 个线程" in status


def test_the_status_line_counts_the_threads_in_the_plural():
    from dataclasses import replace

    from kvviz.page import _status
    from kvviz.records.trace import RunInfo

    info = RunInfo(model_name="tiny", device="cpu", dtype="float32", read_gbps=20.0, read_threads=4)
    assert _status(info, [])["en"].endswith("read 20.0 GB/s (cpu, 4 threads)")
    # a GPU's ceiling is not a count of CPU threads; an unrecorded count says none
    assert _status(replace(info, device="cuda"), [])["en"].endswith("read 20.0 GB/s (cuda)")
    assert _status(replace(info, read_threads=0), [])["en"].endswith("read 20.0 GB/s (cpu)")


@pytest.mark.parametrize("size", [(1280, 900), (1280, 1600)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_read_ceilings_label_is_inside_its_plot_above_the_line(browser, pages, size):
    show(browser, pages["en"], *size)
    drawn = browser.eval("document.querySelector('#panel-latency canvas')._ceiling || null")
    assert drawn is not None, "the latency panel drew no read ceiling"
    left, top, width, height = drawn["plot"]
    x, y, w, h = drawn["label"]
    assert left < x and x + w < left + width, drawn
    assert top < y, drawn  # below the plot's top edge: not clipped by it
    assert y + h <= drawn["line"], drawn  # above the dashed line
    assert drawn["line"] < top + height, drawn
    # and drawn: the label's box on screen holds text in the line's colour
    image, _png = browser.screenshot()
    cx, cy, _cw, _ch = browser.rect("#panel-latency canvas")
    area = image[int(cy + y):int(np.ceil(cy + y + h)), int(cx + x):int(np.ceil(cx + x + w))].astype(int)
    close = (np.abs(area - np.array(COPY_LINE)).sum(axis=-1) < 60).sum()
    assert close >= 20, close
