"""Atomic writes: all or nothing, with ordinary permissions."""
from __future__ import annotations

import os
import stat

import pytest

from kvviz.fileio import atomic_write, atomic_write_text


def test_written_file_has_the_umask_mode(tmp_path):
    path = atomic_write_text(tmp_path / "a.txt", "hello")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    assert path.read_text() == "hello"


def test_failure_leaves_old_file_and_no_temp(tmp_path):
    target = tmp_path / "b.txt"
    target.write_text("old")

    def boom(tmp):
        tmp.write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        atomic_write(target, boom)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.txt"]
