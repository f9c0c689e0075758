"""The window's settings file: where it may be (a regular file, or none yet; never a FIFO, a device or a
link to one, which Qt blocks on reading or replaces when it saves, by a rename over the link's target),
and the one reader of its keys: each value checked against the range of the field it fills (the commands'
bounds, kvviz.options.BOUNDS), a bad one refused in one line naming the file and the key, the default kept.
It knows settings and fields, nothing of runs or panels."""
from __future__ import annotations

import math
import os
import stat
import sys
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings, QStandardPaths
from PySide6.QtWidgets import QDoubleSpinBox, QSpinBox

from kvviz.options import BOUNDS
from kvviz.ui.qtutil import translator

MAX_TEXT_CHARS = 1 << 20  # a prompt, a list of folders: longer is no value a person kept
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"))


_tr = translator("SettingsFile")


def default_path(organization: str, application: str) -> Path:
    """Where QSettings(organization, application) keeps its file on Linux (XDG_CONFIG_HOME or ~/.config),
    found without opening it."""
    folder = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericConfigLocation)
    return Path(folder) / organization / f"{application}.conf"


def check_path(path: str | Path) -> Path:
    """`path` if it is a regular file (a link to one included) or does not exist yet; else ValueError (one
    line): Qt would wait for ever on a FIFO, and on saving would rename a new file over a device."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode  # links followed: what Qt would read and replace
    except FileNotFoundError:
        return path
    except (OSError, ValueError) as exc:
        raise ValueError(f"settings file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISREG(mode):
        what = next((what for test, what in _KINDS if test(mode)), "not a regular file")
        what = f"a link to {what}" if path.is_symlink() else what
        raise ValueError(f"settings file {path} is {what}, not a regular file: kvviz neither reads it nor "
                         "saves over it (give a file, or a name not taken yet)")
    return path


def open_settings(path: str | Path | None, organization: str, application: str) -> QSettings:
    """The settings at `path` (an INI file), or the user's; ValueError (one line) where the file may not be."""
    if path is None:
        check_path(default_path(organization, application))
        return QSettings(organization, application)
    return QSettings(str(check_path(path)), QSettings.Format.IniFormat)


class SettingsReader:
    """Read a QSettings key by key; a value refused is noted in `problems` (one line each) and its default
    used. `of(settings)` gives a form's restore() the reader the window made, or a new one."""

    def __init__(self, settings: QSettings) -> None:
        self.settings = settings
        self.problems: list[str] = []

    @staticmethod
    def of(settings: QSettings | SettingsReader) -> SettingsReader:
        return settings if isinstance(settings, SettingsReader) else SettingsReader(settings)

    def refuse(self, key: str, raw: object, why: str) -> None:
        shown = raw if isinstance(raw, str) else type(raw).__name__
        shown = shown if len(shown) <= 40 else shown[:40] + "…"
        self.problems.append(_tr("settings {0}: {1}={2} refused ({3}); the default is used").format(
            self.settings.fileName(), key, shown, why))
        self.settings.remove(key)  # the file holds the default again once saved: said once, not every start

    def _raw(self, key: str):
        return self.settings.value(key) if self.settings.contains(key) else None

    def number(self, key: str, default: float, low: float, high: float, *, integer: bool = True) -> float:
        """A whole number (or, integer=False, a finite number) in [low, high], else the default."""
        raw = self._raw(key)
        if raw is None:
            return default
        value = _parse_number(raw, integer)
        if value is None:
            self.refuse(key, raw, _tr("not a whole number") if integer else _tr("not a finite number"))
            return default
        if not low <= value <= high:
            self.refuse(key, raw, _tr("outside {0}..{1}").format(f"{low:,g}" if not integer else f"{int(low):,}",
                                                                  f"{high:,g}" if not integer else f"{int(high):,}"))
            return default
        return value

    def bounded(self, key: str, default: float, bound: str) -> float:
        """A number within kvviz.options.BOUNDS[bound], the range every command takes."""
        b = BOUNDS[bound]
        value = self.number(key, default, b.low, b.high, integer=b.integer)
        if b.low_open and value == b.low and value != default:
            self.refuse(key, self._raw(key), _tr("must be more than {0:g}").format(b.low))
            return default
        return value

    def spin(self, key: str, spin: QSpinBox | QDoubleSpinBox) -> None:
        """The spin box set to the saved value where its range (the commands' bounds) holds it."""
        integer = isinstance(spin, QSpinBox)
        spin.setValue(self.number(key, spin.value(), spin.minimum(), spin.maximum(), integer=integer))

    def flag(self, key: str, default: bool) -> bool:
        raw = self._raw(key)
        if raw is None:
            return default
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower() if isinstance(raw, (str, int)) else None
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        self.refuse(key, raw, _tr("not true or false"))
        return default

    def text(self, key: str, default: str, limit: int = MAX_TEXT_CHARS) -> str:
        raw = self._raw(key)
        if raw is None:
            return default
        if isinstance(raw, list):  # QSettings reads "a,b" in an INI file as a list
            raw = ", ".join(str(x) for x in raw)
        if not isinstance(raw, str):
            self.refuse(key, raw, _tr("not text"))
            return default
        if len(raw) > limit or "\0" in raw:
            self.refuse(key, raw[:40], _tr("{0:,} characters, more than {1:,}").format(len(raw), limit)
                        if len(raw) > limit else _tr("holds a NUL"))
            return default
        return raw

    def blob(self, key: str) -> QByteArray | None:
        """Bytes Qt saved (a window's geometry or state), or None (missing, or not bytes: refused)."""
        raw = self._raw(key)
        if raw is None:
            return None
        if isinstance(raw, (QByteArray, bytes, bytearray)):
            return QByteArray(raw)
        self.refuse(key, raw, _tr("not the bytes Qt saves"))
        return None


def _parse_number(raw, integer: bool) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        value = raw
    elif isinstance(raw, str):
        text = raw.strip()
        if len(text) > 40:  # no setting is a number this long; int() of a huge one costs time
            return None
        try:
            value = int(text, 10) if integer else float(text)
        except ValueError:
            return None
    else:
        return None
    if integer and (not isinstance(value, int) and not (isinstance(value, float) and value.is_integer())):
        return None
    if not math.isfinite(value):
        return None
    return int(value) if integer else float(value)


def show_problems(window, problems: list[str]) -> None:
    """Each refused value on stderr, and the first in the window's error strip (saying how many more)."""
    for line in problems:
        print(f"kvviz: {line}", file=sys.stderr)
    if problems:
        window.show_error(problems[0] if len(problems) == 1 else
                          _tr("{0} (and {1} more on stderr)").format(problems[0], len(problems) - 1))
