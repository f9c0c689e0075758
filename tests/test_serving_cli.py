"""`kvviz serve`: what it prints and writes, and every bad input refused in one line with exit code 2."""
from __future__ import annotations

import json

import pytest

from kvviz.cli import main


def _serve(capsys, *argv):
    rc = main(["serve", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_course_batch_table_and_json(torch_cpu, capsys, tmp_path):
    from kvviz.serving.record import load_runs

    path = tmp_path / "serve.json"
    rc, out, err = _serve(capsys, "--workload", "course-batch", "--threads", "1", "--json", str(path))
    assert rc == 0, err
    rows = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0] in (
        "static", "continuous", "chunked", "paged", "prefix", "reserve")}
    assert len(rows) == 6
    assert "55/120 46%" in rows["static"] and "23/80 29%" in rows["static"]
    assert "0/65 0%" in rows["continuous"]
    for key in ("static", "continuous", "chunked", "paged", "prefix", "reserve"):
        assert f"{key}: every request's tokens equal its own solo run (4 of 4)" in out.splitlines()
    runs = load_runs(path)
    assert [r.scheduler for r in runs] == ["static", "continuous", "chunked", "paged", "prefix", "reserve"]
    doc = json.loads(path.read_text())
    assert doc["identical"] is True
    assert doc["runs"][0]["summary"]["padding_slots"] == 55
    assert [len(r["token_ids"]) for r in doc["runs"][0]["results"]] == [15, 10, 20, 12]
    assert all(run.results[i].token_ids == runs[0].results[i].token_ids for run in runs for i in range(4))
    assert all(r.solo_token_ids == r.token_ids for run in runs for r in run.results)
    assert not [p for p in tmp_path.iterdir() if p.name != "serve.json"]  # no temporary left


def _bad_workload(tmp_path, name, doc) -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("argv, match", [
    (["--workload", "{file}"], "not valid JSON"),
    (["--workload", "nosuch"], "neither a preset"),
    (["--workload", "course-batch", "--schedulers", "static,fastest"], "unknown scheduler 'fastest'"),
    (["--workload", "course-batch", "--schedulers", "static,static"], "named twice"),
    (["--workload", "course-batch", "--max-batch", "0"], "--max-batch: must be at least 1"),
    (["--workload", "course-batch", "--token-budget", "0"], "--token-budget: must be at least 1"),
    (["--workload", "course-batch", "--token-budget", "8"], "smaller than one block of 16"),
    (["--workload", "course-batch", "--blocks", "0"], "--blocks: must be at least 1"),
    (["--workload", "course-batch", "--schedulers", "paged", "--blocks", "1"], "than request 1 needs (3 blocks)"),
    (["--workload", "{long}"], "exceeds the model's context of 2048"),
    ([], "give --workload"),
    (["--decode-sweep", "1,0"], "--decode-sweep: must be at least 1"),
])
def test_bad_input_is_one_line_exit_2(torch_cpu, capsys, tmp_path, argv, match):
    files = {"{file}": _bad_workload(tmp_path, "bad.json", "{requests: ["),
             "{long}": _bad_workload(tmp_path, "long.json", {"requests": [{"prompt": "x" * 2040, "new_tokens": 9}]})}
    argv = [files.get(a, a) for a in argv]
    rc, out, err = _serve(capsys, *argv)
    assert rc == 2
    assert match in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_gpt2_checkpoint_is_refused(torch_cpu, capsys, tmp_path):
    pytest.importorskip("tokenizers")
    from kvviz.config import ModelConfig
    from kvviz.models.gpt2 import GPT2
    from kvviz.models.hf import save_hf_checkpoint, train_tokenizer_json

    cfg = ModelConfig(name="g", arch="gpt2", vocab_size=300, d_model=64, n_layer=1, n_head=4, n_kv_head=4,
                      head_dim=16, d_ff=96, max_seq_len=256)
    save_hf_checkpoint(GPT2(cfg).init_weights(0), tmp_path, tokenizer_json=train_tokenizer_json(300))
    rc, out, err = _serve(capsys, "--workload", "course-batch", "--model", str(tmp_path))
    assert rc == 2 and "Llama-family" in err and len(err.strip().splitlines()) == 1, err


def test_decode_sweep(torch_cpu, capsys, tmp_path):
    from kvviz.config import ModelConfig
    from kvviz.costs.wall import WallShape

    path = tmp_path / "sweep.json"
    rc, out, err = _serve(capsys, "--decode-sweep", "1,4", "--threads", "1", "--json", str(path))
    assert rc == 0, err
    rows = json.loads(path.read_text())["rows"]
    assert [r["batch"] for r in rows] == [1, 4]
    wall = WallShape.from_config(ModelConfig(name="tiny"))
    one, four = rows
    # a step reads the weights once, whatever the batch; K/V and embedding rows grow with it
    assert wall.weights_bytes < one["bytes_per_step"] < 2 * wall.weights_bytes
    extra = four["bytes_per_step"] - one["bytes_per_step"]
    assert extra == 3 * wall.row_bytes + 3 * (one["bytes_per_step"] - wall.weights_bytes - wall.row_bytes)
    assert four["bytes_per_token"] < one["bytes_per_token"] / 2
    assert len([line for line in out.splitlines() if line.split() and line.split()[0] in ("1", "4")]) == 2


def test_bpe_checkpoint_folder(torch_cpu, capsys, tmp_path):
    pytest.importorskip("tokenizers")
    from kvviz.config import ModelConfig
    from kvviz.models.hf import save_hf_checkpoint, train_tokenizer_json
    from kvviz.models.transformer import Transformer

    cfg = ModelConfig(name="ck", arch="llama", vocab_size=320, d_model=64, n_layer=2, n_head=4, n_kv_head=2,
                      head_dim=16, d_ff=96, max_seq_len=256, tie_embeddings=False)
    save_hf_checkpoint(Transformer(cfg).init_weights(1), tmp_path, tokenizer_json=train_tokenizer_json(320))
    rc, out, err = _serve(capsys, "--workload", "shared-prefix", "--model", str(tmp_path), "--schedulers",
                          "static,prefix", "--block-size", "4", "--threads", "1")
    assert rc == 0, err
    assert "static: every request's tokens equal its own solo run (10 of 10)" in out.splitlines(), out
    assert "prefix: every request's tokens equal its own solo run (10 of 10)" in out.splitlines(), out
    prefix = next(line for line in out.splitlines() if line.startswith("prefix"))
    assert " 0.0%" not in prefix  # BPE tokens still share full blocks of the system prompt


def test_a_pool_larger_than_memory_is_refused_before_allocating(torch_cpu, capsys):
    from kvviz.models.io import available_ram

    if (available_ram() or 0) > 512 << 30:
        pytest.skip("this machine could hold the pool")
    rc, out, err = _serve(capsys, "--workload", "course-batch", "--schedulers", "paged", "--blocks", "1048576",
                          "--model", "wide", "--threads", "1")
    assert rc == 1 and "a K/V pool of 1,048,576 blocks of 16 needs 512.0 GiB" in err, err
    assert len(err.strip().splitlines()) == 1
