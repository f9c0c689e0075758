"""The seams of STYLE.md, enforced: Qt only under kvviz/ui; torch and the engines in the UI only in
the worker and the app; trace.py and history.py importable without torch or Qt."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "kvviz"
QT = ("PySide6", "pyqtgraph", "shiboken6")
HEAVY = ("torch", "kvviz.engines", "kvviz.caches", "kvviz.models", "kvviz.sampling", "kvviz.measure.timing",
         "kvviz.runtime.devices")
UI_MAY_IMPORT_TORCH = {"worker.py", "app.py"}  # the run worker, and the app that starts one


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def hits(names: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if any(n == r or n.startswith(r + ".") for r in roots))


def test_qt_only_under_ui():
    bad = {str(p.relative_to(PKG)): hits(imports(p), QT) for p in PKG.rglob("*.py")
           if "ui" not in p.relative_to(PKG).parts[:1]}
    assert {k: v for k, v in bad.items() if v} == {}


def test_ui_needs_no_torch_except_worker_and_app():
    ui = PKG / "ui"
    bad = {str(p.relative_to(PKG)): hits(imports(p), HEAVY) for p in ui.rglob("*.py")
           if not (p.parent == ui and p.name in UI_MAY_IMPORT_TORCH)}
    assert {k: v for k, v in bad.items() if v} == {}


def assert_imports_none_of(modules: str, banned: tuple[str, ...]) -> None:
    """Import `modules` in a fresh interpreter; none of the `banned` packages may come with them."""
    code = (f"import sys, {modules}; "
            f"bad = [m for m in sys.modules if m.split('.')[0] in {banned!r}]; "
            "print(bad); raise SystemExit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_trace_and_history_import_without_torch_or_qt():
    assert_imports_none_of("kvviz.records.trace, kvviz.ui.history, kvviz.config", ("torch", "PySide6", "pyqtgraph"))


def test_the_download_worker_fetches_without_torch():
    """Model > Download model plans and fetches a checkpoint's files with kvviz.download, which reads no tensor."""
    assert_imports_none_of("kvviz.ui.download_worker, kvviz.ui.dialogs.download, kvviz.download", ("torch",))


def test_the_window_module_loads_without_pyqtgraph():
    """The window is shown before the panels (and pyqtgraph, most of a launch's time) are imported."""
    assert_imports_none_of("kvviz.ui.window, kvviz.ui.app", ("torch", "pyqtgraph"))


def test_the_engine_session_and_its_protocol_need_no_qt():
    """kvviz.runtime.session (EngineSession, the engine process and its wire protocol) runs in a notebook or a
    script: no Qt comes with it."""
    assert_imports_none_of("kvviz.runtime.session, kvviz.runtime.messages, kvviz.costs.estimate, kvviz.format",
                           ("PySide6", "pyqtgraph", "shiboken6"))
