"""Test setup: Qt offscreen before any Qt import, one torch thread, small seeded models."""
from __future__ import annotations

import os
import stat
import tempfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
if not os.environ.get("XDG_RUNTIME_DIR"):
    _runtime = tempfile.mkdtemp(prefix="kvviz-xdg-")
    os.chmod(_runtime, stat.S_IRWXU)
    os.environ["XDG_RUNTIME_DIR"] = _runtime

import gc  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402


def _qt_app():
    """The QApplication when a test has made one (Qt imported and an instance alive), else None."""
    if "PySide6.QtCore" not in sys.modules:
        return None
    from PySide6.QtCore import QCoreApplication

    return QCoreApplication.instance()


OWN_INTERPRETER = "KVVIZ_TEST_OWN_INTERPRETER"  # set to a test's id in the child interpreter that runs it


@pytest.fixture
def own_interpreter(request):
    """own_interpreter() for a test that must not run in the suite's process: torch.compile leaves dynamo's frame
    hook in the interpreter, and dynamo is not thread-safe, while later tests run torch on Qt worker threads. In
    the suite's process it runs this one test in a child interpreter, fails with the child's output unless the
    child passed it, and returns False (the caller returns); in the child it returns True (the caller goes on)."""

    def run() -> bool:
        nodeid = request.node.nodeid
        if os.environ.get(OWN_INTERPRETER) == nodeid:
            return True
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", nodeid],
                              cwd=request.config.rootpath, env={**os.environ, OWN_INTERPRETER: nodeid},
                              capture_output=True, text=True, timeout=1200)
        assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-4000:] + proc.stderr[-2000:]
        return False

    return run


@pytest.fixture(autouse=True)
def _deleted_widgets_go_with_their_test():
    """The widgets a test closed with deleteLater are destroyed when it ends, not at whatever moment a later test
    first runs an event loop: the whole suite is one process, and a window destroyed in the middle of another
    test's paint or language change is a crash there."""
    yield
    app = _qt_app()
    if app is not None:
        from PySide6.QtCore import QCoreApplication, QEvent

        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture(autouse=True, scope="module")
def _qt_garbage_goes_with_its_file():
    """Python's reference cycles that hold Qt objects (plots, their items, their signal connections) are collected
    when a test file ends, at a point where no Qt call is running, instead of wherever the collector next runs."""
    yield
    if _qt_app() is not None:
        from PySide6.QtCore import QCoreApplication, QEvent

        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        gc.collect()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture(scope="session")
def torch_cpu():
    import torch

    torch.set_num_threads(1)
    return torch


@pytest.fixture(scope="session")
def tiny_random(torch_cpu):
    from kvviz.models.presets import load_model

    return load_model("tiny-random", torch_cpu.device("cpu"))


@pytest.fixture(scope="session")
def byte_tokenizer():
    from kvviz.tokenizer import ByteTokenizer

    return ByteTokenizer()


@pytest.fixture
def watch_engines(monkeypatch):
    """watch_engines(on_trace): every engine made from then on (in this process) calls on_trace(trace)
    before it yields each trace, to record it or to raise as a failing device would. Returns a
    function that puts the real engines back."""
    import kvviz.engines

    real = kvviz.engines.make_engine

    class Watched:
        def __init__(self, engine, on_trace) -> None:
            self.engine, self.on_trace = engine, on_trace

        def generate(self, *args, **kwargs):
            for trace in self.engine.generate(*args, **kwargs):
                self.on_trace(trace)
                yield trace

        def __getattr__(self, name):  # what the session reads of an engine (its kernel, its cache)
            return getattr(self.engine, name)

    def watch(on_trace):
        monkeypatch.setattr(kvviz.engines, "make_engine", lambda *a, **k: Watched(real(*a, **k), on_trace))
        return lambda: monkeypatch.setattr(kvviz.engines, "make_engine", real)

    return watch


def settings_at(path):
    from PySide6.QtCore import QSettings

    return QSettings(str(path), QSettings.Format.IniFormat)


@pytest.fixture
def open_window(qtbot, tmp_path, torch_cpu):
    """open_window(isolate=False, settings=None): a shown MainWindow whose model list has arrived."""
    from kvviz.ui import app

    def make(*, isolate: bool = False, settings=None):
        window = app.create_window(settings or settings_at(tmp_path / "kvviz.ini"), isolate=isolate)
        qtbot.addWidget(window)  # closed at the end of the test: the worker's thread is stopped
        window.show()
        qtbot.waitUntil(lambda: window.env is not None, timeout=90_000)
        window.form.set_model("tiny-random")
        window.torch_threads = 1
        return window

    return make


def threaded_worker():
    """A RunWorker with an engine process on its own QThread, as the window has it, and a stand-in window whose
    `start` and `stop` signals reach it from the test's thread: (window, thread, worker). The caller quits and
    waits for the thread (the worker shuts its engine process down as the thread finishes)."""
    from PySide6.QtCore import QObject, Qt, QThread, Signal

    from kvviz.ui.worker import RunWorker

    class Window(QObject):
        start = Signal(object)
        stop = Signal()

    win, thread, worker = Window(), QThread(), RunWorker(isolate=True)
    worker.moveToThread(thread)
    thread.finished.connect(worker.shut_down, Qt.ConnectionType.DirectConnection)
    win.start.connect(worker.start_run)
    win.stop.connect(worker.request_stop)
    thread.start()
    return win, thread, worker
