"""Exports from a real run (tiny-random, all four engines, CPU): PNG at a scale, SVG, clipboard, GIF and
MP4 with one frame per step, CSV, JSON round-tripped through File > Open trace into a window that has
no model at all; the headless `kvviz export`; and the bad inputs (unwritable path, full disk, cancelled
animation, truncated or foreign trace file): a message, the app carries on, no partial file left.
"""
from __future__ import annotations

import csv
import errno
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from kvviz.records import traceio
from kvviz.records.trace import RunInfo
from kvviz.ui.history import RunHistory

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ("naive", "concat", "static", "paged")
PROMPT = "KV cache demo"  # 13 byte tokens
NEW_TOKENS = 8
BLOCK_SIZE = 4
SIZE = (1100, 760)


def ffmpeg_works() -> bool:
    try:
        from kvviz.ui.exporters import ffmpeg_exe

        exe = ffmpeg_exe()
        return subprocess.run([exe, "-version"], capture_output=True, timeout=30).returncode == 0
    except Exception:
        return False


# -- fixtures -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def history(tiny_random, byte_tokenizer) -> RunHistory:
    """A real compare run, recorded in lockstep as the window records it."""
    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine

    tok = byte_tokenizer
    ids = tok.encode(PROMPT)
    cfg = tiny_random.cfg
    info = RunInfo(run_id="r1", model_name=cfg.name, device="cpu", dtype="float32", prompt=PROMPT,
                   prompt_ids=tuple(ids), prompt_labels=tuple(tok.token_text(i) for i in ids), engines=ENGINES,
                   max_new_tokens=NEW_TOKENS, n_layer=cfg.n_layer, n_head=cfg.n_head, n_kv_head=cfg.n_kv_head,
                   head_dim=cfg.head_dim, kv_bytes_per_token=cfg.kv_bytes_per_token(), block_size=BLOCK_SIZE)
    hist = RunHistory()
    hist.reset(info)
    runs = {k: make_engine(k, tiny_random, block_size=BLOCK_SIZE).generate(
        ids, NEW_TOKENS, trace=TraceOptions(weights_layer=0), run_id="r1", token_text=tok.token_text)
        for k in ENGINES}
    for _ in range(NEW_TOKENS):
        for k in ENGINES:
            hist.add(next(runs[k]))
    return hist


@pytest.fixture(scope="module")
def run_json(history, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "run.json"
    traceio.save_run(path, history.info, history.traces)
    return path


def _fake_worker():
    from PySide6.QtCore import QObject, Signal, Slot

    class FakeWorker(QObject):
        """The worker's interface and nothing behind it: this window has no model and never gets one."""

        environment_listed = Signal(object)
        model_loaded = Signal(object)
        run_started = Signal(object)
        run_noted = Signal(str, str)
        step_traced = Signal(object)
        run_failed = Signal(str, str)
        run_finished = Signal(str)

        @Slot()
        def list_environment(self) -> None: ...

        @Slot(object)
        def start_run(self, request) -> None: ...

        @Slot()
        def request_stop(self) -> None: ...

        @Slot(bool)
        def set_paused(self, paused: bool) -> None: ...

        @Slot()
        def request_step(self) -> None: ...

        @Slot(float)
        def set_speed(self, steps_per_s: float) -> None: ...

        @Slot()
        def shut_down(self) -> None: ...

    return FakeWorker()


def make_window(tmp_path: Path):
    from PySide6.QtCore import QSettings

    from kvviz.ui import app
    from kvviz.ui.export_actions import install_export_actions
    from kvviz.ui.window import MainWindow

    app.ensure_app()
    worker = _fake_worker()
    window = MainWindow(worker, QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    window.fake_worker = worker  # for tests that speak as the worker
    window.resize(*SIZE)
    window.show()
    actions = install_export_actions(window)
    return window, actions


@pytest.fixture(scope="module")
def replayed(qapp, run_json, tmp_path_factory):
    """A window with no model that opened the saved run: every export below starts from it."""
    from kvviz.ui.export_actions import settle

    window, actions = make_window(tmp_path_factory.mktemp("settings"))
    assert actions.open_trace(str(run_json)), window.error_text()
    settle()
    window.replay_message = window.statusBar().currentMessage()
    yield window, actions
    window.close()


@pytest.fixture
def window(replayed):
    w, actions = replayed
    w.clear_error()
    return w


@pytest.fixture
def actions(replayed):
    return replayed[1]


def distinct_colours(path_or_image) -> int:
    from PySide6.QtGui import QImage

    image = QImage(str(path_or_image)) if not isinstance(path_or_image, QImage) else path_or_image
    assert not image.isNull()
    image = image.convertToFormat(QImage.Format.Format_RGB32)
    arr = np.frombuffer(image.constBits(), dtype=np.uint32, count=image.sizeInBytes() // 4)
    return len(np.unique(arr))


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# -- Open trace: the JSON round trip into a window ---------------------------------------------------
def test_open_trace_replays_every_step_in_the_panels(window, history, qtbot):
    from kvviz.ui.export_actions import WINDOW, draw_step
    from kvviz.ui.panels.work_matrix import COMPUTED, RECOMPUTED

    assert window.history.engines == ENGINES
    assert window.history.n_steps() == NEW_TOKENS
    for k in ENGINES:
        assert window.history.token_ids(k) == history.token_ids(k)
    qtbot.waitUntil(lambda: window.transport.timeline.maximum() == NEW_TOKENS - 1)
    assert window.replay_message.startswith(f"Replaying run.json: {NEW_TOKENS} steps of naive, concat")
    step = 5
    draw_step(window, step, [WINDOW])
    n = len(PROMPT) + step  # positions whose K/V exist at decode step 5
    matrix = window.grid.panels["work_matrix"]
    for engine in ENGINES:
        kinds = matrix.cell_kinds(engine)
        assert kinds.shape == (n, n)
        assert (kinds == COMPUTED).sum() == 1
    assert (matrix.cell_kinds("naive") == RECOMPUTED).sum() == n * (n + 1) // 2 - 1
    attention = window.grid.panels["attention"]
    attention.set_engine("static")
    draw_step(window, step, [WINDOW])
    expected = history.at("static", step).attn_weights
    assert np.allclose(attention.weights()[-1, : expected.shape[-1]], expected[-1], atol=1e-6)


def test_json_export_round_trips(window, history, tmp_path):
    from kvviz.ui.export_actions import export_data

    path = export_data(window, "json", tmp_path / "again.json")
    saved = traceio.load_run(path)
    assert tuple(saved.traces) == ENGINES
    for k in ENGINES:
        for a, b in zip(saved.traces[k], history.traces[k]):
            assert (a.token_id, a.bytes_copied, a.mask_spec, a.block_table) == \
                   (b.token_id, b.bytes_copied, b.mask_spec, b.block_table)
            assert (a.attn_weights is None) == (b.attn_weights is None)
            if a.attn_weights is not None:
                assert np.array_equal(a.attn_weights, b.attn_weights)


# -- images ----------------------------------------------------------------------------------------------
def test_window_png_at_2x_has_twice_the_pixels_and_content(window, tmp_path):
    from PySide6.QtGui import QImage

    from kvviz.ui.export_actions import WINDOW, export_image

    path = export_image(window, WINDOW, "png", tmp_path / "w.png", scale=2.0)
    image = QImage(str(path))
    assert (image.width(), image.height()) == (2 * window.width(), 2 * window.height())
    assert distinct_colours(image) > 200
    assert oct(path.stat().st_mode & 0o777) != "0o600"  # not the temporary file's private mode


@pytest.mark.parametrize("key", ["work_matrix", "latency", "summary"])
def test_panel_png_at_scale(window, tmp_path, key):
    from PySide6.QtGui import QImage

    from kvviz.ui.export_actions import export_image

    frame = window.grid.frames[key]
    path = export_image(window, key, "png", tmp_path / f"{key}.png", scale=1.5)
    image = QImage(str(path))
    assert (image.width(), image.height()) == (round(frame.width() * 1.5), round(frame.height() * 1.5))
    assert distinct_colours(image) > 20


@pytest.mark.parametrize("key", ["window", "latency", "work_matrix", "token_stream"])
def test_svg_parses_and_holds_the_plots(window, tmp_path, key):
    from kvviz.ui.export_actions import export_image

    path = export_image(window, key, "svg", tmp_path / f"{key}.svg")
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    text = path.read_text(encoding="utf-8")
    nested = root.findall("{http://www.w3.org/2000/svg}svg")  # pyqtgraph's own export of each plot view
    if key == "token_stream":
        assert "<text" in text or "<image" in text
    else:
        assert nested and all(n.get("viewBox") for n in nested)
    if key == "latency":
        assert "Latency" in text  # the frame's title, as vector text


def test_clipboard_gets_the_panel(window):
    from PySide6.QtWidgets import QApplication

    from kvviz.ui.export_actions import export_image

    image = export_image(window, "bytes", "clipboard", scale=1.0)
    got = QApplication.clipboard().image()
    assert not got.isNull() and (got.width(), got.height()) == (image.width(), image.height())


# -- animations ------------------------------------------------------------------------------------------
def test_gif_has_one_frame_per_step(window, tmp_path):
    from PIL import Image

    from kvviz.ui.export_actions import export_animation

    before = window.selected_step
    n = export_animation(window, ["work_matrix", "bytes"], tmp_path / "decode.gif", fps=5)
    assert n == NEW_TOKENS
    with Image.open(tmp_path / "decode.gif") as gif:
        assert gif.n_frames == NEW_TOKENS
        assert gif.info["duration"] == 200
        first = np.asarray(gif.convert("RGB"))
        gif.seek(NEW_TOKENS - 1)
        last = np.asarray(gif.convert("RGB"))
    assert first.shape == last.shape and not np.array_equal(first, last)
    assert window.selected_step == before
    assert leftovers(tmp_path) == ["decode.gif"]


def test_gif_of_a_step_range_of_the_whole_window(window, tmp_path):
    from PIL import Image

    from kvviz.ui.export_actions import WINDOW, export_animation

    assert export_animation(window, [WINDOW], tmp_path / "part.gif", fps=2, first=2, last=5, scale=0.5) == 4
    with Image.open(tmp_path / "part.gif") as gif:
        assert gif.n_frames == 4
        assert gif.size == (round(window.width() * 0.5), round(window.height() * 0.5))


@pytest.mark.skipif(not ffmpeg_works(), reason="imageio-ffmpeg's ffmpeg is not usable here")
def test_mp4_is_written_and_readable(window, tmp_path):
    import imageio_ffmpeg

    from kvviz.ui.export_actions import export_animation

    path = tmp_path / "decode.mp4"
    assert export_animation(window, ["latency"], path, fps=4) == NEW_TOKENS
    frames, seconds = imageio_ffmpeg.count_frames_and_secs(str(path))
    assert frames == NEW_TOKENS and seconds == pytest.approx(NEW_TOKENS / 4, abs=0.3)
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    assert meta["size"][0] % 2 == 0 and meta["size"][1] % 2 == 0
    reader.close()


# -- data ------------------------------------------------------------------------------------------------
def test_steps_csv_has_one_row_per_engine_and_step(window, tmp_path):
    from kvviz.ui.export_actions import export_data

    path = export_data(window, "steps_csv", tmp_path / "steps.csv")
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(ENGINES) * NEW_TOKENS
    assert {(r["engine"], int(r["step"])) for r in rows} == {(e, s) for e in ENGINES for s in range(NEW_TOKENS)}


def test_summary_csv_and_markdown(window, tmp_path):
    from kvviz.ui.export_actions import export_data

    with open(export_data(window, "summary_csv", tmp_path / "s.csv"), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["engine"] for r in rows] == list(ENGINES)
    assert all(int(r["new_tokens"]) == NEW_TOKENS for r in rows)
    md = export_data(window, "summary_md", tmp_path / "s.md").read_text(encoding="utf-8")
    assert sum(line.startswith(f"| {e} ") for e in ENGINES for line in md.splitlines()) == len(ENGINES)


# -- bad input, nothing lost ------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["missing_folder", "under_a_file", "a_folder"])
def test_unwritable_path_is_a_message_and_the_app_carries_on(window, actions, tmp_path, where):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "adir").mkdir()
    target = {"missing_folder": tmp_path / "nope" / "x.png", "under_a_file": tmp_path / "file.txt" / "x.png",
              "a_folder": tmp_path / "adir"}[where]
    assert actions.export_image("work_matrix", "png", str(target), 1.0) is None
    assert "Image export failed" in window.error_text() and str(target.parent.name) in window.error_text()
    assert actions.save("steps_csv", str(target)) is None
    assert "Data export failed" in window.error_text()
    assert window.isVisible()
    assert leftovers(tmp_path) == ["adir", "file.txt"] and leftovers(tmp_path / "adir") == []
    assert actions.export_image("work_matrix", "png", str(tmp_path / "ok.png"), 1.0) is not None  # still works


def test_full_disk_leaves_no_partial_file(window, actions, tmp_path, monkeypatch):
    from kvviz.ui import exporters

    def half_then_full(tmp: Path, data: bytes) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(exporters, "_write_all", half_then_full)
    assert actions.export_image("latency", "png", str(tmp_path / "x.png"), 2.0) is None
    assert "disk is full" in window.error_text()
    assert leftovers(tmp_path) == []


def test_full_disk_during_a_gif_leaves_no_partial_file(window, actions, tmp_path, monkeypatch):
    from kvviz.ui import export_actions

    real = export_actions.exporters.image_array
    calls = []

    def fails_on_third(image):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(image)

    monkeypatch.setattr(export_actions.exporters, "image_array", fails_on_third)
    assert actions.export_animation(["recompute"], str(tmp_path / "a.gif"), "gif", 4) == 0
    assert "disk is full" in window.error_text()
    assert leftovers(tmp_path) == []


def test_cancelled_animation_leaves_nothing(window, tmp_path):
    from kvviz.ui.export_actions import Cancelled, export_animation

    with pytest.raises(Cancelled):
        export_animation(window, ["bytes"], tmp_path / "c.gif", fps=4, progress=lambda done, n: done < 3)
    assert leftovers(tmp_path) == []


def test_bad_animation_settings_are_refused_before_any_file(window, tmp_path):
    from kvviz.ui.export_actions import export_animation

    for kwargs, words in ((dict(first=5, last=2), "from"), (dict(fps=0), "frames per second"),
                          (dict(fmt="avi"), "GIF or MP4"), (dict(scale=50), "scale")):
        with pytest.raises(ValueError, match=words):
            export_animation(window, ["bytes"], tmp_path / "x.gif", **{"fps": 4, **kwargs})
    with pytest.raises(ValueError, match="unknown panel"):
        export_animation(window, ["nope"], tmp_path / "x.gif")
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("damage, words", [
    ("truncated", "truncated"),
    ("version", "newer"),
    ("schema", "not a kvviz trace"),
    ("empty", "empty"),
])
def test_a_bad_trace_file_is_refused_and_the_shown_run_stays(window, actions, run_json, tmp_path, damage, words):
    text = run_json.read_text(encoding="utf-8")
    bad = tmp_path / "bad.json"
    if damage == "truncated":
        bad.write_text(text[: len(text) * 2 // 3], encoding="utf-8")
    elif damage == "empty":
        bad.write_text("", encoding="utf-8")
    else:
        doc = json.loads(text)
        doc.update(version=2) if damage == "version" else doc.update(schema="something-else")
        bad.write_text(json.dumps(doc), encoding="utf-8")
    assert not actions.open_trace(str(bad))
    assert "Could not open the trace" in window.error_text() and words in window.error_text()
    assert window.history.n_steps() == NEW_TOKENS and window.history.engines == ENGINES
    assert window.isVisible()


def test_nothing_to_export_before_a_run(qapp, tmp_path):
    from kvviz.ui.export_actions import export_animation, export_data

    empty, actions = make_window(tmp_path)
    try:
        with pytest.raises(ValueError, match="nothing to export"):
            export_data(empty, "json", tmp_path / "x.json")
        with pytest.raises(ValueError, match="nothing to export"):
            export_animation(empty, ["window"], tmp_path / "x.gif")
        actions.dialog("json")  # the menu entry says so instead of opening a file dialog
        assert "nothing to export" in empty.error_text()
        actions.actions["page"].trigger()
        assert empty.error_text().startswith("Page export failed: nothing to export")
        assert not (tmp_path / "x.json").exists() and not (tmp_path / "x.gif").exists()
    finally:
        empty.close()


def test_the_data_and_page_entries_are_the_shells_kinds(window, actions, tmp_path, monkeypatch):
    """File > Export's trace data and page go through the shell's one path: the save dialog with each kind's
    title, name and filter, the file written, the status bar's "Saved", the folder kept for the open dialog."""
    from PySide6.QtWidgets import QFileDialog

    from kvviz.ui.shell.exports import FOLDER_KEY, ShellExports

    assert isinstance(actions, ShellExports)
    assert list(actions.actions) == ["json", "steps_csv", "summary_csv", "summary_md", "page"]
    asked = []

    def save_name(parent, title, start, file_filter):
        asked.append((title, Path(start).name, file_filter))
        return str(tmp_path / Path(start).name), file_filter

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(save_name))
    for act in actions.actions.values():
        act.trigger()
    data = ("Export data", "kvviz-trace.json", "kvviz traces (*.json)")
    assert asked == [data, ("Export data", "kvviz-steps.csv", "CSV files (*.csv)"),
                     ("Export data", "kvviz-summary.csv", "CSV files (*.csv)"),
                     ("Export data", "kvviz-summary.md", "Markdown files (*.md)"),
                     ("Export interactive page", "kvviz-run.html", "HTML pages (*.html)")]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(name for _, name, _ in asked)
    assert traceio.load_run(tmp_path / "kvviz-trace.json").info.engines == ENGINES
    page = tmp_path / "kvviz-run.html"
    assert window.statusBar().currentMessage() == f"Saved {page} ({page.stat().st_size:,} bytes)"
    assert window.settings.value(FOLDER_KEY) == str(tmp_path)
    opened = []
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        staticmethod(lambda parent, title, start, _filter: opened.append((title, start)) or ("", "")))
    actions.act_open_trace.trigger()
    assert opened == [("Open trace", str(tmp_path))]


def test_menus_toolbar_and_shortcuts_are_installed(window, actions):
    from PySide6.QtGui import QKeySequence

    titles = [a.text() for a in window.export_menu.actions() if a.text()]
    assert len(titles) >= 7 and window.export_menu.menuAction().isEnabled()
    assert actions.act_open_trace in window.file_menu.actions()
    assert actions.act_image.shortcut() == QKeySequence("Ctrl+E")
    assert window.toolbar.findChild(type(actions.button), "export_button") is actions.button


def test_image_dialog_flow_writes_the_chosen_file(window, actions, tmp_path, monkeypatch):
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QDialog, QFileDialog

    from kvviz.ui.export_actions import ImageExportDialog

    def accept(self):
        self.target_combo.setCurrentIndex(self.target_combo.findData("recompute"))
        self.scale_spin.setValue(2.0)
        return QDialog.DialogCode.Accepted

    monkeypatch.setattr(ImageExportDialog, "exec", accept)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(tmp_path / "r.png"), "")))
    actions.act_image.trigger()
    frame = window.grid.frames["recompute"]
    image = QImage(str(tmp_path / "r.png"))
    assert (image.width(), image.height()) == (2 * frame.width(), 2 * frame.height())
    assert "Saved" in window.statusBar().currentMessage()


# -- the headless command ---------------------------------------------------------------------------------
def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kvviz", "export", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=timeout)


def test_kvviz_export_writes_every_asked_file_in_chinese(tmp_path):
    from PIL import Image
    from PySide6.QtGui import QImage

    out = tmp_path / "slides"
    formats = ["--png", "--svg", "--gif", "--csv", "--json", "--md"] + (["--mp4"] if ffmpeg_works() else [])
    tokens = 6
    proc = run_cli("--out", str(out), "--model", "tiny-random", "--prompt", PROMPT, "--tokens", str(tokens),
                   "--engines", "naive,concat", "--panels", "window,work_matrix", "--size", "1100x700",
                   "--threads", "1", "--fps", "3", "--lang", "zh_CN", *formats)
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = {"window.png", "window.svg", "work_matrix.png", "work_matrix.svg", "decode.gif", "steps.csv",
             "summary.csv", "summary.md", "trace.json"} | ({"decode.mp4"} if "--mp4" in formats else set())
    assert set(leftovers(out)) == names
    assert "gif frame" in proc.stderr and "wrote" in proc.stderr
    shot = QImage(str(out / "window.png"))
    assert (shot.width(), shot.height()) == (1100, 700) and distinct_colours(shot) > 100
    with Image.open(out / "decode.gif") as gif:
        assert gif.n_frames == tokens
    with open(out / "steps.csv", newline="", encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == 2 * tokens
    saved = traceio.load_run(out / "trace.json")
    assert tuple(saved.traces) == ("naive", "concat") and all(len(v) == tokens for v in saved.traces.values())
    ET.parse(out / "work_matrix.svg")
    assert "工作矩阵" in (out / "work_matrix.svg").read_text(encoding="utf-8")  # --lang zh_CN: the panel's title
    assert "文件" in (out / "window.svg").read_text(encoding="utf-8")  # the File menu


@pytest.mark.parametrize("args, words", [
    (["--model", "tiny-random"], "choose at least one file"),
    (["--png", "--panels", "window,nonsense"], "unknown panel 'nonsense'"),
    (["--png", "--lang", "fr"], "unknown language"),
    (["--gif", "--steps", "5:2"], "--steps"),
    (["--gif", "--fps", "0"], "--fps"),
    (["--png", "--size", "big"], "--size"),
])
def test_kvviz_export_bad_arguments_are_one_line_and_exit_2(tmp_path, capsys, args, words):
    from kvviz.cli import main

    assert main(["export", "--out", str(tmp_path / "o"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvviz export: error:") and words in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()  # nothing made for a refused command


def test_kvviz_export_runs_every_engine_with_the_chosen_kernel(tmp_path):
    from kvviz.kernels import unavailable

    why = unavailable("native", "cpu")
    if why:
        pytest.skip(why)
    out = tmp_path / "out"
    proc = run_cli("--out", str(out), "--model", "tiny-random", "--kernel", "native", "--engines", "concat,static",
                   "--tokens", "4", "--threads", "1", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = traceio.load_run(out / "trace.json").info
    assert info.decode_kernels == ("native", "native") and info.kernel == "native"


@pytest.mark.parametrize("args, words", [
    (["--kernel", "native", "--engines", "naive,concat"],
     "kvviz export: error: naive cannot decode with the C step kernel (--kernel native); naive decodes with "),
    (["--kernel", "compiled", "--engines", "static,paged"], "kvviz export: error: paged cannot decode with "),
    (["--kernel", "native", "--from", "saved.json"], "kvviz export: error: --kernel native is for a model run"),
])
def test_kvviz_export_refuses_a_kernel_before_any_window(tmp_path, args, words):
    # Qt's platform named here does not exist: any window work would end in Qt's own abort instead.
    env = dict(os.environ, QT_QPA_PLATFORM="no-such-platform", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "kvviz", "export", "--out", str(tmp_path / "o"), "--png", *args],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(words), proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["under_a_file", "a_file"])
def test_kvviz_export_unwritable_out_is_exit_2(tmp_path, capsys, where):
    from kvviz.cli import main

    (tmp_path / "f").write_text("x")
    out = tmp_path / "f" / "sub" if where == "under_a_file" else tmp_path / "f"
    assert main(["export", "--out", str(out), "--png"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvviz export: error:") and "--out" in err and err.count("\n") == 1


def test_open_trace_during_a_run_stops_it_and_replays_once_it_ended(qapp, run_json, tmp_path):
    from kvviz.ui.transport import RunState

    busy, actions = make_window(tmp_path)
    stops = []
    busy.stop_requested.connect(lambda: stops.append(1))
    try:
        busy.state = RunState.RUNNING  # as if the worker were mid-run
        assert actions.open_trace(str(run_json))
        assert stops and busy.history.n_steps() == 0  # asked to stop; the replay waits for the end
        busy.fake_worker.run_finished.emit(busy.run_id)  # the worker reports the run ended
        assert busy.state is RunState.IDLE and busy.history.n_steps() == NEW_TOKENS
        busy.fake_worker.run_finished.emit(busy.run_id)  # a second end replays nothing twice
        assert busy.history.n_steps() == NEW_TOKENS
    finally:
        busy.close()


@pytest.mark.parametrize("message, words", [("No space left on device", "the disk is full"),
                                             ("Error writing trailer: Input/output error", "ffmpeg failed")])
def test_ffmpeg_dying_mid_video_is_a_message_and_leaves_nothing(window, actions, tmp_path, monkeypatch, message,
                                                                words):
    fake = tmp_path / "bin" / "ffmpeg"  # starts the file, reads some frames, then fails as a full disk makes it
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nfor last; do :; done\nprintf '%100s' > \"$last\"\nhead -c 1000 > /dev/null\n"
                    f"echo '{message}' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr("kvviz.ui.exporters.ffmpeg_exe", lambda: str(fake))
    out = tmp_path / "out"
    out.mkdir()
    assert actions.export_animation(["latency"], str(out / "v.mp4"), "mp4", 4) == 0
    assert words in window.error_text() and "\n" not in window.error_text()
    assert leftovers(out) == []
