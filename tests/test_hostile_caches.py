"""Files kvviz reads back that are not what they should be: a FIFO, an endless device or a huge file as the
cached bandwidth figures or as `kvviz memory --measured`'s bench file is refused or ignored at once, in bounded
memory (never waited on, never read whole); the bad cache is probed again with one line on stderr. The
devices are made in a temporary folder (mknod: zero is 1,5), never the real /dev."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from kvviz.measure import bandwidth
from kvviz.measure.bandwidth import Bandwidth

needs_mknod = pytest.mark.skipif(not hasattr(os, "mknod") or os.geteuid() != 0,
                                 reason="making a character device needs root")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _within(seconds: float, fn):
    """fn()'s value, or a failed test if it has not returned after `seconds` (run in a daemon thread, so a
    call that blocks for ever fails the test instead of hanging it)."""
    box: dict = {}

    def call() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the test's own thread
            box["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def _release(fifo) -> None:
    """A writer on `fifo` opened and closed, so a reader blocked in open() returns (a failed test's thread)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def _bounded(code: str, seconds: float = 60, memory: int = 1 << 30) -> tuple[subprocess.CompletedProcess, float]:
    """`code` in a fresh Python under an address-space limit (so a reader that grows without bound stops at
    `memory` bytes, not at the machine's), killed after `seconds`; (its result, wall seconds)."""
    limit = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))\n"
    t0 = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", limit + textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=seconds, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {seconds} s")
    return done, time.monotonic() - t0


def _fake_probes(monkeypatch) -> list:
    calls: list = []

    def copy(buffer_bytes=None, bursts=bandwidth.BURSTS):
        calls.append("copy")
        return Bandwidth(device="cpu", copy_gbps=12.5, buffer_bytes=64, bursts=1, machine=bandwidth.machine_key())

    def read(threads=None, buffer_bytes=None, bursts=bandwidth.READ_BURSTS):
        calls.append("read")
        return bandwidth.ReadCeiling(device="cpu", read_gbps=20.0, threads=threads or 1, buffer_bytes=64, bursts=1,
                                     machine=bandwidth.machine_key(), measured_at=time.time())

    monkeypatch.setattr(bandwidth, "probe_cpu", copy)
    monkeypatch.setattr(bandwidth, "probe_read_cpu", read)
    monkeypatch.setattr(bandwidth, "_WARNED", set(), raising=False)
    return calls


def test_a_fifo_as_the_bandwidth_cache_is_probed_again_with_one_line(tmp_path, monkeypatch, capsys):
    fifo = tmp_path / "bandwidth.json"
    os.mkfifo(fifo)
    calls = _fake_probes(monkeypatch)
    try:
        assert _within(10, lambda: bandwidth.cached_read_ceiling(1, path=fifo)) is None
        c = _within(10, lambda: bandwidth.read_ceiling("cpu", threads=1, path=fifo))
    finally:
        _release(fifo)
    assert c.read_gbps == 20.0 and calls == ["copy", "read"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # kvviz's cache rule writes a FIFO in place, never replaces it
    err = capsys.readouterr().err
    assert err == (f"kvviz: the cached bandwidth file is not used: {fifo}: a FIFO (named pipe), not a bandwidth "
                   f"cache; measuring again\n")


def test_a_huge_bandwidth_cache_is_not_read_whole(tmp_path, monkeypatch, capsys):
    import tracemalloc

    huge = tmp_path / "bandwidth.json"
    with open(huge, "wb") as fh:
        fh.truncate(200 << 20)  # sparse: 200 MB that a whole read would hold
    _fake_probes(monkeypatch)
    tracemalloc.start()
    try:
        assert bandwidth.cached_read_ceiling(1, path=huge) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20
    assert "more than a bandwidth cache holds" in capsys.readouterr().err


@needs_mknod
def test_an_endless_device_as_the_bandwidth_cache_is_refused_at_once_in_bounded_memory(tmp_path):
    zero = tmp_path / "zero"
    os.mknod(zero, 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    done, seconds = _bounded(f"""
        from pathlib import Path
        from kvviz.measure import bandwidth
        print(bandwidth.cached_read_ceiling(1, path=Path({str(zero)!r})))
        print(bandwidth.cached_read_ceiling(1, path=Path({str(zero)!r})))
    """, seconds=30)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout == "None\nNone\n"
    assert done.stderr == (f"kvviz: the cached bandwidth file is not used: {zero}: a character device, not a "
                           f"bandwidth cache; measuring again\n")  # once, for two reads
    assert seconds < 30


def _memory_measured(path, capsys) -> tuple[int, str]:
    from kvviz.cli import main

    rc = main(["memory", "--model", "tiny", "--tokens", "64", "--measured", str(path)])
    return rc, capsys.readouterr().err


def test_memory_measured_from_a_fifo_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "bench.json"
    os.mkfifo(fifo)
    try:
        rc, err = _within(20, lambda: _memory_measured(fifo, capsys))
    finally:
        _release(fifo)
    assert rc == 2 and err == f"kvviz memory: error: {fifo}: a FIFO (named pipe), not a bench file\n"


def test_memory_measured_from_a_huge_file_is_refused_at_once(tmp_path, capsys):
    huge = tmp_path / "bench.json"
    with open(huge, "wb") as fh:
        fh.truncate(4 << 30)  # sparse
    rc, err = _within(20, lambda: _memory_measured(huge, capsys))
    assert rc == 2
    assert err == (f"kvviz memory: error: {huge}: 4,294,967,296 bytes, more than a bench file holds "
                   f"(268,435,456)\n")


@needs_mknod
def test_memory_measured_from_an_endless_device_is_one_line_in_bounded_memory(tmp_path):
    zero = tmp_path / "zero"
    os.mknod(zero, 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    done, seconds = _bounded(f"""
        import sys
        from kvviz.cli import main
        sys.exit(main(["memory", "--model", "tiny", "--tokens", "64", "--measured", {str(zero)!r}]))
    """, seconds=60, memory=2 << 30)
    assert done.returncode == 2, done.stderr[-500:]
    assert done.stderr == f"kvviz memory: error: {zero}: a character device, not a bench file\n"



# -- the native step's build and its cached library ------------------------------------------------
def _native_fresh(monkeypatch, cache) -> object:
    from kvviz import native

    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setattr(native, "_LIB", None)
    monkeypatch.setattr(native, "_WHY_NOT", {})
    return native


def test_a_compiler_that_hangs_is_stopped_with_its_children_and_refused_in_one_line(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    native = _native_fresh(monkeypatch, tmp_path / "cache")
    pid_file = tmp_path / "child.pid"
    cc = tmp_path / "hanging-cc"
    cc.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pid_file}\nwait\n")
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setattr(native, "BUILD_SECONDS", 1.0, raising=False)
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=r"^--kernel native: hanging-cc did not build step\.c within 1 s$"):
        _within(20, native.load)
    assert time.monotonic() - t0 < 10
    child = int(pid_file.read_text())
    for _ in range(100):  # SIGKILL is delivered at once; reaping by init may lag a little
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        if _is_zombie(child):
            break
        time.sleep(0.05)
    else:
        pytest.fail("the compiler's child is still running")
    assert os.listdir(tmp_path / "cache" / "kvviz" / "native") == []  # no half-written library left


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _has_cc() -> bool:
    from kvviz import native

    return native.compiler() is not None


needs_cc = pytest.mark.skipif(not _has_cc(), reason="no C compiler")


def _library_path(native):
    path = native.library_path(native.compiler())
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _check_rebuilt(native, path) -> None:
    lib = native._LIB
    assert lib is not None and lib.kv_vector_floats() in (4, 8, 16)
    assert stat.S_ISREG(os.lstat(path).st_mode) and os.listdir(path.parent) == [path.name]


@needs_cc
def test_a_fifo_as_the_cached_library_is_rebuilt_not_opened(tmp_path):
    pytest.importorskip("torch")
    # in a process of its own: the loader's open of a FIFO blocks with the interpreter's lock held
    done, seconds = _bounded(f"""
        import os, stat
        os.environ["XDG_CACHE_HOME"] = {str(tmp_path / "cache")!r}
        from kvviz import native
        path = native.library_path(native.compiler())
        path.parent.mkdir(parents=True)
        os.mkfifo(path)
        lib = native.load()
        print(lib.kv_vector_floats(), stat.S_ISREG(os.lstat(path).st_mode), os.listdir(path.parent) == [path.name])
    """, seconds=120, memory=1 << 40)
    assert done.returncode == 0, done.stderr[-1000:]
    assert done.stdout.split()[1:] == ["True", "True"] and int(done.stdout.split()[0]) in (4, 8, 16)


@needs_cc
def test_a_truncated_cached_library_is_rebuilt(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    native = _native_fresh(monkeypatch, tmp_path / "cache")
    path = _library_path(native)
    whole = tmp_path / "whole.so"
    subprocess.run([native.compiler(), *native.FLAGS, "-o", str(whole), str(native.SOURCE), "-lm"], check=True)
    path.write_bytes(whole.read_bytes()[: whole.stat().st_size // 3])  # a build cut short, never loaded here
    native.load()
    _check_rebuilt(native, path)
    assert path.stat().st_size > whole.stat().st_size // 3


@needs_cc
@pytest.mark.parametrize("how", ["copy", "link"])
def test_a_foreign_library_under_the_cached_name_is_rebuilt_and_left_untouched_elsewhere(tmp_path, monkeypatch, how):
    pytest.importorskip("torch")
    native = _native_fresh(monkeypatch, tmp_path / "cache")
    path = _library_path(native)
    foreign = tmp_path / "libforeign.so"
    source = tmp_path / "foreign.c"
    source.write_text("int kv_unrelated(void) { return 7; }\n")
    subprocess.run([native.compiler(), "-shared", "-fPIC", "-o", str(foreign), str(source)], check=True)
    before = foreign.read_bytes()
    if how == "copy":
        path.write_bytes(before)
    else:
        path.symlink_to(foreign)
    native.load()
    _check_rebuilt(native, path)
    assert foreign.read_bytes() == before  # the link's target is not replaced: only kvviz's own name


@needs_cc
def test_a_bad_cached_library_whose_rebuild_fails_is_one_line(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    native = _native_fresh(monkeypatch, tmp_path / "cache")
    broken = tmp_path / "step.c"
    broken.write_text("int kv_decode( {\n")
    monkeypatch.setattr(native, "SOURCE", broken)
    path = _library_path(native)  # the name hashes the source
    path.write_bytes(b"\x7fELF truncated")
    with pytest.raises(ValueError, match=r"^--kernel native: \S+ could not build step\.c: .*error") as err:
        native.load()
    assert "\n" not in str(err.value)
    assert native.build_error() == str(err.value)


def test_free_memory_counts_the_processs_own_limit():
    """A pool or model sized to free memory (kvviz.models.io.available_ram) fits under `ulimit -v`, not only under
    what the machine has free."""
    import resource
    import subprocess
    import sys

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    code = "from kvviz.models.io import available_ram; print(available_ram())"
    free = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    limited = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                 preexec_fn=limit).stdout)
    assert 0 < limited < 1 << 30 and (free > 1 << 30) == (limited < free)
