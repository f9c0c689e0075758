"""`kvviz convert`: a kvviz model as a Hugging Face checkpoint that transformers generates the same greedy
tokens from, with a tokenizer.json that encodes and decodes exactly as kvviz's byte tokenizer; bad
outputs refused in one line with nothing left behind. No vLLM needed.
"""
from __future__ import annotations

import json
import random

import pytest

from kvviz.cli import main

PROMPTS = ("The key and value of a token", "def f(x):\n    return x", "中文 ünï 👩\u200d👩\u200d👧 cache")
ODD_TEXTS = ("", " ", "  two  spaces\n\ttabs\r\n", "\x00\x01\x7f", "é" * 300, "a" * 5000, "'s 're n't ?!.")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """`kvviz convert` of tiny (trained, tied head) and tiny-random (untied head)."""
    root = tmp_path_factory.mktemp("convert")
    folders = {}
    for name in ("tiny", "tiny-random"):
        assert main(["convert", "--model", name, "--out", str(root / name)]) == 0
        folders[name] = root / name
    return folders


@pytest.mark.parametrize("name", ["tiny", "tiny-random"])
def test_transformers_generate_gives_kvviz_greedy_tokens(converted, name, torch_cpu):
    from transformers import AutoModelForCausalLM

    from kvviz.engines import make_engine
    from kvviz.models.presets import build_model

    hf = AutoModelForCausalLM.from_pretrained(str(converted[name]), dtype=torch_cpu.float32).eval()
    model = build_model(name).eval()
    for prompt in PROMPTS:
        ids = list(prompt.encode("utf-8"))
        with torch_cpu.no_grad():
            out = hf.generate(torch_cpu.tensor([ids]), max_new_tokens=48, do_sample=False)
        theirs = out[0, len(ids):].tolist()
        ours = [t.token_id for t in make_engine("static", model).generate(ids, 48)]
        assert theirs == ours, prompt


def test_config_names_no_special_tokens(converted):
    """Llama's config class would default to bos 1 and eos 2, bytes that generate would then stop at."""
    data = json.loads((converted["tiny"] / "config.json").read_text())
    assert data["model_type"] == "llama"
    assert (data["bos_token_id"], data["eos_token_id"], data["pad_token_id"]) == (None, None, None)
    assert data["head_dim"] == 32 and data["tie_word_embeddings"] is True


def test_kvviz_reads_the_checkpoint_back_to_the_same_logits(converted, torch_cpu):
    from kvviz.models.hf import load_hf_model
    from kvviz.models.presets import build_model

    ids = torch_cpu.tensor([list(PROMPTS[1].encode())])
    for name in ("tiny", "tiny-random"):
        with torch_cpu.no_grad():
            again = load_hf_model(converted[name]).eval()(ids).logits
            first = build_model(name).eval()(ids).logits
        assert torch_cpu.allclose(again, first, atol=1e-5), name


def _random_ids(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(256) for _ in range(n)]


def test_tokenizer_encodes_and_decodes_as_kvviz_bytes(converted):
    """transformers' AutoTokenizer and kvviz's own reader of tokenizer.json, on ASCII, multi-byte UTF-8 and
    byte sequences that are not UTF-8 (truncated, stray continuation bytes, 0xff)."""
    from transformers import AutoTokenizer

    from kvviz.models.hf import load_hf_tokenizer
    from kvviz.tokenizer import ByteTokenizer

    ours = ByteTokenizer()
    theirs = AutoTokenizer.from_pretrained(str(converted["tiny"]))
    read = load_hf_tokenizer(converted["tiny"])
    for text in (*PROMPTS, *ODD_TEXTS):
        assert theirs(text, add_special_tokens=True)["input_ids"] == ours.encode(text), repr(text[:20])
        assert read.encode(text) == ours.encode(text), repr(text[:20])
        assert theirs.decode(ours.encode(text)) == text
    rng = random.Random(0)
    odd = [[0xE4, 0xB8], [0x80, 0x41], [0xFF, 0xFE, 0x41], [0xF0, 0x9F, 0x98], [0xC3, 0xA9, 0xA9],
           *(_random_ids(rng, rng.randrange(1, 24)) for _ in range(500))]
    for ids in odd:
        assert theirs.decode(ids) == ours.decode(ids), ids
        assert read.decode(ids) == ours.decode(ids), ids


def test_converting_again_replaces_the_files(converted, capsys, tmp_path):
    out = tmp_path / "again"
    assert run_cli(capsys, "convert", "--model", "tiny-random", "--out", str(out))[0] == 0
    first = (out / "model.safetensors").read_bytes()
    code, printed, _ = run_cli(capsys, "convert", "--model", "tiny", "--out", str(out))
    assert code == 0 and str(out) in printed
    assert (out / "model.safetensors").read_bytes() == (converted["tiny"] / "model.safetensors").read_bytes() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again"]  # no temporary folder left beside it


@pytest.mark.parametrize("case", ["file", "other-files", "no-parent", "unknown-model"])
def test_bad_output_is_one_line_and_leaves_nothing(case, capsys, tmp_path):
    out, model = tmp_path / "out", "tiny"
    if case == "file":
        out.write_text("x")
    elif case == "other-files":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    elif case == "no-parent":
        out = tmp_path / "missing" / "out"
    else:
        model = "no-such-model"
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    code, printed, err = run_cli(capsys, "convert", "--model", model, "--out", str(out))
    assert code == 2 and printed == ""
    assert err.startswith("kvviz convert: error: ") and err.count("\n") == 1, err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
