"""The Chinese UI: every string of kvviz/ui (as lupdate finds it now) has a finished zh_CN translation
that keeps its placeholders and shortcut key, the compiled .qm says the same as the .ts, View > Language
switches at run time and is remembered, the default follows the system locale, and a missing CJK font
is reported once.
"""
from __future__ import annotations

import importlib.util
import re
import string
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("update_translations", ROOT / "scripts" / "update_translations.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def extracted(tool):
    return tool.extract()  # runs pyside6-lupdate over the current sources into a temporary .ts


@pytest.fixture(scope="module")
def shipped(tool):
    return tool.parse_ts(tool.ts_path("zh_CN"))


@pytest.fixture
def english():
    """Whatever a test switches to, the next test starts in English."""
    from kvviz.ui import app, i18n

    app.ensure_app()
    yield
    i18n.set_language("en")


def fields(text: str) -> list[str]:
    return sorted(f"{name}!{conv}:{spec}" for _, name, spec, conv in string.Formatter().parse(text) if name is not None)


def test_lupdate_finds_the_ui_strings(extracted):
    contexts = {e.key.context for e in extracted}
    assert {"MainWindow", "ExportActions", "RunWorker", "engines"} <= contexts
    assert len(extracted) > 200


def test_every_string_has_a_finished_chinese_translation(extracted, shipped):
    missing = [f"[{e.key.context}] {e.key.source!r}" for e in extracted
               if e.key not in shipped or not shipped[e.key].finished]
    assert not missing, ("untranslated (run `python scripts/update_translations.py`, then translate in "
                         "assets/i18n/kvviz_zh_CN.ts or with --fill):\n" + "\n".join(missing))


def test_translations_keep_placeholders_markup_and_shortcut_keys(shipped):
    bad = []
    for key, entry in shipped.items():
        if not entry.finished:
            continue
        src, zh = key.source, entry.translation
        if fields(src) != fields(zh):
            bad.append(f"placeholders differ: {src!r} -> {zh!r}")
        if re.findall(r"</?\w+>", src) != re.findall(r"</?\w+>", zh):
            bad.append(f"markup differs: {src!r} -> {zh!r}")
        accel = re.search(r"&(\w)", src.replace("&&", ""))
        if accel and f"&{accel.group(1)}".lower() not in zh.lower():
            bad.append(f"shortcut key &{accel.group(1)} lost: {src!r} -> {zh!r}")
        words = re.sub(r"\{[^}]*\}", "", src)  # a string of placeholders and punctuation has no words to translate
        if (not re.search(r"[\u4e00-\u9fff]", zh) and zh.strip() != src.strip() and len(src) > 12
                and re.search(r"[A-Za-z]{2}", words)):
            bad.append(f"no Chinese in {zh!r}")
    assert not bad, "\n".join(bad)


def test_compiled_qm_says_what_the_ts_says(shipped, tool, english):
    from PySide6.QtCore import QTranslator

    translator = QTranslator()
    assert translator.load(str(tool.ts_path("zh_CN").with_suffix(".qm")))
    stale = [f"[{k.context}] {k.source!r}" for k, e in shipped.items()
             if e.finished and translator.translate(k.context, k.source, k.comment or None) != e.translation]
    assert not stale, "the .qm is older than the .ts (run scripts/update_translations.py):\n" + "\n".join(stale[:20])
    assert translator.translate("MainWindow", "&File") == "文件(&F)"


def test_normalize_and_system_default(english, tmp_path):
    from PySide6.QtCore import QLocale, QSettings

    from kvviz.ui import i18n

    assert i18n.normalize("zh_CN") == i18n.normalize("zh-Hans") == i18n.normalize("zh") == "zh_CN"
    assert i18n.normalize("en_US") == i18n.normalize("C") == "en"
    with pytest.raises(ValueError, match="unknown language"):
        i18n.normalize("fr")
    assert i18n.system_language(QLocale("zh_CN")) == "zh_CN"
    assert i18n.system_language(QLocale("de_DE")) == "en"
    settings = QSettings(str(tmp_path / "empty.ini"), QSettings.Format.IniFormat)
    assert i18n.saved_language(settings) == i18n.system_language()


def _window(tmp_path):
    """A real MainWindow with the export actions, on a worker that does nothing (no model needed)."""
    from PySide6.QtCore import QObject, QSettings, Signal

    from kvviz.ui.export_actions import install_export_actions
    from kvviz.ui.window import MainWindow

    class IdleWorker(QObject):
        environment_listed, model_loaded, run_started, step_traced = (Signal(object) for _ in range(4))
        run_noted, run_failed = Signal(str, str), Signal(str, str)
        run_finished = Signal(str)

        def __getattr__(self, name):  # every control slot: accepted, ignored
            return lambda *args: None

    window = MainWindow(IdleWorker(), QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    window.resize(1100, 760)
    window.show()
    return window, install_export_actions(window)


def test_language_menu_switches_at_run_time_and_is_remembered(qapp, tmp_path, english):
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from kvviz.ui import i18n

    i18n.set_language("en")
    window, actions = _window(tmp_path)
    try:
        menu = i18n.install_language_menu(window)
        assert set(menu.actions) == {"en", "zh_CN"} and menu.actions["zh_CN"].text() == "简体中文"
        assert window.file_menu.title() == "&File"
        menu.actions["zh_CN"].trigger()
        QApplication.processEvents()
        assert i18n.current_language() == "zh_CN"
        assert window.file_menu.title() == "文件(&F)"
        assert window.windowTitle() == "kvviz：一步一步看懂 KV Cache"
        assert actions.act_image.text() == "图片(&I)..."  # the export actions follow the switch too
        assert window.grid.frames["work_matrix"].header.text() == "工作矩阵"
        assert menu.actions["zh_CN"].isChecked() and not menu.actions["en"].isChecked()
        window.settings.sync()
        assert QSettings(window.settings.fileName(), QSettings.Format.IniFormat).value(i18n.SETTINGS_KEY) == "zh_CN"
        menu.actions["en"].trigger()
        QApplication.processEvents()
        assert window.file_menu.title() == "&File" and actions.act_image.text() == "&Image..."
    finally:
        window.close()


def test_saved_language_is_applied_on_install(qapp, tmp_path, english):
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from kvviz.ui import i18n

    i18n.set_language("en")
    QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat).setValue(i18n.SETTINGS_KEY, "zh_CN")
    window, _ = _window(tmp_path)
    try:
        i18n.install_language_menu(window)
        QApplication.processEvents()
        assert i18n.current_language() == "zh_CN" and window.view_menu.title() == "视图(&V)"
    finally:
        window.close()


def test_chinese_font_check_and_the_one_time_warning(qapp, tmp_path, english, monkeypatch, capsys):
    from PySide6.QtWidgets import QMessageBox

    from kvviz.ui import i18n

    if Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc").exists():
        assert i18n.chinese_font_available()
    assert not i18n.chinese_font_available("\U0010fffd")  # a private-use code point no font has
    window, _ = _window(tmp_path)
    try:
        monkeypatch.setattr(i18n, "chinese_font_available", lambda sample=i18n.SAMPLE_CHINESE: False)
        monkeypatch.setattr(i18n, "_font_warned", False)
        assert not i18n.warn_if_no_chinese_font(window, "en")  # English needs no CJK font
        assert i18n.warn_if_no_chinese_font(window, "zh_CN")
        assert not i18n.warn_if_no_chinese_font(window, "zh_CN")  # once
        box = window.findChild(QMessageBox, "cjk_font_warning")
        assert box is not None and "fonts-wqy-microhei" in box.text()
        assert "fonts-wqy-microhei" in capsys.readouterr().err
        box.close()
    finally:
        window.close()


def test_a_missing_qm_is_a_clear_error_and_english_stays(english, monkeypatch, tmp_path):
    from kvviz.ui import i18n

    monkeypatch.setattr(i18n, "I18N_DIR", tmp_path)
    with pytest.raises(ValueError, match="update_translations"):
        i18n.set_language("zh_CN")
    assert i18n.current_language() == "en"


def test_installing_twice_adds_nothing(qapp, tmp_path, english):
    from kvviz.ui import i18n
    from kvviz.ui.export_actions import install_export_actions

    window, actions = _window(tmp_path)
    try:
        n = len(window.export_menu.actions())
        assert install_export_actions(window) is actions and len(window.export_menu.actions()) == n
        menu = i18n.install_language_menu(window)
        assert i18n.install_language_menu(window) is menu and len(menu.menu.actions()) == len(i18n.LANGUAGES)
    finally:
        window.close()


def test_an_open_shortcuts_table_and_the_form_follow_a_switch(qapp, tmp_path, english):
    """The Prompt label and the phase names are Chinese in Chinese; an open Keyboard shortcuts table is
    filled again in the new language (it had kept the old one)."""
    from PySide6.QtWidgets import QApplication, QTableWidget

    from kvviz.ui import i18n

    i18n.set_language("en")
    window, _actions = _window(tmp_path)
    try:
        window.show_shortcuts()
        table = window.shortcuts_dialog.findChild(QTableWidget)
        assert table.horizontalHeaderItem(0).text() == "Action" and table.item(0, 0).text() == "Run"
        i18n.set_language("zh_CN")
        QApplication.processEvents()
        assert window.form.prompt_label.text() == "提示词"
        assert window.shortcuts_dialog.windowTitle() == "键盘快捷键"
        assert table.horizontalHeaderItem(0).text() != "Action" and table.item(0, 0).text() != "Run"
        assert [table.item(i, 0).text() for i in range(table.rowCount())] == [t for t, _ in window.shortcut_rows()]
        assert QApplication.translate("TransportBar", "decode") == "解码"
    finally:
        window.close()
