"""The Serve window's File > Export > Run as a page: the page `kvviz export --from SERVE.json --html` writes of the
same record, opening at the step the window shows; refused before the save dialog while there is no run."""
from __future__ import annotations

import json
import re

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QFileDialog
from test_serve_view_records import shared_prefix_pair

from kvviz.serving.history import ServeHistory
from kvviz.ui.serve.window import ServeWindow


@pytest.fixture
def window(qtbot, tmp_path):
    """A Serve window with no worker (it replays only), shown."""
    w = ServeWindow(None, QSettings(str(tmp_path / "serve.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.show()
    return w


def page_data(text: str) -> dict:
    """The page's embedded data (its one application/json script)."""
    found = re.search(r'<script[^>]*type="application/json"[^>]*>(.*?)</script>', text, re.S)
    assert found, "the page holds no data script"
    return json.loads(found.group(1).replace("<\\/", "</"))


def test_the_page_from_the_menu_is_the_commands_page(qtbot, window, tmp_path, monkeypatch):
    from kvviz.cli import main

    w = window
    w.replay(ServeHistory.from_runs((shared_prefix_pair("paged"), shared_prefix_pair("prefix"))))
    w.select_step(2)
    assert w.exports.actions["page"] in w.export_menu.actions()
    target = tmp_path / "chosen" / "serve.html"
    target.parent.mkdir()
    asked = []

    def save_dialog(parent, title, proposed, file_filter):
        asked.append((proposed, file_filter))
        return str(target), file_filter

    monkeypatch.setattr(QFileDialog, "getSaveFileName", save_dialog)
    w.exports.actions["page"].trigger()
    assert asked and asked[0][0].endswith("kvviz-serve.html") and "*.html" in asked[0][1]
    assert w.error_text() == "" and str(target) in w.statusBar().currentMessage()
    page = target.read_text(encoding="utf-8")
    data = page_data(page)
    assert [s["name"] for s in data["schedulers"]] == ["paged", "prefix"]
    assert data["start"]["step"] == 2 and data["start"]["lang"] == "en"

    record = w.exports.export("json", tmp_path / "serve.json")
    assert main(["export", "--from", str(record), "--out", str(tmp_path / "cli"), "--html", "--step", "2"]) == 0
    assert (tmp_path / "cli" / "run.html").read_text(encoding="utf-8") == page


def test_no_run_no_dialog(qtbot, window, monkeypatch):
    opened = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a: opened.append(a) or ("", ""))
    window.exports.actions["page"].trigger()
    assert not opened
    assert "nothing to export" in window.error_text()
