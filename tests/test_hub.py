"""Hub ids (`ORG/NAME[@REVISION]`) resolved offline from the Hugging Face and ModelScope caches, in every
command that takes --model, and `kvviz models` listing what the caches hold. The Hugging Face cache is
filled by huggingface_hub itself (a download from tests/hubserver.py on 127.0.0.1); ModelScope's is a
folder per model, laid out as its releases write it."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hubserver import HubServer, Repo, keep_hub_client_local

from kvviz.cli import main

REPO = "org/tiny"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from kvviz.config import ModelConfig
    from kvviz.models import build_decoder
    from kvviz.models.hf import save_hf_checkpoint, train_tokenizer_json

    cfg = ModelConfig(name="t", arch="llama", vocab_size=300, d_model=64, n_layer=2, n_head=4, n_kv_head=2,
                      head_dim=16, d_ff=96, max_seq_len=128)
    folder = tmp_path_factory.mktemp("ckpt") / "tiny"
    return save_hf_checkpoint(build_decoder(cfg).init_weights(0), folder, tokenizer_json=train_tokenizer_json(300))


@pytest.fixture
def caches(tmp_path, monkeypatch) -> tuple[Path, Path]:
    hf, ms = tmp_path / "hf", tmp_path / "ms"
    monkeypatch.setenv("HF_HUB_CACHE", str(hf))
    keep_hub_client_local(monkeypatch)
    monkeypatch.setenv("MODELSCOPE_CACHE", str(ms))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: any request would fail
    monkeypatch.delenv("HF_HOME", raising=False)
    return hf, ms


def fill_hf_cache(checkpoint: Path, monkeypatch, repo_id: str = REPO) -> Path:
    """Download the checkpoint from the local stand-in, so huggingface_hub writes the cache its own way."""
    from kvviz.download import download_model

    with HubServer({repo_id: Repo.from_folder(checkpoint)}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        folder = download_model(repo_id)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    return folder


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_cached_id_loads_the_same_model_as_its_folder(checkpoint, caches, monkeypatch):
    import torch

    from kvviz.models.presets import load_model, load_tokenizer

    snapshot = fill_hf_cache(checkpoint, monkeypatch)
    assert snapshot.parent.name == "snapshots" and (snapshot / "model.safetensors").is_symlink()
    by_id = load_model(REPO, torch.device("cpu"))
    by_folder = load_model(str(checkpoint), torch.device("cpu"))
    assert by_id.cfg.n_kv_head == 2 and by_id.cfg.arch == "llama"
    for (name, a), (_, b) in zip(by_id.state_dict().items(), by_folder.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert load_tokenizer(REPO).encode("the cache") == load_tokenizer(str(checkpoint)).encode("the cache")
    commit = snapshot.name
    from kvviz.models.presets import resolve_name

    assert resolve_name(f"{REPO}@{commit}") == resolve_name(f"{REPO}@main") == resolve_name(REPO) == str(snapshot)


def test_every_command_takes_a_cached_id(checkpoint, caches, monkeypatch, capsys, tmp_path):
    fill_hf_cache(checkpoint, monkeypatch)
    rc, out, err = run_cli(capsys, "bench", "--model", REPO, "--tokens", "3", "--engines", "concat")
    assert rc == 0, err
    rc, out, err = run_cli(capsys, "memory", "--model", REPO, "--tokens", "100")
    assert rc == 0, err
    assert "model org/tiny: 2 layers, 2 KV heads of 16, float32" in out and "KV per token, 2 layers: 512 B" in out
    text = tmp_path / "t.txt"
    text.write_text("The key and value of a token never change.\n")
    rc, out, err = run_cli(capsys, "score", "--model", REPO, str(text))
    assert rc == 0, err


def test_hf_home_is_used_when_hf_hub_cache_is_unset(checkpoint, caches, monkeypatch, tmp_path):
    from kvviz.models.hub import hf_cache_dir
    from kvviz.models.presets import resolve_name

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "home" / "hub"))
    snapshot = fill_hf_cache(checkpoint, monkeypatch)
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hf_cache_dir() == tmp_path / "home" / "hub"
    assert resolve_name(REPO) == str(snapshot)


@pytest.mark.parametrize("layout", ["models/Qwen/Tiny-0___5B", "Qwen/Tiny-0.5B", "hub/models/Qwen/Tiny-0___5B"])
def test_modelscope_cache_layouts(checkpoint, caches, layout, capsys):
    _, ms = caches
    shutil.copytree(checkpoint, ms / layout)
    rc, out, err = run_cli(capsys, "bench", "--model", "Qwen/Tiny-0.5B", "--tokens", "3", "--engines", "concat")
    assert rc == 0, err
    rc, out, err = run_cli(capsys, "models")
    row = next(line for line in out.splitlines() if line.startswith("Qwen/Tiny-0.5B"))
    assert "ModelScope" in row and "llama" in row and "cannot open" not in row


def test_an_id_in_no_cache_names_the_caches_searched_and_kvviz_download(caches, capsys):
    hf, ms = caches
    rc, out, err = run_cli(capsys, "bench", "--model", "Qwen/Qwen3-0.6B")
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert str(hf) in err and str(ms) in err and "`kvviz download Qwen/Qwen3-0.6B`" in err
    rc, out, err = run_cli(capsys, "bench", "--model", "Qwen/Qwen3-0.6B@v2")  # a revision: Hugging Face only
    assert rc == 2 and str(hf) in err and str(ms) not in err


@pytest.mark.parametrize("text", ["org/", "a/b/c", "org/ti ny", "org/tiny@", "org--x/y", "org/-y", "org/y@bad rev"])
def test_malformed_ids_are_one_line(text, caches, capsys):
    rc, out, err = run_cli(capsys, "bench", "--model", text)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "is not a model id" in err


def test_a_half_downloaded_snapshot_says_what_is_missing(checkpoint, caches, monkeypatch, capsys):
    snapshot = fill_hf_cache(checkpoint, monkeypatch)
    (snapshot / "model.safetensors").unlink()  # as a download interrupted before the weights leaves it
    rc, out, err = run_cli(capsys, "bench", "--model", REPO)
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "incomplete" in err and "missing model.safetensors" in err and "`kvviz download org/tiny`" in err
    rc, out, err = run_cli(capsys, "models")
    row = next(line for line in out.splitlines() if line.startswith(REPO))
    assert "cannot open: files missing: model.safetensors" in row


def test_models_lists_cached_checkpoints_and_says_why_one_cannot_open(checkpoint, caches, monkeypatch, capsys,
                                                                        tmp_path):
    from kvviz.models.hf import read_hf_config
    from kvviz.models.hub import list_cached_models

    fill_hf_cache(checkpoint, monkeypatch)
    bert = tmp_path / "bert"
    shutil.copytree(checkpoint, bert)
    data = json.loads((bert / "config.json").read_text())
    data.update(model_type="bert", architectures=["BertModel"])
    (bert / "config.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="unsupported architecture bert"):  # kvviz download stops after config.json
        fill_hf_cache(bert, monkeypatch, "google/bert-tiny")
    rc, out, err = run_cli(capsys, "models")
    assert rc == 0, err
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip() and "/" in line.split()[0]}
    cfg = read_hf_config(checkpoint)
    good = rows[REPO]
    assert f"{cfg.param_count() / 1e6:.2f}M" in good and "512 B" in good and "cannot open" not in good
    assert "cannot open: unsupported architecture bert (BertModel)" in rows["google/bert-tiny"]
    listed = {m.model_id: m for m in list_cached_models()}
    assert listed[REPO].openable and listed[REPO].config.kv_bytes_per_token() == cfg.kv_bytes_per_token()
    on_disk = sum(p.stat().st_size for p in checkpoint.iterdir())
    assert listed[REPO].size_bytes == on_disk
    assert not listed["google/bert-tiny"].openable


def test_an_unreadable_cache_folder_is_one_line(checkpoint, caches, monkeypatch, capsys):
    """Root reads every folder whatever its mode, so the refusal the system would give is simulated there."""
    hf, _ = caches
    fill_hf_cache(checkpoint, monkeypatch)
    repo = hf / "models--org--tiny"
    if os.geteuid() == 0:
        real = os.listdir

        def listdir(path="."):
            if Path(path).resolve().is_relative_to(repo.resolve()):
                raise PermissionError(13, "Permission denied", str(path))
            return real(path)

        monkeypatch.setattr(os, "listdir", listdir)
        monkeypatch.setattr("huggingface_hub._snapshot_download.os.path.exists",
                            lambda p: False if Path(p).is_relative_to(repo) else os.path.lexists(p))
    else:
        repo.chmod(0)
    try:
        rc, out, err = run_cli(capsys, "bench", "--model", REPO)
    finally:
        repo.chmod(0o755)
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "permission denied" in err and str(repo) in err
