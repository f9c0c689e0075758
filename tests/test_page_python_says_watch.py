"""The watch page's words, figures and series are Python's (kvviz/page/watch.py), in both languages: the slider's
label at every moment, the status line, the plots' lines (the Watch history's series, scaled), their ticks and
legends, each tree's heading and each segment's description, the narration's times; watch.js formats no number,
fills no template and scales no series. Drawn in headless Chromium (network blocked), the page shows these
texts as Python made them."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from test_watch_zh import HAN, URL, recording  # noqa: F401 - the recording, as a fixture

ROOT = Path(__file__).resolve().parent.parent


def _data(path: Path, lang: str = "en") -> dict:
    from kvviz.page.watch import build_watch_page

    page = build_watch_page(path, lang=lang)
    return json.loads(re.search(r'<script id="kvviz-data" type="application/json">(.*?)</script>', page,
                                re.DOTALL).group(1))


def _replayed(path: Path):
    from kvviz.peers.watch.history import WatchHistory
    from kvviz.peers.watch.recording import RecordingReader, read_header

    history = WatchHistory(read_header(path), window_s=math.inf)
    for record in RecordingReader(path):
        history.apply(record)
    return history


def test_the_labels_status_plots_and_trees_are_pythons_in_both_languages(recording):  # noqa: F811
    from kvviz.page.strings import translator
    from kvviz.page.watch import WORDS

    data = _data(recording)
    last = data["frames"][-1]["t"]
    for frame in data["frames"]:
        for lang in ("en", "zh_CN"):
            want = translator("Narration", lang)(WORDS["at"]).format(t=f"{frame['t']:.1f}", last=f"{last:.1f}")
            assert frame["label"][lang] == want
    assert data["frames"][-1]["label"]["en"] == "3.5 s of 3.5 s" and HAN.search(data["frames"][0]["label"]["zh_CN"])
    assert data["status"]["en"] == f"recorded {data['started']}, 4 metric samples"
    assert HAN.search(data["status"]["zh_CN"]) and data["started"] in data["status"]["zh_CN"]

    s = _replayed(recording).servers[0].series()
    req_max = max(1.0, float(np.nanmax(s["running"])), float(np.nanmax(s["waiting"])))
    def scaled(key, f):
        return [None if math.isnan(v) else round(float(v) * f, 6) for v in s[key]]

    plots = data["plots"]
    assert plots["usage"]["lines"] == [[0, None, scaled("usage", 100)], [0, [4, 3], scaled("running", 100 / req_max)],
                                       [0, [1, 2], scaled("waiting", 100 / req_max)]]
    assert plots["hits"]["lines"] == [[0, None, scaled("hit_rate", 100)]]
    assert plots["latency"]["lines"] == [[0, None, scaled("ttft_ms", 1)], [0, [4, 3], scaled("itl_ms", 1)]]
    assert plots["hits"]["lines"][0][2] == [None, 50.0, None, None]  # 3 of 6 prompt blocks found cached, once
    assert [text for _v, text in plots["usage"]["ticks"]] == ["0%", "25%", "50%", "75%", "100%"]
    top = max(np.nanmax(s["ttft_ms"]), np.nanmax(s["itl_ms"]))
    assert plots["latency"]["ymax"] == pytest.approx(top) and plots["latency"]["ticks"][-1][1] == f"{top:g} ms"
    assert plots["usage"]["legend"][0]["en"] == f"{URL}: usage % (solid), running and waiting (dashed, dotted; " \
                                                f"100 = {req_max:g})"
    assert HAN.search(plots["hits"]["legend"][0]["zh_CN"])
    assert data["t_axis"] == [data["servers"][0]["series"]["t"][-1], f"{data['servers'][0]['series']['t'][-1]:.0f} s"]

    tree = data["frames"][-1]["servers"][0]["trees"][0]
    head = data["phrases"][tree["head"]]
    assert head == {lang: f"{URL}: {tree['shape'][lang]}" for lang in ("en", "zh_CN")}
    described = {data["phrases"][seg[7]]["en"] for seg in tree["segs"]}
    assert described == {f"{seg[1]} blocks, {seg[4]} branches from its end" if seg[4] > 1 else
                         ("1 block, a branch" if seg[1] == 1 else f"{seg[1]} blocks, a branch") for seg in tree["segs"]}
    assert all(HAN.search(data["phrases"][seg[7]]["zh_CN"]) for seg in tree["segs"])
    times = [t for t, _said in data["servers"][0]["narration"]]
    assert times and all(re.fullmatch(r"\d+\.\d s", t) for t in times), times


def test_watch_js_formats_no_number_fills_no_template_and_scales_no_series():
    script = (ROOT / "kvviz" / "page" / "watch.js").read_text(encoding="utf-8")
    for word in ("toFixed", "toPrecision", "toLocaleString", "maxOf", "reqMax", "* 100", "100 /", "\\{(\\w+)\\}"):
        assert word not in script, word


def test_the_page_in_chromium_shows_pythons_texts_in_both_languages(recording, tmp_path):  # noqa: F811
    from html_page_cdp import Browser, missing

    if missing():
        pytest.skip(missing())
    from kvviz.page.watch import write_watch_page

    page = write_watch_page(tmp_path / "w.html", recording, lang="zh_CN")
    data = _data(recording)
    browser = Browser(1280, 720)
    try:
        browser.open(page)
        for lang in ("zh_CN", "en"):
            browser.eval(f'document.querySelector(\'#langs button[data-lang="{lang}"]\').click()')
            shown = browser.eval("[document.getElementById('step-label').textContent, "
                                 "document.getElementById('status').textContent, "
                                 "document.querySelector('#panel-usage .legend').textContent, "
                                 "document.getElementById('narration').textContent, document.body.dataset.errors]")
            assert shown[0] == data["frames"][-1]["label"][lang] and shown[1] == data["status"][lang], shown
            assert shown[2] == "\u25a0 " + data["plots"]["usage"]["legend"][0][lang], shown
            assert data["servers"][0]["narration"][-1][0] in shown[3] and shown[4] == "0", shown
        assert not browser.problems, browser.problems
    finally:
        browser.close()
