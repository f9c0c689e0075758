"""The shell's grid and export actions are every view's: the Serve and Watch views only configure them, and a
throwaway view made of a registry of two panels (below, no form, no worker) gets the layout, View's show and
hide, the give-way behind tabs, a panel given the whole grid and File > Export from the shell alone; what it
shows is checked in the pixels of its exported PNG.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QFileDialog, QLabel, QWidget

from kvviz.ui.shell.exports import FOLDER_KEY, ExportKind, ShellExports
from kvviz.ui.shell.grid import GridSpec, ShellGrid
from kvviz.ui.shell.window import ShellWindow

COLOURS = {"left": QColor(200, 30, 30), "right": QColor(30, 30, 200)}
READABLE = (300, 400)  # each panel's readable size: two fit side by side in 800 px, not above each other in 600


class SwatchPanel(QWidget):
    """A panel that paints its colour and remembers the step it was shown."""

    key = ""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.shown: list[tuple] = []
        self.fail = False

    def title(self) -> str:
        return f"{self.key} swatch"

    def help_text(self) -> str:
        return "one colour"

    def show_step(self, history, step, *selection) -> None:
        if self.fail:
            raise RuntimeError("drawn wrong")
        self.shown.append((history, step, *selection))

    def retranslate(self) -> None:
        pass

    def clear(self) -> None:
        self.shown.clear()

    def readable_size(self) -> tuple[int, int]:
        return READABLE

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)
        painter.fillRect(self.rect(), COLOURS[self.key])
        painter.end()


class LeftPanel(SwatchPanel):
    key = "left"


class RightPanel(SwatchPanel):
    key = "right"


SPEC = GridSpec("swatch", [("left", f"{__name__}:LeftPanel"), ("right", f"{__name__}:RightPanel")],
                (("left", "right"),), {"left": 0, "right": 1})


class SwatchView(ShellWindow):
    """The throwaway view: the shell's transport keys, its grid of the two swatches and its exports."""

    def __init__(self, settings: QSettings) -> None:
        super().__init__(settings)
        self.grid = ShellGrid(SPEC)
        self.build_shell(QLabel("swatches"), self.grid, area="swatch_area", error="swatch_error")
        self.exports = ShellExports(self, {
            "png": ExportKind("PNG (*.png)", "swatch.png"),
            "txt": ExportKind("Text (*.txt)", "swatch.txt", self.write_text),
        }, lambda: {"png": "View as PNG...", "txt": "Laid out (text)...", "title": "Export", "saved": "saved {0}"},
            self.draw)
        self.exports.retranslate()
        self.grid.retranslate()
        self.host_worker(None)

    def draw(self) -> None:
        self.grid.draw("history", 3, "picked")

    def write_text(self, path) -> Path:
        if not self.grid.laid_out():
            raise ValueError("nothing laid out")
        Path(path).write_text(" ".join(self.grid.laid_out()))
        return Path(path)


def colour_share(png: Path) -> dict[str, float]:
    """The share of the image's pixels in each swatch's colour."""
    image = QImage(str(png)).convertToFormat(QImage.Format.Format_RGB32)
    counts = dict.fromkeys(COLOURS, 0)
    for y in range(0, image.height(), 2):
        for x in range(0, image.width(), 2):
            pixel = image.pixelColor(x, y)
            for key, colour in COLOURS.items():
                if pixel == colour:
                    counts[key] += 1
    total = ((image.height() + 1) // 2) * ((image.width() + 1) // 2)
    return {key: n / total for key, n in counts.items()}


@pytest.fixture
def view(qtbot, tmp_path):
    window = SwatchView(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(window)
    window.resize(800, 600)
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: window.grid.laid_out() == ["left", "right"] and window.grid.width() > 700)
    return window


def test_a_registry_of_two_panels_gets_the_grid_its_give_way_and_a_panel_enlarged(view, qtbot, tmp_path):
    grid = view.grid
    assert set(grid.panels) == {"left", "right"} and not grid.load_errors
    assert grid.objectName() == "swatch_grid" and grid.frames["left"].objectName() == "swatch_panel_left"
    both = colour_share(view.exports.export("png", tmp_path / "both.png"))
    assert both["left"] > 0.1 and both["right"] > 0.1, both
    assert grid.panels["left"].shown[-1] == ("history", 3, "picked")  # the view's selection reaches the panels

    view.resize(450, 600)  # neither side by side nor one above the other: the second waits behind a tab
    qtbot.waitUntil(lambda: grid.laid_out() == ["left"])
    assert grid.moved == ["right"] and grid.strip.isVisible()
    assert [grid.tabs.tabText(i) for i in range(grid.tabs.count())] == ["Grid", "right swatch"]
    alone = colour_share(view.exports.export("png", tmp_path / "alone.png"))
    assert alone["left"] > 0.2 and alone["right"] == 0, alone
    grid.tabs.setCurrentIndex(1)  # the tab shows the moved panel with the grid to itself
    assert grid.laid_out() == ["right"]
    grid.tabs.setCurrentIndex(0)

    view.resize(800, 600)
    qtbot.waitUntil(lambda: grid.laid_out() == ["left", "right"] and not grid.strip.isVisible())
    QTest.mouseDClick(grid.frames["right"].header, Qt.MouseButton.LeftButton)  # the title double-clicked
    assert grid.focused() == "right" and grid.laid_out() == ["right"]
    qtbot.waitUntil(lambda: grid.frames["right"].width() > 700)
    enlarged = colour_share(view.exports.export("png", tmp_path / "enlarged.png"))
    assert enlarged["right"] > 2 * both["right"] and enlarged["left"] == 0, (enlarged, both)
    QTest.mouseDClick(grid.frames["right"].header, Qt.MouseButton.LeftButton)  # again: the grid back
    assert grid.focused() == "" and grid.laid_out() == ["left", "right"]

    grid.panel_actions["left"].setChecked(False)  # View: hidden
    assert grid.laid_out() == ["right"]
    grid.panel_actions["left"].setChecked(True)
    assert grid.laid_out() == ["left", "right"]


def test_a_panel_that_fails_to_draw_says_so_in_its_title_and_the_other_is_drawn(view):
    grid = view.grid
    grid.panels["left"].fail = True
    grid.draw("history", 5)
    assert "RuntimeError: drawn wrong" in grid.frames["left"].header.full_text()
    assert grid.panels["right"].shown[-1] == ("history", 5)


def test_the_export_actions_save_where_asked_and_say_so(view, tmp_path, monkeypatch):
    exports = view.exports
    assert [a.text() for a in exports.actions.values()] == ["View as PNG...", "Laid out (text)..."]
    assert exports.actions["png"].shortcut().toString() == "Ctrl+E"
    asked = []
    target = tmp_path / "out" / "laid.txt"
    target.parent.mkdir()

    def save_name(parent, title, start, file_filter):
        asked.append((title, start, file_filter))
        return str(target), file_filter

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(save_name))
    exports.actions["txt"].trigger()
    assert target.read_text() == "left right"
    assert asked == [("Export", str(Path.home() / "swatch.txt"), "Text (*.txt)")]
    assert view.settings.value(FOLDER_KEY) == str(target.parent) and exports.folder() == str(target.parent)
    assert view.statusBar().currentMessage() == f"saved {target}"
    exports.dialog("png")  # the next dialog starts in the folder saved to
    assert asked[-1][1] == str(target.parent / "swatch.png")

    for key in view.grid.panel_actions:
        view.grid.panel_actions[key].setChecked(False)
    exports.dialog("txt")  # the view's writer refuses: its one line in the error strip, nothing saved
    assert view.error_text() == "nothing laid out"
    with pytest.raises(ValueError, match="unknown export 'gif'"):
        exports.export("gif", tmp_path / "x.gif")


def test_the_serve_and_watch_views_are_the_shells_grid_and_exports(qtbot, tmp_path):
    from kvviz.ui.serve.window import ServeWindow
    from kvviz.ui.watch.window import WatchWindow

    serve = ServeWindow(None, QSettings(str(tmp_path / "serve.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(serve)
    watch = WatchWindow(QSettings(str(tmp_path / "watch.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(watch)
    for view, name, kinds in ((serve, "serve", ["png", "svg", "page", "json", "csv", "gif"]),
                              (watch, "watch", ["png", "svg", "page", "gif"])):
        assert type(view.grid) is ShellGrid and view.grid.objectName() == f"{name}_grid"
        assert isinstance(view.exports, ShellExports) and list(view.exports.actions) == kinds
        assert all(act in view.view_menu.actions() for act in view.grid.panel_actions.values())
