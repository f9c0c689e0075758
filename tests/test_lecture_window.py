"""The window in front of a class: quiet when idle, one step everywhere, no surprises.
Driven as a person does (a prompt typed, Run pressed, keys), counting what Qt itself reports (paint
events, the process's CPU time), not the window's own bookkeeping."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import QApplication, QVBoxLayout, QWidget

from tests.conftest import settings_at
from tests.test_ui_window import PROMPT, ROOT, run_to_end, type_prompt


class PaintCounter(QObject):
    """Paint events Qt delivers to any widget of `window` (the grid, the panels' views, the labels)."""

    def __init__(self, window) -> None:
        super().__init__()
        self.window, self.count = window, 0
        QApplication.instance().installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Paint and hasattr(obj, "window") and obj.window() is self.window:
            self.count += 1
        return False

    def close(self) -> None:
        QApplication.instance().removeEventFilter(self)


def prepared(qtbot, window, engines=("naive", "concat", "static", "paged"), tokens: int = 30, size=(1280, 720)):
    """The window at a projector's size with a prompt typed and a flat-out run of `tokens` set up."""
    window.resize(*size)
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(engines)
    window.form.tokens_spin.setValue(tokens)
    window.toolbar.speed_spin.setValue(0)
    return window


def finished_run(qtbot, open_window, tokens: int = 30):
    window = prepared(qtbot, open_window(), tokens=tokens)
    run_to_end(qtbot, window)
    return window


def test_an_idle_window_after_a_run_paints_nothing_and_runs_no_timer(qtbot, open_window):
    """After a run (and the panels' warm-up, which ends), three seconds idle: no paint event reaches
    the window and the process spends almost no CPU (it had repainted at ~30 Hz, 55% of a core)."""
    window = finished_run(qtbot, open_window)
    qtbot.waitUntil(lambda: not window.frames.ticking(), timeout=60_000)
    qtbot.wait(300)  # the last frame's own paint
    counter = PaintCounter(window)
    cpu = time.process_time()
    qtbot.wait(3_000)
    cpu = time.process_time() - cpu
    counter.close()
    assert counter.count == 0
    assert cpu < 0.3, cpu  # 3 s at 55% of a core, a timer repainting while idle, would be 1.6 s
    # Something to draw wakes it: a step picked is drawn, then it rests again.
    counter = PaintCounter(window)
    window.select_step(3)
    key = next(k for k, frame in window.grid.frames.items() if frame.isVisible())
    qtbot.waitUntil(lambda: window.grid.painted.get(key) == (window.history.version, 3), timeout=5_000)
    qtbot.waitUntil(lambda: counter.count > 0, timeout=5_000)
    qtbot.waitUntil(lambda: not window.frames.ticking(), timeout=5_000)
    counter.close()


def test_a_panel_shown_again_while_idle_is_drawn_at_the_step_shown(qtbot, open_window):
    window = finished_run(qtbot, open_window, tokens=12)
    qtbot.waitUntil(lambda: not window.frames.ticking(), timeout=60_000)
    key = next(k for k, frame in window.grid.frames.items() if frame.isVisible())
    act = window.grid.panel_actions[key]
    act.setChecked(False)
    window.select_step(4)
    qtbot.waitUntil(lambda: not window.frames.ticking(), timeout=5_000)
    assert window.grid.painted.get(key) != (window.history.version, 4)
    act.setChecked(True)
    qtbot.waitUntil(lambda: window.grid.painted.get(key) == (window.history.version, 4), timeout=5_000)


def test_the_narration_tells_the_step_the_timeline_shows_while_a_run_streams(qtbot, open_window):
    """Sampled between turns of the event loop, where the screen is painted: the narration's "Step k"
    is the slider's k (a narration that lags says 45 beside panels at 53). The run is paced at 150 steps/s, so that it
    streams for two seconds or more however busy the machine is (flat out, on a loaded machine, the window
    could show only two steps of the run before its end, too few to sample)."""
    window = prepared(qtbot, open_window(), ("naive", "concat"), tokens=300)
    window.toolbar.speed_spin.setValue(150)
    samples = []

    def sample():
        found = re.search(r"(\d+)", window.transport.narration.text().split(",")[0] or "")
        if found and window.grid.updatesEnabled():
            samples.append((window.transport.timeline.value(), int(found.group(1))))

    sampler = QTimer()
    sampler.timeout.connect(sample)
    sampler.start(7)
    run_to_end(qtbot, window)
    sampler.stop()
    assert len({s[0] for s in samples}) >= 3
    assert [s for s in samples if s[0] != s[1]] == []


def test_the_narration_is_never_cut_at_any_width(qtbot, open_window):
    """From 1920 px down to 700 px wide: the text shown is one of the narration's forms in words
    (no ellipsis), and the label is tall enough for it wrapped at its width."""
    from PySide6.QtGui import QTextDocument

    window = finished_run(qtbot, open_window, tokens=20)
    for width in (1920, 1500, 1280, 1000, 700):
        window.resize(width, 720)
        qtbot.wait(50)
        window.refresh()
        label = window.transport.narration
        text = label.text()
        assert text and "…" not in text
        doc = QTextDocument()
        doc.setDocumentMargin(0)
        doc.setDefaultFont(label.font())
        doc.setHtml(text)
        doc.setTextWidth(label.contentsRect().width())
        assert doc.size().height() <= label.contentsRect().height() + 1, width
        assert doc.toPlainText().startswith("Step 19")


def test_n_after_a_finished_run_keeps_the_run(qtbot, open_window):
    window = finished_run(qtbot, open_window, tokens=10)
    run_id = window.history.info.run_id
    qtbot.keyClick(window.panel_area, Qt.Key.Key_N)
    qtbot.wait(300)
    assert window.history.info.run_id == run_id and window.history.n_steps() == 10
    assert window.state.value == "idle"


def dark_rows(widget) -> int:
    """Rows of the widget's grab holding text (pixels much darker than the background)."""
    import numpy as np

    image = widget.grab().toImage().convertToFormat(widget.grab().toImage().Format.Format_Grayscale8)
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    return int((pixels[:, : image.width()] < 100).any(axis=1).sum())


def test_zoom_is_live_and_keeps_the_run_the_step_and_the_layout(qtbot, open_window, tmp_path):
    path = tmp_path / "zoom.ini"
    window = prepared(qtbot, open_window(settings=settings_at(path)), ("concat", "static"), 12, (1500, 920))
    run_to_end(qtbot, window)
    window.select_step(5)
    window.refresh()
    run_id, shown = window.history.info.run_id, window.grid.shown_panels()
    points = QApplication.font().pointSizeF()
    label = window.transport.step_label
    header = next(f.header for f in window.grid.frames.values() if f.isVisible())  # bold, by a style sheet
    rows, header_rows, dock = dark_rows(label), dark_rows(header), window.form_dock.width()
    qtbot.keyClick(window.panel_area, Qt.Key.Key_Plus, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(window.panel_area, Qt.Key.Key_Plus, Qt.KeyboardModifier.ControlModifier)
    qtbot.wait(100)
    assert window.presentation.zoom == 150 and window.grid.zoom == 150
    assert QApplication.font().pointSizeF() == points * 1.5
    assert dark_rows(label) >= rows * 1.3  # the text on screen is taller, not only a number
    assert dark_rows(header) >= header_rows * 1.3  # a styled label too (its style sheet sets its own font)
    assert window.form_dock.width() > dock * 1.3  # the Inputs dock with its text
    assert window.history.info.run_id == run_id and window.selected_step == 5
    assert window.grid.shown_panels() == shown
    assert window.zoom_group.checkedAction().data() == 150
    assert "QT_SCALE_FACTOR" not in os.environ
    window.settings.sync()
    assert settings_at(path).value("view/zoom", type=int) == 150
    qtbot.keyClick(window.panel_area, Qt.Key.Key_Minus, Qt.KeyboardModifier.ControlModifier)
    assert window.presentation.zoom == 125
    qtbot.keyClick(window.panel_area, Qt.Key.Key_0, Qt.KeyboardModifier.ControlModifier)
    assert window.presentation.zoom == 100 and QApplication.font().pointSizeF() == points
    qtbot.waitUntil(lambda: abs(window.form_dock.width() - dock) <= 2, timeout=2_000)
    rows_by_action = dict(window.shortcut_rows())
    assert rows_by_action["Zoom 100%"] == "Ctrl+0" and rows_by_action["Reset layout"] == "Ctrl+Shift+L"


def test_a_saved_zoom_opens_at_that_zoom_and_kvviz_zoom_is_for_one_launch(tmp_path):
    """`kvviz --zoom 150` over a saved 125: the window at 150 with no QT_SCALE_FACTOR anywhere, the
    saved choice left at 125; without --zoom it opens at the saved 125."""
    ini = tmp_path / "zoom.ini"
    ini.write_text("[view]\nzoom=125\n")
    script = tmp_path / "launch.py"
    script.write_text(textwrap.dedent("""
        import argparse, os, sys
        from PySide6.QtCore import QTimer
        from kvviz.ui import app

        made = app.create_window

        def create_window(*args, **kwargs):  # the app's own window, looked at once it has shown
            window = made(*args, **kwargs)
            QTimer.singleShot(1500, lambda: report(window))
            return window

        def report(window):
            print(window.presentation.zoom, "QT_SCALE_FACTOR" in os.environ, flush=True)
            window.close()

        app.create_window = create_window
        parser = argparse.ArgumentParser()
        app.configure(parser)
        sys.exit(app.run(parser.parse_args(sys.argv[1:])))
        """))
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    env.pop("QT_SCALE_FACTOR", None)
    for args, want in ((["--zoom", "150"], "150 False"), ([], "125 False")):
        proc = subprocess.run([sys.executable, str(script), "--settings", str(ini), *args], capture_output=True,
                              text=True, env=env, cwd=ROOT, timeout=120)
        assert proc.stdout.strip().splitlines()[-1:] == [want], proc.stderr
    assert settings_at(ini).value("view/zoom", type=int) == 125


def test_the_memory_calculator_keeps_its_place_and_follows_a_language_switch(qtbot):
    """Return in the lengths field recomputes and leaves the dialog open; each table shows at least five
    rows however small the dialog; an error takes the figures' place without moving the tables; an open
    dialog, its preset's description, its note and its errors follow a switch to Chinese."""
    from PySide6.QtWidgets import QApplication

    from kvviz.ui import i18n
    from kvviz.ui.dialogs.memory import MIN_TABLE_ROWS, MemoryDialog

    i18n.set_language("en")
    dialog = MemoryDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.resize(400, 300)  # smaller than its content: the tables keep their rows
    qtbot.wait(50)
    for table in (dialog.table, dialog.strategy_table):
        visible = table.viewport().height() // table.verticalHeader().defaultSectionSize()
        assert visible >= MIN_TABLE_ROWS, visible
    dialog.resize(800, 760)
    qtbot.wait(50)
    top = dialog.table.mapTo(dialog, dialog.table.rect().topLeft()).y()
    dialog.lengths_edit.setFocus()
    dialog.lengths_edit.setText("100 x")
    qtbot.keyClick(dialog.lengths_edit, Qt.Key.Key_Return)
    assert dialog.isVisible() and dialog.report() is None and "'x'" in dialog.error_label.text()
    qtbot.wait(50)
    assert dialog.table.mapTo(dialog, dialog.table.rect().topLeft()).y() == top  # no jump
    dialog.set_preset("qwen3-0.6b")
    try:
        i18n.set_language("zh_CN")
        QApplication.processEvents()
        assert dialog.windowTitle() != "KV cache memory calculator"
        assert "公布的配置" in dialog.description_label.text()
        assert "本章" in dialog.error_label.text() or "长度" in dialog.error_label.text()  # the lengths error
        dialog.set_lengths([100])
        assert "本章" in dialog.notes_label.text()  # the Qwen3 note in Chinese
        assert dialog.table.horizontalHeaderItem(0).text() != "tokens"
    finally:
        i18n.set_language("en")


def test_open_trace_updates_the_form_the_status_bar_and_the_quality_panel(qtbot, open_window, tmp_path):
    """A window that ran concat on tiny-random opens a saved run of int8 and concat with another prompt
    and length: the form shows that run's settings read-only, the last run's "window N core" is gone,
    the quality panel is shown for the int8 run's figures."""
    from kvviz.records import traceio
    from kvviz.ui.export_actions import install_export_actions

    window = open_window()
    saved = tmp_path / "int8.json"
    prepared(qtbot, window, ("concat", "int8"), tokens=9, size=(1500, 920))
    window.form.prompt_edit.setPlainText("an int8 run")
    run_to_end(qtbot, window)
    saved.write_text(traceio.dumps_run(window.history.info, window.history.traces))
    window.grid.panel_actions["quality"].setChecked(False)
    window.grid.chosen.discard("quality")
    prepared(qtbot, window, ("concat",), tokens=30)
    window.toolbar.speed_spin.setValue(20)  # 1.5 s of stepping: a "window N core" figure to drop
    run_to_end(qtbot, window)
    assert window.status_fields.cost.isVisibleTo(window)
    assert install_export_actions(window).open_trace(str(saved))
    assert window.form.prompt_edit.toPlainText() == "an int8 run" and window.form.tokens_spin.value() == 9
    assert window.form.checked_engines() == ("concat", "int8")
    assert window.form.read_only() and not window.form.prompt_edit.isEnabled() and window.form.run_button.isEnabled()
    assert not window.status_fields.cost.isVisibleTo(window)
    assert window.grid.panel_actions["quality"].isChecked()
    window.form.edit_button.click()
    assert not window.form.read_only() and window.form.prompt_edit.isEnabled()


def test_the_frame_painter_alone_draws_what_changed_then_stops(qtbot, tiny_random, byte_tokenizer):
    """FramePainter with a real grid, transport and history and no window: steps arriving wake it, it
    follows the newest, draws every shown panel at one step and stops its timer when all are drawn; a
    pick wakes it again; a hidden panel is not drawn."""
    from PySide6.QtCore import QSettings

    from kvviz.ui.frames import FramePainter
    from kvviz.ui.grid import PanelGrid
    from kvviz.ui.history import RunHistory
    from kvviz.ui.transport import TransportBar
    from tests.test_panels import make_history

    full = make_history(tiny_random, byte_tokenizer, PROMPT)
    history = RunHistory()
    grid = PanelGrid(QSettings(os.devnull, QSettings.Format.IniFormat))
    transport = TransportBar(history)
    host = QWidget()
    layout = QVBoxLayout(host)
    layout.addWidget(transport)
    layout.addWidget(grid)
    qtbot.addWidget(host)
    host.resize(1500, 920)
    host.show()
    grid.install()
    shown = []
    painter = FramePainter(history, grid, transport, running=lambda: True, shown=lambda: shown.append(1),
                           idle_work=lambda: False)
    history.reset(full.info)
    for steps in zip(*full.traces.values()):
        for trace in steps:
            history.add(trace)
        painter.wake()
    qtbot.waitUntil(lambda: not painter.ticking(), timeout=10_000)
    newest = (history.version, history.n_steps() - 1)
    visible = [k for k, frame in grid.frames.items() if not frame.isHidden()]
    assert visible and all(grid.painted.get(k) == newest for k in visible)
    assert transport.timeline.value() == history.n_steps() - 1 and shown
    painter.select(2)
    assert painter.ticking()
    qtbot.waitUntil(lambda: not painter.ticking(), timeout=10_000)
    assert all(grid.painted.get(k) == (history.version, 2) for k in visible)
    assert transport.step_label.text().startswith("step 2 /")
