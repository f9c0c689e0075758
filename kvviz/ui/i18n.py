"""The UI's languages: loading the compiled translations (assets/i18n/kvviz_<lang>.qm), View > Language,
the saved choice (QSettings "ui/language", else the system locale), and a one-time warning when no
installed font can draw the Chinese UI.

English is the source language: choosing it removes the translators. Knows nothing about runs.
"""
from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QEvent, QLibraryInfo, QLocale, QObject, QSettings, Qt, QTranslator
from PySide6.QtGui import QAction, QActionGroup, QFont, QFontDatabase, QFontMetrics, QGuiApplication
from PySide6.QtWidgets import QMainWindow, QMenu, QMessageBox, QWidget

I18N_DIR = Path(__file__).resolve().parent.parent.parent / "assets" / "i18n"
LANGUAGES: dict[str, str] = {"en": "English", "zh_CN": "简体中文"}  # each named in its own language
SETTINGS_KEY = "ui/language"
SAMPLE_CHINESE = "文件导出语言缓存步骤注意力"  # characters the Chinese UI shows at once
FONT_PACKAGE_HINT = ("install a CJK font, e.g. on Debian/Ubuntu: sudo apt-get install fonts-wqy-microhei "
                     "(Fedora: google-noto-sans-cjk-fonts)")

_translators: list[QTranslator] = []  # installed now; kept referenced so Qt's pointers stay valid
_current = "en"
_font_warned = False


def normalize(lang: str) -> str:
    """"zh", "zh_CN", "zh-Hans", "zh_TW" -> "zh_CN" (the one Chinese translation); "en*" -> "en";
    ValueError for a language kvviz has no translation for."""
    text = (lang or "").strip().replace("-", "_")
    low = text.lower()
    if low in ("c", "posix") or low.startswith("en"):
        return "en"
    if low.startswith("zh"):
        return "zh_CN"
    raise ValueError(f"unknown language {lang!r}; choose from {', '.join(LANGUAGES)}")


def system_language(locale: QLocale | None = None) -> str:
    """The language kvviz shows by default: Chinese for any Chinese locale, else English."""
    locale = locale or QLocale.system()
    try:
        return normalize(locale.name())
    except ValueError:
        return "en"


def qm_path(lang: str) -> Path:
    return I18N_DIR / f"kvviz_{lang}.qm"


def current_language() -> str:
    return _current


def set_language(lang: str) -> str:
    """Install the translation for `lang` (removing the previous one) and return the language set.
    Qt then sends every widget a LanguageChange event, on which the window retranslates. Also loads
    Qt's own strings (standard buttons, file dialogs) where the Qt build ships them."""
    global _current
    lang = normalize(lang)
    app = QCoreApplication.instance()
    if app is None:
        raise RuntimeError("set_language needs a QApplication")
    for old in _translators:
        app.removeTranslator(old)
    _translators.clear()
    if lang != "en":
        ours = QTranslator()
        if not ours.load(str(qm_path(lang))):
            _current = "en"
            raise ValueError(f"the {LANGUAGES[lang]} translation is missing: {qm_path(lang)} "
                             "(run scripts/update_translations.py)")
        qt_own = QTranslator()
        if qt_own.load(f"qtbase_{lang}", QLibraryInfo.path(QLibraryInfo.LibraryPath.TranslationsPath)):
            app.installTranslator(qt_own)
            _translators.append(qt_own)
        app.installTranslator(ours)
        _translators.append(ours)
    QLocale.setDefault(QLocale(lang if lang != "en" else "en_US"))
    _current = lang
    return lang


def saved_language(settings: QSettings) -> str:
    value = settings.value(SETTINGS_KEY, "", type=str)
    try:
        return normalize(value) if value else system_language()
    except ValueError:
        return system_language()


def apply_saved_language(settings: QSettings | None = None) -> str:
    """Install the saved language (or the system's). Call before building the window so its first
    paint is already in that language."""
    lang = saved_language(settings if settings is not None else QSettings())
    try:
        return set_language(lang)
    except ValueError as exc:
        print(f"kvviz: {exc}; showing English", file=sys.stderr)
        return set_language("en")


# -- fonts -----------------------------------------------------------------------------------------
def chinese_font_available(sample: str = SAMPLE_CHINESE) -> bool:
    """True when the UI font, or an installed font for Simplified Chinese, has glyphs for `sample`."""
    def covers(font: QFont) -> bool:
        metrics = QFontMetrics(font)
        return all(metrics.inFontUcs4(ord(ch)) for ch in sample)

    if covers(QGuiApplication.font()):
        return True
    families = QFontDatabase.families(QFontDatabase.WritingSystem.SimplifiedChinese)
    return any(covers(QFont(family)) for family in families)


def font_warning() -> str:
    """In English on purpose: without a CJK font, Chinese would show as boxes."""
    return ("No installed font can show Chinese, so the Chinese interface would appear as empty boxes. "
            f"To fix it, {FONT_PACKAGE_HINT}, then restart kvviz.")


def warn_if_no_chinese_font(parent: QWidget | None = None, lang: str | None = None) -> bool:
    """Once per process, when the language is Chinese and no font covers it: say so on stderr and, with
    a parent, in a non-blocking message box. True if it warned now."""
    global _font_warned
    if _font_warned or (lang or _current) == "en" or chinese_font_available():
        return False
    _font_warned = True
    print(f"kvviz: {font_warning()}", file=sys.stderr)
    if parent is not None:
        box = QMessageBox(QMessageBox.Icon.Warning, "kvviz: no Chinese font", font_warning(),
                          QMessageBox.StandardButton.Ok, parent)
        box.setObjectName("cjk_font_warning")
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()
    return True


# -- View > Language ----------------------------------------------------------------------------------
class LanguageMenu(QObject):
    """One checkable action per language in the window's language menu; choosing one switches at once
    and saves the choice in the window's settings."""

    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.setObjectName("language_menu_controller")
        self.window = window
        self.settings: QSettings = getattr(window, "settings", None) or QSettings()
        self.menu: QMenu = getattr(window, "language_menu", None) or self._make_menu()
        self.group: QActionGroup = getattr(window, "language_group", None) or QActionGroup(self)
        self.group.setExclusive(True)
        self.actions: dict[str, QAction] = {}
        for act in self.menu.actions():
            if act.data() in LANGUAGES:
                self.actions[act.data()] = act
        for lang, name in LANGUAGES.items():
            act = self.actions.get(lang)
            if act is None:
                act = QAction(name, window)
                act.setData(lang)
                self.menu.addAction(act)
                self.actions[lang] = act
            act.setText(name)
            act.setCheckable(True)
            self.group.addAction(act)
        self.group.triggered.connect(self._on_group_triggered)
        self._sync_checks()

    def _make_menu(self) -> QMenu:
        view = getattr(self.window, "view_menu", None) or self.window.menuBar().addMenu("&View")
        menu = view.addMenu("&Language")
        return menu

    def _sync_checks(self) -> None:
        act = self.actions.get(_current)
        if act is not None:
            act.setChecked(True)

    def choose(self, lang: str) -> str:
        """Switch to `lang` now, remember it, and warn (once) if Chinese cannot be drawn."""
        try:
            lang = set_language(lang)
        except ValueError as exc:
            lang = set_language("en")
            shown = getattr(self.window, "show_error", None)
            if shown is not None:
                shown(str(exc))
        self.settings.setValue(SETTINGS_KEY, lang)
        self._sync_checks()
        warn_if_no_chinese_font(self.window, lang)
        return lang

    def _on_group_triggered(self, act: QAction) -> None:
        if act.data() in LANGUAGES and act.data() != _current:
            self.choose(act.data())


def install_language_menu(window: QMainWindow) -> LanguageMenu:
    """View > Language for `window`: English / 简体中文, switched at run time and saved in the window's
    QSettings. If no translation is installed yet, installs the saved one (else the system's)."""
    existing = window.findChild(LanguageMenu, "language_menu_controller")
    if existing is not None:
        return existing
    if not _translators and _current == "en":
        apply_saved_language(getattr(window, "settings", None))
    controller = LanguageMenu(window)
    warn_if_no_chinese_font(window)
    QCoreApplication.sendPostedEvents(None, QEvent.Type.LanguageChange)
    return controller
