"""File > Export > Interactive page... in the window: the entry sits in the Export menu, and writes the run the
window shows as the page, at the window's step and language (kvviz.page; the page itself is tested in
tests/test_html_page.py)."""
from __future__ import annotations

import json
import re

import pytest


@pytest.fixture(scope="module")
def saved():
    import kvviz

    return kvviz.compare("KV cache", engines=("naive", "paged"), tokens=6, model="tiny", block_size=4, threads=1)


def page_data(text: str) -> dict:
    found = re.search(r'<script id="kvviz-data" type="application/json">(.*?)</script>', text, re.S)
    return json.loads(found.group(1))


def test_the_export_menu_writes_the_shown_run_as_a_page(open_window, saved, tmp_path, qtbot):
    from kvviz.records.traceio import SavedRun
    from kvviz.ui import i18n
    from kvviz.ui.export_actions import install_export_actions, replay_run, settle

    window = open_window()
    actions = install_export_actions(window)
    entry = actions.page_action.act
    assert entry in actions.menu.actions()
    assert actions.menu.actions().index(entry) < actions.menu.actions().index(actions.act_animation)
    assert entry.text() == "Interactive &page (HTML)..."
    replay_run(window, SavedRun(saved.info, saved.traces))
    settle()
    window.select_step(3)
    settle()
    path = actions.page_action.export_page(tmp_path / "run.html")
    assert path is not None and path.is_file(), window.error_text()
    data = page_data(path.read_text(encoding="utf-8"))
    assert data["start"] == {"step": 3, "lang": "en", "embedded": False}
    assert [e["name"] for e in data["engines"]] == ["naive", "paged"]
    assert data["engines"][1]["steps"]["cache_len"] == [t.cache_len for t in saved.traces["paged"]]
    assert "run.html" in window.statusBar().currentMessage()
    i18n.set_language("zh_CN")
    try:
        actions.page_action.retranslate()
        assert entry.text() != "Interactive &page (HTML)..."  # translated
        again = actions.page_action.export_page(tmp_path / "zh.html")
        assert page_data(again.read_text(encoding="utf-8"))["start"]["lang"] == "zh_CN"
    finally:
        i18n.set_language("en")
    # a path that cannot be written: the error strip says so, nothing is left
    assert actions.page_action.export_page(tmp_path / "missing" / "run.html") is None
    assert "cannot write" in window.error_text()
    assert not (tmp_path / "missing").exists()
