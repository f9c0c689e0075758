"""The window as a person uses it: keys that reach the transport after Run or a click on the panels
(never typing into the prompt), and a frame that shows one step in every panel while a run streams."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from tests.test_ui_window import PROMPT, type_prompt


def long_run(window, tokens: int = 400, speed: int = 20) -> None:
    window.form.set_engines(("naive", "concat"))
    window.form.tokens_spin.setValue(tokens)
    window.toolbar.speed_spin.setValue(speed)


def test_after_ctrl_r_in_the_prompt_space_and_arrows_drive_the_run(qtbot, open_window):
    window = open_window()
    window.activateWindow()
    long_run(window)
    type_prompt(qtbot, window, PROMPT)
    window.form.prompt_edit.setFocus()
    qtbot.keyClick(window.form.prompt_edit, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.history.n_steps() >= 5, timeout=60_000)
    focused = QApplication.focusWidget()
    assert focused is window.panel_area  # Run took the keys out of the prompt
    qtbot.keyClick(focused, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: window.state.value == "paused", timeout=5_000)
    window.refresh()
    at = window.selected_step
    qtbot.keyClick(focused, Qt.Key.Key_Left)
    qtbot.keyClick(focused, Qt.Key.Key_Left)
    assert window.selected_step == at - 2
    qtbot.keyClick(focused, Qt.Key.Key_Home)
    assert window.selected_step == 0
    assert window.form.prompt_edit.toPlainText() == PROMPT  # nothing typed into it
    qtbot.keyClick(focused, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: window.state.value == "idle", timeout=10_000)


def test_run_from_a_spin_box_leaves_its_value_alone(qtbot, open_window):
    """Tab to Block size, Ctrl+R, Space: Space had blanked the box instead of pausing."""
    window = open_window()
    window.activateWindow()
    long_run(window)
    window.form.block_spin.setValue(16)
    window.form.block_spin.setFocus()
    window.form.block_spin.selectAll()
    qtbot.keyClick(window.form.block_spin, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.history.n_steps() >= 3, timeout=60_000)
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: window.state.value == "paused", timeout=5_000)
    assert window.form.block_spin.value() == 16 and window.form.block_spin.text() == "16"
    window.stop_run()
    qtbot.waitUntil(lambda: window.state.value == "idle", timeout=10_000)


def test_a_click_on_the_timeline_or_a_plot_gives_the_keys_to_the_transport(qtbot, open_window):
    window = open_window()
    window.activateWindow()
    window.form.set_engines(("concat",))
    window.form.tokens_spin.setValue(12)
    window.toolbar.speed_spin.setValue(0)
    type_prompt(qtbot, window, PROMPT)
    with qtbot.waitSignal(window.run_finished, timeout=60_000):
        window.start_run()
    for target in (window.transport.timeline, window.grid.frames["latency"], window.grid.panels["recompute"]):
        window.form.prompt_edit.setFocus()
        assert QApplication.focusWidget() is window.form.prompt_edit
        qtbot.mouseClick(target, Qt.MouseButton.LeftButton, pos=target.rect().center())
        qtbot.waitUntil(lambda: QApplication.focusWidget() is window.panel_area, timeout=2_000)
        window.select_step(5)
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Left)
        assert window.selected_step == 4, target
        assert window.form.prompt_edit.toPlainText() == PROMPT
    # A field being edited keeps its keys: a click into the prompt, then Space types a space.
    qtbot.mouseClick(window.form.prompt_edit.viewport(), Qt.MouseButton.LeftButton)
    window.form.prompt_edit.moveCursor(window.form.prompt_edit.textCursor().MoveOperation.End)
    qtbot.keyClick(window.form.prompt_edit, Qt.Key.Key_Space)
    assert window.form.prompt_edit.toPlainText() == PROMPT + " "


def test_the_shortcuts_work_again_after_a_modal_dialog_closes(qtbot, open_window):
    window = open_window()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5_000)

    def close_box():
        box = QApplication.activeModalWidget()
        assert isinstance(box, QMessageBox)
        box.accept()

    QTimer.singleShot(300, close_box)
    window.act_about.trigger()  # modal: returns when closed
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5_000)


@pytest.mark.parametrize("speed,tokens", [(20, 150), (0, 600)])
def test_a_frame_shows_one_step_in_every_panel_while_a_run_streams(qtbot, open_window, speed, tokens):
    """Sampled between turns of the event loop, where the grid paints (what the screen shows): the
    timeline, the step label and every shown panel's last drawn step agree, at the speed control's
    default and flat out."""
    window = open_window()
    long_run(window, tokens=tokens, speed=speed)
    type_prompt(qtbot, window, PROMPT)
    drawn: dict[str, int] = {}
    for key, panel in window.grid.panels.items():
        real = panel.show_step

        def recording(history, step, key=key, real=real):
            drawn[key] = step
            real(history, step)

        panel.show_step = recording
    samples: list[tuple] = []

    def sample():  # what the screen shows: a frame drawn across turns is painted only once whole
        # On screen: a panel behind one of the grid's tabs (no room for it) is drawn when its tab is chosen.
        shown = [k for k in window.grid.shown_panels() if window.grid.frames[k].isVisible()]
        if window.history.n_steps() and set(shown) <= set(drawn) and window.grid.updatesEnabled():
            label = window.transport.step_label.text().split()
            samples.append((window.transport.timeline.value(), int(label[1]), frozenset(drawn[k] for k in shown)))

    sampler = QTimer()
    sampler.timeout.connect(sample)
    sampler.start(7)
    with qtbot.waitSignal(window.run_finished, timeout=120_000):
        window.start_run()
    sampler.stop()
    assert len(samples) > 20
    mixed = [s for s in samples if s[2] != {s[0]} or s[1] != s[0]]
    assert not mixed, mixed[:5]
    assert len({s[0] for s in samples}) >= 3  # the frames did move on as the run streamed
