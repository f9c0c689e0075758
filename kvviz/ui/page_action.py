"""File > Export > Interactive page...: the run shown, as one self-contained HTML page (kvviz.page), at the
step and in the language the window shows. The page itself is built without Qt; this is its menu entry.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction


class PageAction(QObject):
    """The menu entry; `export_page(path)` writes the page and reports in the status bar or error strip."""

    def __init__(self, actions) -> None:
        super().__init__(actions)
        self.actions = actions  # kvviz.ui.export_actions.ExportActions: its window, menu, dialogs, reports
        self.window = actions.window
        self.act = QAction(self.window)
        self.act.triggered.connect(lambda: self.page_dialog())
        self.window.addAction(self.act)
        actions.menu.insertAction(actions.act_animation, self.act)
        self.retranslate()
        actions.menu.aboutToShow.connect(self.retranslate)  # the language may have changed since

    def retranslate(self) -> None:
        self.act.setText(self.tr("Interactive &page (HTML)..."))
        self.act.setToolTip(self.tr("The run as one HTML file with a step slider and every panel; it opens in "
                                    "any browser, with no network"))

    def page_dialog(self) -> None:
        if not self.window.history.n_steps():
            self.actions._failed(self.tr("Page export"), ValueError(self.tr(
                "nothing to export yet: run the engines or open a saved trace first")))
            return
        path = self.actions._ask_save_path(self.tr("Export interactive page"), "kvviz-run.html",
                                           self.tr("HTML pages (*.html)"))
        if path:
            self.export_page(path)

    def export_page(self, path: str | Path) -> Path | None:
        from kvviz.page import write_page
        from kvviz.ui import i18n

        history = self.window.history
        try:
            saved = write_page(path, history.info, history.traces, step=self.window.selected_step,
                               lang=i18n.current_language())
        except ValueError as exc:
            self.actions._failed(self.tr("Page export"), exc)
            return None
        self.actions._saved(saved, self.tr("{0} bytes").format(f"{saved.stat().st_size:,}"))
        return saved


def install_page_action(actions) -> PageAction:
    return PageAction(actions)
