"""`kvviz export --html` and `--from TRACE.json`, the page's refusals, and what the page shares with the window:
its colours (kvviz.ui.style, pyqtgraph's viridis) and no Qt in a notebook's process (kvviz.compare / show)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.cli import main
from kvviz.records import traceio

ROOT = Path(__file__).resolve().parent.parent
PAGE_JS = ROOT / "kvviz" / "page" / "page.js"


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    import kvviz

    run = kvviz.compare("KV cache demo", tokens=8, model="tiny", block_size=4, threads=1)
    return run.save(tmp_path_factory.mktemp("trace") / "trace.json")


def page_data(path: Path) -> dict:
    found = re.search(r'<script id="kvviz-data" type="application/json">(.*?)</script>', path.read_text("utf-8"), re.S)
    return json.loads(found.group(1))


def refused(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_from_a_trace_writes_the_page_and_the_data_without_a_model(trace, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["export", "--from", str(trace), "--out", str(out), "--html", "--csv", "--json", "--md",
                 "--step", "3", "--lang", "zh_CN"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["run.html", "steps.csv", "summary.csv", "summary.md",
                                                     "trace.json"]
    saved, again = traceio.load_run(trace), traceio.load_run(out / "trace.json")
    assert {k: [t.token_id for t in v] for k, v in again.traces.items()} == \
        {k: [t.token_id for t in v] for k, v in saved.traces.items()}
    data = page_data(out / "run.html")
    assert data["start"] == {"step": 3, "lang": "zh_CN", "embedded": False}
    assert data["range"] == [0, 7]
    for engine in data["engines"]:
        steps = saved.traces[engine["name"]]
        assert engine["steps"]["kv_projections"] == [t.kv_projections for t in steps]
        assert engine["steps"]["bytes_copied"] == [t.bytes_copied for t in steps]
    text = (out / "run.html").read_text("utf-8")
    assert "http://" not in text and "https://" not in text  # nothing fetched: every part inline
    assert "<script src" not in text and "<link" not in text


def test_from_a_trace_the_images_and_animation_are_the_replayed_windows(trace, tmp_path):
    """--png/--svg/--gif from a saved run: the run replayed in the offscreen window (no model), one GIF frame
    per step of --steps."""
    from PIL import Image

    out = tmp_path / "img"
    done = subprocess.run([sys.executable, "-m", "kvviz", "export", "--from", str(trace), "--out", str(out), "--png",
                           "--svg", "--gif", "--csv", "--steps", "0:3", "--size", "1280x800"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["decode.gif", "steps.csv", "summary.csv", "window.png",
                                                     "window.svg"]
    with Image.open(out / "decode.gif") as gif:
        assert gif.n_frames == 4
    import numpy as np

    with Image.open(out / "window.png") as png:
        assert png.size == (1280, 800)
        pixels = np.asarray(png.convert("RGB"))
    naive_red = np.all(pixels == np.array([0xd6, 0x27, 0x28], dtype=np.uint8), axis=-1).sum()
    assert naive_red > 50  # the replayed run drawn: naive's name and curves in its colour


def test_a_model_run_with_html(tmp_path):
    """`kvviz export --html` runs the engines in the offscreen window, as every export does, and writes the page
    of that run; the trace it is built from is not left behind unless --json asked for it."""
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "kvviz", "export", "--out", str(out), "--html", "--tokens", "4",
                           "--model", "tiny-random", "--threads", "1", "--step", "2"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["run.html"]
    data = page_data(out / "run.html")
    assert [e["name"] for e in data["engines"]] == ["naive", "concat", "static", "paged"]
    assert data["range"] == [0, 3] and data["start"]["step"] == 2
    assert data["info"]["model_name"] == "tiny-random"


def test_a_range_of_steps(trace, tmp_path):
    assert main(["export", "--from", str(trace), "--out", str(tmp_path / "o"), "--html", "--steps", "2:5"]) == 0
    data = page_data(tmp_path / "o" / "run.html")
    assert data["range"] == [2, 5] and data["start"]["step"] == 5
    assert all(len(e["steps"]["pos_stop"]) == 6 for e in data["engines"])  # the totals need steps 0..1 too


@pytest.mark.parametrize("case", ["truncated", "not a trace", "meaning", "missing"])
def test_a_trace_that_fails_validation_is_refused_and_nothing_is_made(case, trace, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    text = trace.read_text("utf-8")
    if case == "truncated":
        bad.write_text(text[: len(text) // 2])
    elif case == "not a trace":
        bad.write_text('{"schema": "something else"}')
    elif case == "meaning":
        doc = json.loads(text)
        doc["engines"][0]["steps"][2]["bytes_copied"] = -5
        bad.write_text(json.dumps(doc))
    out = tmp_path / "out"
    err = refused(capsys, ["export", "--from", str(bad), "--out", str(out), "--html", "--csv"])
    assert "bad.json" in err
    assert not out.exists()


def test_an_output_that_cannot_be_written_is_refused(trace, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    refused(capsys, ["export", "--from", str(trace), "--out", str(blocker), "--html"])
    refused(capsys, ["export", "--from", str(trace), "--out", str(blocker / "below"), "--html"])
    assert blocker.read_text() == "x"


def test_a_range_outside_the_run_is_refused(trace, tmp_path, capsys):
    err = refused(capsys, ["export", "--from", str(trace), "--out", str(tmp_path / "o"), "--html", "--steps", "3:99"])
    assert "0..7" in err
    assert not (tmp_path / "o").exists()


def test_a_run_too_large_for_one_page_says_the_limit_and_suggests_a_range(trace, tmp_path, capsys, monkeypatch):
    import kvviz.page

    monkeypatch.setattr(kvviz.page, "MAX_PAGE_BYTES", 5_000)
    err = refused(capsys, ["export", "--from", str(trace), "--out", str(tmp_path / "o"), "--html", "--csv"])
    assert "4.9 KiB" in err and "--steps A:B" in err
    assert not (tmp_path / "o").exists()
    # before a model run too, from --tokens and the prompt alone
    err = refused(capsys, ["export", "--out", str(tmp_path / "o"), "--html", "--tokens", "400"])
    assert "--steps A:B" in err
    assert not (tmp_path / "o").exists()


def test_a_page_is_written_whole_or_not_at_all(trace, tmp_path, monkeypatch):
    from kvviz.page import write_page

    saved = traceio.load_run(trace)
    target = tmp_path / "run.html"
    target.write_text("old")

    import kvviz.fileio

    def broken(fd):  # the disk fills while the page is synced under its temporary name
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(kvviz.fileio.os, "fsync", broken)
    with pytest.raises(ValueError, match="the disk is full"):
        write_page(target, saved.info, saved.traces)
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["run.html"]  # no temporary file left


def test_the_page_has_the_windows_colours():
    import pyqtgraph as pg

    import kvviz.page as page
    from kvviz.ui import style

    assert page.ENGINE_COLORS == style.ENGINE_COLORS and page.ENGINE_DASH == style.ENGINE_DASH
    assert page.EXTRA_COLORS == style._EXTRA_COLORS
    script = PAGE_JS.read_text("utf-8")
    for name, table in (("CELL", style.CELL_COLORS), ("BLOCK", style.BLOCK_COLORS)):
        found = re.search(rf"const {name} = \{{(.*?)\}};", script, re.S).group(1)
        assert dict(re.findall(r'(\w+): "(#[0-9a-f]{6})"', found)) == table
    for name, value in (("HIGHLIGHT", style.HIGHLIGHT), ("MUTED", style.MUTED_TEXT), ("FG", style.PLOT_FOREGROUND)):
        assert re.search(rf'\b{name} = "(#[0-9a-f]{{6}})"', script).group(1) == value
    lut = pg.colormap.get("viridis").getLookupTable(0.0, 1.0, 253, alpha=False)
    viridis = re.search(r'const VIRIDIS = "([0-9a-f]+)"', script).group(1)
    assert viridis == "".join(f"{r:02x}{g:02x}{b:02x}" for r, g, b in lut)


def test_the_page_reads_the_windows_chinese():
    from kvviz.page.strings import page_strings

    strings = page_strings()
    assert strings["Narration"]["every engine"] != "every engine"
    assert strings["TransportBar"]["identical"] == "完全一致"


def test_a_notebook_runs_and_shows_without_qt():
    """kvviz.compare and kvviz.show in a fresh interpreter: `import kvviz` loads no torch, and nothing loads Qt."""
    code = """
import sys
import kvviz
assert "torch" not in sys.modules and "numpy" not in sys.modules, "import kvviz is not light"
run = kvviz.compare("KV", engines=("concat", "paged"), tokens=3, model="tiny", threads=1)
assert run.n_steps == 3 and run.engines == ("concat", "paged")
html = run._repr_html_()
assert html.startswith("<iframe srcdoc=") and "kvviz-data" in html
shown = kvviz.show(run, step=1)
assert "srcdoc" in (shown.data if hasattr(shown, "data") else shown)
import kvviz.page.serve, kvviz.serving.history  # a serve record's page too: records and numpy only
print(sorted(m for m in sys.modules if m.split(".")[0] in ("PySide6", "shiboken6", "pyqtgraph")))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
