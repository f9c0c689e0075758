"""`kvviz train`'s shape options: a smaller draft for a shipped model, trained a few steps and loaded as
spec-draft's draft; impossible shapes refused in one line before anything is written."""
from __future__ import annotations

import json

import pytest

from kvviz.config import ModelConfig
from kvviz.training.shape import training_config


def test_a_one_layer_draft_trains_and_drafts_for_tiny(torch_cpu, tmp_path, capsys):
    from kvviz.cli import main
    from kvviz.engines import make_engine
    from kvviz.models.io import load_model_folder
    from kvviz.models.presets import load_model

    out = tmp_path / "tiny-1l"
    rc = main(["train", "--draft-for", "tiny", "--layers", "1", "--d-ff", "256", "--steps", "3", "--batch-size",
               "2", "--context", "32", "--warmup", "1", "--eval-every", "0", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    draft = load_model_folder(out)
    tiny = load_model("tiny", torch_cpu.device("cpu"))
    assert draft.cfg == tiny.cfg.replace(name="tiny-1l", n_layer=1, d_ff=256)
    record = json.loads((out / "training.json").read_text())
    assert record["drafts_for"] == "tiny" and record["steps_done"] == 3
    assert (out / "README.md").read_text().startswith("# tiny-1l: a draft for tiny")

    prompt = list(b"The key of a dictionary is the key of a dictionary")
    naive = [t.token_id for t in make_engine("naive", tiny).generate(prompt, 24)]
    for rollback in ("overwrite", "crop"):
        engine = make_engine("spec-draft", tiny, draft=str(out), rollback=rollback, spec_k=3)
        traces = list(engine.generate(prompt, 24))
        assert [t.token_id for t in traces] == naive  # exact under greedy whatever the draft proposes
        assert engine.proposer.name == str(out) and engine.proposer.model.cfg.n_layer == 1
        assert traces[-1].draft_forwards > 0 and sum(t.spec_proposed for t in traces if t.spec_index == 0) > 0


def test_shape_arithmetic_by_hand():
    tiny = ModelConfig(name="tiny")
    # d_model 64 over 2 heads: head_dim 32, one KV head per head, d_ff in tiny's ratio (512 / 128 = 4): 256
    cfg = training_config(tiny, name="d", d_model=64, heads=2)
    assert (cfg.d_model, cfg.n_head, cfg.n_kv_head, cfg.head_dim, cfg.d_ff) == (64, 2, 2, 32, 256)
    # a draft for Qwen3-0.6B's shape keeps its grouped heads of 128 and its architecture, trained in float32
    from kvviz.models.presets import preset_config

    qwen = preset_config("qwen3-0.6b-shape")
    cfg = training_config(qwen, name="q", layers=2)
    assert (cfg.arch, cfg.n_layer, cfg.n_head, cfg.n_kv_head, cfg.head_dim, cfg.qk_norm, cfg.dtype) == (
        "qwen3", 2, 16, 8, 128, True, "float32")


@pytest.mark.parametrize("argv, needle", [
    (["--heads", "3"], "--heads 3 does not divide --d-model 128"),
    (["--d-model", "100", "--heads", "8"], "--heads 8 does not divide --d-model 100"),
    (["--kv-heads", "3"], "--kv-heads 3 does not divide --heads 4"),
    (["--layers", "0"], "--layers must be a whole number of at least 1"),
    (["--head-dim", "33"], "head_dim 33 is odd"),
    (["--draft-for", "nope"], "not a shipped model"),
])
def test_impossible_shapes_are_refused_in_one_line(torch_cpu, tmp_path, capsys, argv, needle):
    from kvviz.cli import main

    rc = main(["train", "--out", str(tmp_path / "m"), "--steps", "1", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "m").exists()


def test_a_shape_larger_than_the_memory_is_refused_before_it_is_built(torch_cpu, tmp_path, capsys):
    from kvviz.cli import main

    # 2 layers of d_model 2^18 (128 heads of 2,048, d_ff 2^20): some 2.2e12 parameters, 16 B each to train
    rc = main(["train", "--out", str(tmp_path / "m"), "--d-model", str(1 << 18), "--heads", "128", "--steps",
               "1"])
    err = capsys.readouterr().err
    assert rc == 1 and "needs" in err and "of memory" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "m").exists()


def test_a_shape_of_its_own_needs_an_out_folder(torch_cpu, capsys):
    from kvviz.cli import main
    from kvviz.commands.train import DEFAULT_OUT

    before = (DEFAULT_OUT / "model.safetensors").stat().st_mtime_ns
    assert main(["train", "--layers", "1", "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "give --out" in err and len(err.strip().splitlines()) == 1
    assert (DEFAULT_OUT / "model.safetensors").stat().st_mtime_ns == before
