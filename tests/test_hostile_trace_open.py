"""`kvviz TRACE.json` and `kvviz gui TRACE.json`: the window opens on the saved run; a trace
that is no regular file, or no valid trace, is refused in one line with exit code 2 before any window.
The good path runs the real `kvviz gui` entry (kvviz.ui.app.run) offscreen, with Qt's event loop
replaced by one that waits for the replay, looks, and closes the window.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory, torch_cpu) -> Path:
    from kvviz.config import SamplingConfig, TraceOptions
    from kvviz.engines import make_engine
    from kvviz.models.presets import load_model
    from kvviz.records import traceio
    from kvviz.records.trace import RunInfo

    model = load_model("tiny-random", torch_cpu.device("cpu"))
    prompt = list(b"KV cache")
    traces = {key: list(make_engine(key, model).generate(prompt, 6, SamplingConfig(), TraceOptions(masks=True),
                                                         run_id="saved1", token_text=chr))
              for key in ("concat", "static")}
    cfg = model.cfg
    info = RunInfo(run_id="saved1", model_name="tiny-random", device="cpu", dtype="float32", prompt="KV cache",
                   prompt_ids=tuple(prompt), prompt_labels=tuple(map(chr, prompt)), engines=tuple(traces),
                   max_new_tokens=6, n_layer=cfg.n_layer, n_head=cfg.n_head, n_kv_head=cfg.n_kv_head,
                   head_dim=cfg.head_dim, param_count=cfg.param_count(),
                   kv_bytes_per_token=cfg.kv_bytes_per_token("float32"), block_size=16)
    path = tmp_path_factory.mktemp("saved") / "run.json"
    traceio.save_run(path, info, traces)
    return path


@pytest.mark.parametrize("via_gui", [False, True])
def test_kvviz_trace_json_opens_the_window_on_the_saved_run(qapp, trace_file, tmp_path, monkeypatch, via_gui):
    from PySide6.QtWidgets import QApplication

    from kvviz import cli
    from kvviz.ui import app as app_module

    seen: dict = {}

    class LookThenClose:
        """Stands in for QApplication.exec: runs events until the replay is shown, then closes the window."""

        def __init__(self, qt_app) -> None:
            self.qt_app = qt_app

        def exec(self) -> int:
            deadline = time.monotonic() + 60
            window = None
            while time.monotonic() < deadline:
                QApplication.processEvents()
                window = next((w for w in QApplication.topLevelWidgets()  # this run's: an earlier one is closed
                               if hasattr(w, "history") and w.isVisible()), None)
                # the replay shown, and the worker's thread started (it is started after the first paint:
                # closing before that would leave it running past the window)
                if window is not None and window.history.n_steps() > 0 and window.env is not None:
                    break
                time.sleep(0.01)
            for _ in range(20):
                QApplication.processEvents()
                time.sleep(0.01)
            seen["steps"] = window.history.n_steps() if window is not None else 0
            seen["engines"] = tuple(window.history.info.engines) if window is not None else ()
            seen["run_id"] = window.history.info.run_id if window is not None else ""
            seen["status"] = window.statusBar().currentMessage() if window is not None else ""
            if window is not None:
                window.grab().save(str(tmp_path / "replay.png"))
                window.close()
                window.deleteLater()
            return 0

    real = app_module.ensure_app
    monkeypatch.setattr(app_module, "ensure_app", lambda *argv: LookThenClose(real(*argv)))
    argv = (["gui"] if via_gui else []) + [str(trace_file), "--settings", str(tmp_path / "kvviz.ini")]
    assert cli.main(argv) == 0
    assert seen["steps"] == 6 and seen["engines"] == ("concat", "static") and seen["run_id"] == "saved1"
    assert "run.json" in seen["status"], seen["status"]


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kvviz", *argv], capture_output=True, text=True, timeout=60,
                          cwd=cwd, env=env)


def test_kvviz_bad_trace_is_one_line_exit_2_before_any_window(tmp_path):
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    (tmp_path / "loop.json").symlink_to("loop.json")
    (tmp_path / "notrace.json").write_text('{"schema": "kvviz-trace", "version": 1, "info": {}, "engines": []}')
    for name in ("fifo.json", "zero.json", "loop.json", "notrace.json", "missing.json"):
        for argv in ((name,), ("gui", name)):
            before = sorted(p.name for p in tmp_path.iterdir())
            proc = _cli(*argv, "--settings", str(tmp_path / "never.ini"), cwd=tmp_path)
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, (argv, proc.stderr)
            assert name in lines[0]
            assert sorted(p.name for p in tmp_path.iterdir()) == before  # no settings file, nothing written


def test_file_open_trace_on_a_special_file_is_a_message_in_the_window(open_window, tmp_path):
    """File > Open trace: a FIFO, /dev/zero, a /proc file, a loop of links, a folder are each one line in the
    window's error strip, at once (a FIFO had frozen the window, /dev/zero had let a MemoryError escape)."""
    from kvviz.ui.export_actions import install_export_actions

    window = open_window()
    actions = install_export_actions(window)
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    (tmp_path / "proc.json").symlink_to("/proc/self/status")
    (tmp_path / "loop.json").symlink_to("loop.json")
    (tmp_path / "folder.json").mkdir()
    for name, says in (("fifo.json", "FIFO"), ("zero.json", "character device"), ("proc.json", "/proc"),
                       ("loop.json", "loop of symbolic links"), ("folder.json", "a folder")):
        assert not actions.open_trace(str(tmp_path / name))
        text = window.error_text()
        assert name in text and says in text and "\n" not in text, text
    assert window.history.n_steps() == 0


def test_the_window_and_the_record_do_not_import_the_tokenizer_module():
    """The display rules live in kvviz.textshow: the trace record and every panel import that, and the
    tokenizer module (with its encode limits and the tokenizers library) stays out of the window."""
    code = ("import sys, pkgutil, importlib, kvviz.records.traceio, kvviz.ui.window, kvviz.ui.panels\n"
            "for m in pkgutil.iter_modules(kvviz.ui.panels.__path__):\n"
            "    importlib.import_module('kvviz.ui.panels.' + m.name)\n"
            "print(sorted(k for k in sys.modules if k in ('kvviz.tokenizer', 'tokenizers')))")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
