"""`kvviz download` and kvviz.download against a Hub stand-in on 127.0.0.1 (tests/hubserver.py):
what is fetched and in which order, a dropped connection, a cancel and a resume, HF_TOKEN, server
failures and a full disk. No test touches the internet: HF_ENDPOINT points at the local server."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from hubserver import HubServer, Repo, keep_hub_client_local

from kvviz.cli import main

REPO = "org/tiny"
WEIGHTS = "model.safetensors"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A tiny Qwen3 checkpoint in Hugging Face format (about 320 KiB), written by kvviz itself."""
    from kvviz.config import ModelConfig
    from kvviz.models import build_decoder
    from kvviz.models.hf import save_hf_checkpoint, train_tokenizer_json

    cfg = ModelConfig(name="t", arch="qwen3", vocab_size=300, d_model=64, n_layer=2, n_head=4, n_kv_head=2,
                      head_dim=16, d_ff=96, max_seq_len=128, qk_norm=True)
    folder = tmp_path_factory.mktemp("ckpt") / "tiny"
    save_hf_checkpoint(build_decoder(cfg).init_weights(0), folder, tokenizer_json=train_tokenizer_json(300))
    (folder / "README.md").write_text("not needed by kvviz\n")
    (folder / "pytorch_model.bin").write_bytes(b"\0" * 1000)  # neither: kvviz reads safetensors only
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    cache = tmp_path / "hf"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return cache


@pytest.fixture
def small_chunks(monkeypatch):
    """huggingface_hub reads 10 MiB per chunk; 16 KiB lets a test stop inside a 320 KiB file."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 16 * 1024)
    # every chunk reported, so a test can stop at one
    monkeypatch.setattr("kvviz.commands.download.REPORT_EVERY_S", 0.0)


def serve(checkpoint: Path, monkeypatch, **kwargs) -> HubServer:
    server = HubServer({REPO: Repo.from_folder(checkpoint, token=kwargs.pop("token", None))}, **kwargs)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    return server


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error" in line.lower()]


@pytest.fixture(autouse=True)
def quiet_local_hub_client(monkeypatch):
    """No request to the internet (see keep_hub_client_local); and huggingface_hub's logger keeps the stderr
    of the test that first used it, so a later test's warning (a retry) would go to that closed stream."""
    from huggingface_hub.utils import logging as hf_logging

    keep_hub_client_local(monkeypatch)
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    yield
    hf_logging.set_verbosity(level)


def snapshot_files(cache: Path) -> dict[str, bytes]:
    snaps = list(cache.glob("models--org--tiny/snapshots/*"))
    assert len(snaps) <= 1
    return {p.name: p.read_bytes() for p in snaps[0].iterdir()} if snaps else {}


def test_download_fetches_only_what_kvviz_reads_config_first(checkpoint, cache, monkeypatch, capsys):
    with serve(checkpoint, monkeypatch) as server:
        rc, out, err = run_cli(capsys, "download", REPO)
    assert rc == 0, err
    files = snapshot_files(cache)
    assert sorted(files) == ["config.json", "model.safetensors", "tokenizer.json"]
    for name, data in files.items():
        assert data == (checkpoint / name).read_bytes()
    gets = [path.rsplit("/", 1)[1] for method, path, _ in server.log if method == "GET" and "/resolve/" in path]
    assert gets[0] == "config.json" and set(gets) == set(files)  # README and pytorch_model.bin never asked for
    assert {path.split("/")[1] for _, path, _ in server.log} <= {"api", "org"}
    assert [path for _, path, _ in server.log if path.startswith("/api/")] == ["/api/models/org/tiny"]
    assert Path(out.strip()) == next(cache.glob("models--org--tiny/snapshots/*"))
    assert "3 files" in err and "322.9 KiB" in err
    assert not list(cache.rglob("*.kvviz-partial")) and not list(cache.rglob("*.incomplete"))


def test_downloaded_id_then_resolves_offline(checkpoint, cache, monkeypatch, capsys):
    """Nothing is fetched implicitly: after the download, `--model org/tiny` works with the server gone."""
    with serve(checkpoint, monkeypatch):
        assert run_cli(capsys, "download", REPO)[0] == 0
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    with serve(checkpoint, monkeypatch) as server:
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
        rc, out, err = run_cli(capsys, "bench", "--model", REPO, "--tokens", "3", "--engines", "concat")
        assert server.log == []
    assert rc == 0, err
    assert "tokens identical" in out or "concat" in out
    rc, out, err = run_cli(capsys, "models")
    assert rc == 0
    row = next(line for line in out.splitlines() if line.startswith(REPO))
    assert "qwen3" in row and "Hugging Face" in row and "512 B" in row and "cannot open" not in row


def test_a_connection_dropped_mid_file_is_resumed_with_a_range_request(checkpoint, cache, monkeypatch, capsys,
                                                                        small_chunks):
    with serve(checkpoint, monkeypatch, drop_after={WEIGHTS: 50_000}) as server:
        rc, out, err = run_cli(capsys, "download", REPO)
    assert rc == 0, err
    ranges = [rng for method, path, rng in server.requested(WEIGHTS) if method == "GET"]
    assert ranges == ["", "bytes=50000-"]  # every byte received before the drop is kept (written as it comes)
    assert snapshot_files(cache)[WEIGHTS] == (checkpoint / WEIGHTS).read_bytes()


def test_cancel_keeps_the_partial_file_and_the_next_download_resumes_it(checkpoint, cache, monkeypatch,
                                                                          small_chunks):
    from kvviz.download import DownloadCancelled, download_model

    cancel = threading.Event()
    seen = []

    def progress(p):
        seen.append(p)
        if p.file == WEIGHTS and p.done_bytes > 100_000:
            cancel.set()

    with serve(checkpoint, monkeypatch) as server:
        with pytest.raises(DownloadCancelled):
            download_model(REPO, progress=progress, cancel=cancel, report_every_s=0)
        partial = list(cache.rglob("*.kvviz-partial"))
        assert len(partial) == 1 and 0 < partial[0].stat().st_size < (checkpoint / WEIGHTS).stat().st_size
        kept = partial[0].stat().st_size
        assert WEIGHTS not in snapshot_files(cache)  # no partial file where the complete one belongs
        reports = []
        folder = download_model(REPO, progress=reports.append, report_every_s=0)
    assert (folder / WEIGHTS).read_bytes() == (checkpoint / WEIGHTS).read_bytes()
    ranges = [rng for method, path, rng in server.requested(WEIGHTS) if method == "GET"]
    assert ranges == ["", f"bytes={kept}-"]
    # The second run reports the kept bytes as done but not as fetched: its rate counts only new bytes.
    last = reports[-1]
    assert last.done_bytes == last.total_bytes == sum(p.stat().st_size for p in folder.iterdir())
    assert last.fetched_bytes == (checkpoint / WEIGHTS).stat().st_size - kept
    assert [p.file_index for p in seen][0] == 1 and seen[0].n_files == 3
    assert seen[0].eta_s is None  # no time left is guessed from config.json's few bytes
    assert last.eta_s == 0.0 and last.rate_bytes_per_s > 0


def test_ctrl_c_on_the_command_line_then_resume(checkpoint, cache, monkeypatch, capsys, small_chunks):
    import kvviz.commands.download as command

    calls = {"n": 0}
    draw = command._Printer.__call__

    def interrupting(self, p):
        draw(self, p)
        if p.file == WEIGHTS and p.done_bytes > 150_000 and calls["n"] == 0:
            calls["n"] += 1
            raise KeyboardInterrupt

    monkeypatch.setattr(command._Printer, "__call__", interrupting)
    with serve(checkpoint, monkeypatch):
        rc, out, err = run_cli(capsys, "download", REPO)
        assert rc == 130
        assert "interrupted; run `kvviz download org/tiny` again to resume" in err
        assert WEIGHTS not in snapshot_files(cache)
        rc, out, err = run_cli(capsys, "download", REPO)
    assert rc == 0, err
    assert snapshot_files(cache)[WEIGHTS] == (checkpoint / WEIGHTS).read_bytes()


def test_hf_token_is_sent_for_a_private_repo(checkpoint, cache, monkeypatch, capsys):
    with serve(checkpoint, monkeypatch, token="s3cret"):
        rc, out, err = run_cli(capsys, "download", REPO)
        assert rc == 2 and len(err.strip().splitlines()) == 1
        assert "HTTP 401" in err and "HF_TOKEN" in err
        monkeypatch.setenv("HF_TOKEN", "s3cret")
        rc, out, err = run_cli(capsys, "download", REPO)
    assert rc == 0, err
    assert WEIGHTS in snapshot_files(cache)


def test_an_unsupported_architecture_is_refused_before_any_weight(checkpoint, cache, monkeypatch, capsys, tmp_path):
    bert = tmp_path / "bert"
    shutil.copytree(checkpoint, bert)
    data = json.loads((bert / "config.json").read_text())
    data.update(model_type="bert", architectures=["BertModel"])
    (bert / "config.json").write_text(json.dumps(data))
    with serve(bert, monkeypatch) as server:
        rc, out, err = run_cli(capsys, "download", REPO)
    assert rc == 2
    assert len(error_lines(err)) == 1  # after the plan's line and config.json's progress line
    assert "unsupported architecture bert" in error_lines(err)[0]
    assert server.requested(WEIGHTS) == [] and server.requested("tokenizer.json") == []


@pytest.mark.parametrize("failure, expected", [
    ({"/api/models": 404}, "no such model repo"),
    ({"/api/models": 401}, "HTTP 401: no such repo, or a private or gated one"),
    ({"/api/models": 500}, "answered HTTP 500"),
    ({"/api/models": "html"}, "did not answer with JSON"),
    # (a 5xx on a file is retried by huggingface_hub for 23 s before it gives up: not tested here)
    ({"/org/tiny/resolve/main/config.json": "html"}, "not a file of the Hub"),
    ({"/org/tiny/resolve/0123456789abcdef0123456789abcdef01234567/model.safetensors": 401}, "HTTP 401"),
])
def test_server_failures_are_one_line_and_leave_no_partial_file(checkpoint, cache, monkeypatch, capsys,
                                                                 failure, expected):
    with serve(checkpoint, monkeypatch, fail=failure):
        rc, out, err = run_cli(capsys, "download", REPO)
    assert rc == 2
    errors = error_lines(err)
    assert len(errors) == 1 and errors[0].startswith("kvviz download: error: org/tiny: ") and expected in errors[0]
    assert "Traceback" not in err
    assert WEIGHTS not in snapshot_files(cache)


@pytest.mark.parametrize("text", ["org", "org/", "/tiny", "a/b/c", "org/ti ny", "org/tiny@", "org--x/y"])
def test_malformed_ids_are_refused(text, cache, monkeypatch, capsys):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    rc, out, err = run_cli(capsys, "download", text)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "is not a model id" in err


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs (root only; skipped elsewhere)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_too_little_disk_space_is_refused_before_fetching(checkpoint, small_disk, monkeypatch, capsys, tmp_path):
    big = tmp_path / "big"
    shutil.copytree(checkpoint, big)
    (big / "model-extra.safetensors").write_bytes(b"\0" * (2 << 20))  # 2 MiB more than the disk holds
    monkeypatch.setenv("HF_HUB_CACHE", str(small_disk / "hf"))
    with serve(big, monkeypatch) as server:
        rc, out, err = run_cli(capsys, "download", REPO)
    assert rc == 2 and "not enough disk space" in error_lines(err)[0] and len(error_lines(err)) == 1
    assert [m for m, path, _ in server.log if "/resolve/" in path] == []


def test_a_disk_filling_up_mid_download_is_one_line_and_no_partial_blob(checkpoint, small_disk, monkeypatch,
                                                                        capsys, small_chunks):
    import kvviz.commands.download as command

    monkeypatch.setenv("HF_HUB_CACHE", str(small_disk / "hf"))
    draw = command._Printer.__call__

    def fill_the_disk(self, p):  # another program takes the space once the weights start
        draw(self, p)
        filler = small_disk / "filler"
        if p.file == WEIGHTS and not filler.exists():
            with open(filler, "wb") as fh:
                try:
                    while True:
                        fh.write(b"\0" * 4096)
                        fh.flush()
                except OSError:
                    pass

    monkeypatch.setattr(command._Printer, "__call__", fill_the_disk)
    with serve(checkpoint, monkeypatch):
        rc, out, err = run_cli(capsys, "download", REPO)
    assert rc == 2
    errors = error_lines(err)
    assert len(errors) == 1 and "the disk filled up" in errors[0]
    assert WEIGHTS not in snapshot_files(small_disk / "hf")
    assert not [p for p in (small_disk / "hf").rglob("blobs/*") if not p.name.endswith((".kvviz-partial",))
                and p.stat().st_size == (checkpoint / WEIGHTS).stat().st_size]


def test_a_sharded_repo_fetches_only_the_shards_its_index_names(checkpoint, cache, monkeypatch, capsys, tmp_path):
    """As in Mistral's repos: shards, their index, and a consolidated.safetensors kvviz does not read."""
    import torch
    from safetensors.torch import load_file, save_file

    from kvviz.models.presets import load_model

    sharded = tmp_path / "sharded"
    sharded.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(checkpoint / name, sharded / name)
    state = load_file(str(checkpoint / WEIGHTS))
    names = sorted(state)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for shard, keys in shards.items():
        save_file({k: state[k] for k in keys}, str(sharded / shard), metadata={"format": "pt"})
    index = {"metadata": {}, "weight_map": {k: shard for shard, keys in shards.items() for k in keys}}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    shutil.copy(checkpoint / WEIGHTS, sharded / "consolidated.safetensors")
    with serve(sharded, monkeypatch) as server:
        rc, out, err = run_cli(capsys, "download", REPO)
    assert rc == 0, err
    assert server.requested("consolidated.safetensors") == []
    assert sorted(snapshot_files(cache)) == sorted(["config.json", "tokenizer.json", "model.safetensors.index.json",
                                                    *shards])
    by_id = load_model(REPO, torch.device("cpu")).state_dict()
    by_folder = load_model(str(checkpoint), torch.device("cpu")).state_dict()
    assert all(torch.equal(by_id[k], by_folder[k]) for k in by_folder)
