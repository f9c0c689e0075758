"""The serve page's words and figures are the Serve view's own Python's, written into the page's data in both
languages: the narration at every step equals the window's (kvviz.ui.serve.narration.narrate, translated by Qt)
in English and in Chinese, the counters' cells the counters panel's, the latency marks read at any step give
ServeHistory.latency, and serve.js formats no number and builds no sentence."""
from __future__ import annotations

import bisect
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> Path:
    """random:6 in a pool of 6 blocks: arrivals apart, preemptions, three schedulers finishing apart."""
    path = tmp_path_factory.mktemp("serve") / "tight.json"
    done = subprocess.run([sys.executable, "-m", "kvviz", "serve", "--workload", "random:6", "--schedulers",
                           "static,paged,reserve", "--blocks", "6", "--threads", "1", "--json", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture(scope="module")
def served(record):
    from kvviz.page.serve import serve_data
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.record import load_runs

    runs = load_runs(record)
    return ServeHistory.from_runs(runs), serve_data(runs)


def test_the_narration_at_every_step_is_the_windows_in_both_languages(served, qapp):
    from kvviz.ui import i18n
    from kvviz.ui.serve.narration import narrate

    history, data = served
    said = data["narration"]
    try:
        for lang in ("en", "zh_CN"):
            i18n.set_language(lang)
            for step in range(history.n_steps()):
                assert at_step(said[lang][bisect.bisect_right(said["at"], step) - 1], step) == narrate(history, step), \
                    (lang, step)
        assert "。" in said["zh_CN"][-1] and said["en"] != said["zh_CN"]
    finally:
        i18n.set_language("en")


def at_step(text: str, step: int) -> str:
    """serve.js's atStep: the step's number and the steps counted to it where Python left their marks."""
    from kvviz.page.serve import COUNT_MARK, STEP_MARK

    return text.replace(STEP_MARK, str(step)).replace(COUNT_MARK, f"{step + 1:,}")


def test_the_counters_cells_and_step_labels_are_pythons(served, qapp):
    from kvviz.page.serve import COUNTERS
    from kvviz.ui.serve.panels.counters import cell_text

    history, data = served
    for lane in data["schedulers"]:
        k = lane["name"]
        starts = history.starts(k)
        for step in range(history.n_steps(k)):
            i = int(np.searchsorted(starts[:-1], step, side="right")) - 1
            shown = [at_step(text, step) for text in lane["counters"][i]]
            assert shown == [cell_text(key, history.counters(k, step)) for key in COUNTERS], (k, step)
    # the step label is the Serve window's (kvviz/ui/serve/transport.py), in both languages
    assert at_step(data["label"]["en"], 3) == f"step 3 / {history.n_steps() - 1}"
    assert at_step(data["label"]["zh_CN"], 3) == f"第 3 / {history.n_steps() - 1} 步"


def test_the_latency_marks_give_the_latency_at_every_step(served):
    history, data = served
    for lane in data["schedulers"]:
        k = lane["name"]
        for step in range(history.n_steps(k) + 1):
            shown = min(step, history.n_steps(k) - 1)
            ttft, tpot = [], []
            for at, first, after in lane["latency"]:  # serve.js's reading: the values after the tokens emitted
                count = sum(1 for s in at if s <= shown)
                ttft.append(first if count >= 1 else None)
                tpot.append(after[count - 1] if count >= 2 else None)
            want = history.latency(k, step)
            assert [None if np.isnan(v) else float(v) for v in want[0]] == ttft, (k, step)
            assert [None if np.isnan(v) else float(v) for v in want[1]] == tpot, (k, step)


def test_the_pool_headings_are_the_pool_panels_in_chinese(served):
    from kvviz.page.strings import page_strings

    history, data = served
    zh = page_strings()["PoolPanel"]["{0}: {1} of {2} blocks free"]
    for lane in data["schedulers"]:
        for s, shown in zip(history.steps[lane["name"]], lane["steps"]):
            free = s.pool.n_blocks - s.pool.used_blocks - s.pool.cached_blocks
            assert shown["head"]["zh_CN"].startswith(zh.format(lane["name"], free, s.pool.n_blocks))
            assert shown["head"]["en"].startswith(f"{lane['name']}: {free} of {s.pool.n_blocks} blocks free")


def test_serve_js_formats_no_number_and_builds_no_sentence():
    script = (ROOT / "kvviz" / "page" / "serve.js").read_text(encoding="utf-8")
    for word in ("pyFormat", "toFixed", "fixed(", "commas(", "toPrecision", "join(\"; \")", "tr(\"ServeNarration\""):
        assert word not in script, word
    assert not re.search(r"tr\(\"[A-Za-z]+\", \"[^\"]*\{0\}", script)  # no template of a sentence


def test_the_panels_titles_headings_legends_axes_and_counter_names_are_the_windows_in_both_languages(served, qapp):
    from kvviz.ui import i18n
    from kvviz.ui.serve.panels.counters import CountersPanel, rows
    from kvviz.ui.serve.panels.latency import LatencyPanel
    from kvviz.ui.serve.panels.pool import PoolPanel
    from kvviz.ui.serve.panels.timeline import TimelinePanel, kind_name
    from kvviz.ui.serve.panels.usage import UsagePanel

    history, data = served
    assert data["counter_keys"] == [key for key, _name in rows()]
    try:
        for lang in ("en", "zh_CN"):
            i18n.set_language(lang)
            words = data["words"][lang]
            panels = {"timeline": TimelinePanel(), "pool": PoolPanel(), "usage": UsagePanel(),
                      "counters": CountersPanel(), "latency": LatencyPanel()}
            try:
                panels["timeline"].show_step(history, history.n_steps() - 1, None)
                assert words["titles"] == {key: panel.title() for key, panel in panels.items()}, lang
                assert [lane["head"][lang] for lane in data["schedulers"]] == \
                    [panels["timeline"].heading(k) for k in history.schedulers], lang
                usage, latency = panels["usage"], panels["latency"]
                assert words["usage"] == [usage.pool_plot.getAxis("left").labelText,
                                          usage.batch_plot.getAxis("left").labelText,
                                          usage.batch_plot.getAxis("bottom").labelText]
                assert words["latency"] == [
                    f"{latency.ttft_plot.getAxis('left').labelText} ({latency.ttft_plot.getAxis('left').labelUnits})",
                    f"{latency.tpot_plot.getAxis('left').labelText} ({latency.tpot_plot.getAxis('left').labelUnits})",
                    latency.tpot_plot.getAxis("bottom").labelText]
            finally:
                for panel in panels.values():
                    panel.close()
                    panel.deleteLater()
            assert words["kinds"] == {kind: kind_name(kind) for kind in words["kinds"]}
            assert words["counters"] == [name for _key, name in rows()]
        assert data["words"]["zh_CN"]["titles"]["pool"] != data["words"]["en"]["titles"]["pool"]
        assert data["words"]["en"]["titles"]["timeline"].startswith("Request timeline: wasted slots static ")
    finally:
        i18n.set_language("en")


def test_the_text_panels_words_and_note_at_every_step_are_the_windows(record, qapp):
    """A record whose paged run generated one different token for request 1: at every step and for every request,
    the text the page's data gives (the request's tokens at or before the step, serve.js's reading) equals the
    Serve view's text panel's, and the page notes "different text" at exactly the steps the panel does."""
    import dataclasses

    from kvviz.page.serve import serve_data
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.record import load_runs
    from kvviz.ui.serve.panels.text import TextPanel

    runs = list(load_runs(record))
    paged = next(i for i, r in enumerate(runs) if r.scheduler == "paged")
    results = list(runs[paged].results)
    ids = results[1].token_ids
    results[1] = dataclasses.replace(results[1], token_ids=ids[:-1] + (ord("#") if ids[-1] != ord("#") else 65,))
    runs[paged] = dataclasses.replace(runs[paged], results=tuple(results))
    history, data = ServeHistory.from_runs(tuple(runs)), serve_data(runs)
    note = "the schedulers generated different text"
    panel = TextPanel()
    noted = []
    try:
        for q in range(history.n_requests()):
            for step in range(history.n_steps()):
                panel.show_step(history, step, q)
                for lane in data["schedulers"]:
                    assert js_text(lane["texts"][q], step) == history.text_of(lane["name"], q, step)[1], \
                        (lane["name"], q, step)
                page_notes = any(first <= step < past for first, past in data["differ"][q])
                assert page_notes == (note in panel.browser.toPlainText()), (q, step)
                noted.append(page_notes)
    finally:
        panel.close()
        panel.deleteLater()
    assert data["differ"][1] == [[max(history.n_steps(k) for k in history.schedulers) - 1, history.n_steps()]]
    assert sum(noted) == 1 and not any(data["differ"][q] for q in (0, 2, 3, 4, 5))


def js_text(t: dict, step: int) -> str:
    """serve.js's reading of a request's text at a step: its tokens at or before the step counted, the full text
    cut at that count's end (a JavaScript slice: UTF-16 code units) or the count's own text."""
    count = bisect.bisect_right(t["at"], step)
    end = t["ends"][count]
    return t["full"].encode("utf-16-le")[:2 * end].decode("utf-16-le") if end >= 0 else t["odd"][str(count)]


def test_a_text_beyond_the_bmp_is_cut_where_javascript_counts(record):
    """Tokens that write characters outside the BMP (two UTF-16 units each in the page's script): the text the
    page shows at every step is the text panel's."""
    from kvviz.page.serve import _texts_of
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.record import load_runs

    history = ServeHistory.from_runs(load_runs(record))
    k = history.schedulers[0]
    texts = history.token_texts[k]
    q = max(texts, key=lambda r: len(texts[r]))
    texts[q] = ["\U0001F600" if i % 2 else "\u00e9" for i in range(len(texts[q]))]
    lane = _texts_of(history, k)
    for step in range(history.n_steps(k)):
        assert js_text(lane[q], step) == history.text_of(k, q, step)[1], step
    full = lane[q]["full"]
    assert "\U0001F600" in full and lane[q]["ends"][-1] == len(full.encode("utf-16-le")) // 2 > len(full)


def test_serve_js_translates_no_word_and_counts_no_token():
    script = (ROOT / "kvviz" / "page" / "serve.js").read_text(encoding="utf-8")
    assert not re.search(r"\btr\(", script)  # every title, legend, axis and counter name is Python's (DATA.words)
    for word in ("new Set(", ".em", "=== q)", "the schedulers generated", "reduce(", "r.blocks"):
        assert word not in script, word
