"""The page in Firefox too: headless Firefox (a fresh profile whose every HTTP(S) request goes to a closed local
port) takes a screenshot of the exported file, and the screenshot holds what the page draws at its first step
(the work matrix's recomputed and cached cells, the engines' colours, the summary's tint). Skips, saying why,
where Firefox is missing (.ci/run installs firefox-esr)."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

FIREFOX = shutil.which("firefox-esr") or shutil.which("firefox")
pytestmark = pytest.mark.skipif(FIREFOX is None, reason="no firefox-esr or firefox on PATH (Debian: apt-get install "
                                                         "firefox-esr)")
OFFLINE = """
user_pref("network.proxy.type", 1);
user_pref("network.proxy.http", "127.0.0.1");
user_pref("network.proxy.http_port", 9);
user_pref("network.proxy.ssl", "127.0.0.1");
user_pref("network.proxy.ssl_port", 9);
user_pref("network.proxy.allow_hijacking_localhost", true);
user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("app.update.enabled", false);
"""


def test_the_page_draws_in_firefox(tmp_path):
    from PIL import Image

    import kvviz
    from kvviz.page import write_page

    run = kvviz.compare("KV cache demo", tokens=10, model="tiny", block_size=4, threads=1)
    page = write_page(tmp_path / "run.html", run.info, run.traces, step=6)
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "user.js").write_text(OFFLINE)
    shot = tmp_path / "firefox.png"
    done = subprocess.run([FIREFOX, "--headless", "--no-remote", "--profile", str(profile), "--window-size=1600,1000",
                           "--screenshot", str(shot), page.as_uri()], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and shot.is_file(), done.stderr
    image = np.asarray(Image.open(shot).convert("RGB"))
    assert image.shape[:2] == (1000, 1600)

    def count(rgb) -> int:
        return int(np.all(image == np.array(rgb, dtype=np.uint8), axis=-1).sum())

    assert count((0xe4, 0x57, 0x2e)) > 1000  # naive's recomputed cells at a decode step
    assert count((0x7f, 0xb3, 0xe0)) > 0  # keys the caches read
    for engine_rgb in ((0xd6, 0x27, 0x28), (0xff, 0x7f, 0x0e), (0x2c, 0xa0, 0x2c), (0x1f, 0x77, 0xb4)):
        assert count(engine_rgb) > 20
    assert count((0xcf, 0xe8, 0xc8)) > 100  # the summary's best figures, tinted
