"""The compare page's words and derived series are the window's own Python's, written into the page's data: the
narration of every step equals the window's (kvviz.ui.narration.describe, translated by Qt) in English and in
Chinese, each position's eviction step the traces' StepTrace.evicted, each step's read bytes and rate the wall's
(kvviz.costs.wall.WallShape.read); page.js keeps no sentence template of the narration, no eviction rule and no
wall arithmetic."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def run():
    pytest.importorskip("torch")
    import kvviz

    return kvviz.compare("The cache keeps the keys and the values of every token", engines=("naive", "concat", "sinks"),
                         tokens=24, model="tiny", threads=1, window=16, sinks=4)


@pytest.fixture(scope="module")
def data(run):
    from kvviz.page import page_data

    return page_data(run.info, run.traces)


def test_the_narration_of_every_step_is_the_windows_in_both_languages(run, data, qapp):
    from kvviz.page import ENGINE_MARK
    from kvviz.ui import i18n
    from kvviz.ui.history import RunHistory
    from kvviz.ui.narration import describe

    history = RunHistory(info=run.info, traces=run.traces)
    orders = {name: i for i, name in enumerate(run.traces)}
    try:
        for lang in ("en", "zh_CN"):
            i18n.set_language(lang)
            for step in range(run.n_steps):
                window = describe(history, step, lambda engine, order: f"e{order}")
                said = data["narration"][lang][step]
                page = re.sub("[\ue000-\uf8ff]", lambda m: f"e{ord(m.group()) - ENGINE_MARK}", said)
                window = re.sub(r'<b style="color:(e\d+)">[^<]*</b>', lambda m: m.group(1), window)
                assert page == window, (lang, step)
        said = data["narration"]["en"][-1]
        assert "Eviction:" in said and f'{chr(ENGINE_MARK + orders["sinks"])} dropped' in said
        assert "第" in data["narration"]["zh_CN"][-1]
    finally:
        i18n.set_language("en")


def test_each_positions_eviction_step_is_the_traces(run, data):
    sinks = next(e for e in data["engines"] if e["name"] == "sinks")
    at = sinks["evicted_at"]
    for t in run.traces["sinks"]:
        assert sorted(p for p, s in enumerate(at) if 0 <= s <= t.step) == t.evicted.tolist(), t.step
    assert any(s > 0 for s in at)
    assert next(e for e in data["engines"] if e["name"] == "concat")["evicted_at"] is None


def test_each_steps_read_is_the_walls(run, data):
    shape = run.info.wall()
    assert shape is not None
    for e in data["engines"]:
        reads = [shape.read(t) for t in run.traces[e["name"]]]
        assert e["steps"]["read_bytes"] == [r.total_bytes for r in reads]
        assert e["steps"]["read_gbps"] == [r.gbps(t.latency_ms) for r, t in zip(reads, run.traces[e["name"]])]


def test_page_js_keeps_no_narration_eviction_rule_or_wall_arithmetic():
    script = (ROOT / "kvviz" / "page" / "page.js").read_text(encoding="utf-8")
    assert 'tr("Narration", "{engines}' not in script and "computed the K/V of all" not in script
    assert "kv_bytes_per_token" not in script and "row_bytes" not in script  # WallShape.read
    assert "W - S" not in script.split("function kindsImage")[0]  # the window's eviction rule
