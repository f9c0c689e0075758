"""An X server for the tests that drive the real window on Qt's xcb platform: Xvfb on a free display.

what_is_missing() names what these tests lack on this machine (`.ci/run` installs it with apt-get
when it runs as root on Debian), so they skip with that reason and only there.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass

from kvviz.ui import xcb

# The first display number tried (the next free one is taken); set it to keep clear of other X servers.
FIRST_DISPLAY = int(os.environ.get("KVVIZ_TEST_DISPLAY", "140"))
TOOLS = ("Xvfb", "xdotool")


def what_is_missing() -> str | None:
    """Why the xcb tests cannot run here (programs or system libraries missing), or None."""
    gaps = [f"{tool} is not installed" for tool in TOOLS if shutil.which(tool) is None]
    plugin = xcb.plugin_path()
    if plugin is None:
        gaps.append("PySide6 has no xcb platform plugin")
    else:
        missing, error = xcb.missing_libraries(plugin)
        if missing or error:
            gaps.append(f"Qt's xcb plugin does not load ({', '.join(missing) or error} missing)")
    if not gaps:
        return None
    return "; ".join(gaps) + " (.ci/run installs them with apt-get when it runs as root on Debian)"


def unused_display(start: int = FIRST_DISPLAY) -> int:
    """A display number no X server holds (no lock file, no socket)."""
    for n in range(start, start + 200):
        if not os.path.exists(f"/tmp/.X{n}-lock") and not os.path.exists(f"/tmp/.X11-unix/X{n}"):
            return n
    raise RuntimeError(f"no free X display number in {start}..{start + 199}")


@dataclass
class XServer:
    display: str  # ":N"
    size: tuple[int, int]
    proc: subprocess.Popen

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """base (os.environ) for a program that shows windows on this server with Qt's xcb platform."""
        env = {k: v for k, v in (os.environ if base is None else base).items()
               if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE", "XAUTHORITY")}
        env["DISPLAY"] = self.display
        return env

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_xvfb(size: tuple[int, int] = (1920, 1080), timeout: float = 20.0) -> XServer:
    """Xvfb on the first free display from FIRST_DISPLAY, once it accepts connections."""
    start = FIRST_DISPLAY
    for _ in range(5):  # another program may take the number between the check and the start
        n = unused_display(start)
        proc = subprocess.Popen(["Xvfb", f":{n}", "-screen", "0", f"{size[0]}x{size[1]}x24", "-nolisten", "tcp",
                                 "-noreset"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            if xcb.display_error(f":{n}") is None:
                return XServer(f":{n}", size, proc)
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"Xvfb :{n} did not accept connections within {timeout:g} s")
        start = n + 1
    raise RuntimeError("Xvfb did not start on any of five free display numbers")
