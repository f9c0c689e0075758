"""`kvviz gui` (and `python main.py`): the QApplication, the main window and its run worker.

One of the two ui modules that may reach the engines: it hands the window a RunWorker, which imports
torch in its own thread, so the window shows before torch is loaded. Qt is imported only after the
display checks (a display at all; on X11, the xcb plugin's system libraries and the X server, see
kvviz.ui.xcb), so a machine without them gets a one-line hint instead of Qt aborting.
"""
from __future__ import annotations

import signal
import sys

from kvviz.ui.qtapp import APPLICATION, ORGANIZATION, display_problem, ensure_app
from kvviz.ui.zoom import check_zoom


def configure(parser) -> None:
    parser.add_argument("trace", nargs="?", default=None, metavar="TRACE.json",
                        help="open the window on this saved run (File > Open trace), checked before the window opens")
    parser.add_argument("--session", metavar="FILE",
                        help="open the window on a saved session (File > Save session...): its form, panels, zoom "
                             "and step, its run replayed; checked before the window opens")
    parser.add_argument("--settings", metavar="FILE",
                        help="keep the window's settings in this INI file instead of the user's")
    from kvviz.options import bounded

    parser.add_argument("--zoom", type=bounded("zoom"), metavar="PERCENT",
                        help="text and plots at this size, e.g. 150 on a projector, for this launch (default: "
                             "View > Zoom's saved choice; 100). View > Zoom and Ctrl+plus / Ctrl+minus / Ctrl+0 "
                             "change it live")


def create_window(settings=None, *, isolate: bool = True, defer_panels: bool = False):
    """A MainWindow wired to a fresh RunWorker (its thread started); not shown yet. With isolate the
    engines run in a child process (the default); without, in the worker's thread (quicker to start,
    but the engines then share the interpreter lock with painting). defer_panels builds the panels
    after the first paint, so the window appears before pyqtgraph is imported."""
    ensure_app()
    from kvviz.ui.window import MainWindow
    from kvviz.ui.worker import RunWorker

    return MainWindow(RunWorker(isolate=isolate), settings, defer_panels=defer_panels)


def run(args) -> int:
    zoom = check_zoom(args.zoom) if args.zoom is not None else None
    saved = None
    if getattr(args, "trace", None):
        from kvviz.records import traceio

        saved = traceio.load_run(args.trace)  # refused in one line (exit 2) before any window
    session = None
    if getattr(args, "session", None):
        if saved is not None:
            raise ValueError("give a trace or --session, not both")
        from kvviz.ui.session_file import read_session

        session = read_session(args.session)  # refused in one line (exit 2) before any window
    problem = display_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    from PySide6.QtCore import QTimer

    from kvviz.ui.settings_file import open_settings

    settings = open_settings(args.settings, ORGANIZATION, APPLICATION)  # one line (exit 2) for a FIFO, a device
    app = ensure_app([sys.argv[0]])
    window = create_window(settings, defer_panels=True)  # at View > Zoom's saved choice
    if zoom is not None:
        window.presentation.set_zoom(zoom, save=False)  # this launch only: the saved choice stays
    from kvviz.ui.export_actions import install_export_actions
    from kvviz.ui.i18n import install_language_menu
    from kvviz.ui.shell.exports import install_error_hook

    install_language_menu(window)  # View > Language: the saved choice, else the system's
    install_export_actions(window)  # File > Export, File > Open trace, the Export button
    install_error_hook(window)  # an exception nothing caught: one line in the window, not only on a terminal
    window.show()
    if saved is not None:
        from kvviz.ui.export_actions import replay_run

        QTimer.singleShot(0, lambda: replay_run(window, saved, args.trace))
    if session is not None:
        from kvviz.ui.session_file import apply_when_ready

        apply_when_ready(window, session)  # once the engines are listed and the panels built
    # Ctrl+C in the terminal closes the window (and so stops the worker) instead of being ignored
    # while Qt's loop runs: the timer gives Python a moment to see the signal.
    signal.signal(signal.SIGINT, lambda *_: window.close())
    tick = QTimer()
    tick.timeout.connect(lambda: None)
    tick.start(250)
    return int(app.exec())
