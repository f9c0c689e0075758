"""Hostile input: a download from a server that trickles (a byte every 0.2 s) or
goes silent gives up after the stall deadline with one error line and exit code 2, keeping the bytes
that came; the next try against a healthy server resumes from them with a Range request. The deadline
is `--stall-timeout` (1 s here, 30 s by default), so the test takes seconds.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from hubserver import HubServer, Repo, keep_hub_client_local
from test_download import checkpoint  # noqa: F401 - the same tiny Qwen3 checkpoint, as a fixture

from kvviz.cli import main
from kvviz.download import PARTIAL_SUFFIX

REPO = "org/tiny"
WEIGHTS = "model.safetensors"
STALL_S = 1.0


class SlowServer(HubServer):
    """The Hub stand-in, but the weights come `head` bytes at once and then one byte per `every_s` (or
    nothing at all with every_s=None), until `stop` is set."""

    def __init__(self, *args, head: int, every_s: float | None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.head, self.every_s, self.stop = head, every_s, False

    def _file(self, h, repo_id: str, revision: str, name: str, body: bool) -> None:
        if name != WEIGHTS or not body:
            return super()._file(h, repo_id, revision, name, body)
        from hubserver import etag

        data = self.repos[repo_id].files[name]
        h.send_response(200)
        for key, value in {"X-Repo-Commit": self.repos[repo_id].commit, "ETag": f'"{etag(name, data)}"',
                           "Content-Length": str(len(data)), "Content-Type": "application/octet-stream"}.items():
            h.send_header(key, value)
        h.end_headers()
        try:
            h.wfile.write(data[:self.head])
            h.wfile.flush()
            at = self.head
            while not self.stop and at < len(data):
                time.sleep(self.every_s or 0.05)
                if self.every_s is not None:
                    h.wfile.write(data[at:at + 1])
                    h.wfile.flush()
                    at += 1
        except (ConnectionError, OSError):
            pass  # the client gave up: what the test wants
        h.close_connection = True


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    from huggingface_hub.utils import logging as hf_logging

    keep_hub_client_local(monkeypatch)
    cache = tmp_path / "hf"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    level = hf_logging.get_verbosity()
    yield cache
    hf_logging.set_verbosity(level)


def _partials(cache: Path) -> list[Path]:
    return sorted(cache.rglob(f"*{PARTIAL_SUFFIX}"))


@pytest.mark.parametrize("every_s", [0.2, None], ids=["trickle", "silent"])
def test_a_stalled_download_gives_up_in_one_line_and_the_next_try_resumes(checkpoint, cache, monkeypatch, capsys,  # noqa: F811
                                                                          every_s):
    head = 20_000
    server = SlowServer({REPO: Repo.from_folder(checkpoint)}, head=head, every_s=every_s)
    with server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        t0 = time.perf_counter()
        rc = main(["download", REPO, "--stall-timeout", str(STALL_S)])
        elapsed = time.perf_counter() - t0
        server.stop = True
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line]
    print(f"\n{every_s and 'trickling' or 'silent'} server: gave up after {elapsed:.1f} s (deadline {STALL_S:g} s)")
    assert rc == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert "no progress for 1 s" in errors[0] and WEIGHTS in errors[0]
    partials = _partials(cache)
    assert len(partials) == 1
    kept = partials[0].stat().st_size
    assert kept >= head  # what came is kept
    assert not any(p.name == WEIGHTS for p in cache.rglob(WEIGHTS))  # no half file under the real name
    healthy = HubServer({REPO: Repo.from_folder(checkpoint)})
    with healthy:
        monkeypatch.setenv("HF_ENDPOINT", healthy.url)
        assert main(["download", REPO]) == 0
    ranges = [rng for method, path, rng in healthy.requested(WEIGHTS) if method == "GET"]
    assert ranges == [f"bytes={kept}-"]  # resumed, not fetched again
    snapshot = next(cache.rglob(f"snapshots/*/{WEIGHTS}"))
    assert snapshot.read_bytes() == (checkpoint / WEIGHTS).read_bytes()
    assert _partials(cache) == []


def test_the_stall_deadline_is_bounded_at_parse_time(capsys):
    for value in ("0", "-1", "nan", "1e9", "x"):
        assert main(["download", REPO, "--stall-timeout", value]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
