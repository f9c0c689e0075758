"""Hostile input beyond the field-by-field fuzz (tests/test_hostile_fuzz.py): what that fuzz does not try.

- special files in every place kvviz reads a path: a trace, a checkpoint's config.json, tokenizer.json,
  weights, index and a shard, a kvviz-format config.json, the HF cache's refs/main, a text to score; each
  as a FIFO, a link to /dev/zero, a link to a zero-size /proc file, a loop of links, a folder;
- tokenizer.json components: normalizers, pre-tokenizers, their regexes, added tokens, decoders;
- weights that are not numbers (NaN, +Inf, -Inf, in one file or one shard) or not in F32/F16/BF16, and a
  run whose logits overflow;
- option values out of bounds, refused at parse time by every command that takes them.

Each refused case is one line (ValueError in-process; exit code 2 and one `error:` line through the CLI),
leaves every folder it touched as it was, and its time and Python-heap peak (tracemalloc) are kept; the
counts per class print at the end (`-s`): tried / refused / accepted. Engine-process faults, the slow
server and `kvviz TRACE.json` have files of their own (tests/test_hostile_engine_process.py,
tests/test_hostile_download.py, tests/test_hostile_trace_open.py).
"""
from __future__ import annotations

import json
import os
import time
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from kvviz.cli import main

COUNTS: dict[str, Counter] = {}
FIGURES: dict[str, list[tuple[str, float, float]]] = {}  # class -> (case, seconds, peak MiB)
VOCAB = 300


def _tally(kind: str, case: str, refused: bool, seconds: float, peak_bytes: int) -> None:
    COUNTS.setdefault(kind, Counter())["tried"] += 1
    COUNTS[kind]["refused" if refused else "accepted"] += 1
    FIGURES.setdefault(kind, []).append((case, seconds, peak_bytes / (1 << 20)))


@pytest.fixture(scope="module", autouse=True)
def print_counts():
    yield
    print("\nhostile input: tried / refused / accepted (slowest case, largest Python-heap peak)")
    for kind, c in COUNTS.items():
        slow = max(FIGURES[kind], key=lambda f: f[1])
        big = max(FIGURES[kind], key=lambda f: f[2])
        print(f"  {kind:<22} {c['tried']:>3} / {c['refused']:>3} / {c['accepted']:>3}   "
              f"slowest {slow[1] * 1000:.0f} ms ({slow[0]}), peak {big[2]:.1f} MiB ({big[0]})")


def _state(*folders: Path) -> dict:
    """Every entry under the folders with its size and mtime: 'nothing was written' is this unchanged."""
    out = {}
    for folder in folders:
        for root, dirs, files in os.walk(folder, followlinks=False):
            for name in dirs + files:
                p = Path(root) / name
                st = os.lstat(p)
                out[str(p)] = (st.st_size, st.st_mtime_ns)
    return out


def _refused_in_process(kind: str, case: str, call, *folders: Path) -> str | None:
    """Run call(); the one-line refusal (ValueError) or None when it was accepted. Nothing may change."""
    before = _state(*folders)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        call()
        message = None
    except ValueError as exc:
        message = str(exc)
    finally:
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    _tally(kind, case, message is not None, seconds, peak)
    if message is not None:
        assert "\n" not in message and len(message) <= 1000, message
    assert _state(*folders) == before, f"{case}: something was written"
    return message


def _refused_by_cli(kind: str, case: str, argv: list[str], capsys, *folders: Path) -> str:
    before = _state(*folders)
    t0 = time.perf_counter()
    tracemalloc.start()
    rc = main(argv)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    seconds = time.perf_counter() - t0
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line]
    _tally(kind, case, rc == 2, seconds, peak)
    assert rc == 2 and len(errors) == 1 and "Traceback" not in err, (case, rc, err)
    assert _state(*folders) == before, f"{case}: something was written"
    return errors[0]


# -- special files ---------------------------------------------------------------------------------------
SPECIALS = ("fifo", "dev-zero", "proc-file", "loop", "folder")


def make_special(path: Path, how: str) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    if how == "fifo":
        os.mkfifo(path)
    elif how == "dev-zero":
        path.symlink_to("/dev/zero")
    elif how == "proc-file":
        path.symlink_to("/proc/self/status")  # st_size 0, holds text
    elif how == "loop":
        path.symlink_to(path.name)
    elif how == "folder":
        path.mkdir()


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory, torch_cpu) -> Path:
    from kvviz.config import ModelConfig
    from kvviz.models.hf import save_hf_checkpoint, train_tokenizer_json
    from kvviz.models.transformer import Transformer

    cfg = ModelConfig(name="ck", arch="llama", vocab_size=VOCAB, d_model=64, n_layer=2, n_head=4, n_kv_head=2,
                      head_dim=16, d_ff=96, max_seq_len=128, norm_eps=1e-6, tie_embeddings=False)
    folder = tmp_path_factory.mktemp("hf") / "good"
    return save_hf_checkpoint(Transformer(cfg).init_weights(0), folder, tokenizer_json=train_tokenizer_json(VOCAB))


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def _shard(folder: Path) -> Path:
    """The folder with its weights split into two shards and an index, as large checkpoints are."""
    from safetensors.torch import load_file, save_file

    state = load_file(str(folder / "model.safetensors"))
    names = sorted(state)
    half = len(names) // 2
    parts = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    weight_map = {}
    for shard, keys in parts.items():
        save_file({k: state[k] for k in keys}, str(folder / shard), metadata={"format": "pt"})
        weight_map.update({k: shard for k in keys})
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


BENCH = ["bench", "--tokens", "2", "--repeat", "1", "--engines", "concat", "--threads", "1"]


@pytest.mark.parametrize("how", SPECIALS)
@pytest.mark.parametrize("place", ["config.json", "tokenizer.json", "model.safetensors", "index", "shard"])
def test_a_special_file_in_a_checkpoint_is_one_line_exit_2(hf_folder, tmp_path, capsys, place, how):
    folder = _copy(hf_folder, tmp_path / "ck")
    if place in ("index", "shard"):
        _shard(folder)
    target = {"index": "model.safetensors.index.json", "shard": "model-00002-of-00002.safetensors"}.get(place, place)
    make_special(folder / target, how)
    line = _refused_by_cli("special file", f"{place} as {how}", [*BENCH, "--model", str(folder)], capsys, tmp_path)
    assert target in line


@pytest.mark.parametrize("how", SPECIALS)
def test_a_special_file_as_a_trace_is_one_line(tmp_path, how):
    from kvviz.records import traceio

    make_special(tmp_path / "run.json", how)
    message = _refused_in_process("special file", f"trace as {how}", lambda: traceio.load_run(tmp_path / "run.json"),
                                  tmp_path)
    assert message is not None and "run.json" in message


@pytest.mark.parametrize("how", SPECIALS)
def test_a_special_file_as_a_kvviz_config_or_a_text_to_score_is_one_line(tmp_path, capsys, tiny_random, how):
    from kvviz.models.io import save_model

    folder = save_model(tiny_random, tmp_path / "kv")
    make_special(folder / "config.json", how)
    _refused_by_cli("special file", f"kvviz config.json as {how}", [*BENCH, "--model", str(folder)], capsys, tmp_path)
    make_special(tmp_path / "text.txt", how)
    line = _refused_by_cli("special file", f"score text as {how}", ["score", str(tmp_path / "text.txt"), "--model",
                                                                    "tiny-random"], capsys, tmp_path)
    assert "text.txt" in line


@pytest.mark.parametrize("how", [*SPECIALS, "binary"])
def test_a_special_or_binary_refs_main_in_the_hf_cache_is_one_line(hf_folder, tmp_path, monkeypatch, capsys, how):
    from huggingface_hub import constants  # imported before HF_HUB_CACHE is set: its default stays the real one

    from kvviz.models.hub import list_cached_models

    assert constants.HF_HUB_CACHE
    cache = tmp_path / "hub"
    repo = cache / "models--org--tiny"
    commit = "0" * 40
    _copy(hf_folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True)
    if how == "binary":
        (repo / "refs" / "main").write_bytes(b"\xff\xfe\x00garbage")
    else:
        make_special(repo / "refs" / "main", how)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    line = _refused_by_cli("special file", f"refs/main as {how}", [*BENCH, "--model", "org/tiny"], capsys, tmp_path)
    assert "main" in line
    if how in ("fifo", "dev-zero", "loop"):  # the window's model list: huggingface_hub's scan would open it
        listed = [m for m in list_cached_models() if m.source == "Hugging Face"]
        assert len(listed) == 1 and not listed[0].openable and "refs" in listed[0].problem


def test_a_hub_id_of_5000_characters_is_one_line(capsys, tmp_path):
    line = _refused_by_cli("special file", "hub id of 5,000 characters",
                           [*BENCH, "--model", "a/" + "b" * 4998], capsys, tmp_path)
    assert len(line) < 600


# -- tokenizer components ------------------------------------------------------------------------------
def _bomb(n: int) -> dict:
    step = {"type": "Replace", "pattern": {"String": "a"}, "content": "a" * 10}
    return {"type": "Sequence", "normalizers": [step] * n}


def _split(regex: str) -> dict:
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}


TOKENIZER_CASES = {
    # normalizers
    "normalizer Replace x10 x3 (a bomb)": ("normalizer", _bomb(3)),
    "normalizer Replace x300": ("normalizer", {"type": "Replace", "pattern": {"String": "a"}, "content": "b" * 300}),
    "normalizer Replace by regex x50": ("normalizer", {"type": "Replace", "pattern": {"Regex": "."},
                                                       "content": "c" * 50}),
    "normalizer Prepend 100 chars": ("normalizer", {"type": "Prepend", "prepend": "x" * 100, "content": "x" * 100}),
    "normalizer Sequence of 200 NFKC": ("normalizer", {"type": "Sequence", "normalizers": [{"type": "NFKC"}] * 200}),
    "normalizer Lowercase": ("normalizer", {"type": "Lowercase"}),
    "normalizer unknown type": ("normalizer", {"type": "Explode"}),
    "normalizer Replace of a space (real)": ("normalizer", {"type": "Replace", "pattern": {"String": " "},
                                                            "content": "\u2581"}),
    # pre-tokenizers and their regexes
    "pre-tokenizer (a+)+b backtracking": ("pre_tokenizer", _split("(a+)+b")),
    "pre-tokenizer (x+x+)+y backtracking": ("pre_tokenizer", _split("(x+x+)+y")),
    "pre-tokenizer regex that does not compile": ("pre_tokenizer", _split("(((")),
    "pre-tokenizer empty regex": ("pre_tokenizer", _split("")),
    "pre-tokenizer regex of 100k chars": ("pre_tokenizer", _split("a" * 100_000)),
    "pre-tokenizer Sequence of 500 Whitespace": ("pre_tokenizer", {"type": "Sequence",
                                                                   "pretokenizers": [{"type": "Whitespace"}] * 500}),
    "pre-tokenizer Metaspace": ("pre_tokenizer", {"type": "Metaspace", "replacement": "\u2581",
                                                  "prepend_scheme": "always", "split": True}),
    # decoders
    "decoder Replace x1000": ("decoder", {"type": "Replace", "pattern": {"String": "a"}, "content": "b" * 1000}),
    "decoder unknown type": ("decoder", {"type": "Nope"}),
    # added tokens
    "added tokens: 5,000 specials": ("added_tokens", [{"id": 300 + i, "content": f"<s{i}>", "special": True,
                                                       "single_word": False, "lstrip": False, "rstrip": False,
                                                       "normalized": False} for i in range(5000)]),
    "added token: empty content": ("added_tokens", [{"id": 5, "content": "", "special": True, "single_word": False,
                                                     "lstrip": False, "rstrip": False, "normalized": True}]),
    "added token: 100k chars": ("added_tokens", [{"id": 5, "content": "z" * 100_000, "special": False,
                                                  "single_word": False, "lstrip": False, "rstrip": False,
                                                  "normalized": True}]),
    "added token: id past the vocabulary": ("added_tokens", [{"id": 10**9, "content": "<big>", "special": True,
                                                              "single_word": False, "lstrip": False, "rstrip": False,
                                                              "normalized": False}]),
    "added tokens: one character each, normalized": ("added_tokens", [
        {"id": i, "content": chr(97 + i % 26), "special": False, "single_word": False, "lstrip": True, "rstrip": True,
         "normalized": True} for i in range(26)]),
}
PROBE = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac " + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" + " The KV cache. " * 20


@pytest.mark.parametrize("case", list(TOKENIZER_CASES))
def test_a_hostile_tokenizer_component_is_one_line_or_encodes_within_bounds(hf_folder, tmp_path, case):
    from kvviz.models.hf import load_hf_tokenizer
    from kvviz.tokenizer import MAX_TOKENS_PER_CHAR

    folder = _copy(hf_folder, tmp_path / "ck")
    key, value = TOKENIZER_CASES[case]
    doc = json.loads((folder / "tokenizer.json").read_text())
    doc[key] = value
    (folder / "tokenizer.json").write_text(json.dumps(doc))
    got = {}

    def load_and_encode() -> None:
        tok = load_hf_tokenizer(folder)
        ids = tok.encode(PROBE)
        got["ids"] = ids
        got["labels"] = [tok.token_text(i) for i in ids[:50]]

    message = _refused_in_process("tokenizer component", case, load_and_encode, tmp_path)
    if message is None:  # accepted: what it made is within the bounds
        assert len(got["ids"]) <= MAX_TOKENS_PER_CHAR * len(PROBE)
        assert all(len(label) <= 256 for label in got["labels"])
    else:
        assert "tokenizer.json" in message


def test_a_bomb_names_its_component_and_a_panic_is_caught_on_encode(hf_folder, tmp_path, capfd):
    from kvviz.models.hf import load_hf_tokenizer

    folder = _copy(hf_folder, tmp_path / "ck")
    doc = json.loads((folder / "tokenizer.json").read_text())
    doc["normalizer"] = _bomb(3)
    (folder / "tokenizer.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"normalizer\.normalizers\[1\] \(Replace\) may grow a text 100 times"):
        load_hf_tokenizer(folder)
    doc["normalizer"] = None
    doc["pre_tokenizer"] = _split("(x+x+)+y")  # the probe does not trip it; the text does
    (folder / "tokenizer.json").write_text(json.dumps(doc))
    tok = load_hf_tokenizer(folder)
    with pytest.raises(ValueError, match=r"pre_tokenizer \(Split\): Onig: Regex search error"):
        tok.encode("x" * 30)
    assert "panicked" not in capfd.readouterr().err  # the library's backtrace is not shown


# -- weights ---------------------------------------------------------------------------------------------
def _rewrite_weights(folder: Path, change) -> None:
    from safetensors.torch import load_file, save_file

    state = load_file(str(folder / "model.safetensors"))
    change(state)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _set(name_part: str, fill=None, dtype=None):
    def change(state) -> None:
        name = next(k for k in sorted(state) if name_part in k)
        if fill is not None:
            state[name] = state[name].clone().view(-1).index_fill_(0, __import__("torch").tensor([3]), fill).view(
                state[name].shape)
        if dtype is not None:
            state[name] = state[name].to(dtype)
    return change


def _weight_cases():
    import torch

    nan = float("nan")
    return {
        # the first tensor named: the first in the file, whose names safetensors keeps sorted
        "all NaN": (lambda s: s.update({k: torch.full_like(v, nan) for k, v in s.items()}), "lm_head"),
        "+Inf in the embedding": (_set("embed_tokens", fill=float("inf")), "embed_tokens"),
        "-Inf in a norm": (_set("input_layernorm", fill=float("-inf")), "input_layernorm"),
        "NaN in the head": (_set("lm_head", fill=nan), "lm_head"),
        "int8 weight": (_set("q_proj", dtype=torch.int8), "q_proj"),
        "bool weight": (_set("k_proj", dtype=torch.bool), "k_proj"),
        "float64 weight": (_set("v_proj", dtype=torch.float64), "v_proj"),
        "int32 weight": (_set("o_proj", dtype=torch.int32), "o_proj"),
        "uint8 weight": (_set("gate_proj", dtype=torch.uint8), "gate_proj"),
        "float8 weight": (_set("up_proj", dtype=torch.float8_e4m3fn), "up_proj"),
        "float16 weights (accepted)": (lambda s: s.update({k: v.half() for k, v in s.items()}), None),
        "bfloat16 weights (accepted)": (lambda s: s.update({k: v.bfloat16() for k, v in s.items()}), None),
    }


@pytest.mark.parametrize("case", ["all NaN", "+Inf in the embedding", "-Inf in a norm", "NaN in the head",
                                  "int8 weight", "bool weight", "float64 weight", "int32 weight", "uint8 weight",
                                  "float8 weight", "float16 weights (accepted)", "bfloat16 weights (accepted)"])
def test_weights_that_are_not_numbers_or_not_float_are_refused_naming_the_tensor(hf_folder, tmp_path, capsys,
                                                                                case):
    folder = _copy(hf_folder, tmp_path / "ck")
    change, tensor = _weight_cases()[case]
    _rewrite_weights(folder, change)
    if tensor is None:
        before = _state(tmp_path)
        t0 = time.perf_counter()
        rc = main([*BENCH, "--model", str(folder)])
        _tally("weights", case, False, time.perf_counter() - t0, 0)
        out, err = capsys.readouterr()
        assert rc == 0, err
        assert _state(tmp_path) == before
        return
    line = _refused_by_cli("weights", case, [*BENCH, "--model", str(folder)], capsys, tmp_path)
    assert tensor in line and "model.safetensors" in line


def test_non_finite_weights_in_one_shard_are_refused_naming_the_shard_and_tensor(hf_folder, tmp_path, capsys):
    import torch
    from safetensors.torch import load_file, save_file

    folder = _shard(_copy(hf_folder, tmp_path / "ck"))
    shard = folder / "model-00002-of-00002.safetensors"
    state = load_file(str(shard))
    name = sorted(state)[0]
    state[name] = torch.full_like(state[name], float("nan"))
    save_file(state, str(shard), metadata={"format": "pt"})
    line = _refused_by_cli("weights", "NaN in one shard", [*BENCH, "--model", str(folder)], capsys, tmp_path)
    assert shard.name in line and name in line


def test_logits_that_overflow_stop_the_run_in_one_line(hf_folder, tmp_path, capsys):
    """Finite weights (3e38 in the head, within float32) whose logits are +Inf: bench refuses, in one line,
    what it had reported as 'tokens identical across engines: yes'."""
    import torch

    folder = _copy(hf_folder, tmp_path / "ck")
    _rewrite_weights(folder, lambda s: s.update({"lm_head.weight": torch.full_like(s["lm_head.weight"], 3e38)}))
    for temperature in ("0", "1"):
        line = _refused_by_cli("weights", f"logits overflow, temperature {temperature}",
                               [*BENCH, "--model", str(folder), "--temperature", temperature], capsys, tmp_path)
        assert "logits are not finite" in line


def test_the_sampler_refuses_non_finite_logits(torch_cpu):
    from kvviz.config import SamplingConfig
    from kvviz.sampling import NonFiniteLogits, Sampler, check_picked

    torch = torch_cpu
    cases = {"NaN": torch.tensor([0.0, float("nan"), 1.0]), "+Inf": torch.tensor([0.0, float("inf"), 1.0]),
             "all -Inf": torch.full((3,), float("-inf"))}
    for logits in cases.values():
        for cfg in (SamplingConfig(), SamplingConfig(temperature=1.0, seed=1)):
            with pytest.raises(NonFiniteLogits):
                Sampler(cfg)(logits) if not cfg.greedy else check_picked(logits, Sampler(cfg).pick(logits))
    assert Sampler(SamplingConfig()).pick(torch.tensor([0.0, float("-inf"), 1.0])) == 2  # a masked -Inf is fine


# -- one bound per option ----------------------------------------------------------------------------------
OPTION_CASES = [
    ["shot", "--out", "x.png", "--tokens", "1000000000000"], ["shot", "--out", "x.png", "--step", "10000000"],
    ["shot", "--out", "x.png", "--zoom", "5"], ["shot", "--out", "x.png", "--timeout", "inf"],
    ["shot", "--out", "x.png", "--layer", "99999"], ["memory", "--tokens", "0"], ["memory", "--block-size", "100000"],
    ["memory", "--prompt-tokens", "-1"], ["memory", "--bandwidth-gbps", "inf"], ["train", "--steps", "0"],
    ["train", "--lr", "-1"], ["train", "--context", "0"], ["bench", "--model", ""], ["memory", "--model", ""],
    ["hfbench", "--model", ""], ["score", "t.txt", "--model", " "], ["download", ""], ["shot", "--out", "x.png",
                                                                                       "--model", ""],
    ["bench", "--model", "x\0y"], ["bench", "--model", "m" * 5000],
]


@pytest.mark.parametrize("argv", OPTION_CASES, ids=[" ".join(a)[:60] for a in OPTION_CASES])
def test_an_option_out_of_bounds_is_refused_at_parse_time_by_every_command(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    line = _refused_by_cli("option bound", " ".join(argv)[:60], argv, capsys, tmp_path)
    assert "argument" in line  # argparse's refusal: at parse time, before any model or window


def test_the_zoom_bound_is_view_zoom_s_range():
    from kvviz.options import BOUNDS
    from kvviz.ui.zoom import ZOOM_RANGE

    assert (BOUNDS["zoom"].low, BOUNDS["zoom"].high) == ZOOM_RANGE
