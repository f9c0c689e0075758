"""`kvviz train` on a small slice: the loss falls, a seed repeats itself, the output folder loads."""
from __future__ import annotations

import json
import math

import pytest

from kvviz.config import ModelConfig


def _slice(torch_cpu, n_train: int = 20_000, n_val: int = 2_000):
    from kvviz.commands.train import as_ids
    from kvviz.training.corpus import build_corpus

    corpus = build_corpus()
    return as_ids(corpus.train[:n_train]), as_ids(corpus.val[:n_val])


def test_corpus_holds_out_modules_by_name(torch_cpu):
    """Topics and the standard library's docstrings; validation is whole top-level modules, none of them in
    training, chosen by a stable hash (the same on every machine with the same Python)."""
    from kvviz.training.corpus import build_corpus, held_out, outside_text

    corpus = build_corpus()
    assert len(corpus.train) > 1_500_000 and 30_000 < len(corpus.val) < 0.1 * len(corpus.train)
    assert corpus.topics_bytes > 400_000  # pydoc_data.topics is about 465 KB
    tops = {m.split(".")[0] for m in corpus.train_modules}
    assert corpus.val_tops and not tops & set(corpus.val_tops)
    assert all(held_out(t) for t in corpus.val_tops) and not any(held_out(t) for t in tops)
    assert build_corpus().sha256() == corpus.sha256()
    assert b"Return the" in corpus.train  # docstrings, as English
    outside, name = outside_text()
    assert len(outside) > 50_000 and "pip" in name
    assert outside not in corpus.train[: len(outside) + 1]


def test_lr_schedule_warms_up_then_decays(torch_cpu):
    from kvviz.commands.train import lr_at

    rates = [lr_at(s, 100, 1e-3, 10) for s in range(100)]
    assert rates[0] == pytest.approx(1e-4)
    assert rates[9] == pytest.approx(1e-3)
    assert all(a >= b for a, b in zip(rates[9:], rates[10:]))  # cosine never rises
    assert rates[-1] == pytest.approx(1e-4, rel=0.05)  # floor of 10% at the end


def test_short_run_lowers_loss_and_is_deterministic(torch_cpu):
    from kvviz.commands.score import mean_nats
    from kvviz.commands.train import init_for_training, train
    from kvviz.models.transformer import Transformer

    train_ids, val_ids = _slice(torch_cpu)
    cfg = ModelConfig(name="tiny")
    kw = dict(steps=40, batch_size=8, context=64, lr=1e-2, warmup=5, weight_decay=0.1, seed=3, progress=False)
    model, figures = train(cfg, train_ids, val_ids, **kw)
    before, n = mean_nats(init_for_training(Transformer(cfg), 3), val_ids, 64)
    after, n2 = mean_nats(model, val_ids, 64)
    assert n == n2 == len(val_ids) - 1
    assert after < 0.8 * before  # validation, not just the training batches
    assert figures["final_train_loss"] < figures["first_loss"] - 1.0
    assert figures["val_bits_per_byte"] == pytest.approx(after / math.log(2) / n)
    assert figures["steps_done"] == 40 and not figures["stopped_early"]

    again, _ = train(cfg, train_ids, val_ids, **{**kw, "steps": 5})
    twice, _ = train(cfg, train_ids, val_ids, **{**kw, "steps": 5})
    for (name, a), b in zip(again.state_dict().items(), twice.state_dict().values()):
        assert torch_cpu.equal(a, b), name


def test_time_limit_stops_early(torch_cpu):
    from kvviz.commands.train import train

    train_ids, val_ids = _slice(torch_cpu, n_val=300)
    _, figures = train(ModelConfig(name="tiny"), train_ids, val_ids, steps=1000, batch_size=2, context=32,
                       lr=1e-3, warmup=1, weight_decay=0.0, seed=0, time_limit=0.0, progress=False)
    assert figures["stopped_early"] and figures["steps_done"] == 0


def test_train_command_writes_a_loadable_folder_and_card(torch_cpu, tmp_path, capsys):
    from kvviz.cli import main
    from kvviz.models.io import load_model_folder

    out = tmp_path / "model"
    rc = main(["train", "--steps", "3", "--batch-size", "2", "--context", "32", "--warmup", "1",
               "--eval-every", "2", "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 0
    assert "3/3 loss" in captured.err  # the progress bar
    assert "bits per byte" in captured.out
    model = load_model_folder(out)
    assert model.cfg == ModelConfig(name="tiny")
    record = json.loads((out / "training.json").read_text())
    assert record["steps_done"] == 3 and record["context"] == 32
    card = (out / "README.md").read_text()
    assert f"{record['val_bits_per_byte']:.3f} bits per byte" in card
    assert card.count("- greedy:") == 3 and card.count("- sampled:") == 3


@pytest.mark.parametrize("argv, needle", [
    (["--steps", "0"], "--steps"),
    (["--context", "4096"], "exceeds"),
    (["--lr", "-1"], "--lr"),
    (["--warmup", "0"], "--warmup"),
])
def test_train_rejects_bad_arguments(torch_cpu, tmp_path, capsys, argv, needle):
    from kvviz.cli import main

    rc = main(["train", "--out", str(tmp_path / "m"), "--batch-size", "1", *argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "m").exists()
