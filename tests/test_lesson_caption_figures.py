"""A caption's figures are the ones its slide's panels show for the same thing: the memory wall's caption quotes
the roofline table's first row (the weights and one token's K/V), and the clock's caption quotes the Latency
legend's mean decode step and the Summary note's decode-only speedup, from the same run."""
from __future__ import annotations

import html
import re

from PySide6.QtWidgets import QApplication
from test_lesson import lesson_runs

from kvviz.lessons import find_lesson, load_lesson, memory_view
from kvviz.lessons.facts import fill
from kvviz.lessons.runs import load_run


def table_rows(body: str) -> list[list[str]]:
    """The cells of a memory panel's table, row by row (the heading row first)."""
    rows = re.findall(r"<tr>(.*?)</tr>", body)
    return [[html.unescape(c) for c in re.findall(r"<t[hd]>(.*?)</t[hd]>", row)] for row in rows]


def test_the_memory_walls_caption_quotes_the_tables_weights_row():
    lesson = load_lesson(find_lesson("07-kv-cache"))
    scene = next(s for s in lesson.scenes if s.large == "roofline")
    run = load_run(scene.source, None)
    facts = run.facts()
    for lang in ("en", "zh"):
        head, first, *rest = table_rows(memory_view.panel_html("roofline", run.memory, lang))
        text = fill(scene.caption[lang], facts)
        # the first row reads the least: the weights and one position's K/V
        assert first[0].startswith("1") and all(int(r[0].replace(",", "")) > 1 for r in rest)
        batch_1, batch_b = first[head.index(memory_view.word("tps_1", lang))], first[-1]
        assert facts["roofline"].tokens_per_s_1 == batch_1 and f"{batch_1} tokens/s" in text
        assert facts["roofline"].tokens_per_s_batch == batch_b and f"{batch_b} tokens/s" in text
        assert first[1] == facts["model"].weights and facts["model"].weights in text  # "all ... of weights"
        for row in rest:  # no figure of a longer row, where K/V is read beside the weights
            assert f"{row[2]} tokens/s" not in text and f"{row[4]} tokens/s" not in text


def test_the_clocks_caption_quotes_the_latency_legend_and_the_summarys_decode_speedup(qapp, tmp_path_factory):
    from kvviz.ui.lessons.presenter import PresenterWindow
    from kvviz.ui.lessons.stage import SceneStage
    from kvviz.ui.panels.summary import SummaryPanel

    runs = lesson_runs(tmp_path_factory, "07-kv-cache")
    index, scene = next((i, s) for i, s in enumerate(runs.lesson.scenes) if s.panels == ("latency", "summary"))
    window = PresenterWindow(runs.lesson, runs, "en")
    try:
        window.resize(1920, 1080)
        window.show()
        window.go_to(index)
        QApplication.processEvents()
        run, step = runs.of(scene), runs.step(scene, 0)
        history = SceneStage.history(run)
        latency, summary = (window.stage.page.box(k).panel for k in ("latency", "summary"))
        caption = window.caption.text()
        for engine in ("naive", "concat"):
            legend = latency.legend_text(engine, history, step)  # "naive: 4.95 ms/step"
            ms = re.search(r": ([\d.,]+) ms/step", legend).group(1)
            assert run.facts()[engine].ms_per_token == f"{ms} ms"
            assert f"{ms} ms a token" in caption or f"concat's {ms} ms" in caption
        assert isinstance(summary, SummaryPanel)
        note = summary._note.text()
        decode = re.search(r"Decode steps alone, against naive: (.*?)\. ", note).group(1)
        concat = re.search(r"concat</?\w*>? ?([\d.]+)\u00d7|concat ([\d.]+)\u00d7", decode)
        shown = concat.group(1) or concat.group(2)
        assert f"({shown}\u00d7 faster)" in caption
        assert run.facts()["concat"].speedup not in caption  # the table's total-over-total, the prefill in
    finally:
        window.close()
        window.deleteLater()
        QApplication.processEvents()
