"""The window's view of the speculative engines: the work matrix draws a round's drafted slots in colours of their
own (accepted, rejected and left in place, rejected and freed, a row written over a rejected slot), the narration
tells the round, and the speculation panel shows acceptance by draft position and tokens per target forward; each
checked against a count made here from the traces, and the drawn pixels against the colours."""
from __future__ import annotations

import numpy as np
import pytest

from kvviz.records.trace import RunInfo
from kvviz.ui.history import RunHistory

PROMPT = "The key of a dictionary"
NEW_TOKENS = 48
RUNS = {"static": {}, "spec-lookup": dict(rollback="overwrite"), "spec-draft": dict(rollback="crop")}


@pytest.fixture(scope="module")
def history(torch_cpu, byte_tokenizer) -> RunHistory:
    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine
    from kvviz.models.presets import load_model

    model = load_model("tiny", torch_cpu.device("cpu"))
    tok = byte_tokenizer
    ids = tok.encode(PROMPT)
    cfg = model.cfg
    info = RunInfo(run_id="r", model_name="tiny", prompt=PROMPT, prompt_ids=tuple(ids),
                   prompt_labels=tuple(tok.token_text(i) for i in ids), engines=tuple(RUNS),
                   max_new_tokens=NEW_TOKENS, n_layer=cfg.n_layer, n_head=cfg.n_head, n_kv_head=cfg.n_kv_head,
                   head_dim=cfg.head_dim, kv_bytes_per_token=cfg.kv_bytes_per_token())
    hist = RunHistory()
    hist.reset(info)
    runs = {k: make_engine(k, model, **kw).generate(ids, NEW_TOKENS, trace=TraceOptions(weights_layer=0),
                                                     run_id="r", token_text=tok.token_text)
            for k, kw in RUNS.items()}
    for _ in range(NEW_TOKENS):
        for k in RUNS:
            hist.add(next(runs[k]))
    return hist


def round_step(history, engine, *, rejected: bool = True, overwritten: bool = False) -> int:
    """The first round's first step with rejected drafts (or, `overwritten`, one that wrote over a stale slot)."""
    for t in history.traces[engine]:
        if t.spec_index == 0 and t.phase == "decode" and (
                (t.bytes_overwritten or 0) > 0 if overwritten else (t.spec_rolled_back > 0) == rejected
                and t.spec_proposed > 0):
            return t.step
    raise AssertionError(f"{engine}: no such round in {NEW_TOKENS} tokens")


def make_panel(qtbot, cls):
    panel = cls()
    qtbot.addWidget(panel)
    panel.resize(1000, 640)
    panel.show()
    return panel


def pixels_of(panel, hex_color: str) -> int:
    from PySide6.QtGui import QColor, QImage
    from PySide6.QtWidgets import QApplication

    QApplication.processEvents()
    image = panel.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    arr = np.frombuffer(image.constBits(), dtype=np.uint32, count=image.sizeInBytes() // 4)
    return int((arr & 0xFFFFFF == QColor(hex_color).rgb() & 0xFFFFFF).sum())


@pytest.mark.parametrize("engine, rejected_kind", [("spec-lookup", "STALE"), ("spec-draft", "FREED")])
def test_work_matrix_draws_a_rounds_drafted_rows_by_verdict(qtbot, history, engine, rejected_kind):
    from kvviz.ui.panels import work_matrix as wm

    step = round_step(history, engine)
    t = history.traces[engine][step]
    panel = make_panel(qtbot, wm.WorkMatrixPanel)
    panel.show_step(history, step)
    kinds = panel.cell_kinds(engine)
    n = t.pos_stop + t.spec_proposed  # the matrix reaches the drafted rows past the sequence
    assert kinds.shape == (n, n)
    row_kind = [int(kinds[i, i]) for i in range(t.pos_stop, n)]
    kept, gone = t.spec_accepted, t.spec_proposed - t.spec_accepted
    assert row_kind == [wm.ACCEPTED] * kept + [getattr(wm, rejected_kind)] * gone
    assert (kinds[t.pos_stop:, : t.pos_start] == wm.CACHED).all()  # the drafted rows read the cache too
    assert kinds[t.pos_start, t.pos_start] in (wm.COMPUTED, wm.OVERWRITTEN)
    assert pixels_of(panel, wm.SPEC_CELL_COLORS[rejected_kind.lower()]) > 0
    # a later step of a round: its accepted row came from that forward, nothing computed
    later = next(x for x in history.traces[engine] if x.spec_index == 1)
    panel.show_step(history, later.step)
    kinds = panel.cell_kinds(engine)
    assert kinds[later.pos_start, later.pos_start] == wm.ACCEPTED and not (kinds == wm.COMPUTED).any()


def test_work_matrix_marks_the_rows_written_over_stale_slots(qtbot, history):
    from kvviz.ui.panels import work_matrix as wm

    step = round_step(history, "spec-lookup", overwritten=True)
    t = history.traces["spec-lookup"][step]
    row_bytes = t.bytes_written // (1 + t.spec_rolled_back)
    panel = make_panel(qtbot, wm.WorkMatrixPanel)
    panel.show_step(history, step)
    kinds = panel.cell_kinds("spec-lookup")
    assert int((np.diag(kinds) == wm.OVERWRITTEN).sum()) == t.bytes_overwritten // row_bytes
    assert pixels_of(panel, wm.SPEC_CELL_COLORS["overwritten"]) > 0
    crop = [x for x in history.traces["spec-draft"] if x.phase == "decode"]
    assert all(x.bytes_overwritten == 0 for x in crop)  # crop leaves no slot to write over


def test_narration_tells_the_round(history):
    from kvviz.ui.narration import describe

    step = round_step(history, "spec-lookup")
    t = history.traces["spec-lookup"][step]
    text = describe(history, step, color=lambda e, o: "#000")
    assert (f"drafted {t.spec_proposed}, the target accepted {t.spec_accepted}, {t.spec_rolled_back} slots rolled "
            f"back (left in place: the next forward writes over them); {t.spec_accepted + 1} tokens for one target "
            f"forward") in text
    d = history.traces["spec-draft"][round_step(history, "spec-draft")]
    text = describe(history, d.step, color=lambda e, o: "#000")
    assert f"{d.spec_rolled_back} slots rolled back (" in text and "cut from the cache" in text
    later = next(x for x in history.traces["spec-lookup"] if x.spec_index == 1)
    text = describe(history, later.step, color=lambda e, o: "#000")
    assert f"from the target forward of step {later.step - 1}: no forward this step" in text


def test_speculation_panel_acceptance_and_tokens_per_forward(qtbot, history):
    from kvviz.ui import style
    from kvviz.ui.panels.speculation import SpeculationPanel, acceptance, tokens_per_forward

    last = NEW_TOKENS - 1
    traces = history.traces["spec-lookup"]
    drafted, kept = acceptance(traces, last)
    # by hand: a round that drafted p and kept a counts for positions 1..p, kept for 1..a
    rounds = [(t.spec_proposed, t.spec_accepted) for t in traces if t.spec_index == 0 and t.phase == "decode"]
    assert list(drafted) == [sum(p >= j for p, _a in rounds) for j in range(1, 5)]
    assert list(kept) == [sum(a >= j for _p, a in rounds) for j in range(1, 5)]
    assert tokens_per_forward(traces, last)[-1] == pytest.approx(NEW_TOKENS / (1 + len(rounds)))
    assert (tokens_per_forward(history.traces["static"], last) == 1.0).all()
    panel = make_panel(qtbot, SpeculationPanel)
    panel.show_step(history, last)
    legend = " ".join(entry[1] for entry in panel.legend_entries)
    assert f"{NEW_TOKENS / (1 + len(rounds)):.2f} tokens per target forward" in legend
    for order, engine in enumerate(history.engines):
        if engine != "static":
            assert pixels_of(panel, style.engine_color(engine, order)) > 100  # its bars and its line
