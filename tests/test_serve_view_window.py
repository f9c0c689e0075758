"""The Serve window offscreen: a real serve run of tiny-random (shared-prefix, paged beside prefix) drawn in
lockstep, the transport keys, scrubbing, a cell click, idle costing no timer, and a serve record exported
as JSON and replayed in a fresh window without any model.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QSettings, Qt
from test_serve_view_records import course_batch_static, shared_prefix_pair

from kvviz.serving import record
from kvviz.serving.history import ServeHistory
from kvviz.ui.serve.window import ServeWindow


@pytest.fixture
def window(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    w = ServeWindow(None, QSettings(str(tmp_path / "serve.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(1280, 720)
    w.show()
    qtbot.waitExposed(w)
    return w


def drawn(qtbot, w):
    qtbot.waitUntil(lambda: not w._frame_timer.isActive(), timeout=5000)
    w.draw()


def test_keys_scrub_and_a_cell_click_select_request_and_step(qtbot, window):
    w = window
    w.replay(ServeHistory.from_runs((shared_prefix_pair("paged"), shared_prefix_pair("prefix"))))
    drawn(qtbot, w)
    assert w.step == 0
    w.give_keys_to_transport()
    for key, expected in ((Qt.Key.Key_Right, 1), (Qt.Key.Key_Right, 2), (Qt.Key.Key_Left, 1), (Qt.Key.Key_End, 3),
                          (Qt.Key.Key_Home, 0)):
        qtbot.keyClick(w.panel_area, key)
        drawn(qtbot, w)
        assert w.step == expected and w.transport.timeline.value() == expected
    w.transport.timeline.setValue(2)  # the slider, as a drag would
    drawn(qtbot, w)
    assert w.step == 2 and "step 2 / 3" in w.transport.step_label.text()
    timeline = w.grid.panels["timeline"]
    k, rect, cell_w = timeline.blocks[1]
    assert k == "prefix"
    # Request 1's row, the column of its decode at step 3 (prefix's steps: 36, 4 (1 decode + a 4-slot chunk), 1, 1).
    x0 = w.run.timeline("prefix").x0
    point = QPoint(rect.left() + int((x0[3] + 0.5) * cell_w), rect.top() + int(1.5 * timeline.cell_px[1]))
    qtbot.mouseClick(timeline, Qt.MouseButton.LeftButton, pos=point)
    drawn(qtbot, w)
    assert (w.request, w.step) == (1, 3)
    assert w.grid.panels["text"].title() == "Request 1: its text"
    assert "CDE" in w.grid.panels["text"].browser.toPlainText()  # its three tokens 67, 68, 69
    assert not w._frame_timer.isActive()  # idle: nothing changes, no timer runs


def test_an_exported_serve_record_replays_in_a_fresh_window(qtbot, window, tmp_path):
    w = window
    w.replay(ServeHistory.from_runs((course_batch_static(),)))
    drawn(qtbot, w)
    path = w.exports.export("json", tmp_path / "serve.json")
    doc = json.loads(path.read_text())
    assert doc["schema"] == "kvviz-serve" and doc["runs"][0]["summary"]["padding_slots"] == 55
    csv_path = w.exports.export("csv", tmp_path / "steps.csv")
    rows = csv_path.read_text().splitlines()
    assert len(rows) == 1 + 20 and rows[1].split(",")[6] == "55"  # step 0's padding slots
    png = w.exports.export("png", tmp_path / "serve.png")
    assert png.stat().st_size > 10_000

    fresh = ServeWindow(None, QSettings(str(tmp_path / "fresh.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(fresh)
    fresh.resize(1280, 720)
    fresh.show()
    assert fresh.exports.open_record(path)
    drawn(qtbot, fresh)
    assert fresh.run.schedulers == ("static",) and fresh.run.n_steps() == 20
    assert np.array_equal(fresh.run.timeline("static").cells, w.run.timeline("static").cells)
    assert fresh.grid.panels["timeline"].title() == "Request timeline: wasted slots static 78"
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "kvviz-trace"}')
    assert not fresh.exports.open_record(bad)
    assert "not a kvviz serve record" in fresh.error_text()


def test_a_live_shared_prefix_run_of_paged_beside_prefix(qtbot, tmp_path, torch_cpu):
    from kvviz.ui.serve.worker import ServeWorker

    w = ServeWindow(ServeWorker(threads=1), QSettings(str(tmp_path / "serve.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(1280, 720)
    w.show()
    w.form.set_models(["tiny-random"], "tiny-random")
    w.form.load_preset("shared-prefix")
    w.form.set_schedulers(("paged", "prefix"))
    w.form.blocks.setValue(64)
    assert w.form.problem() == ""
    with qtbot.waitSignal(w.run_finished, timeout=120_000):
        assert w.start_run()
    assert w.error_text() == ""
    run = w.run
    assert set(run.results) == {"paged", "prefix"}
    for k in ("paged", "prefix"):
        # What streamed in is what the library's result says: every token, and the step count.
        streamed = [[t for s in run.steps[k] for r, t in s.emitted if r == i] for i in range(run.n_requests())]
        assert streamed == [list(res.token_ids) for res in run.results[k]]
    assert [r.token_ids for r in run.results["paged"]] == [r.token_ids for r in run.results["prefix"]]
    prefix = run.counters("prefix", run.n_steps())
    assert prefix["saved"] > 0 and run.counters("paged", run.n_steps())["saved"] == 0
    hit = next(s for s in run.steps["prefix"] if s.prefix_hits)
    w.select_step(hit.step)
    drawn(qtbot, w)
    assert f"request {hit.prefix_hits[0].request} joined and reused" in w.transport.narration.toolTip()
    assert not w._frame_timer.isActive() and not w._worker._timer.isActive()  # idle again: no timer runs
    # The record exported from a live run is a valid serve file the library reads back.
    runs = record.load_runs(w.exports.export("json", tmp_path / "live.json"))
    assert [r.scheduler for r in runs] == ["paged", "prefix"]
    w.close()


def test_step_pause_and_stop_keys_drive_a_live_run_and_idle_paints_nothing(qtbot, torch_cpu, tmp_path):
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QApplication

    from kvviz.ui.serve.worker import ServeWorker

    w = ServeWindow(ServeWorker(threads=1, isolate=False),
                    QSettings(str(tmp_path / "serve.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(1280, 720)
    w.show()
    w.form.set_models(["tiny-random"], "tiny-random")
    w.form.load_preset("course-batch")
    w.form.set_schedulers(("static", "paged"))
    qtbot.waitExposed(w)
    w.give_keys_to_transport()
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)
    with qtbot.waitSignal(w.run_started, timeout=60_000):
        qtbot.keyClick(w.panel_area, Qt.Key.Key_N)  # Step from idle: a paused run, one lockstep round
    qtbot.waitUntil(lambda: w.run.n_steps() == 1, timeout=10_000)
    assert w.state == "paused" and {k: w.run.n_steps(k) for k in w.run.schedulers} == {"static": 1, "paged": 1}
    qtbot.keyClick(w.panel_area, Qt.Key.Key_N)
    qtbot.waitUntil(lambda: w.run.n_steps() == 2, timeout=10_000)
    qtbot.keyClick(w.panel_area, Qt.Key.Key_Right)  # at the newest step of a paused run: one more round
    qtbot.waitUntil(lambda: w.run.n_steps() == 3, timeout=10_000)
    qtbot.wait(200)
    assert w.run.n_steps() == 3 and w.state == "paused"  # paused: nothing more is computed
    with qtbot.waitSignal(w.run_finished, timeout=60_000):
        qtbot.keyClick(w.panel_area, Qt.Key.Key_Space)  # resume: it runs to the end
    assert w.state == "idle" and w.run.n_steps() == 20 and set(w.run.results) == {"static", "paged"}

    class Paints(QObject):
        count = 0

        def eventFilter(self, obj, event):  # noqa: N802 (Qt override)
            if event.type() == QEvent.Type.Paint:
                Paints.count += 1
            return False

    qtbot.wait(500)  # the last frame painted
    counter = Paints()
    for frame in w.grid.frames.values():
        frame.panel.installEventFilter(counter)
    qtbot.wait(1000)
    assert Paints.count == 0  # idle after the run: nothing is drawn again
    assert not w._frame_timer.isActive() and not w._worker._timer.isActive()
    w.close()


def test_svg_and_gif_exports_of_a_replayed_record(qtbot, window, tmp_path):
    from PIL import Image

    w = window
    w.replay(ServeHistory.from_runs((shared_prefix_pair("paged"), shared_prefix_pair("prefix"))))
    drawn(qtbot, w)
    svg = w.exports.export("svg", tmp_path / "serve.svg")
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()
    gif = w.exports.export("gif", tmp_path / "serve.gif")
    with Image.open(gif) as image:
        assert image.n_frames == 4  # one frame per step
    assert w.step == 0  # the step shown before the export
    mp4 = w.exports.export("gif", tmp_path / "serve.mp4")  # the animation's format follows the suffix
    from kvviz.ui.exporters import probe_mp4

    probe_mp4(mp4, 4)  # an H.264 file of four frames (raises otherwise)


def test_a_kvviz_serve_json_file_replays_without_a_model(qtbot, window, tmp_path):
    import subprocess
    import sys

    path = tmp_path / "cli.json"
    subprocess.run([sys.executable, "-m", "kvviz", "serve", "--workload", "course-batch", "--schedulers",
                    "static,paged", "--model", "tiny-random", "--threads", "1", "--json", str(path)],
                   check=True, capture_output=True, timeout=300)
    assert window.exports.open_record(path)
    drawn(qtbot, window)
    run = window.run
    assert run.schedulers == ("static", "paged") and run.n_steps() == 20
    static = run.counters("static", run.n_steps())
    assert (static["padding"], static["idle"]) == (55, 23)  # the course's figures, drawn from the command's file
    assert window.grid.panels["timeline"].title() == "Request timeline: wasted slots static 78, paged 0"
    assert "replay" in window.statusBar().currentMessage()


def test_a_first_status_message_does_not_shorten_the_panels(qtbot, window):
    """Qt makes a main window's status bar when it is first asked for: the Serve view's first message ("replaying
    ...", "saved ...") had taken its height from the panels. It is there from the start."""
    qtbot.waitUntil(lambda: window.grid.height() > 0)
    before = window.grid.height()
    window.statusBar().showMessage("saved /tmp/x.json", 10_000)
    qtbot.wait(100)  # a layout pass
    assert window.grid.height() == before and window.statusBar().isVisible()
