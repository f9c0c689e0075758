"""The watch page's plots with one sample and with none: a series with one value (every request's TTFT seen in one
sample interval, as a tiny model's often is) is drawn as a dot 10 CSS pixels across, solid and dashed lines alike,
scaled with the page's pixel ratio; a sample between gaps is marked on dashed lines as on solid ones; a plot none of
whose lines holds a value shows the page's words for nothing yet (Python's, in both languages) in place of axes.
Drawn in headless Chromium (network blocked), the plots' canvases read back pixel by pixel.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_page_python_says_watch import _data
from test_watch_zh import URL, _metrics

pytest.importorskip("msgspec")

COLOR = "#1f77b4"  # the first server's colour (kvviz.page.watch.SERVER_COLORS[0])


def _recording(path: Path, counts: list[int], queries: list[int]) -> Path:
    """One server's samples a second apart: cumulative TTFT/ITL counts and prefix-cache queries (half of them hits),
    so that a count unchanged between two samples leaves that interval without a value."""
    from kvviz.peers.watch.recording import Header, RecordingWriter, Sample

    t0 = 1000.0
    writer = RecordingWriter(path, Header(t0, (URL,), (1,)))
    for i, (count, asked) in enumerate(zip(counts, queries)):
        writer.write(Sample(t0 + 0.5 + i, 0, _metrics(count, hits=asked / 2, queries=asked)))
    return writer.close()


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, Path]:
    """"lone": TTFT, ITL and the hit rate each hold one value (the third interval's); "empty": none; "gaps": TTFT and
    ITL each hold two values with gaps around them."""
    folder = tmp_path_factory.mktemp("watchlone")
    return {"lone": _recording(folder / "lone.kvwatch", [0, 0, 1, 1, 1], [0, 0, 8, 8, 8]),
            "empty": _recording(folder / "empty.kvwatch", [0] * 5, [0] * 5),
            "gaps": _recording(folder / "gaps.kvwatch", [0, 0, 1, 1, 2, 2, 2], [0] * 7)}


def _blobs(points: list[list[int]]) -> list[tuple[int, int]]:
    """The (width, height) of each 8-connected group of (x, y) pixels, largest first."""
    left = {tuple(p) for p in points}
    sizes = []
    while left:
        todo, xs, ys = [left.pop()], [], []
        while todo:
            x, y = todo.pop()
            xs.append(x)
            ys.append(y)
            for near in ((x + dx, y + dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)):
                if near in left:
                    left.remove(near)
                    todo.append(near)
        sizes.append((max(xs) - min(xs) + 1, max(ys) - min(ys) + 1))
    return sorted(sizes, reverse=True)


def _colored(browser, panel: str) -> list[list[int]]:
    """The canvas pixels of `panel` in the server's colour (each channel within 2), as [x, y] in canvas pixels."""
    rgb = [int(COLOR[i:i + 2], 16) for i in (1, 3, 5)]
    return browser.eval(f"""(() => {{
        const c = document.querySelector('#panel-{panel} canvas'), want = {json.dumps(rgb)}, out = [];
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        for (let i = 0; i < d.length; i += 4)
          if (d[i + 3] > 250 && [0, 1, 2].every(k => Math.abs(d[i + k] - want[k]) <= 2))
            out.push([(i / 4) % c.width, Math.floor(i / 4 / c.width)]);
        return out; }})()""")


def _browser():
    from html_page_cdp import Browser, missing

    if missing():
        pytest.skip(missing())
    return Browser(1280, 900)


def test_the_data_holds_one_value_per_lone_series_and_the_empty_plots_words(recordings):
    from kvviz.page.strings import translator
    from kvviz.page.watch import WORDS

    lone = _data(recordings["lone"])["plots"]
    assert [sum(v is not None for v in values) for _s, _dash, values in lone["latency"]["lines"]] == [1, 1]
    assert [sum(v is not None for v in values) for _s, _dash, values in lone["hits"]["lines"]] == [1]
    assert all(p["empty"] is None and len(p["ticks"]) == 5 for p in lone.values())
    empty = _data(recordings["empty"])["plots"]
    nothing = {lang: translator("Narration", lang)(WORDS["nothing"]) for lang in ("en", "zh_CN")}
    for key in ("hits", "latency"):
        assert empty[key]["empty"] == nothing and empty[key]["ticks"] == [], empty[key]
    assert empty["usage"]["empty"] is None and [t for _v, t in empty["usage"]["ticks"]][-1] == "100%"


def test_a_lone_sample_is_a_dot_ten_css_pixels_across_at_the_pages_pixel_ratio(recordings, tmp_path):
    from kvviz.page.watch import write_watch_page

    page = write_watch_page(tmp_path / "lone.html", recordings["lone"])
    browser = _browser()
    try:
        browser.open(page)
        for ratio in (1, 2):
            if ratio != 1:  # the page's zoom: the canvases are drawn in CSS pixels at the device's ratio
                browser.call("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=ratio,
                             mobile=False)
                browser.eval("document.querySelector('#langs button[data-lang=\"en\"]').click()")
                assert browser.eval("window.devicePixelRatio") == ratio
            latency, hits = _blobs(_colored(browser, "latency")), _blobs(_colored(browser, "hits"))
            # TTFT (solid) at 50 ms and ITL (dashed) at 10 ms: two dots; the hit rate's 50 %: one
            assert len(latency) == 2 and len(hits) == 1, (ratio, latency, hits)
            for width, height in latency + hits:
                assert 8 * ratio <= width <= 11 * ratio and 8 * ratio <= height <= 11 * ratio, (ratio, latency, hits)
        assert browser.eval("document.body.dataset.errors") == "0" and not browser.problems, browser.problems
    finally:
        browser.close()


def test_a_sample_between_gaps_is_marked_on_solid_and_dashed_lines(recordings, tmp_path):
    from kvviz.page.watch import write_watch_page

    lines = _data(recordings["gaps"])["plots"]["latency"]["lines"]
    assert [[v is not None for v in values] for _s, _dash, values in lines] == [[False, False, True, False, True,
                                                                                  False, False]] * 2
    page = write_watch_page(tmp_path / "gaps.html", recordings["gaps"])
    browser = _browser()
    try:
        browser.open(page)
        marks = _blobs(_colored(browser, "latency"))
        # two TTFT marks (solid) and two ITL marks (dashed), each a few pixels: no line joins them, no dot
        assert len(marks) == 4 and all(w <= 4 and h <= 4 for w, h in marks), marks
        assert browser.eval("document.body.dataset.errors") == "0" and not browser.problems, browser.problems
    finally:
        browser.close()


def test_a_plot_with_no_value_shows_the_words_for_nothing_yet_in_place_of_axes(recordings, tmp_path):
    from kvviz.page.watch import write_watch_page

    data = _data(recordings["empty"])
    page = write_watch_page(tmp_path / "empty.html", recordings["empty"], lang="zh_CN")
    browser = _browser()
    try:
        browser.open(page)
        for lang in ("zh_CN", "en"):
            browser.eval(f'document.querySelector(\'#langs button[data-lang="{lang}"]\').click()')
            for key in ("hits", "latency"):
                shown = browser.eval(f"""(() => {{ const s = document.getElementById('panel-{key}'),
                    e = s.querySelector('.empty'), r = e.getBoundingClientRect();
                    return [e.textContent, r.width, r.height, s.querySelector('canvas').offsetHeight]; }})()""")
                assert shown[0] == data["plots"][key]["empty"][lang] and shown[1] > 100 and shown[2] > 100, shown
                assert shown[3] == 0, shown  # no axes drawn beside the words
            usage = browser.eval("(() => { const s = document.getElementById('panel-usage'); return [s.querySelector("
                                 "'.empty').offsetHeight, s.querySelector('canvas').offsetHeight]; })()")
            assert usage[0] == 0 and usage[1] > 100, usage
        assert _colored(browser, "usage")  # the plot with values still draws its lines
        assert browser.eval("document.body.dataset.errors") == "0" and not browser.problems, browser.problems
    finally:
        browser.close()
