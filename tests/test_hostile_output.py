"""The output rule (kvviz.fileio): an existing device node, FIFO or descriptor is written in place or refused
in one line, never replaced; a regular file is replaced whole; a legal name of 249 characters works. The
device nodes are made in a temporary folder (mknod: null is 1,3 and full is 1,7), never the real /dev."""
from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from kvviz import fileio
from kvviz.fileio import atomic_write, atomic_write_text, check_writable, write_output

needs_mknod = pytest.mark.skipif(not hasattr(os, "mknod") or os.geteuid() != 0,
                                 reason="making a character device needs root")


def _device(folder, name: str, minor: int):
    path = folder / name
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    return path


def _is_char(path) -> bool:
    return stat.S_ISCHR(os.lstat(path).st_mode)


def _read_fifo(path, got: list) -> threading.Thread:
    """A reader on the FIFO `path`, open before this returns, that keeps in `got` what one writer wrote."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a reader at once, with no writer yet

    def read() -> None:
        data, deadline = b"", time.monotonic() + 20
        try:
            while time.monotonic() < deadline:
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:  # a writer, nothing written yet
                    chunk = None
                if chunk:
                    data += chunk
                elif chunk == b"" and data:  # the writer closed it
                    break
                else:
                    time.sleep(0.005)
        finally:
            os.close(fd)
            got.append(data)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


@needs_mknod
def test_a_null_device_is_written_in_place_and_stays_a_device(tmp_path):
    null = _device(tmp_path, "null", 3)
    atomic_write_text(null, "hello\n")
    write_output(null, "hello\n", "--json")
    atomic_write(null, lambda tmp: tmp.write_bytes(b"a picture's bytes"))  # a writer that needs a path (Qt's save)
    assert _is_char(null) and os.major(os.lstat(null).st_rdev) == 1 and os.minor(os.lstat(null).st_rdev) == 3
    assert sorted(os.listdir(tmp_path)) == ["null"]


@needs_mknod
def test_a_full_device_says_the_disk_is_full_in_one_line_and_stays(tmp_path):
    full = _device(tmp_path, "full", 7)
    with pytest.raises(ValueError, match=r"^cannot write --json .*full: the disk is full$"):
        write_output(full, "x" * 10_000, "--json")
    with pytest.raises(OSError):
        atomic_write(full, lambda tmp: tmp.write_bytes(b"x"))
    assert _is_char(full) and sorted(os.listdir(tmp_path)) == ["full"]


@needs_mknod
def test_a_link_to_a_device_keeps_the_link_and_the_device(tmp_path):
    null = _device(tmp_path, "null", 3)
    link = tmp_path / "settings.json"
    link.symlink_to(null)
    atomic_write_text(link, "{}\n")
    assert link.is_symlink() and _is_char(null) and sorted(os.listdir(tmp_path)) == ["null", "settings.json"]


@needs_mknod
def test_check_writable_makes_no_probe_beside_a_device(tmp_path, monkeypatch):
    null = _device(tmp_path, "null", 3)

    def no_probe(*args, **kwargs):
        raise AssertionError("a probe file was made beside a device node")

    monkeypatch.setattr(fileio.tempfile, "mkstemp", no_probe)
    assert check_writable(null, "--json") == null
    assert sorted(os.listdir(tmp_path)) == ["null"]


def test_a_fifo_with_a_reader_gets_the_bytes_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list = []
    reader = _read_fifo(fifo, got)
    atomic_write(fifo, lambda tmp: tmp.write_text('{"a": 1}\n'))
    reader.join(10)
    assert b"".join(got).endswith(b'{"a": 1}\n')
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and sorted(os.listdir(tmp_path)) == ["pipe"]


def test_a_fifo_with_nothing_reading_it_is_refused_in_one_line_at_once(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"^cannot write --json .*pipe: a FIFO with nothing reading it$"):
        write_output(fifo, "{}\n", "--json")
    with pytest.raises(ValueError, match="a FIFO with nothing reading it"):
        atomic_write(fifo, lambda tmp: tmp.write_text("{}"))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and sorted(os.listdir(tmp_path)) == ["pipe"]


def test_a_socket_is_refused_in_one_line_and_kept(tmp_path):
    path = tmp_path / "s"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(path))
        for call in (lambda: write_output(path, "{}", "--json"), lambda: check_writable(path, "--json"),
                     lambda: atomic_write_text(path, "{}")):
            with pytest.raises(ValueError, match=r"cannot write .*s: it is a socket; kvviz writes a file"):
                call()
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        sock.close()


def test_a_descriptor_under_proc_is_written_in_place_not_renamed(tmp_path):
    out = tmp_path / "out.txt"
    with open(out, "wb") as held:  # as a shell holds `> out.txt` for the command's /dev/stdout
        held.write(b"before\n")
        held.flush()
        inode = os.fstat(held.fileno()).st_ino
        atomic_write_text(f"/proc/self/fd/{held.fileno()}", "the json\n")
        assert os.fstat(held.fileno()).st_nlink == 1  # still the file's one name: not replaced
    assert out.stat().st_ino == inode and out.read_text() == "before\nthe json\n"
    assert sorted(os.listdir(tmp_path)) == ["out.txt"]


def test_a_regular_file_through_a_link_is_replaced_and_the_link_kept(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_output(link, "new", "--json")
    assert link.is_symlink() and real.read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["link.json", "real.json"]


@pytest.mark.parametrize("length", [249, 255])
def test_a_name_of_the_longest_legal_length_is_written(tmp_path, length):
    path = tmp_path / ("n" * (length - 5) + ".json")
    assert len(path.name) == length
    check_writable(path, "--json")
    write_output(path, "{}\n", "--json")
    atomic_write(path, lambda tmp: tmp.write_text("{}\n"))
    assert path.read_text() == "{}\n" and sorted(os.listdir(tmp_path)) == [path.name]


def test_the_temporary_prefix_is_short_only_where_the_name_needs_it(tmp_path):
    assert fileio.temp_prefix(tmp_path, "a.json", ".part") == ".a.json."
    assert fileio.temp_prefix(tmp_path, "n" * 249, ".part") == ".kvviz."


def _memory(argv, capsys):
    from kvviz.cli import main

    rc = main(["memory", "--model", "tiny", "--tokens", "64", *argv])
    return rc, capsys.readouterr()


@needs_mknod
def test_kvviz_memory_json_into_a_null_device_keeps_it_a_device(tmp_path, capsys):
    null = _device(tmp_path, "null", 3)
    rc, out = _memory(["--json", str(null)], capsys)
    assert rc == 0 and _is_char(null) and sorted(os.listdir(tmp_path)) == ["null"]


@needs_mknod
def test_kvviz_memory_json_into_a_full_device_is_one_line(tmp_path, capsys):
    full = _device(tmp_path, "full", 7)
    rc, out = _memory(["--json", str(full)], capsys)
    assert rc == 2 and _is_char(full)
    assert out.err == f"kvviz memory: error: cannot write --json {full}: the disk is full\n"


def test_kvviz_memory_json_into_a_fifo_with_a_reader(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list = []
    reader = _read_fifo(fifo, got)
    rc, out = _memory(["--json", str(fifo)], capsys)
    reader.join(10)
    assert rc == 0 and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(b"".join(got))["model"]


# -- the HTML page's inline data ---------------------------------------------------------------------
HOSTILE = "pasted: <!--<script>alert(1)</script> <!--<script"  # no "-->" after: nothing ends the comment


def _data_script(page: str) -> str:
    head = '<script id="kvviz-data" type="application/json">'
    start = page.index(head) + len(head)
    return page[start:page.index("</script>", start)]


def test_inline_json_has_no_angle_bracket_in_any_field_and_reads_back():
    from kvviz.page import _script_json

    doc = {HOSTILE: [HOSTILE, {"k": HOSTILE}], "n": 1, "zh": "第 3 步 <!--"}
    text = _script_json(doc)
    assert "<" not in text and json.loads(text) == doc


@pytest.fixture(scope="module")
def hostile_page(tmp_path_factory):
    pytest.importorskip("torch")
    import kvviz
    from kvviz.page import write_page

    run = kvviz.compare(HOSTILE, engines=("static",), tokens=4, model="tiny", threads=1)
    path = write_page(tmp_path_factory.mktemp("page") / "run.html", run.info, run.traces)
    return path, run


def test_a_prompt_holding_markup_stays_inside_the_pages_data(hostile_page):
    path, run = hostile_page
    data = _data_script(path.read_text(encoding="utf-8"))
    assert "<" not in data
    doc = json.loads(data)
    assert doc["info"]["prompt"] == HOSTILE
    assert any("<" in t for t in doc["prompt"]["shown"])  # the tokens' text carries the markup too


def test_a_prompt_holding_markup_renders_in_chromium(hostile_page):
    import html_page_cdp

    if html_page_cdp.missing():
        pytest.skip(html_page_cdp.missing())
    path, run = hostile_page
    browser = html_page_cdp.Browser(1200, 800)
    try:
        browser.open(path)
        assert browser.eval("JSON.parse(document.getElementById('kvviz-data').textContent).info.prompt") == HOSTILE
        assert browser.eval("document.querySelectorAll('script').length") == 2  # no element made from the text
        assert int(browser.eval("document.body.dataset.frames")) >= 1
        browser.pump()
        assert not browser.problems, browser.problems
    finally:
        browser.close()


# -- out of memory under the process's own limit -----------------------------------------------------
def test_torchs_allocation_failure_under_ulimit_v_is_one_line_out_of_memory():
    """A command whose tensor passes the process's RLIMIT_AS (as `ulimit -v` sets it) ends in one line, exit 1,
    naming the limit, where torch's CPU allocator says "can't allocate memory", never "out of memory"."""
    pytest.importorskip("torch")
    code = """
        import resource, sys
        import torch
        import kvviz.commands.memory as command
        from kvviz.cli import main

        with open("/proc/self/statm") as fh:
            mapped = int(fh.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (mapped + (512 << 20), resource.RLIM_INFINITY))
        command.run = lambda args: torch.empty(2 << 30, dtype=torch.uint8).fill_(1)  # more than the room left
        sys.exit(main(["memory", "--model", "tiny"]))
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert done.stderr.startswith("kvviz memory: error: out of memory (this process is limited to ")
    assert "GiB by ulimit -v); try fewer new tokens" in done.stderr


def test_the_room_left_under_the_process_limit_is_known():
    code = """
        import resource
        from kvviz.errors import process_memory_limit, process_memory_room

        with open("/proc/self/statm") as fh:
            mapped = int(fh.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (mapped + (512 << 20), resource.RLIM_INFINITY))
        room = process_memory_room()
        assert process_memory_limit() == mapped + (512 << 20) and (256 << 20) < room <= 512 << 20, room
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_kind_of_allocation_failure_is_out_of_memory():
    from kvviz.errors import friendly_error, is_out_of_memory

    cpu = RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
                       "you tried to allocate 2147483648 bytes. Error code 12 (Cannot allocate memory)")
    assert is_out_of_memory(cpu) and is_out_of_memory(MemoryError())
    assert friendly_error(cpu).startswith("out of memory") and friendly_error(MemoryError()).startswith("out of memory")
    assert not is_out_of_memory(RuntimeError("shape mismatch")) and not is_out_of_memory(ValueError("out of memory"))
