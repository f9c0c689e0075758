"""The shell keeps a view's selection: the step shown (`step`, read as selected_step), whether it follows the newest
(following, set_following) and scrubbing (a step back stops following), so a view drawn at one step writes only
select_step; the Serve and Watch views take them from the shell."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings

from kvviz.ui.shell.window import ShellWindow


class StepView(ShellWindow):
    """A view of ten steps that writes select_step and nothing else of the selection."""

    def select_step(self, step: int) -> None:
        self.step = max(0, min(step, 9))
        self._follow = self.step == 9


def test_the_shell_keeps_the_selected_step_and_following(qtbot, tmp_path):
    view = StepView(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(view)
    assert view.selected_step == 0 and view.following()
    view.set_following(False)
    assert not view.following()
    view.scrub(12)
    assert view.selected_step == 9 and view.following()
    view.scrub(-3)
    assert view.selected_step == 6 and not view.following()
    view.scrub(3)
    assert view.selected_step == 9 and view.following()
    view.close()


@pytest.mark.parametrize("module, name", [("kvviz.ui.serve.window", "ServeWindow"),
                                          ("kvviz.ui.watch.window", "WatchWindow")])
def test_the_serve_and_watch_views_take_the_selection_from_the_shell(module, name):
    import importlib

    view = getattr(importlib.import_module(module), name)
    for method in ("selected_step", "following", "set_following", "scrub"):
        assert getattr(view, method) is getattr(ShellWindow, method), (name, method)
