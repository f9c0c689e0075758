"""Ctrl+C during `kvviz export` and `kvviz shot`, as a terminal sends it (SIGINT to the whole process group)
and as `kill -INT PID` sends it (to the command alone): exit code 130, one line saying "interrupted", no
traceback, no partial file, no engine process or encoder left running. Also a closed pipe and a full disk
under stdout: one line or none, never a traceback.

Each command runs as a subprocess in its own session, is watched until it is working (its progress line,
its temporary .part file or its engine process's PyTorch), then signalled.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 120  # for a command to reach the point where it is signalled, and then to exit


def save_trace(path: Path, tokens: int, engines=("concat", "static")) -> Path:
    """A saved run of tiny-random (a `kvviz export --from` source), made in this process."""
    import torch

    from kvviz.config import SamplingConfig, TraceOptions
    from kvviz.engines import make_engine
    from kvviz.models.presets import load_model
    from kvviz.records import traceio
    from kvviz.records.trace import RunInfo

    model = load_model("tiny-random", torch.device("cpu"))
    prompt = list(b"KV cache")
    traces = {key: list(make_engine(key, model).generate(prompt, tokens, SamplingConfig(), TraceOptions(masks=True),
                                                         run_id="saved1", token_text=chr))
              for key in engines}
    cfg = model.cfg
    info = RunInfo(run_id="saved1", model_name="tiny-random", device="cpu", dtype="float32", prompt="KV cache",
                   prompt_ids=tuple(prompt), prompt_labels=tuple(map(chr, prompt)), engines=tuple(traces),
                   max_new_tokens=tokens, n_layer=cfg.n_layer, n_head=cfg.n_head, n_kv_head=cfg.n_kv_head,
                   head_dim=cfg.head_dim, param_count=cfg.param_count(),
                   kv_bytes_per_token=cfg.kv_bytes_per_token("float32"), block_size=16)
    traceio.save_run(path, info, traces)
    return path


def kvviz(*args: str, env_extra: dict | None = None, **kwargs) -> subprocess.Popen:
    """`python -m kvviz ARGS` offscreen, in a session (and so a process group) of its own."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT), **(env_extra or {}))
    kwargs.setdefault("stdout", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-m", "kvviz", *args], stderr=subprocess.PIPE, text=True, env=env,
                            cwd=ROOT, start_new_session=True, **kwargs)


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of a process from /proc, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[0], int(fields[1]), int(fields[19])


def descendants(pid: int) -> dict[int, int]:
    """Every process below `pid`, pid -> start time (psutil's children(recursive=True), from /proc)."""
    parents: dict[int, list[tuple[int, int]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                parents.setdefault(stat[1], []).append((int(entry.name), stat[2]))
    found, todo = {}, [pid]
    while todo:
        for child, started in parents.get(todo.pop(), []):
            found[child] = started
            todo.append(child)
    return found


def left_running(processes: dict[int, int]) -> list[str]:
    """Those of `processes` still there (running, or a zombie nobody reaped), as 'pid state'."""
    left = []
    for pid, started in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[2] == started:
            left.append(f"{pid} {stat[0]}")
    return left


class Watched:
    """A command's stderr read as it comes, so the test can wait for a line."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_until(self, ready, what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not ready():
            if self.proc.poll() is not None:
                self._reader.join(5)
                pytest.fail(f"the command ended (exit {self.proc.returncode}) before {what}: {self.lines[-5:]}")
            if time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"no {what} within {WAIT_S} s")
            time.sleep(0.02)

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def interrupt(self, whole_group: bool) -> tuple[int, float, dict[int, int]]:
        """SIGINT to the process group (a terminal's Ctrl+C) or the process alone; (exit code, seconds to
        exit, the processes it had started)."""
        below = descendants(self.proc.pid)
        started = time.monotonic()
        if whole_group:
            os.killpg(self.proc.pid, signal.SIGINT)
        else:
            os.kill(self.proc.pid, signal.SIGINT)
        try:
            code = self.proc.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            pytest.fail(f"still running {WAIT_S} s after SIGINT: {self.lines[-5:]}")
        took = time.monotonic() - started
        self._reader.join(5)
        return code, took, below


def assert_clean_interrupt(watched: Watched, code: int, below: dict[int, int], command: str,
                           children: bool = True) -> None:
    text = "\n".join(watched.lines)
    assert code == 130, text
    assert watched.lines[-1] == f"kvviz {command}: interrupted", text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text and "unexpectedly" not in text, text
    # the rest are the command's own progress lines, each one line
    assert all(line.startswith(f"kvviz {command}: ") for line in watched.lines), text
    if children:
        assert below, "the command had started no child process: it was signalled too early to test anything"
    deadline = time.monotonic() + 3  # a killed child is reaped by its parent before it exits; allow a moment
    while left_running(below) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left_running(below), f"left behind: {left_running(below)}"


def no_partial_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if ".part" in p.name or p.name.startswith("decode."))


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory, torch_cpu) -> Path:
    """120 steps of concat and static: an animation long enough to be interrupted while it renders."""
    return save_trace(tmp_path_factory.mktemp("saved") / "run.json", 120)


@pytest.mark.parametrize("whole_group", [True, False], ids=["group", "process"])
def test_export_interrupted_during_the_run(tmp_path, whole_group):
    out = tmp_path / "out"
    watched = Watched(kvviz("export", "--out", str(out), "--model", "tiny-random", "--engines", "naive,concat",
                            "--tokens", "1500", "--prompt", "x", "--threads", "1", "--png", "--json"))
    watched.wait_until(lambda: watched.said("run, step"), "run step")
    code, took, below = watched.interrupt(whole_group)
    assert_clean_interrupt(watched, code, below, "export")
    assert not watched.said("ran 1500 steps"), "the run went on to its end"
    assert not out.exists(), sorted(p.name for p in out.iterdir())  # nothing written: not even its folder
    assert took < 20, took


def _maps(pid: int, library: str) -> bool:
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("library", ["libshiboken6", "libQt6Widgets", "libpyside6"])
def test_export_interrupted_while_it_imports_qt(tmp_path, library):
    """SIGINT as Qt's libraries load: a KeyboardInterrupt inside PySide's import had aborted the interpreter
    ('libshiboken/signature: could not initialize'), or been swallowed there (the export ran to its end)."""
    out = tmp_path / "out"
    watched = Watched(kvviz("export", "--out", str(out), "--model", "tiny-random", "--tokens", "50", "--png",
                            "--threads", "1"))
    watched.wait_until(lambda: _maps(watched.proc.pid, library), f"{library} loaded")
    code, took, below = watched.interrupt(True)
    assert_clean_interrupt(watched, code, below, "export", children=False)
    assert not out.exists()


@pytest.mark.parametrize("fmt, whole_group", [("gif", True), ("mp4", True), ("mp4", False)])
def test_export_interrupted_while_the_animation_is_written(tmp_path, long_trace, fmt, whole_group):
    if fmt == "mp4":
        pytest.importorskip("imageio_ffmpeg")
    out = tmp_path / "out"
    watched = Watched(kvviz("export", "--from", str(long_trace), "--out", str(out), f"--{fmt}", "--size", "800x600"))
    # rendering frames into the .part file; an MP4's once ffmpeg has the first
    watched.wait_until(lambda: watched.said(f"{fmt} frame") and any(".part" in p.name for p in out.iterdir())
                       and (fmt == "gif" or descendants(watched.proc.pid)), f"{fmt} frames going to the .part file")
    code, took, below = watched.interrupt(whole_group)
    assert_clean_interrupt(watched, code, below, "export", children=fmt == "mp4")  # ffmpeg encodes an MP4
    assert not watched.said(f"{fmt} frame 120/120")
    assert not out.exists() or no_partial_files(out) == [], no_partial_files(out)
    assert took < 20, took


@pytest.mark.parametrize("whole_group", [True, False], ids=["group", "process"])
def test_shot_interrupted_during_the_run(tmp_path, whole_group):
    out = tmp_path / "shot.png"
    scratch = tmp_path / "tmp"  # the shot's temporary settings, written once the form is filled and Run pressed
    scratch.mkdir()
    watched = Watched(kvviz("shot", "--out", str(out), "--model", "tiny-random", "--engines", "naive,concat",
                            "--tokens", "1900", "--prompt", "x", "--threads", "1",
                            env_extra={"TMPDIR": str(scratch)}))
    watched.wait_until(lambda: any(scratch.glob("kvviz-shot-*/settings.ini")), "run started (settings saved)")
    code, took, below = watched.interrupt(whole_group)
    assert_clean_interrupt(watched, code, below, "shot")
    assert watched.lines == ["kvviz shot: interrupted"]
    assert [p.name for p in tmp_path.iterdir()] == ["tmp"] and list(scratch.iterdir()) == []
    assert took < 20, took


def test_a_closed_pipe_under_stdout_ends_quietly():
    """`kvviz memory | head -0`: the reader is gone before the first line; exit 141 as SIGPIPE would, no words."""
    proc = kvviz("memory", "--model", "tiny-random")
    proc.stdout.close()
    code = proc.wait(WAIT_S)
    stderr = proc.stderr.read()
    assert (code, stderr) == (141, "")


@pytest.fixture
def full_device(tmp_path) -> Path:
    """A node of the full device (char 1, 7), made in a temporary folder, never the real /dev."""
    path = tmp_path / "full"
    try:
        os.mknod(path, 0o666 | 0o020000, os.makedev(1, 7))
    except OSError:
        pytest.skip("making a device node needs root (CAP_MKNOD)")
    return path


@pytest.mark.parametrize("args", [["memory", "--model", "tiny-random"], ["models"]])
def test_stdout_on_a_full_disk_is_one_line(full_device, args):
    with open(full_device, "w") as sink:
        proc = kvviz(*args, stdout=sink)
        code = proc.wait(WAIT_S)
    stderr = proc.stderr.read()
    assert code == 2, stderr
    assert stderr.strip().splitlines() == ["kvviz: cannot write the output: the disk is full"], stderr
    assert full_device.is_char_device()


def test_the_serve_views_engine_process_leaves_an_interrupt_to_its_parent():
    """The Serve view's child (kvviz.serving.session.ServeProcess) ignores SIGINT, as the compare window's does:
    a terminal's Ctrl+C reaches the whole process group, and the child must not die under the parent."""
    import time

    from kvviz.serving.session import ServeProcess

    proc = ServeProcess()
    try:
        proc._launch()
        child = proc._proc
        time.sleep(3)  # past the interpreter's start and the first import
        os.kill(child.pid, signal.SIGINT)
        time.sleep(1)
        assert child.poll() is None  # still alive: the interrupt was left to the parent
    finally:
        proc.close()
    assert child.poll() is not None
