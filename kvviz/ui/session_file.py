"""A session file: the compare window's whole view kept in one JSON file (the form, the panels shown and the one
alone, the zoom, the step, the narration) with its run saved beside it as a trace, and reopened: the view set
again and the run replayed. The view is a lesson scene's table (kvviz.lessons), checked as a lesson checks one.
Knows the window's public surface, the lesson format and the trace files; no torch.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvviz.lessons.lesson import LessonError, Scene, view_from_dict
from kvviz.records import traceio
from kvviz.ui.qtutil import translator

MARK = "session"  # the value of the file's "kvviz" field
VERSION = 1
FIELDS = ("kvviz", "version", "view", "alone", "narration", "run", "form")
FORM_FIELDS = ("compare_kernel", "repeat", "spec_k", "rollback")  # the form's settings a lesson scene does not hold
MAX_SESSION_BYTES = 1 << 20
MAX_DEPTH = 16

_tr = translator("SessionFile")


@dataclass(frozen=True)
class Session:
    """A session file read and checked: the view as a scene, the panel shown alone, the narration shown, and the
    run (its trace loaded) or None."""

    path: Path
    scene: Scene
    alone: str | None
    narration: bool
    run: traceio.SavedRun | None
    run_path: Path | None
    form: dict[str, Any] = field(default_factory=dict)  # FORM_FIELDS present in the file


def trace_path(path: Path) -> Path:
    """The run's trace beside the session: NAME.trace.json for NAME.json."""
    stem = path.name[: -len(".json")] if path.name.lower().endswith(".json") else path.name
    return path.with_name(f"{stem}.trace.json")


# -- writing ------------------------------------------------------------------------------------------
def session_doc(window) -> dict[str, Any]:
    """The window's view as a session's table (its "run" field left for save_session to fill)."""
    from kvviz.ui.lessons.capture import capture_view

    checked = [k for k, act in window.grid.panel_actions.items() if act.isChecked()]
    if not checked:
        raise ValueError(_tr("no panel is shown: a session keeps the panels shown (View, at least one)"))
    shown = window.grid.shown_panels()
    alone = shown[0] if len(shown) == 1 and len(checked) > 1 else None
    view = capture_view(window, "session")
    view.update(panels=checked, large=alone or checked[0])
    for key in ("title", "caption"):
        view.pop(key)
    form = window.form
    return {"kvviz": MARK, "version": VERSION, "view": view, "alone": alone,
            "narration": window.act_narration.isChecked(), "run": None,
            "form": {"compare_kernel": form.compare_combo.currentData() or "", "repeat": form.repeat_spin.value(),
                     "spec_k": form.spec_k_spin.value(), "rollback": form.rollback_combo.currentData()}}


def save_session(window, path: str | Path) -> Path:
    """File > Save session: the window's view into `path` (JSON) and its run, if one is shown, into NAME.trace.json
    beside it; each written to a temporary name and renamed. ValueError (one line) for a view that cannot be kept
    (a run still going, no panel shown) before anything is written."""
    from kvviz.fileio import atomic_write_text, check_writable
    from kvviz.ui.shell.state import RunState

    path = Path(path)
    if window.state is not RunState.IDLE:
        raise ValueError(_tr("a run is going: stop it (its steps stay) before saving the session"))
    doc = session_doc(window)
    _view(doc["view"], path)  # the view it keeps reads back, or nothing is written
    check_writable(path, "session file")
    history = window.history
    trace = None
    if history.n_steps():
        trace = trace_path(path)
        traceio.save_run(trace, history.info, history.traces)
        doc["run"] = trace.name
    try:
        atomic_write_text(path, json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
    except BaseException:
        if trace is not None:
            trace.unlink(missing_ok=True)
        raise
    return path


# -- reading ------------------------------------------------------------------------------------------
def _view(doc: Any, path: Path) -> Scene:
    view = {"title": "session", "caption": "session", **doc} if isinstance(doc, dict) else doc
    return view_from_dict(view, path, f"{path.name}: field 'view'")


def read_session(path: str | Path) -> Session:
    """The session in `path`, its view checked and its run's trace loaded; ValueError (one line naming the file
    and the field) for anything wrong, before the window changes."""
    from kvviz.fileio import read_json

    path = Path(path)
    name = path.name
    doc = read_json(path, MAX_DEPTH, MAX_SESSION_BYTES, "session file")
    if not isinstance(doc, dict) or doc.get("kvviz") != MARK:
        raise ValueError(f"{name}: not a kvviz session file (it has no \"kvviz\": \"session\")")
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise ValueError(f"{name}: unknown field {unknown[0]!r}; a session has {', '.join(FIELDS)}")
    if doc.get("version") != VERSION:
        raise ValueError(f"{name}: field 'version' must be {VERSION}, got {doc.get('version')!r}")
    try:
        scene = _view(doc.get("view"), path)
    except LessonError as exc:
        raise ValueError(str(exc)) from None
    alone = doc.get("alone")
    if alone is not None and alone not in scene.panels:
        raise ValueError(f"{name}: field 'alone': {alone!r} is not one of the view's panels")
    narration = doc.get("narration", True)
    if not isinstance(narration, bool):
        raise ValueError(f"{name}: field 'narration' must be true or false, got {narration!r}")
    run, run_path = None, None
    if doc.get("run") is not None:
        if not isinstance(doc["run"], str) or not doc["run"].strip():
            raise ValueError(f"{name}: field 'run' must be the name of the run's trace file")
        run_path = path.parent / doc["run"]
        try:
            run = traceio.load_run(run_path)
        except ValueError as exc:
            raise ValueError(f"{name}: field 'run': {exc}") from None
        if scene.step >= max(len(steps) for steps in run.traces.values()):
            raise ValueError(f"{name}: field 'view.step': step {scene.step} is past the run's last step")
    return Session(path=path, scene=scene, alone=alone, narration=narration, run=run, run_path=run_path,
                   form=_form(doc.get("form", {}), name))


def _form(doc: Any, name: str) -> dict[str, Any]:
    """The session's form settings beyond the scene's, checked as the commands check them (kvviz.options)."""
    from kvviz.kernels import KERNEL_KEYS
    from kvviz.options import ROLLBACKS, check_value

    if not isinstance(doc, dict):
        raise ValueError(f"{name}: field 'form' must be a table of {', '.join(FORM_FIELDS)}")
    unknown = sorted(set(doc) - set(FORM_FIELDS))
    if unknown:
        raise ValueError(f"{name}: unknown field 'form.{unknown[0]}'; the form keeps {', '.join(FORM_FIELDS)}")
    if doc.get("compare_kernel", "") not in ("", *KERNEL_KEYS):
        raise ValueError(f"{name}: field 'form.compare_kernel' must be one of {', '.join(KERNEL_KEYS)} or \"\", "
                         f"got {doc['compare_kernel']!r}")
    if doc.get("rollback", ROLLBACKS[0]) not in ROLLBACKS:
        raise ValueError(f"{name}: field 'form.rollback' must be one of {', '.join(ROLLBACKS)}, "
                         f"got {doc['rollback']!r}")
    for key in ("repeat", "spec_k"):
        if key in doc:
            if isinstance(doc[key], bool) or not isinstance(doc[key], int):
                raise ValueError(f"{name}: field 'form.{key}' must be a whole number, got {doc[key]!r}")
            check_value(key, doc[key], f"{name}: field 'form.{key}'")
    return dict(doc)


# -- reopening ------------------------------------------------------------------------------------------
def apply_session(window, session: Session) -> None:
    """The window set to the session: its run replayed (when it has one), then the form, the panels (the one
    alone), the zoom, the step and the narration as they were saved; the transport's Speed as the user set it (a
    session file keeps none). ValueError (one line) while a run is going or for a form this machine cannot fill
    (a device it lacks)."""
    from kvviz.ui.export_actions import replay_run
    from kvviz.ui.lessons.capture import apply_scene
    from kvviz.ui.shell.state import RunState

    if window.state is not RunState.IDLE:
        raise ValueError(_tr("a run is going: stop it before opening a session"))
    if session.run is not None:
        replay_run(window, session.run, str(session.run_path))
    apply_scene(window, session.scene)
    form, kept = window.form, session.form
    if "compare_kernel" in kept:
        form.compare_combo.setCurrentIndex(max(0, form.compare_combo.findData(kept["compare_kernel"])))
    if "repeat" in kept:
        form.repeat_spin.setValue(kept["repeat"])
    if "spec_k" in kept:
        form.spec_k_spin.setValue(kept["spec_k"])
    if "rollback" in kept:
        form.rollback_combo.setCurrentIndex(form.rollback_combo.findData(kept["rollback"]))
    if session.alone is not None:
        window.grid.show_alone(session.alone)
    window.act_narration.setChecked(session.narration)
    window.refresh()


def apply_when_ready(window, session: Session, done=None) -> None:
    """apply_session once the window knows its engines and has its panels (a window just opened has neither);
    a refusal is shown in the window's error strip. `done(problem)` is called after, with "" or the refusal."""
    def ready() -> bool:
        return window.env is not None and bool(window.grid.panel_actions)

    def attempt(*_args) -> None:
        if not ready():
            return
        for signal in (window.environment_ready, window.panels_ready):
            try:
                signal.disconnect(attempt)
            except (RuntimeError, TypeError):
                pass
        try:
            apply_session(window, session)
            problem = ""
        except ValueError as exc:
            problem = str(exc)
            window.show_error(problem)
        if done is not None:
            done(problem)

    if ready():
        attempt()
        return
    for signal in (window.environment_ready, window.panels_ready):
        signal.connect(attempt)


# -- the window's File menu -----------------------------------------------------------------------------
def save_session_dialog(window) -> Path | None:
    """File > Save session...: a file asked for, the session saved there; a refusal shown in the window's error
    strip in one line."""
    from PySide6.QtWidgets import QFileDialog

    name, _ = QFileDialog.getSaveFileName(window, _tr("Save session"), "session.json", _tr("kvviz sessions (*.json)"))
    if not name:
        return None
    path = Path(name if name.lower().endswith(".json") else name + ".json")
    return _said(window, lambda: save_session(window, path), _tr("Session saved to {0}").format(path))


def _said(window, act, done: str):
    """act()'s result and `done` in the status bar, or None and its refusal (one line) in the error strip."""
    try:
        result = act()
    except (ValueError, OSError) as exc:
        window.show_error(str(exc))
        return None
    window.statusBar().showMessage(done, 10_000)
    return result


def open_session_dialog(window, path: str | Path | None = None) -> Session | None:
    """File > Open session...: a session file (asked for when no path is given) read, checked and applied; a
    refusal shown in the window's error strip in one line, the window as it was."""
    from PySide6.QtWidgets import QFileDialog

    if path is None:
        path, _ = QFileDialog.getOpenFileName(window, _tr("Open session"), "", _tr("kvviz sessions (*.json)"))
        if not path:
            return None
    def reopen() -> Session:
        session = read_session(path)
        apply_session(window, session)
        return session

    return _said(window, reopen, _tr("Session opened from {0}").format(path))
