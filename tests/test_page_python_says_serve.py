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
    assert at_step(data["label"]["en"], 3) == f"3 / {history.n_steps() - 1} steps"


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
