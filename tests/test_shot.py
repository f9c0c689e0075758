"""`kvviz shot`: the real window offscreen, a compare run, one PNG of the requested size."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def shot(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kvviz", "shot", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=timeout)


def test_shot_writes_a_non_blank_png_of_the_requested_size(tmp_path):
    from PySide6.QtGui import QImage

    out = tmp_path / "window.png"
    proc = shot("--out", str(out), "--model", "tiny-random", "--tokens", "12", "--engines", "naive,concat,paged",
                "--size", "1100x700", "--step", "-3", "--threads", "1", "--prompt", "Shot of a cache")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "step 9 of 12" in proc.stdout and "identical" in proc.stdout
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1100, 700)
    image = image.convertToFormat(QImage.Format.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), dtype=np.uint8).reshape(700, image.bytesPerLine())[:, :1100 * 4]
    colours = np.unique(pixels.reshape(-1, 4)[::37], axis=0)
    assert len(colours) > 50  # text, plots and the matrices, not an empty grey window
    assert [p.name for p in tmp_path.iterdir()] == ["window.png"]  # no temporary file left


@pytest.mark.parametrize("args, says", [
    (["--size", "big"], "--size must be WIDTHxHEIGHT"),
    (["--size", "100x100"], "outside 320x240"),
    (["--tokens", "0"], "argument --tokens: must be at least 1 and at most 1,000,000"),  # as bench says it
    (["--tokens", "1000000000000"], "argument --tokens: must be at least 1 and at most 1,000,000"),
    (["--engines", "concat,concat"], "named twice"),
    (["--hide", "summary,nope", "--model", "tiny-random"], "unknown panel 'nope'"),
    (["--zoom", "20"], "argument --zoom: must be at least 50 and at most 300"),
    (["--kernel", "native", "--engines", "naive"], "naive cannot decode with the C step kernel (--kernel native)"),
])
def test_shot_refuses_bad_input_in_one_line(tmp_path, args, says):
    proc = shot("--out", str(tmp_path / "x.png"), *args, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert not (tmp_path / "x.png").exists()


def test_shot_refuses_a_missing_folder(tmp_path):
    proc = shot("--out", str(tmp_path / "nowhere" / "x.png"), timeout=60)
    assert proc.returncode == 2 and "no such folder" in proc.stderr


def test_shot_in_presentation_mode_with_panels_hidden(tmp_path):
    """A 1080p projector at View > Zoom 150%: the window laid out at 1920 x 1080 with the app's text and plots
    at 1.5x, in presentation mode, two panels hidden: the other six are shown."""
    from PySide6.QtGui import QImage

    out = tmp_path / "present.png"
    proc = shot("--out", str(out), "--model", "tiny-random", "--tokens", "8", "--size", "1920x1080", "--zoom", "150",
                "--threads", "1", "--presentation", "--hide", "token_stream,summary")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1920, 1080)
    assert "1920x1080, zoom 150%, presentation mode, step 7 of 8" in proc.stdout
    assert "panels work_matrix,recompute,attention,latency,bytes,cache_memory)" in proc.stdout
