"""The compare page's words and derived series are the window's own Python's, written into the page's data: the
narration of every step equals the window's (kvviz.ui.narration.describe, translated by Qt) in English and in
Chinese, each position's eviction step the traces' StepTrace.evicted, each step's read bytes and rate the wall's
(kvviz.costs.wall.WallShape.read), each legend and summary figure the window panels' (kvviz.page.said_compare);
page.js keeps no sentence template of the narration or the panels, no number formatting, no eviction rule and no
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


def _said(node, said: dict, lang: str, names: dict[str, str], html: bool = False) -> str:
    """A sentence of the page's data as page.js writes it (its spoken()): the template of the language, each field
    Python's text (escaped for rich text), an engine's mark its name, a shared sentence from said["shared"]."""
    import html as markup

    if node is None:
        return ""
    if isinstance(node, str):
        text = markup.escape(node, quote=False).replace('"', "&quot;") if html else node
        return re.sub("[\ue000-\uf8ff]", lambda m: names[m.group()], text)
    if isinstance(node, dict) and "s" in node:
        return _said(said["shared"][node["s"]], said, lang, names, html)
    if isinstance(node, dict):
        return _said(node["join"], said, lang, names, html).join(_said(p, said, lang, names, html)
                                                                 for p in node["parts"])
    return re.sub(r"\{(\d+)\}", lambda m: _said(node[1 + int(m.group(1))], said, lang, names, html),
                  said["templates"][lang][node[0]])


def _at(changes: list, step: int):
    return [value for first, value in changes if first <= step][-1]


def test_every_legend_and_summary_figure_of_the_page_is_the_windows_in_both_languages(run, data, qapp):
    """At every step, in English and in Chinese, the page's legends (latency, bytes, cache memory, recompute,
    quality) are the window's panels' legend texts, and its summary's heading, row names, cells and notes the
    window's SummaryPanel's, its tokens-held line the cache memory panel's: page.js only puts Python's in place."""
    from kvviz.format import fmt_count
    from kvviz.page import ENGINE_MARK
    from kvviz.ui import i18n
    from kvviz.ui.history import RunHistory
    from kvviz.ui.panels.bytes import BytesPanel
    from kvviz.ui.panels.cache_memory import CacheMemoryPanel
    from kvviz.ui.panels.latency import LatencyPanel
    from kvviz.ui.panels.quality import QualityPanel
    from kvviz.ui.panels.recompute import RecomputePanel
    from kvviz.ui.panels.summary import COLUMNS, SummaryPanel

    history = RunHistory(info=run.info, traces=run.traces)
    said = data["said"]
    names = {chr(ENGINE_MARK + e["order"]): e["name"] for e in data["engines"]}
    try:
        for lang in ("en", "zh_CN"):
            i18n.set_language(lang)
            panels = {"latency": LatencyPanel(), "bytes": BytesPanel(), "cache_memory": CacheMemoryPanel(),
                      "quality": QualityPanel()}
            recompute, summary = RecomputePanel(), SummaryPanel()
            summary.resize(900, 1200)
            try:
                for step in range(run.n_steps):
                    for e in data["engines"]:
                        for key, panel in panels.items():
                            page = _said(_at(e["said"][key], step), said, lang, names)
                            assert page == panel.legend_text(e["name"], history, step), (lang, step, key)
                        total = recompute.tr("{engine}: {total} K/V computed").format(
                            engine=e["name"], total=fmt_count(recompute.kv_computed(history, e["name"], step)))
                        assert _said(_at(e["said"]["recompute"], step), said, lang, names) == total, (lang, step)
                    summary.show_step(history, step)
                    table, rows = summary._table, [key for key, _higher in COLUMNS]
                    assert _said(_at(said["summary"]["heading"], step), said, lang, names) == summary._heading_text
                    labels, cells = _at(said["summary"]["labels"], step), _at(said["summary"]["cells"], step)
                    for r, key in enumerate(said["summary"]["rows"]):
                        row = rows.index(key)
                        assert _said(labels[r], said, lang, names) == table.verticalHeaderItem(row).text(), key
                        assert [c[r] for c in cells] == [table.item(row, col).text() for col in range(len(cells))]
                    notes = "<br>".join(_said(note, said, lang, names, html=True)
                                        for _kind, note in _at(said["summary"]["notes"], step))
                    assert notes == summary._note.text(), (lang, step)
                # the cache memory's grey line: the tokens held, in bytes
                panels["cache_memory"].show_step(history, run.n_steps - 1)
                assert said["held_bytes"] == panels["cache_memory"]._held_y.tolist()
            finally:
                for panel in (*panels.values(), recompute, summary):
                    panel.close()
                    panel.deleteLater()
        assert said["templates"]["zh_CN"] != said["templates"]["en"]
    finally:
        i18n.set_language("en")


def test_page_js_formats_no_number_and_says_no_sentence_of_the_panels():
    """The ports of kvviz/format.py and of the panels' text rules are gone from page.js: it draws Python's."""
    script = (ROOT / "kvviz" / "page" / "page.js").read_text(encoding="utf-8")
    for name in ("pyRound", "fixed", "commas", "pyFormat", "gFormat", "fmtBytes", "fmtFigure", "fmtCount",
                 "fmtCountShort", "byteUnit", "durationUnit", "fmtMs", "median", "summaryValues", "shareText",
                 "parted", "kernelsText", "kernelsRan", "running", "threeFigures"):
        assert not re.search(rf"function {name}\b|const {name} =", script), name
    assert ".toFixed(" not in script and "formatters" not in script
    for sentence in ("{engine}: {ms:.2f} ms/step", "K/V computed", "mean KL", "Totals over steps", "Work saved",
                     "Decode steps alone", "Outlined: the", "rows verified", "pool {n}", "differs from {first}"):
        assert sentence not in script, sentence


def test_the_page_carries_only_the_string_tables_page_js_looks_words_up_in(data):
    """Python says the sentences, so the page's own string table holds only the contexts page.js names (panel
    titles, axes, the step bar): not the narration's, the status bar's or the summary notes' words."""
    from kvviz.page.strings import page_strings

    script = (ROOT / "kvviz" / "page" / "page.js").read_text(encoding="utf-8")
    carried = data["strings"]
    assert carried and all(f'"{context}"' in script for context in carried)
    assert {"TransportBar", "SummaryPanel", "WorkMatrixPanel"} <= set(carried)
    assert {"Narration", "StatusFields", "kernels"}.isdisjoint(carried)
    assert all(carried[c] == page_strings()[c] for c in carried)


def test_the_work_matrix_lines_and_attention_captions_are_the_windows_in_both_languages(run, data, qapp):
    """At every step, in English and in Chinese: the line under each engine's work matrix and the attention
    panel's title line and caption, for every engine with weights, are the window panels' own."""
    from kvviz.page import ENGINE_MARK
    from kvviz.ui import i18n
    from kvviz.ui.history import RunHistory
    from kvviz.ui.panels.attention import AttentionPanel
    from kvviz.ui.panels.work_matrix import WorkMatrixPanel

    def detail(plot) -> str:  # the second line of kvviz.ui.style.engine_title's title
        return re.findall(r"<span[^>]*>([^<]*)</span>", plot.titleLabel.text)[-1]

    history = RunHistory(info=run.info, traces=run.traces)
    said = data["said"]
    names = {chr(ENGINE_MARK + e["order"]): e["name"] for e in data["engines"]}
    weighed = [e for e in data["engines"] if e["said"]["attention"]]
    assert weighed
    try:
        for lang in ("en", "zh_CN"):
            i18n.set_language(lang)
            matrix, attention = WorkMatrixPanel(), AttentionPanel()
            try:
                for step in range(run.n_steps):
                    matrix.show_step(history, step)
                    for e in data["engines"]:
                        page = _said(_at(e["said"]["work_matrix"], step), said, lang, names)
                        assert page == detail(matrix._views[e["name"]].plot), (lang, step, e["name"])
                    for e in weighed:
                        attention.show_step(history, step)
                        attention._engine_box.setCurrentText(e["name"])
                        title, caption = (_said(n, said, lang, names) for n in _at(e["said"]["attention"], step))
                        assert (title, caption) == (detail(attention._plot), attention._caption.text()), (lang, step)
            finally:
                for panel in (matrix, attention):
                    panel.close()
                    panel.deleteLater()
    finally:
        i18n.set_language("en")



@pytest.fixture(scope="module")
def paged_runs():
    """A run of static beside paged (blocks of 4) on tiny, and the same run saved without the number of tokens it
    asked for (a saved run may leave max_new_tokens out: its pool is then as large as its table's highest block)
    and loaded back."""
    pytest.importorskip("torch")
    import json

    import kvviz
    from kvviz.notebook import as_run
    from kvviz.records import traceio

    run = kvviz.compare("The cache keeps the keys and the values of every token", engines=("static", "paged"),
                        tokens=24, model="tiny", threads=1, block_size=4, layer=None)
    doc = json.loads(traceio.dumps_run(run.info, run.traces))
    del doc["info"]["max_new_tokens"]
    return {"length said": run, "length not said": as_run(traceio.loads_run(json.dumps(doc)))}


@pytest.mark.parametrize("length", ["length said", "length not said"])
def test_the_pool_legend_is_the_windows_and_counts_the_tiles_it_draws(paged_runs, qapp, length):
    """At every step of a paged run, in English and in Chinese, the page's block pool legend (the pool's size and
    block table, the slots holding K/V, the reserved and empty ones) is the window's cache memory panel's, and its
    figures are the tiles the panel draws of each kind: the pool's blocks, the slots written this step or before
    (the tokens the trace holds), the slots reserved and empty (the rest of the table's blocks)."""
    from kvviz.page import ENGINE_MARK, page_data
    from kvviz.ui import i18n
    from kvviz.ui.history import RunHistory
    from kvviz.ui.panels import cache_memory as cm

    run = paged_runs[length]
    data = page_data(run.info, run.traces)
    said = data["said"]
    names = {chr(ENGINE_MARK + e["order"]): e["name"] for e in data["engines"]}
    history = RunHistory(info=run.info, traces=run.traces)
    per_slot = (cm._TILE - 1) ** 2  # image pixels of one slot's tile (a hairline apart)
    try:
        for lang in ("en", "zh_CN"):
            i18n.set_language(lang)
            panel = cm.CacheMemoryPanel()
            try:
                for step in range(run.n_steps):
                    t = run.traces["paged"][step]
                    panel.show_step(history, step)
                    pool = _at(said["pool"], step)
                    page = [_said(pool[key], said, lang, names) for key in ("title", "used", "wasted")]
                    entries = [entry[1] for entry in panel._block_legend._entries]
                    assert [entries[0], entries[1], entries[3]] == page, (length, lang, step)
                    image = panel._image.image
                    drawn = {kind: int((image == kind).sum()) for kind in (cm.FREE, cm.USED, cm.NEW, cm.WASTED)}
                    assert all(n % per_slot == 0 for n in drawn.values()), drawn
                    used, wasted = (int(re.search(r"\((\d+)\)$", text).group(1)) for text in page[1:])
                    assert used * per_slot == drawn[cm.USED] + drawn[cm.NEW] and used == t.cache_len, (lang, step)
                    assert wasted * per_slot == drawn[cm.WASTED] == (len(t.block_table) * 4 - t.cache_len) * per_slot
                    assert pool["n_pool"] * 4 * per_slot == sum(drawn.values()), (length, step)
                    assert f" {pool['n_pool']} " in page[0] and str(t.block_table[0]) in page[0]
                assert {len(run.traces["paged"][k].block_table) for k in range(run.n_steps)} != {1}  # it grew
            finally:
                panel.close()
                panel.deleteLater()
    finally:
        i18n.set_language("en")
