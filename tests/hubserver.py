"""A Hugging Face Hub stand-in on 127.0.0.1 for tests and benchmarks: a thread serving repos in the
Hub's URL layout (`/api/models/{repo}[/revision/{rev}]`, `/{repo}/resolve/{rev}/{file}`) with the headers
huggingface_hub reads (X-Repo-Commit, ETag, Content-Length) and Range requests, plus the failures a
real server or a proxy produces (an error status, an HTML page, a connection dropped mid-file)."""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


@dataclass
class Repo:
    files: dict[str, bytes]
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    token: str | None = None  # when set, requests must carry `Authorization: Bearer <token>`

    @staticmethod
    def from_folder(folder: Path, **kwargs) -> Repo:
        return Repo({p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}, **kwargs)


def keep_hub_client_local(monkeypatch) -> None:
    """huggingface_hub fetches a registry of AI agents once per process from the endpoint it read at import
    (huggingface.co unless HF_ENDPOINT was set then), to name the caller in its user agent: give it an empty
    one, so no test makes that request to the internet."""
    from huggingface_hub import constants
    from huggingface_hub.utils import _detect_agent

    monkeypatch.setattr(_detect_agent, "_registry", {"standardEnvVars": [], "harnesses": {}})
    # tests/test_hf.py sets HF_HUB_OFFLINE for the whole session (transformers must never reach the
    # network): these tests talk to the Hub stand-in on 127.0.0.1, so they undo it while they run.
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


def etag(name: str, data: bytes) -> str:
    """The Hub's ETag: the sha256 for LFS files (weights), the git blob sha1 for the rest."""
    if name.endswith(".safetensors"):
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class HubServer:
    repos: dict[str, Repo] = field(default_factory=dict)
    fail: dict[str, int | str] = field(default_factory=dict)  # path prefix -> status, or "html"
    drop_after: dict[str, int] = field(default_factory=dict)  # file name -> bytes sent before one drop
    log: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, Range header)

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_HEAD(self) -> None:
                server._answer(self, body=False)

            def do_GET(self) -> None:
                server._answer(self, body=True)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def requested(self, suffix: str) -> list[tuple[str, str, str]]:
        return [entry for entry in self.log if entry[1].endswith(suffix)]

    # -- answering ----------------------------------------------------------------------------------
    def _answer(self, h: BaseHTTPRequestHandler, *, body: bool) -> None:
        path = unquote(urlsplit(h.path).path)
        self.log.append((h.command, path, h.headers.get("Range", "")))
        for prefix, how in self.fail.items():
            if path.startswith(prefix):
                if how == "html":
                    return self._send(h, 200, b"<html><body>Please log in</body></html>", body,
                                      {"Content-Type": "text/html"})
                return self._send(h, int(how), b'{"error": "failure"}', body, {"Content-Type": "application/json"})
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            return self._info(h, "/".join(parts[2:4]), parts[5] if len(parts) >= 6 else "main", body)
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._file(h, "/".join(parts[:2]), parts[3], "/".join(parts[4:]), body)
        self._send(h, 404, b"{}", body, {"X-Error-Code": "RepoNotFound"})

    def _repo(self, h, repo_id: str, revision: str, body: bool) -> Repo | None:
        repo = self.repos.get(repo_id)
        if repo is not None and repo.token and h.headers.get("Authorization") != f"Bearer {repo.token}":
            repo = None  # as the Hub does: a private repo without a valid token answers 401
            self._send(h, 401, b'{"error": "Invalid username or password."}', body,
                       {"X-Error-Code": "RepoNotFound", "Content-Type": "application/json"})
            return None
        if repo is None:
            self._send(h, 404, b'{"error": "Repository not found"}', body, {"X-Error-Code": "RepoNotFound"})
            return None
        if revision not in ("main", repo.commit):
            self._send(h, 404, b'{"error": "Invalid rev id"}', body, {"X-Error-Code": "RevisionNotFound"})
            return None
        return repo

    def _info(self, h, repo_id: str, revision: str, body: bool) -> None:
        repo = self._repo(h, repo_id, revision, body)
        if repo is None:
            return
        siblings = []
        for name, data in repo.files.items():
            entry = {"rfilename": name, "size": len(data), "blobId": etag("x", data)}
            if name.endswith(".safetensors"):
                entry["lfs"] = {"size": len(data), "sha256": etag(name, data), "pointerSize": 134}
            siblings.append(entry)
        data = json.dumps({"id": repo_id, "modelId": repo_id, "sha": repo.commit, "private": bool(repo.token),
                           "siblings": siblings}).encode()
        self._send(h, 200, data, body, {"Content-Type": "application/json"})

    def _file(self, h, repo_id: str, revision: str, name: str, body: bool) -> None:
        repo = self._repo(h, repo_id, revision, body)
        if repo is None:
            return
        if name not in repo.files:
            return self._send(h, 404, b"{}", body, {"X-Error-Code": "EntryNotFound"})
        data = repo.files[name]
        headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{etag(name, data)}"', "Accept-Ranges": "bytes",
                   "Content-Type": "application/octet-stream"}
        start = 0
        rng = h.headers.get("Range", "")
        if rng.startswith("bytes="):
            start = int(rng[6:].split("-")[0])
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        status = 206 if start else 200
        drop = self.drop_after.pop(name, None) if body else None
        if drop is None:
            return self._send(h, status, data[start:], body, headers)
        h.send_response(status)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(data) - start))
        h.end_headers()
        h.wfile.write(data[start:start + drop])
        h.wfile.flush()
        h.close_connection = True
        h.connection.shutdown(2)  # the peer sees the body end early, as when a link drops

    @staticmethod
    def _send(h, status: int, data: bytes, body: bool, headers: dict[str, str]) -> None:
        h.send_response(status)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if body:
            try:
                h.wfile.write(data)
            except ConnectionError:  # the client stopped reading (a cancel, Ctrl+C): what a server sees then
                h.close_connection = True
