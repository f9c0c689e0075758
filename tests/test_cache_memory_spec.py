"""The cache-memory panel draws a speculative engine's cache: a round's drafted slots in the work matrix's colours
(accepted; rejected and left in place or freed; written over a rejected slot), and the bytes its rollback rule
wrote and undid, checked on real runs of the trained tiny against counts made here from the model's shape and the
rounds' verdicts, and the drawn pixels against the colours."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kvviz.records.trace import RunInfo
from kvviz.ui.history import RunHistory
from kvviz.ui.panels.cache_memory import CacheMemoryPanel
from tests.test_spec_ui import make_panel

PROMPT = "The key of a dictionary is the key of a dictionary"
NEW_TOKENS = 40


@pytest.fixture(scope="module")
def runs(torch_cpu, byte_tokenizer):
    """Per rollback rule, a run of static beside spec-lookup (k = 4) on tiny: (info, {engine: traces}, cfg)."""
    from kvviz.engines import make_engine
    from kvviz.models.presets import load_model

    model = load_model("tiny", torch_cpu.device("cpu"))
    tok, cfg = byte_tokenizer, model.cfg
    ids = tok.encode(PROMPT)
    out = {}
    for rule in ("overwrite", "crop"):
        info = RunInfo(run_id=rule, model_name="tiny", prompt=PROMPT, prompt_ids=tuple(ids),
                       prompt_labels=tuple(tok.token_text(i) for i in ids), engines=("static", "spec-lookup"),
                       max_new_tokens=NEW_TOKENS, n_layer=cfg.n_layer, n_head=cfg.n_head, n_kv_head=cfg.n_kv_head,
                       head_dim=cfg.head_dim, kv_bytes_per_token=cfg.kv_bytes_per_token())
        traces = {"static": list(make_engine("static", model).generate(ids, NEW_TOKENS, run_id=rule,
                                                                         token_text=tok.token_text)),
                  "spec-lookup": list(make_engine("spec-lookup", model, rollback=rule, spec_k=4).generate(
                      ids, NEW_TOKENS, run_id=rule, token_text=tok.token_text))}
        out[rule] = (info, traces, cfg)
    return out


def history_of(info, traces) -> RunHistory:
    hist = RunHistory()
    hist.reset(info)
    for i in range(NEW_TOKENS):
        for engine in info.engines:
            hist.add(traces[engine][i])
    return hist


def canvas_pixels(panel, hex_color: str) -> int:
    """Pixels of `hex_color` in the panel's grid of slots (its legends, whose swatches carry the same colours,
    the plot's text beside it and the tiles' position labels, whose anti-aliased greys can match, left out)."""
    from PySide6.QtGui import QColor, QImage
    from PySide6.QtWidgets import QApplication

    shown = [text for text in panel._texts if text.isVisible()]
    for text in shown:
        text.hide()
    QApplication.processEvents()
    view = panel._grid.getViewBox()
    rect = panel._canvas.mapFromScene(view.sceneBoundingRect()).boundingRect()
    image = panel._canvas.grab(rect).toImage().convertToFormat(QImage.Format.Format_RGB32)
    for text in shown:
        text.show()
    arr = np.frombuffer(image.constBits(), dtype=np.uint32, count=image.sizeInBytes() // 4)
    return int((arr & 0xFFFFFF == QColor(hex_color).rgb() & 0xFFFFFF).sum())


def first_round(traces, test) -> int:
    for t in traces:
        if t.spec_index == 0 and t.phase == "decode" and test(t):
            return t.step
    raise AssertionError(f"no such round in {NEW_TOKENS} tokens")


def legend_text(panel) -> str:
    """The grid's legend entries' texts, as set."""
    return " | ".join(entry[1] for entry in panel._block_legend._entries)


@pytest.mark.parametrize("rule, rejected", [("overwrite", "stale"), ("crop", "freed")])
def test_a_rounds_slots_are_drawn_in_the_work_matrix_colours(qtbot, runs, rule, rejected):
    from kvviz.ui.panels import cache_memory as cm
    from kvviz.ui.panels.work_matrix import SPEC_CELL_COLORS

    info, traces, _ = runs[rule]
    spec = traces["spec-lookup"]
    step = first_round(spec, lambda t: t.spec_accepted > 0 and t.spec_rolled_back > 0)
    t = spec[step]
    panel = make_panel(qtbot, CacheMemoryPanel)
    history = history_of(info, traces)
    panel.show_step(history, 0)  # the prefill: nothing drafted yet
    for kind in ("accepted", "stale", "freed", "overwritten"):
        assert canvas_pixels(panel, SPEC_CELL_COLORS[kind]) == 0, kind
    panel.show_step(history, step)
    kinds = panel.spec_slots()
    first, a, p = t.spec_slots
    assert (kinds[first:a] == cm.ACCEPTED).all() and (kinds[a:p] == getattr(cm, rejected.upper())).all()
    assert (kinds[:t.pos_start] == cm.USED).all() and kinds[t.pos_start] in (cm.NEW, cm.OVERWRITTEN)
    assert int((kinds == cm.ACCEPTED).sum()) == t.spec_accepted
    for kind in ("accepted", rejected):
        assert canvas_pixels(panel, SPEC_CELL_COLORS[kind]) > 0, kind
    other = "freed" if rejected == "stale" else "stale"
    assert canvas_pixels(panel, SPEC_CELL_COLORS[other]) == 0
    legend = legend_text(panel)
    assert "drafted, accepted" in legend and ("freed" in legend) == (rule == "crop")


def test_a_slot_written_over_a_rejected_one_is_drawn(qtbot, runs):
    from kvviz.ui.panels import cache_memory as cm
    from kvviz.ui.panels.work_matrix import SPEC_CELL_COLORS

    info, traces, _ = runs["overwrite"]
    step = first_round(traces["spec-lookup"], lambda t: (t.bytes_overwritten or 0) > 0)
    panel = make_panel(qtbot, CacheMemoryPanel)
    panel.show_step(history_of(info, traces), step)
    assert (panel.spec_slots() == cm.OVERWRITTEN).any()
    assert canvas_pixels(panel, SPEC_CELL_COLORS["overwritten"]) > 0


@pytest.mark.parametrize("rule", ["overwrite", "crop"])
def test_bytes_undone_equal_the_rejected_slots_counted_from_the_shape(qtbot, runs, rule):
    from kvviz.format import fmt_bytes

    info, traces, cfg = runs[rule]
    spec = traces["spec-lookup"]
    row = cfg.n_layer * 2 * cfg.n_kv_head * cfg.head_dim * 4  # one position's K and V, every layer, float32
    rejected = sum(t.spec_proposed - t.spec_accepted for t in spec if t.spec_index == 0)
    assert rejected > 0  # the run has rounds with rejected drafts
    want = rejected * row if rule == "crop" else 0  # crop removes every rejected slot, overwrite none
    panel = make_panel(qtbot, CacheMemoryPanel)
    last = len(spec) - 1
    panel.show_step(history_of(info, traces), last)
    totals = panel.spec_byte_totals()
    assert totals["undone"] == want
    assert f"undid {fmt_bytes(want)}" in legend_text(panel).split(f"steps 0 to {last}:")[1]
    # every row a forward stored: the prompt's (the static buffer's; crop's torch.cat cache keeps the prefill's
    # own tensors, kvviz.caches.concat), then each round's last token and its p drafts; the rounds made the
    # NEW_TOKENS - 1 tokens after the prefill's, one plus the accepted drafts each
    prompt_rows = len(info.prompt_ids) if rule == "overwrite" else 0
    assert totals["written"] == (prompt_rows + NEW_TOKENS - 1 + rejected) * row


def test_a_run_without_a_speculative_engine_keeps_the_block_pool(qtbot, runs):
    info, traces, _ = runs["crop"]
    panel = make_panel(qtbot, CacheMemoryPanel)
    panel.show_step(history_of(info, traces), 5)
    assert len(panel.spec_slots())
    panel.clear()
    static_only = dataclasses.replace(info, engines=("static",))
    panel.show_step(history_of(static_only, traces), 5)
    assert not len(panel.spec_slots()) and "no paged engine" in legend_text(panel)
