"""Hostile input: every file kvviz reads, mutated field by field, gets one line or loads.

A valid trace, a Hugging Face config.json, a safetensors index, a tokenizer.json and a kvviz config.json
are mutated one field at a time (types, ranges, nesting, sizes, untrusted paths), and each variant goes
through the loader the commands and the window use, in-process. Every variant must either load (and
then export and reload without error) or be refused with a ValueError of one line (InsufficientMemory,
exit 1, where the machine cannot hold it): never another exception, never a hang. A hypothesis test
stacks several mutations at once, and a handful of real `kvviz` processes check exit code 2, one line
and no traceback end to end. The counts print with `-s` (tried / refused / accepted per file kind).
"""
from __future__ import annotations

import copy
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvviz.errors import InsufficientMemory, friendly_error, one_line
from kvviz.records import traceio

ROOT = Path(__file__).resolve().parent.parent
HANG_S = 20.0  # a hang detector, not a speed figure: a variant that takes this long is a freeze
COUNTS: dict[str, Counter] = {}


# -- mutations -------------------------------------------------------------------------------------------
def deep(n: int):
    value: object = 1
    for _ in range(n):
        value = [value]
    return value


SCALAR_MUTATIONS = {
    "null": None, "true": True, "string": "x", "empty string": "", "list": [1], "object": {"a": 1},
    "zero": 0, "minus one": -1, "half": 0.5, "huge": 10**12, "2^63": 2**63, "float huge": 1e300,
    "inf": math.inf, "-inf": -math.inf, "nan": math.nan, "lone surrogate": "a\ud800b",
    "100k chars": "y" * 100_000, "nested 50": deep(50),
}


def paths(doc, prefix=()):
    """Every place in a JSON document: (path, value), containers included, depth first."""
    yield prefix, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):  # the first items of a list stand for the rest
            yield from paths(v, (*prefix, i))


def mutate(doc, path, value, *, delete=False):
    out = copy.deepcopy(doc)
    if not path:
        return value
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return out


def variants(doc, skip=lambda path: False):
    """(name, mutated doc) for every place and every mutation, plus the place deleted."""
    for path, _ in paths(doc):
        if skip(path):
            continue
        for name, value in SCALAR_MUTATIONS.items():
            yield f"{'/'.join(map(str, path))} = {name}", mutate(doc, path, value)
        if path:
            yield f"{'/'.join(map(str, path))} deleted", mutate(doc, path, None, delete=True)


def dumps(doc) -> str:
    return json.dumps(doc, allow_nan=True)


def judge(kind: str, label: str, load) -> object | None:
    """Run `load()`; count it; fail on anything but success, a one-line ValueError, or InsufficientMemory.
    The message is judged as a person sees it: the CLI and the worker pass it through friendly_error and
    one_line; the trace loader's reaches the window as it is, so it must be short itself."""
    counts = COUNTS.setdefault(kind, Counter())
    counts["tried"] += 1
    t0 = time.perf_counter()
    try:
        result = load()
    except (ValueError, InsufficientMemory) as exc:
        text = str(exc) if kind.startswith("trace") else one_line(friendly_error(exc))
        assert text and "\n" not in text, f"{kind} {label}: not one line: {text!r}"
        assert len(text) < 2000, f"{kind} {label}: a message of {len(text)} characters"
        counts["refused"] += 1
        result = None
    except Exception as exc:  # noqa: BLE001 - the point of the test
        pytest.fail(f"{kind} {label}: {type(exc).__name__}: {str(exc)[:300]}")
    else:
        counts["accepted"] += 1
    took = time.perf_counter() - t0
    counts["max_ms"] = max(counts["max_ms"], round(took * 1000))
    assert took < HANG_S, f"{kind} {label}: {took:.1f} s"
    return result


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for kind, c in sorted(COUNTS.items()):
        print(f"\nfuzz {kind}: {c['tried']} variants tried, {c['refused']} refused, {c['accepted']} accepted; "
              f"slowest {c['max_ms']} ms")
    print(f"fuzz: peak RSS grew by {(rss - rss0) / 1024:.0f} MiB")
    assert rss - rss0 < 2 << 20, "the loaders' peak memory grew by more than 2 GiB"  # KiB


# -- traces ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trace_doc(tiny_random):
    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine
    from kvviz.records.trace import RunInfo

    prompt = [72, 105, 33]
    opts = TraceOptions(weights_layer=0, weights_head=1, logits=True)
    traces = {k: list(make_engine(k, tiny_random, block_size=2).generate(prompt, 3, trace=opts, run_id="r",
                                                                        token_text=chr))
              for k in ("naive", "paged")}
    cfg = tiny_random.cfg
    info = RunInfo(run_id="r", model_name=cfg.name, device="cpu", dtype="float32", prompt="Hi!",
                   prompt_ids=tuple(prompt), prompt_labels=("H", "i", "!"), engines=("naive", "paged"),
                   max_new_tokens=3, n_layer=cfg.n_layer, n_head=cfg.n_head, n_kv_head=cfg.n_kv_head,
                   head_dim=cfg.head_dim, param_count=cfg.param_count(),
                   kv_bytes_per_token=cfg.kv_bytes_per_token(), block_size=2)
    return json.loads(traceio.dumps_run(info, traces))


def _load_and_reexport(text: str, tmp: Path):
    run = traceio.loads_run(text)
    # what the window's File > Export writes from an accepted trace, and what File > Open reads back
    traceio.steps_csv(run.traces)
    traceio.summary_markdown(run.traces)
    traceio.loads_run(traceio.dumps_run(run.info, run.traces))
    return run


def test_the_valid_trace_loads(trace_doc, tmp_path):
    assert judge("trace", "valid", lambda: _load_and_reexport(dumps(trace_doc), tmp_path)) is not None


def test_every_trace_field_mutated(trace_doc, tmp_path):
    skip = lambda path: len(path) > 2 and path[-1] == "data"  # noqa: E731 - base64 blobs: see arrays below
    for label, doc in variants(trace_doc, skip):
        judge("trace", label, lambda doc=doc: _load_and_reexport(dumps(doc), tmp_path))


@pytest.mark.parametrize("case, change", [
    ("negative bytes", lambda s: s.update(bytes_copied=-10**12)),
    ("pos_start > pos_stop", lambda s: s.update(pos_start=s["pos_stop"] + 5)),
    ("NaN latency", lambda s: s.update(latency_ms=math.nan)),
    ("inf latency", lambda s: s.update(latency_ms=math.inf)),
    ("10^12 positions", lambda s: s.update(pos_stop=10**12)),
    ("block size 10^9", lambda s: s.update(block_size=10**9)),
    ("mask disagrees", lambda s: s.update(mask=[1, 2, 1])),
    ("100k-character token", lambda s: s.update(token_text="w" * 100_000)),
    ("lone surrogate", lambda s: s.update(token_text="\udcff")),
])
def test_impossible_step_values_are_refused_in_one_line(trace_doc, case, change):
    doc = copy.deepcopy(trace_doc)
    change(doc["engines"][1]["steps"][1])
    with pytest.raises(ValueError) as info:
        traceio.loads_run(dumps(doc))
    assert "\n" not in str(info.value)


def test_unknown_engine_and_deep_nesting_are_refused(trace_doc):
    doc = copy.deepcopy(trace_doc)
    doc["engines"][0]["name"] = "warp"
    with pytest.raises(ValueError, match="warp"):
        traceio.loads_run(dumps(doc))
    for depth in (20, 100_000):  # within and past what Python's json module can parse
        with pytest.raises(ValueError, match="nest"):
            traceio.loads_run('{"schema": "kvviz-trace", "version": 1, "info": ' + "[" * depth + "]" * depth + "}")


def test_array_blobs_mutated(trace_doc, tmp_path):
    import base64

    import numpy as np

    step = ("engines", 1, "steps", 1)
    for key in ("attn_weights", "logits"):
        arr = trace_doc["engines"][1]["steps"][1][key]
        shape = arr["shape"]
        for label, blob in {
            "nan": dict(arr, data=base64.b64encode(np.full(math.prod(shape), np.nan, "<f4").tobytes()).decode()),
            "huge shape": dict(arr, shape=[10**12, 0]),
            "wrong size": dict(arr, data=base64.b64encode(b"\0" * 12).decode()),
            "bad base64": dict(arr, data="!!!"),
            "float64": dict(arr, dtype="float64"),
            "negative values": dict(arr, data=base64.b64encode((-np.ones(math.prod(shape), "<f4")).tobytes())
                                    .decode()),
        }.items():
            doc = mutate(trace_doc, (*step, key), blob)
            judge("trace", f"{key} {label}", lambda doc=doc: _load_and_reexport(dumps(doc), tmp_path))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_several_trace_fields_mutated_at_once(trace_doc, tmp_path, data):
    places = [p for p, _ in paths(trace_doc) if p and p[-1] != "data"]
    doc = trace_doc
    for _ in range(data.draw(st.integers(2, 4))):
        path = data.draw(st.sampled_from(places))
        try:
            doc = mutate(doc, path, data.draw(st.sampled_from(list(SCALAR_MUTATIONS.values()))))
        except (KeyError, IndexError, TypeError):  # an earlier mutation removed the place
            continue
    judge("trace (stacked)", "random", lambda: _load_and_reexport(dumps(doc), tmp_path))


def test_the_loader_knows_the_engines_the_registry_has(torch_cpu):
    from kvviz.engines import ENGINE_KEYS

    assert traceio.ENGINES == ENGINE_KEYS


# -- checkpoints: config.json, the index, tokenizer.json -------------------------------------------------
@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, torch_cpu):
    """A tiny Llama in Hugging Face form with a byte-level BPE tokenizer, and a kvviz-format folder."""
    from kvviz.config import ModelConfig
    from kvviz.models.hf import save_hf_checkpoint, train_tokenizer_json
    from kvviz.models.io import save_model
    from kvviz.models.transformer import Transformer

    root = tmp_path_factory.mktemp("ckpt")
    cfg = ModelConfig(name="fuzz", arch="llama", vocab_size=300, d_model=32, n_layer=2, n_head=2, n_kv_head=1,
                      head_dim=16, d_ff=64, max_seq_len=64, tie_embeddings=False)
    model = Transformer(cfg).init_weights(0)
    hf = save_hf_checkpoint(model, root / "hf", tokenizer_json=train_tokenizer_json(300))
    own = save_model(Transformer(cfg.replace(arch="kvviz")).init_weights(0), root / "own")
    return hf, own


def _copy_folder(src: Path, dst: Path) -> Path:
    import shutil

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True)
    return dst


def _load_checkpoint(folder: Path):
    from kvviz.models.presets import build_model, load_tokenizer

    tok = load_tokenizer(str(folder))
    model = build_model(str(folder))
    return model, tok


def _fuzz_config(kind: str, src: Path, folder: Path, keep=lambda doc: True) -> None:
    """Every field of src's config.json mutated, each variant loaded from a copy of the folder."""
    base = json.loads((src / "config.json").read_text())
    folder = _copy_folder(src, folder)
    for label, doc in variants(base):
        (folder / "config.json").write_text(dumps(doc))
        if keep(doc):
            judge(kind, label, lambda: _load_checkpoint(folder))


def test_every_config_field_mutated(checkpoint, tmp_path):
    _fuzz_config("config.json", checkpoint[0], tmp_path / "c")


@pytest.mark.parametrize("key", ["hidden_size", "vocab_size", "intermediate_size", "num_hidden_layers"])
def test_a_huge_dimension_is_refused_before_allocating(checkpoint, tmp_path, key):
    hf, _ = checkpoint
    folder = _copy_folder(hf, tmp_path / "c")
    data = json.loads((folder / "config.json").read_text())
    for value in (4000, 1 << 20, 10**9):
        (folder / "config.json").write_text(json.dumps(dict(data, **{key: value})))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with pytest.raises((ValueError, InsufficientMemory)):
            _load_checkpoint(folder)
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 512 << 10  # KiB: nothing big


def test_a_model_larger_than_memory_says_how_much_it_needs(checkpoint, monkeypatch):
    hf, _ = checkpoint
    monkeypatch.setattr("kvviz.models.io.available_ram", lambda: 1 << 16)
    with pytest.raises(InsufficientMemory, match=r"needs .*B of memory to load, 64\.0 KiB is available"):
        _load_checkpoint(hf)


def test_every_kvviz_config_field_mutated(checkpoint, tmp_path):
    # a variant no longer in kvviz's schema is read as a Hugging Face folder, fuzzed above
    _fuzz_config("kvviz config.json", checkpoint[1], tmp_path / "k",
                 keep=lambda doc: isinstance(doc, dict) and "d_model" in doc)


def _sharded(hf: Path, dst: Path) -> tuple[Path, dict]:
    from kvviz.models.io import read_safetensors_header

    folder = _copy_folder(hf, dst)
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    names = read_safetensors_header(folder / "model-00001-of-00001.safetensors")
    index = {"metadata": {"total_size": 1}, "weight_map": {n: "model-00001-of-00001.safetensors" for n in names}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder, index


def test_every_index_field_mutated(checkpoint, tmp_path):
    hf, _ = checkpoint
    folder, index = _sharded(hf, tmp_path / "i")
    assert judge("index", "valid", lambda: _load_checkpoint(folder)) is not None
    outside = tmp_path / "outside.safetensors"
    outside.write_bytes((folder / "model-00001-of-00001.safetensors").read_bytes())
    name = next(iter(index["weight_map"]))
    hostile = {"../": f"../{outside.name}", "absolute": str(outside), "dot dot inside": "x/../../outside.safetensors",
               "not safetensors": "config.json", "nul": "a\0b"}
    for label, shard in hostile.items():
        doc = mutate(index, ("weight_map", name), shard)
        (folder / "model.safetensors.index.json").write_text(dumps(doc))
        assert judge("index", label, lambda: _load_checkpoint(folder)) is None, label
    (folder / "escape.safetensors").symlink_to(outside)
    (folder / "model.safetensors.index.json").write_text(dumps(mutate(index, ("weight_map", name),
                                                                      "escape.safetensors")))
    assert judge("index", "symlink out", lambda: _load_checkpoint(folder)) is None
    for label, doc in variants(index, skip=lambda p: len(p) == 2 and p[0] == "weight_map" and p[1] != name):
        (folder / "model.safetensors.index.json").write_text(dumps(doc))
        judge("index", label, lambda: _load_checkpoint(folder))


def test_weights_and_config_links_out_of_the_folder_are_refused(checkpoint, tmp_path):
    hf, _ = checkpoint
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        folder = _copy_folder(hf, tmp_path / f"l-{name}")
        target = tmp_path / f"real-{name}"
        (folder / name).rename(target)
        (folder / name).symlink_to(target)
        with pytest.raises(ValueError, match="outside the checkpoint folder"):
            _load_checkpoint(folder)


def test_tokenizer_fields_mutated(checkpoint, tmp_path):
    hf, _ = checkpoint
    base = json.loads((hf / "tokenizer.json").read_text())
    folder = _copy_folder(hf, tmp_path / "t")
    # the top level and the model section: the vocabulary's 300 entries stand for themselves
    skip = lambda p: len(p) > 2 and p[:2] in (("model", "vocab"), ("model", "merges"))  # noqa: E731
    for label, doc in variants(base, skip):
        (folder / "tokenizer.json").write_text(dumps(doc))
        judge("tokenizer.json", label, lambda: _load_checkpoint(folder))
    long_token = copy.deepcopy(base)
    long_token["model"]["vocab"]["z" * 100_000] = len(long_token["model"]["vocab"])
    (folder / "tokenizer.json").write_text(dumps(long_token))
    assert judge("tokenizer.json", "a 100k-character token", lambda: _load_checkpoint(folder)) is None


def test_safetensors_headers_mutated(checkpoint, tmp_path):
    hf, _ = checkpoint
    raw = (hf / "model.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    folder = _copy_folder(hf, tmp_path / "s")

    def write(doc):
        text = json.dumps(doc).encode()
        text += b" " * (-len(text) % 8)
        (folder / "model.safetensors").write_bytes(len(text).to_bytes(8, "little") + text + raw[8 + n:])

    name = next(k for k in header if k != "__metadata__")
    skip = lambda p: len(p) >= 1 and p[0] != name and p[0] != "__metadata__"  # noqa: E731 - one tensor stands
    for label, doc in variants(header, skip):
        write(doc)
        judge("safetensors header", label, lambda: _load_checkpoint(folder))
    for label, blob in {"header length past the file": (10**15).to_bytes(8, "little") + raw[8:],
                        "cut short": raw[: len(raw) // 2], "empty": b""}.items():
        (folder / "model.safetensors").write_bytes(blob)
        assert judge("safetensors header", label, lambda: _load_checkpoint(folder)) is None


# -- options: one set of bounds in every command ---------------------------------------------------------
SHARED = {"--temperature": ["0", "10", "10.5", "-1", "nan", "inf"], "--top-k": ["1", "0", "1000001"],
          "--top-p": ["1", "0.5", "0", "1.1", "nan"], "--seed": ["0", "-1", str(2**31)],
          "--block-size": ["1", "4096", "4097", "1000000", "0"], "--threads": ["1", "0", "100000"],
          "--prompt": ["x", ""]}


def test_every_command_applies_the_same_bounds():
    from kvviz.cli import build_parser

    commands = {"bench": [], "export": ["--out", "x"], "shot": ["--out", "x.png"]}
    for option, values in SHARED.items():
        for value in values:
            verdicts = {}
            for command, extra in commands.items():
                parser = build_parser(command)
                try:
                    parser.parse_args([command, *extra, f"{option}={value}"])
                    verdicts[command] = "accepted"
                except SystemExit as exc:
                    verdicts[command] = f"exit {exc.code}"
                COUNTS.setdefault("options", Counter())["tried"] += 1
                COUNTS["options"]["refused" if verdicts[command] != "accepted" else "accepted"] += 1
            assert len(set(verdicts.values())) == 1, f"{option}={value}: {verdicts}"


# -- a handful of real processes ---------------------------------------------------------------------------
def _kvviz(*argv, timeout=180):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kvviz", *argv], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=env)


def test_real_commands_refuse_hostile_checkpoints_in_one_line(checkpoint, tmp_path):
    hf, _ = checkpoint
    huge = _copy_folder(hf, tmp_path / "huge")
    data = json.loads((huge / "config.json").read_text())
    (huge / "config.json").write_text(json.dumps(dict(data, hidden_size=1 << 19)))
    nested = _copy_folder(hf, tmp_path / "nested")
    (nested / "config.json").write_text('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    escape, index = _sharded(hf, tmp_path / "escape")
    name = next(iter(index["weight_map"]))
    (escape / "model.safetensors.index.json").write_text(json.dumps(mutate(index, ("weight_map", name),
                                                                           "../../etc/passwd")))
    text = tmp_path / "t.txt"
    text.write_text("some text to score, long enough to predict a few tokens\n" * 4)
    cases = [("bench", "--model", str(huge), "--tokens", "2", "--repeat", "1"),
             ("score", str(text), "--model", str(nested)),
             ("export", "--out", str(tmp_path / "out"), "--json", "--model", str(escape))]
    for argv in cases:
        proc = _kvviz(*argv)
        # export loads the model in the window's engine process: a refused folder is "the run failed", exit 1
        assert proc.returncode == (1 if argv[0] == "export" else 2), (argv, proc.stderr[-500:])
        said = [line for line in proc.stderr.splitlines() if "error" in line or "failed" in line]
        assert len(said) == 1 and "Traceback" not in proc.stderr, (argv, proc.stderr[-500:])
    assert not (tmp_path / "out" / "trace.json").exists()


def _bench_in_process(capsys, *argv) -> tuple[int, str, str]:
    from kvviz.cli import main

    rc = main(["bench", "--model", "tiny-random", "--tokens", "2", "--repeat", "1", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_bench_json_into_a_bad_place_is_refused_before_the_run(tmp_path, capsys, torch_cpu):
    for target in (tmp_path, tmp_path / "no" / "such" / "x.json", Path("/proc/version")):
        rc, out, err = _bench_in_process(capsys, "--json", str(target))
        assert rc == 2 and err.count("\n") == 1, err
        assert "model tiny-random" not in out  # refused before the benchmark ran


def test_bench_json_onto_a_full_disk_is_refused_before_the_run(tmp_path, capsys, torch_cpu):
    import shutil

    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("full-disk cases need root to mount a small tmpfs")
    where = tmp_path / "full"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)]).returncode != 0:
        pytest.skip("mounting a tmpfs was refused here")
    try:
        try:
            (where / "filler").write_bytes(b"x" * (256 << 10))
        except OSError:
            pass  # full: that is the point
        rc, out, err = _bench_in_process(capsys, "--json", str(where / "r.json"))
        assert rc == 2 and "disk is full" in err and err.count("\n") == 1, err
        assert "model tiny-random" not in out
        assert sorted(p.name for p in where.iterdir()) == ["filler"]
    finally:
        subprocess.run(["umount", str(where)])


def test_accepted_traces_open_in_the_window_and_every_panel_draws(trace_doc, tmp_path, qapp):
    """The window's File > Open path on a sample of the accepted variants (every 12th; all 192 were run by
    hand): the trace opens, and every panel draws its last step without an error on its frame. Found:
    a zero cache_bytes with a non-zero capacity divided by zero in the cache memory panel; refused now."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_export import make_window

    from kvviz.ui.export_actions import WINDOW, draw_step, settle

    accepted = []
    for label, doc in variants(trace_doc, lambda p: len(p) > 2 and p[-1] == "data"):
        try:
            traceio.loads_run(dumps(doc))
        except ValueError:
            continue
        accepted.append((label, doc))
    window, actions = make_window(tmp_path / "settings")
    try:
        for label, doc in accepted[::12]:
            path = tmp_path / "variant.kvviz.json"
            path.write_text(dumps(doc))
            assert actions.open_trace(str(path)), (label, window.error_text())
            settle()
            draw_step(window, window.history.n_steps() - 1, [WINDOW])
            broken = {k: f.error for k, f in window.grid.frames.items() if f.error}
            assert not broken, (label, broken)
            COUNTS.setdefault("trace opened in the window", Counter())["tried"] += 1
            COUNTS["trace opened in the window"]["accepted"] += 1
    finally:
        window.close()
