"""Before Qt starts on an X11 desktop: can Qt's xcb platform plugin load, and does the X display answer?

Missing either, Qt prints a page of advice and aborts (exit 134). This module answers instead with one
line naming the missing system libraries (and the packages that hold them) or the display. It imports
no Qt: it loads the plugin's file with ctypes, which only dlopens what Qt would load a moment later.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import sys
from pathlib import Path

# The system libraries PySide6's xcb plugin (libqxcb.so and libQt6XcbQpa.so.6) loads, from `ldd` on
# PySide6 6.10, with the package holding each: soname -> (Debian/Ubuntu package, Fedora package).
XCB_LIBRARIES: dict[str, tuple[str, str]] = {
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb"),
    "libxcb.so.1": ("libxcb1", "libxcb"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb"),
    "libX11.so.6": ("libx11-6", "libX11"),
    "libGL.so.1": ("libgl1", "libglvnd-glx"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2"),
    "libgthread-2.0.so.0": ("libglib2.0-0", "glib2"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs"),
}
OFFSCREEN_HINT = "or without a display: `kvviz shot --out FILE.png`, or QT_QPA_PLATFORM=offscreen"
# xcb_connection_has_error's codes that say something other than "no server answered"
_XCB_PARSE_ERROR, _XCB_INVALID_SCREEN = 5, 6


def first_platform(environ=None) -> str:
    """The platform plugin Qt tries first: QT_QPA_PLATFORM's first entry (less its ':options'), else
    'wayland' where a Wayland session is announced (Qt 6 tries it before xcb), else 'xcb'."""
    environ = os.environ if environ is None else environ
    chosen = environ.get("QT_QPA_PLATFORM", "").strip()
    if chosen:
        return chosen.split(";")[0].split(":")[0].strip()
    if environ.get("WAYLAND_DISPLAY") or environ.get("XDG_SESSION_TYPE") == "wayland":
        return "wayland"
    return "xcb"


def will_use_xcb(environ=None, platform: str | None = None) -> bool:
    """True when Qt will start on xcb with nothing to fall back on (a list such as 'xcb;offscreen' has one)."""
    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux"):
        return False
    chosen = environ.get("QT_QPA_PLATFORM", "").strip()
    return first_platform(environ) == "xcb" and ";" not in chosen


def plugin_path() -> Path | None:
    """PySide6's libqxcb.so, found without importing PySide6 (None when this PySide6 has none there)."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return path if path.is_file() else None


def _library_in(error: str) -> str:
    """The file a dlopen error names: 'libxcb-cursor.so.0: cannot open shared object file: ...' or
    '/lib/x86_64-linux-gnu/libxcb-cursor.so.0: file too short' -> 'libxcb-cursor.so.0'."""
    return os.path.basename(error.split(": ", 1)[0].strip())


def _load(name: str) -> str | None:
    """dlopen name; None when it loads, else the error."""
    try:
        ctypes.CDLL(name)
    except OSError as exc:
        return str(exc)
    return None


def missing_libraries(plugin: Path) -> tuple[list[str], str]:
    """(the system libraries that do not load, the plugin's own load error); ([], "") when it loads.
    The loader stops at the first missing library, so each known one is then tried alone."""
    error = _load(str(plugin))
    if error is None:
        return [], ""
    first = _library_in(error)
    own = "undefined symbol" in error or first.startswith(("libQt6", "libqxcb", "libicu"))
    # PySide6's own files broken (no system package mends that): only the system libraries are named
    return unloadable([] if own else [first]), error


def unloadable(missing: list[str]) -> list[str]:
    """missing plus every library the known ones fail on (the file the loader names: a library that
    needs a missing one names that one), in XCB_LIBRARIES' order."""
    missing = list(missing)
    for soname in XCB_LIBRARIES:
        failed = _load(soname)
        if failed is not None and _library_in(failed) not in missing:
            missing.append(_library_in(failed))
    order = list(XCB_LIBRARIES)
    return sorted(missing, key=lambda m: order.index(m) if m in order else len(order))


def install_hint(missing: list[str]) -> str:
    """The install commands for these libraries (Debian/Ubuntu and Fedora)."""
    debian = dict.fromkeys(XCB_LIBRARIES[m][0] for m in missing if m in XCB_LIBRARIES)
    fedora = dict.fromkeys(XCB_LIBRARIES[m][1] for m in missing if m in XCB_LIBRARIES)
    unknown = [m for m in missing if m not in XCB_LIBRARIES]
    fedora.update((f"'{m}()(64bit)'", None) for m in unknown)
    hint = ""
    if debian:
        hint = f"sudo apt-get install {' '.join(debian)} (Debian/Ubuntu)"
    if unknown:
        hint += (", and " if hint else "") + f"the package holding {', '.join(unknown)} (apt-file search " \
                                               f"{unknown[0]})"
    return f"{hint}; sudo dnf install {' '.join(fedora)} (Fedora)"


def display_error(display: str | None) -> str | None:
    """None when an X server answers at display (libxcb's own connect, the one Qt makes, xauth
    included), else why not."""
    if not display:
        return "DISPLAY is not set"
    try:
        xcb = ctypes.CDLL("libxcb.so.1")
    except OSError:
        return None  # reported as a missing library instead
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    connection = xcb.xcb_connect(display.encode(), None)
    try:
        code = xcb.xcb_connection_has_error(connection)
    finally:
        xcb.xcb_disconnect(connection)
    if code == 0:
        return None
    if code == _XCB_PARSE_ERROR:
        return f"DISPLAY={display!r} is not an X display name (such as :0)"
    if code == _XCB_INVALID_SCREEN:
        return f"the X display {display!r} has no such screen"
    socket = _local_socket(display)
    if socket and not os.path.exists(socket):
        return f"no X server at DISPLAY={display!r} (no {socket}): start one, or set DISPLAY to yours"
    return (f"the X server at DISPLAY={display!r} does not answer or refuses this user (see xauth, "
            f"XAUTHORITY)")


def _local_socket(display: str) -> str | None:
    match = re.fullmatch(r"(?:unix)?:(\d+)(?:\.\d+)?", display)
    return f"/tmp/.X11-unix/X{match.group(1)}" if match else None


def problem(environ=None, platform: str | None = None) -> str | None:
    """One line saying why Qt's xcb plugin would abort (missing libraries, no X display), or None
    (all is well, or Qt will not start on xcb)."""
    environ = os.environ if environ is None else environ
    if not will_use_xcb(environ, platform):
        return None
    plugin = plugin_path()
    if plugin is None:
        return None
    missing, error = missing_libraries(plugin)
    if missing:
        return (f"kvviz: Qt's xcb platform plugin needs system libraries that are missing: {', '.join(missing)}. "
                f"Install: {install_hint(missing)}; {OFFSCREEN_HINT}")
    if error:
        return f"kvviz: Qt's xcb platform plugin does not load ({error}): reinstall PySide6; {OFFSCREEN_HINT}"
    why = display_error(environ.get("DISPLAY"))
    return f"kvviz: {why}; {OFFSCREEN_HINT}" if why else None


def missing_packages(distro: str) -> list[str]:
    """The packages (distro 'debian' or 'fedora') holding the xcb plugin's system libraries that do not
    load here, without PySide6: what `.ci/run` installs before PySide6 is."""
    column = ("debian", "fedora").index(distro)
    return list(dict.fromkeys(XCB_LIBRARIES[m][column] for m in unloadable([]) if m in XCB_LIBRARIES))


if __name__ == "__main__":  # python -m kvviz.ui.xcb --packages debian
    if sys.argv[1:2] != ["--packages"] or len(sys.argv) != 3 or sys.argv[2] not in ("debian", "fedora"):
        sys.exit("usage: python -m kvviz.ui.xcb --packages debian|fedora")
    print(" ".join(missing_packages(sys.argv[2])))
