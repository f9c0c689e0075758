"""An MP4 onto a full disk is refused, never reported as written (issue 13, item 1).

ffmpeg accepts every frame and then fails writing the index (the trailer) when the disk fills: the old
writer did not look at its exit status and reported a file that cannot be played. The full-disk case
runs on a 256 KiB tmpfs mounted in the test (root only).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import uuid

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
