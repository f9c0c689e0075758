"""A settings file with bad values, or a settings path that is no regular file: the window starts with each
bad value's default and says which file and key in one line (the error strip and stderr); a FIFO, a device or
a link to a device as --settings is refused in one line (exit 2) before any window, and never written.
Device nodes are made with os.mknod in a temporary folder, never the real /dev."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_export import _fake_worker

ROOT = Path(__file__).resolve().parent.parent

# key, bad value in the INI file, what the window holds instead: the default
BAD_VALUES = [
    ("window/geometry", "hello", None),
    ("window/geometry", "@Rect(-5 -5 -100 -100)", None),
    ("window/state", "hello", None),
    ("run/tokens", "123456789012345", "tokens"),
    ("run/window", "1234567890123456789012", "window"),
    ("run/block_size", "-3", "block"),
    ("transport/speed", "nan", "speed"),
    ("sampling/top_p", "nan", "top_p"),
    ("sampling/temperature", "inf", "temperature"),
    ("sampling/seed", "99999999999999999999999", "seed"),
    ("sampling/greedy", "perhaps", "greedy"),
    ("view/zoom", "99999999999999", "zoom"),
]


def _fields(w) -> dict:
    f = w.form
    return {"tokens": f.tokens_spin.value(), "window": f.window_spin.value(), "block": f.block_spin.value(),
            "speed": w.toolbar.speed_spin.value(), "top_p": f.top_p_spin.value(),
            "temperature": f.temperature_spin.value(), "seed": f.seed_spin.value(),
            "greedy": f.greedy_check.isChecked(), "zoom": w.presentation.zoom}


def _window(qtbot, ini: Path):
    from kvviz.ui import app
    from kvviz.ui.window import MainWindow
    from tests.conftest import settings_at

    app.ensure_app()
    w = MainWindow(_fake_worker(), settings_at(ini))
    qtbot.addWidget(w)
    return w


@pytest.fixture
def defaults(qtbot, tmp_path):
    w = _window(qtbot, tmp_path / "empty.ini")
    fields = _fields(w)
    assert w.error_text() == ""
    return fields


@pytest.mark.parametrize(("key", "value", "field"), BAD_VALUES, ids=[f"{k}={v[:12]}" for k, v, _ in BAD_VALUES])
def test_a_bad_value_is_refused_naming_file_and_key_and_the_default_used(qtbot, tmp_path, capsys, defaults, key,
                                                                        value, field):
    section, name = key.split("/")
    ini = tmp_path / "bad.ini"
    ini.write_text(f"[{section}]\n{name}={value}\n")
    w = _window(qtbot, ini)  # had raised TypeError / OverflowError in the window's constructor
    assert w.error_text().count("\n") == 0
    assert str(ini) in w.error_text() and key in w.error_text() and "default" in w.error_text()
    err = capsys.readouterr().err
    assert f"kvviz: settings {ini}: {key}=" in err and err.count("\n") == 1
    if field is not None:
        assert _fields(w)[field] == defaults[field]
    w.close()  # the default is saved over the bad value: the next start is clean
    assert _window(qtbot, ini).error_text() == ""


def test_good_values_come_back_without_a_word(qtbot, tmp_path):
    ini = tmp_path / "good.ini"
    ini.write_text("[run]\ntokens=77\nwindow=12\n[transport]\nspeed=5\n[sampling]\ntop_p=0.5\nseed=3\n")
    w = _window(qtbot, ini)
    assert w.error_text() == ""
    assert (w.form.tokens_spin.value(), w.form.window_spin.value(), w.toolbar.speed_spin.value(),
            w.form.top_p_spin.value(), w.form.seed_spin.value()) == (77, 12, 5, 0.5, 3)


def test_several_bad_values_one_line_in_the_window_each_on_stderr(qtbot, tmp_path, capsys):
    ini = tmp_path / "bad.ini"
    ini.write_text("[run]\ntokens=0\nwindow=x\n[transport]\nspeed=nan\n")
    w = _window(qtbot, ini)
    assert "\n" not in w.error_text() and "2 more" in w.error_text()
    assert capsys.readouterr().err.count("kvviz: settings") == 3


def test_a_serve_form_with_bad_saved_values_starts_with_defaults(qtbot, tmp_path):
    from kvviz.ui.serve.window import ServeWindow
    from tests.conftest import settings_at

    ini = tmp_path / "serve.ini"
    ini.write_text('[serve]\nblocks=99999999999999999999\nrequests="[[\\"a\\", 99999999999999999999, 0]]"\n'
                   "max_batch=nan\n")
    w = ServeWindow(None, settings_at(ini))
    qtbot.addWidget(w)
    assert "serve/requests" in w.error_text() and "2 more" in w.error_text()
    assert w.form.blocks.value() == 32 and w.form.requests()[0].prompt != "a"


def test_a_million_character_word_as_the_saved_prompt_loads(tmp_path):
    """Qt's word wrap lays out one unbroken line in time that grows with its square (minutes at a million
    characters): the prompt box wraps such text anywhere. In a child process, so a hang fails, bounded."""
    ini = tmp_path / "long.ini"
    ini.write_text("[run]\nprompt=" + "a" * 1_000_000 + "\n")
    code = textwrap.dedent(f"""
        from PySide6.QtCore import QSettings
        from PySide6.QtWidgets import QApplication
        from kvviz.ui.form import RunForm
        app = QApplication([])
        settings = QSettings({str(ini)!r}, QSettings.Format.IniFormat)
        form = RunForm(settings)
        form.resize(300, 600)
        form.show()
        form.restore(settings)
        app.processEvents()
        print(len(form.prompt_edit.toPlainText()))
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90, cwd=ROOT,
                          env=dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-1] == "1000000"


# -- the settings path ----------------------------------------------------------------------------------
def _special(tmp_path: Path, kind: str) -> Path:
    if kind == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
        return path
    if kind == "folder":
        path = tmp_path / "folder"
        path.mkdir()
        return path
    dev = tmp_path / "zero"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # what /dev/zero is, in the test's own folder
    except PermissionError:
        pytest.skip("making a device node needs root (CAP_MKNOD)")
    if kind == "device":
        return dev
    link = tmp_path / "settings.ini"
    link.symlink_to(dev)
    return link


@pytest.mark.parametrize("kind", ["fifo", "device", "link-to-device", "folder"])
def test_a_settings_path_that_is_no_regular_file_is_refused_before_any_window(tmp_path, kind):
    path = _special(tmp_path, kind)
    before = os.stat(path).st_mode
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "--settings", str(path)], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path,  # a FIFO had hung before the window
                          env=dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "not a regular file" in lines[0], proc.stderr
    assert os.stat(path).st_mode == before  # the device is still a device (Qt's save renames over a link's target)
    assert {p.name for p in tmp_path.iterdir()} <= {path.name, "zero"}  # nothing written beside it


def test_the_settings_path_check(tmp_path):
    from kvviz.ui.settings_file import check_path, default_path

    regular = tmp_path / "a.ini"
    regular.write_text("")
    link = tmp_path / "link.ini"
    link.symlink_to(regular)
    assert check_path(regular) == regular and check_path(link) == link  # a link to a file: Qt keeps the link
    assert check_path(tmp_path / "new.ini") == tmp_path / "new.ini"
    os.mkfifo(tmp_path / "f")
    with pytest.raises(ValueError, match="is a FIFO, not a regular file"):
        check_path(tmp_path / "f")

    from PySide6.QtCore import QSettings

    from kvviz.ui.app import APPLICATION, ORGANIZATION

    assert str(default_path(ORGANIZATION, APPLICATION)) == QSettings(ORGANIZATION, APPLICATION).fileName()


@pytest.mark.parametrize(("key", "value", "dialog", "field", "default"), [
    ("export/scale", "abc", "ImageExportDialog", "scale", 2.0),
    ("export/scale", "1e300", "ImageExportDialog", "scale", 2.0),
    ("export/fps", "-7", "AnimationExportDialog", "fps", 4),
])
def test_an_export_dialogs_bad_saved_value_is_refused_naming_file_and_key(qtbot, tmp_path, capsys, monkeypatch, key,
                                                                         value, dialog, field, default):
    """The export dialogs' saved scale and frame rate go through the same reader as the window's settings."""
    from PySide6.QtWidgets import QDialog

    from kvviz.ui import export_actions

    section, name = key.split("/")
    ini = tmp_path / "export.ini"
    ini.write_text(f"[{section}]\n{name}={value}\n")
    w = _window(qtbot, ini)
    opened = {}

    class Seen:
        def __init__(self, window, **kw):
            opened.update(kw)

        def exec(self):
            return QDialog.DialogCode.Rejected

    monkeypatch.setattr(export_actions, dialog, Seen)
    actions = export_actions.install_export_actions(w)
    if field == "fps":
        monkeypatch.setattr(w.history, "n_steps", lambda *a: 3)
        actions.animation_dialog()
    else:
        actions.image_dialog()
    assert opened[field] == default
    assert str(ini) in w.error_text() and key in w.error_text()
    assert f"kvviz: settings {ini}: {key}=" in capsys.readouterr().err
