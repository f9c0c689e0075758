"""Exports onto a full disk: an MP4 is refused, never reported as written (ffmpeg accepts every frame and
then fails writing its index, so its exit status and the file are checked); `kvviz export --png` and
`kvviz shot` say the disk is full in one line and exit 2 cleanly, nothing left. The full-disk cases run on
a 256 KiB tmpfs mounted in the test (root only).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("imageio_ffmpeg")

from kvviz.ui import exporters  # noqa: E402


def _frames(n: int = 20) -> list[np.ndarray]:
    base = np.random.default_rng(0).integers(0, 255, (120, 160, 3), dtype=np.uint8)
    return [np.roll(base, i * 7, axis=1) for i in range(n)]


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 256 KiB tmpfs, unmounted after the test; skipped unless root can mount one here."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("full-disk cases need root to mount a small tmpfs")
    where = tmp_path / f"full-{uuid.uuid4().hex[:6]}"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs was refused (no CAP_SYS_ADMIN in this container)")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True)


def test_mp4_round_trip_is_probed(tmp_path):
    out = tmp_path / "decode.mp4"
    assert exporters.write_animation(out, iter(_frames(6)), 4.0) == 6
    boxes = exporters.mp4_boxes(out)
    assert {"ftyp", "moov", "mdat"} <= set(boxes)
    assert sum(boxes.values()) == out.stat().st_size


def test_truncated_mp4_fails_the_probe(tmp_path):
    out = tmp_path / "decode.mp4"
    exporters.write_animation(out, iter(_frames(6)), 4.0)
    data = out.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(OSError, match="incomplete"):
        exporters.probe_mp4(cut, 6)
    with pytest.raises(OSError, match="frames of 7"):
        exporters.probe_mp4(out, 7)


@pytest.mark.parametrize("free_kib", [80, 48])  # room for the frames, not for ffmpeg's trailer pass
def test_mp4_on_a_full_disk_is_refused_and_leaves_nothing(tiny_tmpfs, free_kib):
    # Before the fix: "OK, 20 frames" and an 81,920-byte file ffmpeg itself cannot decode (exit 183).
    (tiny_tmpfs / "filler").write_bytes(b"x" * ((256 - free_kib) * 1024))
    target = tiny_tmpfs / "decode.mp4"
    with pytest.raises(ValueError, match="disk is full") as info:
        exporters.write_animation(target, iter(_frames()), 4.0)
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in tiny_tmpfs.iterdir()) == ["filler"]


ROOT = Path(__file__).resolve().parent.parent


def _kvviz(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kvviz", *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory, torch_cpu) -> Path:
    from test_hostile_interrupts import save_trace

    return save_trace(tmp_path_factory.mktemp("saved") / "run.json", 6)


def test_png_export_onto_a_full_disk_says_so_once_and_exits_cleanly(tiny_tmpfs, saved_run):
    (tiny_tmpfs / "filler").write_bytes(b"x" * (200 * 1024))  # room for the folder's probe, not for the PNG
    out = tiny_tmpfs / "out"
    for _ in range(4):  # the window had outlived the error and crashed the interpreter's exit in about half
        proc = _kvviz("export", "--from", str(saved_run), "--out", str(out), "--png")
        assert (proc.returncode, proc.stderr.splitlines()) == (
            2, [f"kvviz export: error: cannot write {out}/window.png: the disk is full (nothing was saved)"])
    assert sorted(p.name for p in tiny_tmpfs.iterdir()) == ["filler"]  # nor the folder the command made


def test_shot_onto_a_full_disk_says_so_in_one_line(tiny_tmpfs):
    (tiny_tmpfs / "filler").write_bytes(b"x" * (200 * 1024))
    out = tiny_tmpfs / "shot.png"
    proc = _kvviz("shot", "--out", str(out), "--model", "tiny-random", "--tokens", "4", "--engines", "concat",
                  "--threads", "1")
    assert (proc.returncode, proc.stderr.splitlines()) == (
        2, [f"kvviz shot: error: cannot write {out}: the disk is full (nothing was saved)"])
    assert sorted(p.name for p in tiny_tmpfs.iterdir()) == ["filler"]
