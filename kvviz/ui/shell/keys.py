"""The one key map: every action a view has, as data (its name, its keys, the window method it calls),
and the transport's rows and their texts that every view shares (a view's own actions' texts and tips are
its own); menus are each view's lists of names. No window, no runs: `build` makes the QActions."""
from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication, QObject
from PySide6.QtGui import QAction, QKeySequence

Key = str | QKeySequence.StandardKey


@dataclass(frozen=True)
class ActionSpec:
    """One action: kept by the window as `act_<name>`; triggering it calls `handler` (a method of the
    window, or a dotted path from it: "presentation.zoom_step") with `args` (and the check state last
    where `checkable`)."""

    name: str
    keys: tuple[Key, ...] = ()
    handler: str = ""
    args: tuple = ()
    checkable: bool = False


TRANSPORT: tuple[ActionSpec, ...] = (
    ActionSpec("run", ("Ctrl+R", "F5"), "start_run"),
    ActionSpec("pause", ("Space",), "toggle_pause"),
    ActionSpec("step", ("N",), "step_once"),
    ActionSpec("stop", ("Esc",), "stop_run"),
    ActionSpec("prev", ("Left",), "scrub", (-1,)),
    ActionSpec("next", ("Right",), "next_step"),
    ActionSpec("back10", ("PgUp",), "scrub", (-10,)),
    ActionSpec("fwd10", ("PgDown",), "scrub", (10,)),
    ActionSpec("first", ("Home",), "select_step", (0,)),
    ActionSpec("last", ("End",), "follow_live"),
    ActionSpec("faster", ("]",), "change_speed", (+1,)),
    ActionSpec("slower", ("[",), "change_speed", (-1,)),
)
# Ctrl+Q as well: the platform's Quit key is not Ctrl+Q everywhere (offscreen: none). The app quits: every
# window closes (the Serve view, the calculator), workers and engine processes end, the process exits.
QUIT = ActionSpec("quit", (QKeySequence.StandardKey.Quit, "Ctrl+Q"), "quit_app")
# The Run menu of every view: the transport's actions, None a separator.
RUN_MENU: tuple[str | None, ...] = ("run", "pause", "step", "stop", None, "faster", "slower", None, "prev", "next",
                                    "back10", "fwd10", "first", "last")


def _tr(text: str) -> str:
    return QCoreApplication.translate("MainWindow", text)


def transport_texts() -> dict[str, str]:
    """The transport's actions' texts in the current language, by name."""
    return {"run": _tr("&Run"), "pause": _tr("&Pause"), "step": _tr("&Step"), "stop": _tr("S&top"),
            "prev": _tr("Previous step"), "next": _tr("Next step"), "back10": _tr("Back 10 steps"),
            "fwd10": _tr("Forward 10 steps"), "first": _tr("First step"), "last": _tr("Newest step (follow the run)"),
            "faster": _tr("Faster"), "slower": _tr("Slower")}


def pause_text(paused: bool) -> str:
    """Pause's text: Resume while the run is paused."""
    return _tr("&Resume") if paused else _tr("&Pause")


def handler(window: QObject, spec: ActionSpec):
    """The callable `spec.handler` names on the window, looked up when the action fires (so a part made
    after the actions, the toolbar or the presentation, is found)."""
    target = window
    for part in spec.handler.split("."):
        target = getattr(target, part)
    return target


def build(window: QObject, specs: tuple[ActionSpec, ...]) -> dict[str, QAction]:
    """The QActions of `specs`, in order, each added to the window (so its keys work with the menu bar
    hidden) and kept as `window.act_<name>`; a key given twice is set once."""
    made: dict[str, QAction] = {}
    for spec in specs:
        act = QAction(window)
        sequences = {QKeySequence(k).toString(): QKeySequence(k) for k in spec.keys}
        act.setShortcuts(list(sequences.values()))
        act.setCheckable(spec.checkable)
        if spec.checkable:
            act.triggered.connect(lambda checked=False, s=spec: handler(window, s)(*s.args, checked))
        else:
            act.triggered.connect(lambda _checked=False, s=spec: handler(window, s)(*s.args))
        window.addAction(act)
        setattr(window, f"act_{spec.name}", act)
        made[spec.name] = act
    return made


def fill_menu(menu, actions: dict[str, QAction], names: tuple[str | None, ...]) -> None:
    """The named actions in the menu, None a separator."""
    for name in names:
        if name is None:
            menu.addSeparator()
        else:
            menu.addAction(actions[name])


def set_action_tip(act: QAction) -> None:
    """The action's tooltip (its "tip" property, else its text) with its keys, as they are now."""
    keys = ", ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in act.shortcuts())
    tip = act.property("tip") or act.text()
    act.setToolTip(f"{tip} ({keys})" if keys else tip)
