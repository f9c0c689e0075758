"""File > Export > Interactive page...: the run shown, as one self-contained HTML page (kvviz.page), at the
step and in the language the window shows. The page itself is built without Qt; this is its entry of the
compare window's exports (its words and its writer), whose check, dialog and reports are the shell's.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject


class PageAction(QObject):
    """The menu entry (`act`, the exports' "page" kind); `export_page(path)` writes the page and reports in the
    status bar or error strip (None where it could not)."""

    def __init__(self, exports) -> None:
        super().__init__(exports)
        self.exports = exports  # kvviz.ui.export_actions.ExportActions
        self.window = exports.window
        self.act = exports.actions["page"]
        self.retranslate()
        exports.menu.aboutToShow.connect(self.retranslate)  # the language may have changed since

    def retranslate(self) -> None:
        self.act.setText(self.tr("Interactive &page (HTML)..."))
        self.act.setToolTip(self.tr("The run as one HTML file with a step slider and every panel; it opens in "
                                    "any browser, with no network"))

    def words(self) -> tuple[str, str, str]:
        """The save dialog's title and file filter, and the name a failure is told by."""
        return self.tr("Export interactive page"), self.tr("HTML pages (*.html)"), self.tr("Page export")

    def write(self, path: str | Path) -> Path:
        from kvviz.page import write_page
        from kvviz.ui import i18n

        history = self.window.history
        return write_page(path, history.info, history.traces, step=self.window.selected_step,
                          lang=i18n.current_language())

    def export_page(self, path: str | Path) -> Path | None:
        return self.exports.save("page", path)
