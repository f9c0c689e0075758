"""Trace files from a real run: JSON round trip, CSV rows, summary tables, bad files, failed writes."""
from __future__ import annotations

import csv
import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kvviz.records import traceio
from kvviz.records.trace import RunInfo, StepTrace, first_divergence
from kvviz.ui.history import RunHistory

ENGINES = ("naive", "concat", "static", "paged", "window", "sinks", "int8")
PROMPT = [72, 101, 108, 108, 111]
N_NEW = 6


@pytest.fixture(scope="module")
def run(tiny_random):
    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine

    opts = TraceOptions(weights_layer=0, weights_head=1, logits=True)
    engines = {k: make_engine(k, tiny_random, block_size=4, window=4, sinks=1, residual=2) for k in ENGINES}
    traces = {k: list(e.generate(PROMPT, N_NEW, trace=opts, run_id="r1", token_text=lambda i: chr(i)))
              for k, e in engines.items()}
    cfg = tiny_random.cfg
    info = RunInfo(run_id="r1", model_name=cfg.name, device="cpu", dtype="float32", prompt="Hello",
                   prompt_ids=tuple(PROMPT), prompt_labels=tuple("Hello"), engines=ENGINES, max_new_tokens=N_NEW,
                   n_layer=cfg.n_layer, n_head=cfg.n_head, n_kv_head=cfg.n_kv_head, head_dim=cfg.head_dim,
                   param_count=cfg.param_count(), kv_bytes_per_token=cfg.kv_bytes_per_token(), block_size=4)
    return info, traces


def assert_steps_equal(a: StepTrace, b: StepTrace, exact: bool = True) -> None:
    for f in StepTrace.__dataclass_fields__:
        x, y = getattr(a, f), getattr(b, f)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert isinstance(x, np.ndarray) and isinstance(y, np.ndarray), f
            assert x.shape == y.shape and y.dtype == np.float32, f
            if exact:
                assert np.array_equal(x, y), f
            else:
                np.testing.assert_allclose(y, x, rtol=1e-3, atol=1e-3)
        else:
            assert x == y, f


def test_json_round_trip_is_exact(run, tmp_path):
    info, traces = run
    path = traceio.save_run(tmp_path / "run.kvviz.json", info, traces)
    loaded = traceio.load_run(path)
    assert loaded.info == info
    assert list(loaded.traces) == list(ENGINES)
    for k in ENGINES:
        assert len(loaded.traces[k]) == N_NEW
        for a, b in zip(traces[k], loaded.traces[k]):
            assert_steps_equal(a, b)
    # what the run actually holds, so the round trip covered every kind of field
    t = loaded.traces["paged"][3]
    assert t.mask_spec is not None and t.attn_weights is not None and t.logits is not None
    assert t.block_table is not None and t.block_size == 4
    assert np.array_equal(t.mask, traces["paged"][3].mask)
    # and it replays: a RunHistory fed from the file is the same run
    history = RunHistory()
    history.reset(loaded.info)
    for k in ENGINES:
        for step in loaded.traces[k]:
            history.add(step)
    # the approximate caches may part from the exact ones; the file keeps where
    assert history.divergence() == first_divergence([t.token_id for t in traces[k]] for k in ENGINES)
    assert history.n_steps() == N_NEW


def test_json_layout(run):
    info, traces = run
    doc = json.loads(traceio.dumps_run(info, traces))
    assert doc["schema"] == "kvviz-trace" and doc["version"] == 1
    assert [g["name"] for g in doc["engines"]] == list(ENGINES)
    prefill, decode = doc["engines"][1]["steps"][:2]
    assert prefill["mask"] == [5, 5, 0] and decode["mask"] == [1, 6, 5]
    assert decode["attn_weights"]["shape"] == [1, 6] and decode["attn_weights"]["dtype"] == "float32"
    assert "block_table" not in decode and isinstance(doc["engines"][3]["steps"][0]["block_table"], list)


def test_float16_arrays_are_smaller_and_close(run, tmp_path):
    info, traces = run
    small = traceio.save_run(tmp_path / "half.json", info, traces, array_dtype="float16")
    full = traceio.save_run(tmp_path / "full.json", info, traces)
    assert small.stat().st_size < full.stat().st_size
    loaded = traceio.load_run(small)
    for a, b in zip(traces["concat"], loaded.traces["concat"]):
        assert_steps_equal(a, b, exact=False)
    with pytest.raises(ValueError, match="float16"):
        traceio.encode_array(np.array([1e6], dtype=np.float32), "float16")


def test_steps_csv_one_row_per_engine_and_step(run, tmp_path):
    info, traces = run
    path = traceio.save_steps_csv(tmp_path / "steps.csv", traces)
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    assert len(rows) == len(ENGINES) * N_NEW
    assert tuple(rows[0]) == traceio.STEP_COLUMNS
    concat = [r for r in rows if r["engine"] == "concat"]
    assert [int(r["bytes_copied"]) for r in concat] == [t.bytes_copied for t in traces["concat"]]
    assert (concat[1]["q_len"], concat[1]["kv_len"], concat[1]["past_len"]) == ("1", "6", "5")
    assert float(concat[2]["latency_ms"]) == traces["concat"][2].latency_ms
    paged = [r for r in rows if r["engine"] == "paged"]
    assert int(paged[-1]["blocks"]) == len(traces["paged"][-1].block_table)
    assert rows[0]["blocks"] == ""  # naive holds no blocks: an empty cell, not "None"


def test_summary_csv_and_markdown(run, tmp_path):
    info, traces = run
    rows = list(csv.DictReader(io.StringIO(traceio.summary_csv(traces))))
    assert [r["engine"] for r in rows] == list(ENGINES)
    assert float(rows[0]["speedup_vs_naive"]) == 1.0
    naive = [t.token_id for t in traces["naive"]]
    assert [r["same_tokens_as_naive"] for r in rows] == [str([t.token_id for t in traces[k]] == naive)
                                                          for k in ENGINES]
    assert all(r["same_tokens_as_naive"] == "True" for r in rows[:4])  # the exact ones
    assert int(rows[1]["bytes_copied"]) == sum(t.bytes_copied for t in traces["concat"])
    assert int(rows[0]["kv_projections"]) > int(rows[1]["kv_projections"])  # the work the cache saves
    md = traceio.save_summary_markdown(tmp_path / "summary.md", traces).read_text(encoding="utf-8")
    lines = md.strip().splitlines()
    assert len(lines) == 2 + len(ENGINES)
    assert lines[0].startswith("| engine |") and set(lines[1]) <= set("|-: ")
    assert all(line.startswith("| ") and line.endswith(" |") for line in lines[:1] + lines[2:])
    assert len({line.count("|") for line in lines}) == 1
    assert "| concat |" in md and "yes" in md
    # an engine with no naive to compare with: dashes, not errors
    md = traceio.summary_markdown({"concat": traces["concat"]})
    assert md.strip().splitlines()[2].endswith("| - |")
    traceio.save_summary_csv(tmp_path / "summary.csv", traces)


def _saved(run, tmp_path) -> Path:
    info, traces = run
    return traceio.save_run(tmp_path / "run.json", info, {"concat": traces["concat"][:2]})


@pytest.mark.parametrize("damage, message", [
    (lambda t: t[: len(t) // 2], "truncated"),
    (lambda t: t.rstrip()[:-1], "truncated"),
    (lambda t: t.replace('"kvviz-trace"', '"kvviz-bench"', 1), "schema 'kvviz-bench'"),
    (lambda t: t.replace('"version": 1', '"version": 2', 1), "version 2 is newer"),
    (lambda t: t.replace('"version": 1', '"version": 0', 1), "unknown kvviz trace format version 0"),
    (lambda t: t.replace('"version": 1', '"version": "1"', 1), "version"),
    (lambda t: t.replace('"schema": "kvviz-trace",', "", 1), "no 'schema'"),
    (lambda t: "step,engine\n0,naive\n", "not JSON"),
    (lambda t: "", "empty"),
    (lambda t: "[1, 2]", "not an object"),
    (lambda t: t.replace('"latency_ms"', '"latency"', 1), "missing field 'latency_ms'"),
    (lambda t: t.replace('"phase": "decode"', '"phase": "sideways"', 1), "phase"),
    (lambda t: t.replace('"mask": [\n      1,', '"mask": [\n      9,', 1), "past_len"),
])
def test_bad_files_are_one_line_value_errors(run, tmp_path, damage, message):
    path = _saved(run, tmp_path)
    text = path.read_text(encoding="utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text(damage(text), encoding="utf-8")
    assert damage(text) != text
    with pytest.raises(ValueError, match=message) as exc:
        traceio.load_run(bad)
    assert "\n" not in str(exc.value) and str(exc.value).startswith(str(bad))


def test_truncated_anywhere(run, tmp_path):
    text = _saved(run, tmp_path).read_text(encoding="utf-8")
    bad = tmp_path / "cut.json"
    for cut in range(1, len(text) - 2, max(1, len(text) // 40)):
        bad.write_text(text[:cut], encoding="utf-8")
        with pytest.raises(ValueError, match="truncated"):
            traceio.load_run(bad)


def test_bad_array_data(run, tmp_path):
    doc = json.loads(_saved(run, tmp_path).read_text(encoding="utf-8"))
    arr = doc["engines"][0]["steps"][1]["attn_weights"]
    arr["data"] = arr["data"][:-8]
    with pytest.raises(ValueError, match="attn_weights"):
        traceio.run_from_dict(doc)
    arr["data"] = "not base64!"
    with pytest.raises(ValueError, match="base64"):
        traceio.run_from_dict(doc)


def test_unreadable_paths(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        traceio.load_run(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="folder"):
        traceio.load_run(tmp_path)
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00\x01garbage")
    with pytest.raises(ValueError, match="not a text file"):
        traceio.load_run(tmp_path / "bin.json")


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


def test_read_only_folder(run, tmp_path, monkeypatch):
    info, traces = run
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    if os.name != "posix" or os.geteuid() == 0:  # root writes anyway: refuse the temporary file as the kernel would
        import kvviz.fileio

        def refuse(*args, **kwargs):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(ro))

        monkeypatch.setattr(kvviz.fileio.tempfile, "mkstemp", refuse)
    try:
        with pytest.raises(ValueError, match="Permission denied"):
            traceio.save_run(ro / "run.json", info, traces)
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o700)


@pytest.mark.parametrize("where", ["missing/run.json", "a_file/run.json", "."])
def test_unwritable_paths(run, tmp_path, where):
    info, traces = run
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ValueError, match="cannot write") as exc:
        traceio.save_run(tmp_path / where, info, traces)
    assert "\n" not in str(exc.value)
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("save", [traceio.save_run, traceio.save_steps_csv, traceio.save_summary_csv,
                                  traceio.save_summary_markdown])
def test_disk_full_mid_write_loses_nothing(run, tmp_path, monkeypatch, save):
    info, traces = run
    target = tmp_path / "out"
    target.write_text("the previous export\n", encoding="utf-8")

    def half_then_full(self, data, encoding=None, errors=None, newline=None):
        with open(self, "w", encoding=encoding) as fh:
            fh.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_text", half_then_full)
    args = (target, info, traces) if save is traceio.save_run else (target, traces)
    with pytest.raises(ValueError, match="No space left on device") as exc:
        save(*args)
    monkeypatch.undo()
    assert str(exc.value).startswith(f"cannot write {target}")
    assert target.read_text(encoding="utf-8") == "the previous export\n"
    assert _leftovers(tmp_path) == []


def test_traceio_imports_neither_torch_nor_qt():
    code = ("import sys, kvviz.records.traceio; "
            "print([m for m in ('torch', 'PySide6', 'pyqtgraph') if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_decode_kernels_are_saved_checked_and_absent_from_older_traces(run, tmp_path):
    """RunInfo.decode_kernels (what ran each engine's decode step) goes through a file unchanged; a count that
    does not match the engines, or a word no engine records, is refused in one line; a trace saved before the
    field loads with none."""
    from dataclasses import replace

    info, traces = run
    kernels = ("torch", "native", "native", "native", "torch", "torch", "openblas")
    path = traceio.save_run(tmp_path / "k.kvviz.json", replace(info, decode_kernels=kernels), traces)
    assert traceio.load_run(path).info.decode_kernels == kernels
    doc = json.loads(path.read_text())
    for bad, says in ((kernels[:3], "names 3 kernels for 7 engines"), (("cuda",) * 7, "'cuda', not a kernel")):
        doc["info"]["decode_kernels"] = list(bad)
        path.write_text(json.dumps(doc))
        with pytest.raises(ValueError, match=says):
            traceio.load_run(path)
    del doc["info"]["decode_kernels"]
    path.write_text(json.dumps(doc))
    assert traceio.load_run(path).info.decode_kernels == ()


def test_the_session_records_the_runs_one_kernel_and_older_mixed_traces_still_load(tmp_path):
    """The window's run (kvviz.runtime.session) records the kernel the run names for every engine; a trace saved when a
    run could mix kernels (the C step for concat, torch's ops for naive) still loads and says so."""
    from dataclasses import replace

    import kvviz
    from kvviz import native

    run = kvviz.compare("KV cache demo", engines=("naive", "concat", "window"), tokens=4, model="tiny", threads=1,
                        window=8)
    assert run.info.decode_kernels == ("torch", "torch", "torch") and run.info.kernel == "torch"
    if native.build_error() is None:
        on_c = kvviz.compare("KV cache demo", engines=("concat", "static"), tokens=4, model="tiny", threads=1,
                             kernel="native")
        assert on_c.info.decode_kernels == ("native", "native") and on_c.info.kernel == "native"
    mixed = replace(run.info, decode_kernels=("torch", "native", "torch"))
    path = traceio.save_run(tmp_path / "mixed.kvviz.json", mixed, run.traces)
    loaded = traceio.load_run(path).info
    assert loaded.decode_kernels == ("torch", "native", "torch") and loaded.kernel is None
