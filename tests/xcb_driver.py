"""Start the app as `python main.py ARGS` does, on whatever platform the environment gives (xcb under
the tests' Xvfb), and let a test watch it: the window's events as JSON lines on stdout, and a few
read-only questions on stdin. The test presses keys and clicks through the X server (xdotool), never
through this script.

    events:    {"event": "ready"}  {"event": "started"}  {"event": "finished"}  {"event": "failed", ...}
    questions: state -> {"state", "selected_step", "timeline", "n_steps", "prompt", "focus", "window_id"}
               rects -> {"prompt": [x, y, w, h], "<panel>": {"frame": [...], "plots": [[...], ...]}} (root pixels)
               grab PATH -> the X root window (what the screen shows) saved as PNG: {"grabbed": PATH}
               speed N -> the run form's steps-per-second box set to N (test setup, not behaviour)
"""
from __future__ import annotations

import json
import runpy
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def say(obj) -> None:
    print(json.dumps(obj), flush=True)


def global_rect(widget, rect=None) -> list[int]:
    """rect (widget coordinates; the whole widget by default) in X root pixels."""
    from PySide6.QtCore import QRect

    rect = widget.rect() if rect is None else rect
    top_left = widget.mapToGlobal(rect.topLeft())
    ratio = widget.devicePixelRatioF()
    r = QRect(top_left, rect.size())
    return [round(r.x() * ratio), round(r.y() * ratio), round(r.width() * ratio), round(r.height() * ratio)]


def plot_rects(panel) -> list[list[int]]:
    """The data area (the ViewBox) of each shown plot a panel draws with pyqtgraph."""
    out = []
    for item in panel.export_items():
        if not hasattr(item, "getViewBox") or not item.isVisible() or item.opacity() == 0:
            continue
        box = item.getViewBox()
        views = [v for v in box.scene().views() if v.isVisible()]
        if not views:
            continue
        view = views[0]
        area = view.mapFromScene(box.sceneBoundingRect()).boundingRect()
        out.append(global_rect(view.viewport(), area))
    return out


class Driver:
    def __init__(self, window) -> None:
        from PySide6.QtCore import QObject, Signal

        class Inbox(QObject):
            asked = Signal(str)

        self.window = window
        self.inbox = Inbox()
        self.inbox.asked.connect(self.answer)  # queued: the reader thread asks, the GUI thread answers
        window.environment_ready.connect(lambda: say({"event": "ready"}))
        window.run_started.connect(lambda _info: say({"event": "started"}))
        window.run_finished.connect(lambda _id: say({"event": "finished"}))
        window.run_failed.connect(lambda _id, message: say({"event": "failed", "message": message}))
        threading.Thread(target=self.read, daemon=True).start()

    def read(self) -> None:
        for line in sys.stdin:
            self.inbox.asked.emit(line.strip())

    def answer(self, question: str) -> None:
        w = self.window
        word, _, arg = question.partition(" ")
        if word == "state":
            from PySide6.QtWidgets import QApplication

            focus = QApplication.focusWidget()
            say({"state": w.state.value, "selected_step": w.selected_step, "timeline": w.transport.timeline.value(),
                 "n_steps": w.history.n_steps(), "prompt": w.form.prompt_edit.toPlainText(),
                 "focus": "prompt" if focus is w.form.prompt_edit else type(focus).__name__ if focus else None,
                 "active": w.isActiveWindow(), "window_id": int(w.winId())})
        elif word == "rects":
            rects = {"prompt": global_rect(w.form.prompt_edit.viewport())}
            for key, frame in w.grid.frames.items():
                rects[key] = {"frame": global_rect(frame), "plots": plot_rects(frame.panel)}
            say(rects)
        elif word == "grab":
            shot = w.screen().grabWindow(0)  # the X root window: what the server shows, not a re-render
            say({"grabbed": arg if shot.save(arg) else None})
        elif word == "speed":
            w.toolbar.speed_spin.setValue(int(arg))
            say({"speed": w.toolbar.speed_spin.value()})
        else:
            say({"error": f"unknown question {question!r}"})


def main() -> None:
    from kvviz.ui import app

    make_window = app.create_window
    drivers = []

    def create_window(*args, **kwargs):
        window = make_window(*args, **kwargs)
        drivers.append(Driver(window))
        return window

    app.create_window = create_window
    sys.argv = [str(ROOT / "main.py"), *sys.argv[1:]]
    runpy.run_path(str(ROOT / "main.py"), run_name="__main__")  # exits with the app's code


if __name__ == "__main__":
    main()
