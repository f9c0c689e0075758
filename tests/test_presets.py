"""The presets' shapes, the shipped model's weights and quality, `kvviz score`, and bad model input."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.models.presets import PRESETS, TINY_DIR

ENGLISH = (
    "The cat sat on the mat and looked out of the window. It was a cold morning, and the street below "
    "was quiet except for a man walking his dog. When the sun came up, the children left for school, "
    "and the house was still again. She made a cup of tea and read the letter twice before she put it "
    "away in the drawer with the others.\n"
)
# Prose in the register of the training corpus but not taken from it (no 40-byte run of it is in the corpus).
TECHNICAL = (
    "When a function is called, the arguments are evaluated from left to right and bound to the names of "
    "the parameters. If the function returns without a return statement, the value of the call is None. "
    "A class definition creates a new class object, and the methods defined in its body become attributes "
    "of that class.\n"
)

# The shipped model's greedy continuation of GREEDY_PROMPT, recorded from assets/tiny after training.
# Retraining changes it: regenerate with `python -c "from tests.test_presets import greedy; print(repr(greedy()))"`.
GREEDY_PROMPT = "The value of a variable is"
GREEDY_TOKENS = 48
GREEDY_EXPECTED = " a sequence of the set of the\nserver that the se"


def greedy(engine_key: str = "concat") -> str:
    import torch

    from kvviz.config import SamplingConfig
    from kvviz.engines import make_engine
    from kvviz.models.presets import load_model
    from kvviz.tokenizer import ByteTokenizer

    tok = ByteTokenizer()
    model = load_model("tiny", torch.device("cpu"))
    steps = make_engine(engine_key, model).generate(tok.encode(GREEDY_PROMPT), GREEDY_TOKENS, SamplingConfig())
    return tok.decode([s.token_id for s in steps])


def meta_model(name: str):
    """The preset's module tree on the meta device: shapes without memory or init time."""
    import torch

    from kvviz.models.presets import preset_config
    from kvviz.models.transformer import Transformer

    with torch.device("meta"):
        return Transformer(preset_config(name))


# -- shapes -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(PRESETS))
def test_param_count_matches_the_tensors(torch_cpu, name):
    model = meta_model(name)
    assert sum(p.numel() for p in model.parameters()) == model.cfg.param_count()


@pytest.mark.parametrize("name", list(PRESETS))
def test_kv_bytes_per_token_match_the_projections(torch_cpu, name):
    """K and V of one token: the k/v projection widths summed over layers, times the element size."""
    model = meta_model(name)
    state = model.state_dict()  # checkpoint names: q/k/v_proj, whatever the module fuses
    widths = sum(state[f"layers.{i}.self_attn.{proj}.weight"].shape[0]
                 for i in range(len(model.layers)) for proj in ("k_proj", "v_proj"))
    for dtype, elem in (("fp32", 4), ("bf16", 2)):
        assert model.cfg.kv_bytes_per_token(dtype) == widths * elem


def test_preset_shapes_are_the_published_ones(torch_cpu):
    wide = PRESETS["wide"].config
    assert (wide.d_model, wide.n_layer, wide.n_head, wide.n_kv_head, wide.head_dim) == (512, 8, 8, 8, 64)
    q = PRESETS["qwen3-0.6b-shape"].config
    assert (q.n_layer, q.n_head, q.n_kv_head, q.head_dim, q.d_model, q.d_ff) == (28, 16, 8, 128, 1024, 3072)
    assert q.qk_norm and q.vocab_size == 256 and q.dtype == "bfloat16"
    assert q.kv_bytes_per_token("bf16") == 114_688  # 28 layers x 2 (K, V) x 8 heads x 128 x 2 bytes
    model = meta_model("qwen3-0.6b-shape")
    assert model.layers[0].self_attn.q_norm.weight.shape == (128,)
    for name in ("tiny", "tiny-random"):
        c = PRESETS[name].config
        assert (c.n_layer, c.n_head, c.head_dim, c.d_model, c.vocab_size) == (2, 4, 32, 128, 256)
    assert not PRESETS["wide"].trained and not PRESETS["qwen3-0.6b-shape"].trained


def test_only_the_big_preset_warns(torch_cpu):
    from kvviz.models.presets import preset_warning

    text = preset_warning("qwen3-0.6b-shape")
    size = PRESETS["qwen3-0.6b-shape"].config.param_count() / 1e9
    assert text.startswith("qwen3-0.6b-shape:") and f"{size:.2f} B parameters" in text
    assert all(preset_warning(n) == "" for n in ("tiny", "tiny-random", "wide", "/some/folder"))


# -- the shipped model ------------------------------------------------------------------------------

def test_shipped_files_are_complete(torch_cpu):
    from kvviz.config import ModelConfig

    for name in ("config.json", "model.safetensors", "README.md", "training.json"):
        assert (TINY_DIR / name).is_file(), name
    cfg = ModelConfig.load_json(TINY_DIR / "config.json")
    assert cfg == ModelConfig(name="tiny")
    record = json.loads((TINY_DIR / "training.json").read_text())
    assert record["context"] >= 256
    assert record["val_bits_per_byte"] <= 2.5  # modules held out by name
    assert record["outside_bits_per_byte"] <= 2.8  # English from outside CPython
    card = (TINY_DIR / "README.md").read_text()
    assert f"{record['val_bits_per_byte']:.3f} bits per byte" in card


def test_shipped_model_greedy_continuation_is_fixed(torch_cpu):
    assert greedy("concat") == GREEDY_EXPECTED
    assert greedy("static") == GREEDY_EXPECTED


def test_shipped_model_runs_to_its_maximum_context(torch_cpu):
    """Trained at 256 but must not crash at max_seq_len: one full-length forward."""
    from kvviz.models.presets import load_model

    model = load_model("tiny", torch_cpu.device("cpu"))
    ids = torch_cpu.randint(0, 256, (1, model.cfg.max_seq_len), generator=torch_cpu.Generator().manual_seed(0))
    with torch_cpu.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, 256) and torch_cpu.isfinite(logits).all()


# -- kvviz score ------------------------------------------------------------------------------------

def _score(capsys, path, *extra) -> float:
    from kvviz.cli import main

    rc = main(["score", str(path), "--threads", "1", *extra])
    out = capsys.readouterr().out
    assert rc == 0
    return float(out.split()[0])


def test_score_prints_bits_per_byte_and_counts(torch_cpu, tmp_path, capsys):
    from kvviz.cli import main

    path = tmp_path / "english.txt"
    path.write_text(ENGLISH, encoding="utf-8")
    assert main(["score", str(path), "--model", "tiny-random", "--context", "64"]) == 0
    out = capsys.readouterr().out
    n = len(ENGLISH.encode()) - 1  # every byte but the first is predicted
    assert "bits per byte" in out and f"{n} bytes / {n} tokens" in out
    assert f"in {-(-n // 64)} window(s) of up to 64" in out


def test_trained_model_scores_english_far_better_than_random(torch_cpu, tmp_path, capsys):
    from kvviz.training.corpus import build_corpus

    built = build_corpus()
    corpus = built.train + built.val
    data = TECHNICAL.encode()
    assert not any(data[i:i + 40] in corpus for i in range(len(data) - 40))
    scores = {}
    for name, text in (("technical", TECHNICAL), ("everyday", ENGLISH)):
        path = tmp_path / f"{name}.txt"
        path.write_text(text, encoding="utf-8")
        scores[name] = (_score(capsys, path), _score(capsys, path, "--model", "tiny-random"))
    trained, random = scores["technical"]
    assert trained < 2.5 and random > 6.0  # the docs' register: learned
    trained, random = scores["everyday"]
    assert trained < random - 3.0  # everyday prose: far better than random, far worse than the docs'


def test_score_matches_an_independent_count(torch_cpu, tmp_path, capsys):
    """Non-overlapping windows of 16: the same sum as a loop that scores each window by hand."""
    import math

    import torch.nn.functional as F

    from kvviz.models.presets import load_model

    text = ENGLISH[:100]
    path = tmp_path / "short.txt"
    path.write_text(text, encoding="utf-8")
    got = _score(capsys, path, "--context", "16")
    model = load_model("tiny", torch_cpu.device("cpu"))
    ids = torch_cpu.tensor(list(text.encode()))
    total = 0.0
    with torch_cpu.no_grad():
        for s in range(0, len(ids) - 1, 16):
            window = ids[s:s + 17]
            logits = model(window[None, :-1], all_logits=True).logits[0]  # (T, V)
            total += float(F.cross_entropy(logits, window[1:], reduction="sum"))
    assert got == pytest.approx(total / math.log(2) / (len(ids) - 1), abs=1e-4)


def test_score_prints_the_preset_warning(torch_cpu, tmp_path, capsys, monkeypatch, tiny_random):
    """The qwen3 shape is too big to build in a test: the loader is swapped, the warning is not."""
    import kvviz.models.presets as presets
    from kvviz.cli import main

    monkeypatch.setattr(presets, "load_model", lambda *a, **k: tiny_random)
    path = tmp_path / "a.txt"
    path.write_text(ENGLISH, encoding="utf-8")
    assert main(["score", str(path), "--model", "qwen3-0.6b-shape", "--context", "64"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("kvviz score: warning: qwen3-0.6b-shape:") and "B parameters" in err


# -- bad input: one line, exit 2 --------------------------------------------------------------------

def _saved_model(tmp_path: Path, tiny_random) -> Path:
    from kvviz.models.io import save_model

    return save_model(tiny_random, tmp_path / "model")


def _bad_cases(tmp_path: Path, tiny_random) -> dict[str, tuple[list[str], str]]:
    text = tmp_path / "ok.txt"
    text.write_text(ENGLISH, encoding="utf-8")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (tmp_path / "empty.txt").write_bytes(b"")
    missing_weights = _saved_model(tmp_path / "a", tiny_random)
    (missing_weights / "model.safetensors").unlink()
    corrupt = _saved_model(tmp_path / "b", tiny_random)
    (corrupt / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{garbage")
    mismatch = _saved_model(tmp_path / "c", tiny_random)
    cfg = json.loads((mismatch / "config.json").read_text())
    (mismatch / "config.json").write_text(json.dumps({**cfg, "d_model": 64}))
    return {
        "missing file": ([str(tmp_path / "nope.txt")], "nope.txt: file not found"),
        "not utf-8": ([str(tmp_path / "latin1.txt")], "latin1.txt: not UTF-8"),
        "empty": ([str(tmp_path / "empty.txt")], "empty.txt: the file is empty"),
        "no such folder": ([str(text), "--model", "/bad/folder"], "/bad/folder"),
        "unknown preset": ([str(text), "--model", "huge"], "unknown model 'huge'"),
        "missing weights": ([str(text), "--model", str(missing_weights)], "model.safetensors"),
        "corrupt weights": ([str(text), "--model", str(corrupt)], "model.safetensors: not a readable"),
        "config mismatch": ([str(text), "--model", str(mismatch)], "do not match the config"),
    }


CASES = ["missing file", "not utf-8", "empty", "no such folder", "unknown preset", "missing weights",
         "corrupt weights", "config mismatch"]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_and_exit_2(torch_cpu, tmp_path, capsys, tiny_random, case):
    from kvviz.cli import main

    argv, needle = _bad_cases(tmp_path, tiny_random)[case]
    rc = main(["score", *argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("kvviz score: error: ")
    assert needle in err


def test_bad_input_through_the_real_command(torch_cpu, tmp_path, tiny_random):
    """One real process: no traceback reaches the terminal, and the exit code is 2."""
    argv, needle = _bad_cases(tmp_path, tiny_random)["corrupt weights"]
    proc = subprocess.run([sys.executable, "-m", "kvviz", "score", *argv], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert needle in proc.stderr
