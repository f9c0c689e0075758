"""Fetch the files kvviz reads from a Hugging Face Hub repo into the Hugging Face cache, only when asked.

Through huggingface_hub (HF_ENDPOINT for a mirror, HF_TOKEN for private repos). config.json comes first and
is checked for a supported architecture before any weight is fetched; the disk space the server's sizes
call for is checked before that. A file is written under a partial name beside its cache blob and moved
into place only when complete, so an interrupted download resumes where it stopped. No Qt: the command
and the app drive it through a progress callback and a cancel flag (a threading.Event).
"""
from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from kvviz.fileio import read_json
from kvviz.models.hub import NEEDED_PATTERNS, HubId, hf_cache_dir, parse_hub_id

INDEX_NAME = "model.safetensors.index.json"  # as kvviz.models.hf names it (not imported: that imports torch)
PARTIAL_SUFFIX = ".kvviz-partial"  # beside the blob it becomes: same disk, so the final move is a rename
_SHA256 = 64  # an LFS file's ETag is the sha256 of its content, 64 hex digits


STALL_S = 30.0  # a download that gets less than STALL_BYTES in this long gives up (kept for the next try)
RETRIES = 5  # a dropped connection is resumed this many times in a row before the download gives up
STALL_BYTES = 64 << 10  # a link slower than ~2 KiB/s (a server trickling 1 byte/s) is stalled, not slow


class DownloadCancelled(Exception):
    """The cancel flag was set: the partial file is kept, and the next download resumes it."""


class DownloadStalled(ValueError):
    """No progress (fewer than STALL_BYTES) for the stall deadline: one line; the partial file is kept."""


@dataclass(frozen=True)
class RemoteFile:
    name: str
    size: int  # bytes, as the server reports them


@dataclass(frozen=True)
class DownloadPlan:
    """What `download` will fetch: the files kvviz needs at one commit, with the sizes the server reported."""
    hub_id: HubId
    commit: str
    files: tuple[RemoteFile, ...]
    endpoint: str
    cache_dir: Path

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class DownloadProgress:
    """One progress report. `done_bytes` counts files already in the cache and resumed bytes too;
    the rate and time left count only the bytes this download has fetched so far."""
    file: str
    file_index: int  # 1-based
    n_files: int
    done_bytes: int
    total_bytes: int
    fetched_bytes: int
    elapsed_s: float

    @property
    def rate_bytes_per_s(self) -> float:
        return self.fetched_bytes / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """None until a MiB (or a hundredth of what is left) has come: the small files first fetched
        say little about the pace of the weights."""
        left = self.total_bytes - self.done_bytes
        if self.fetched_bytes < min(1 << 20, max(left, 1) / 100) or self.rate_bytes_per_s <= 0:
            return None
        return left / self.rate_bytes_per_s


ProgressCallback = Callable[[DownloadProgress], None]


def hub_endpoint() -> str:
    """HF_ENDPOINT (a mirror such as https://hf-mirror.com), else huggingface_hub's default, read at each call."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def _token() -> str | None:
    return os.environ.get("HF_TOKEN") or None  # None: huggingface_hub reads its own token file


def _needed(name: str) -> bool:
    return "/" not in name and any(fnmatch.fnmatch(name, p) for p in NEEDED_PATTERNS)


def _server_error(exc: Exception, hub_id: HubId, endpoint: str) -> ValueError:
    """One line for what a server (or no server) answered."""
    from huggingface_hub.errors import (
        FileMetadataError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, GatedRepoError):
        return ValueError(f"{hub_id}: the repo is gated on {endpoint}; accept its terms there and set HF_TOKEN")
    if isinstance(exc, RevisionNotFoundError):
        return ValueError(f"{hub_id}: no revision {hub_id.revision or 'main'} on {endpoint}")
    if isinstance(exc, RemoteEntryNotFoundError):
        return ValueError(f"{hub_id}: a file is missing on {endpoint} ({_first_line(exc)})")
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            return ValueError(f"{hub_id}: {endpoint} answered HTTP {status}: no such repo, or a private or gated "
                              "one (set HF_TOKEN to a token that may read it)")
        if status == 404 or isinstance(exc, RepositoryNotFoundError):
            return ValueError(f"{hub_id}: no such model repo on {endpoint} (HTTP {status})")
        return ValueError(f"{hub_id}: {endpoint} answered HTTP {status}; try again later, or another HF_ENDPOINT")
    if isinstance(exc, FileMetadataError | LocalEntryNotFoundError):  # a HEAD without the Hub's headers
        return ValueError(f"{hub_id}: {endpoint} answered with a page that is not a file of the Hub (no ETag or "
                          "commit header: a proxy's or login page?); check HF_ENDPOINT")
    if isinstance(exc, ValueError) and ("JSON" in str(exc) or "Expecting value" in str(exc)):
        return ValueError(f"{hub_id}: {endpoint} did not answer with JSON (a proxy's or login page?); "
                          "check HF_ENDPOINT")
    return ValueError(f"{hub_id}: cannot download from {endpoint} ({type(exc).__name__}: {_first_line(exc)})")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def plan_download(model_id: str, *, cache_dir: str | Path | None = None) -> DownloadPlan:
    """Ask the server which of the files kvviz reads the repo holds, and their sizes (one API call)."""
    from huggingface_hub import HfApi

    hub_id = parse_hub_id(model_id)
    endpoint = hub_endpoint()
    api = HfApi(endpoint=endpoint, token=_token())
    try:
        info = api.model_info(hub_id.repo_id, revision=hub_id.revision, files_metadata=True)
    except Exception as exc:  # every failure of the request becomes one line; none is a kvviz bug
        raise _server_error(exc, hub_id, endpoint) from None
    siblings = {s.rfilename: s for s in info.siblings or []}
    files = [RemoteFile(name, s.size or 0) for name, s in sorted(siblings.items()) if _needed(name)]
    names = {f.name for f in files}
    if "config.json" not in names:
        raise ValueError(f"{hub_id}: the repo has no config.json at its top level; kvviz reads checkpoints "
                         "in Hugging Face format")
    if not any(n.endswith(".safetensors") for n in names):
        other = sorted(n for n in siblings if n.endswith((".bin", ".pt", ".gguf", ".h5", ".msgpack")))
        found = f" (it holds {other[0]}{' and more' if len(other) > 1 else ''})" if other else ""
        raise ValueError(f"{hub_id}: the repo has no safetensors weights{found}; kvviz reads only safetensors")
    if "tokenizer.json" not in names:
        raise ValueError(f"{hub_id}: the repo has no tokenizer.json; kvviz reads only that tokenizer format")
    # config.json first, then the tokenizer and the index, then the weights
    order = {"config.json": 0, "tokenizer.json": 1, INDEX_NAME: 2}
    files.sort(key=lambda f: (order.get(f.name, 3), f.name))
    plan = DownloadPlan(hub_id, info.sha, tuple(files), endpoint,
                        Path(cache_dir) if cache_dir is not None else hf_cache_dir())
    if INDEX_NAME in names:  # only the shards the index names (a repo may also hold consolidated.safetensors)
        shards = _index_shards(plan)
        absent = sorted(shards - names)
        if absent:
            raise ValueError(f"{hub_id}: {INDEX_NAME} names {absent[0]}, which the repo does not hold")
        plan = replace(plan, files=tuple(f for f in plan.files
                                         if not f.name.endswith(".safetensors") or f.name in shards))
    return plan


def _index_shards(plan: DownloadPlan) -> set[str]:
    """The shard files the repo's index names (the index itself is fetched into the cache to read it)."""
    try:
        path = _link(plan, INDEX_NAME, plan.commit)
    except Exception as exc:  # huggingface_hub's HTTP and connection errors
        raise _server_error(exc, plan.hub_id, plan.endpoint) from None
    try:
        weight_map = read_json(path, max_depth=3)["weight_map"]
        return {str(v) for v in weight_map.values()}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ValueError(f"{plan.hub_id}: {INDEX_NAME} on {plan.endpoint} is not an index (no weight_map)") from None


# -- the cache, through huggingface_hub's own functions ------------------------------------------

def _repo_folder(plan: DownloadPlan) -> Path:
    from huggingface_hub.file_download import repo_folder_name

    return plan.cache_dir / repo_folder_name(repo_id=plan.hub_id.repo_id, repo_type="model")


def _cached(plan: DownloadPlan, name: str) -> Path | None:
    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(plan.hub_id.repo_id, name, cache_dir=plan.cache_dir, revision=plan.commit)
    return Path(path) if isinstance(path, str) else None


def _partials(plan: DownloadPlan) -> dict[str, int]:
    """Bytes kept from interrupted downloads, by blob name."""
    blobs = _repo_folder(plan) / "blobs"
    if not blobs.is_dir():
        return {}
    return {p.name.removesuffix(PARTIAL_SUFFIX): p.stat().st_size for p in blobs.glob(f"*{PARTIAL_SUFFIX}")}


def _existing_parent(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def needed_bytes(plan: DownloadPlan) -> int:
    """Bytes still to fetch: the plan's files not yet in the cache, less what interrupted downloads kept
    (counted only when they fit the file)."""
    kept = sum(_partials(plan).values())
    missing = sum(f.size for f in plan.files if _cached(plan, f.name) is None)
    return max(missing - kept, 0)


def check_disk_space(plan: DownloadPlan) -> None:
    from kvviz.format import fmt_bytes

    need = needed_bytes(plan)
    where = _existing_parent(plan.cache_dir)
    free = shutil.disk_usage(where).free
    if need > free:
        raise ValueError(f"{plan.hub_id}: not enough disk space: {fmt_bytes(need)} to fetch into {plan.cache_dir}, "
                         f"{fmt_bytes(free)} free there")


# -- fetching ------------------------------------------------------------------------------------

class _SilentBar:
    """A `tqdm_class` that draws nothing: the small files fetched whole are counted by the caller."""

    def __init__(self, **_kwargs) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, n: int) -> None:
        pass


class _Meter:
    """Counts bytes for the progress callback; raises DownloadCancelled when the flag is set."""

    def __init__(self, plan: DownloadPlan, progress: ProgressCallback | None, cancel: threading.Event | None,
                 min_interval_s: float = 0.1, stall_s: float = STALL_S) -> None:
        self.plan, self.progress, self.cancel = plan, progress, cancel
        self.stall_s = stall_s
        self.restart_stall_clock()
        self.done = 0
        self.fetched = 0
        self.file, self.index = "", 0
        self.start = time.perf_counter()
        self.min_interval_s = min_interval_s
        self._last = 0.0

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise DownloadCancelled(f"{self.plan.hub_id}: download cancelled")

    def restart_stall_clock(self) -> None:
        self._window_start, self._window_bytes = time.monotonic(), 0

    def stalled(self, got: int | None = None) -> DownloadStalled:
        got = self._window_bytes if got is None else got
        return DownloadStalled(f"{self.plan.hub_id}: {self.file}: no progress for {self.stall_s:g} s ({got:,} bytes "
                               f"in that time); what came is kept: run the same command again to resume")

    def add(self, n: int, *, fetched: bool, force: bool = False) -> None:
        self.done += n
        if fetched:
            self.fetched += n
            self._window_bytes += n
            if self._window_bytes >= STALL_BYTES:
                self.restart_stall_clock()
            elif time.monotonic() - self._window_start > self.stall_s:
                raise self.stalled()
        now = time.perf_counter()
        if self.progress is not None and (force or now - self._last >= self.min_interval_s):
            self._last = now
            self.progress(DownloadProgress(self.file, self.index, len(self.plan.files), self.done,
                                           self.plan.total_bytes, self.fetched, now - self.start))
        self.check()

def _verify(partial: Path, expected_size: int | None, etag: str, name: str) -> None:
    size = partial.stat().st_size
    if expected_size is not None and size != expected_size:
        partial.unlink()
        raise ValueError(f"{name}: received {size} bytes, the server announced {expected_size}; run again")
    if len(etag) == _SHA256 and all(c in "0123456789abcdef" for c in etag):
        digest = hashlib.sha256()
        with open(partial, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                digest.update(chunk)
        if digest.hexdigest() != etag:
            partial.unlink()
            raise ValueError(f"{name}: the received bytes do not match the file's sha256; the partial copy "
                             "was removed, run again")


def _http_get(url: str, fh, resume: int, headers: dict[str, str], meter: _Meter) -> None:
    """GET `url` from byte `resume` into `fh` (appending), through huggingface_hub's session (its proxies and
    headers), every chunk written as it comes. Not huggingface_hub's http_get: that one hands bytes on
    only in 10 MiB chunks, so a server trickling a byte a second kept it silent for ever. Here each read
    waits at most the stall deadline, and the meter refuses less than STALL_BYTES in that long."""
    import httpx2
    from huggingface_hub.utils import get_session, hf_raise_for_status

    meter.restart_stall_clock()
    tries = RETRIES
    while True:
        asked = dict(headers, Range=f"bytes={resume}-") if resume else headers
        try:
            with get_session().stream("GET", url, headers=asked, follow_redirects=True,
                                      timeout=httpx2.Timeout(meter.stall_s)) as response:
                hf_raise_for_status(response)
                if resume and response.status_code != 206:  # the server sent the whole file: start again
                    fh.truncate(0)
                    resume = 0
                for chunk in response.iter_bytes():
                    fh.write(chunk)
                    resume += len(chunk)
                    tries = RETRIES  # bytes came: a later drop gets its own retries
                    meter.add(len(chunk), fetched=True)
            return
        except httpx2.TimeoutException:
            raise meter.stalled(0) from None
        except (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.ConnectError) as exc:
            tries -= 1
            if tries < 0:
                raise OSError(f"the connection failed {RETRIES + 1} times ({exc})") from None
            logging.getLogger("huggingface_hub").warning(
                f"the connection dropped after {resume:,} bytes of {meter.file}; resuming")


def _fetch_blob(plan: DownloadPlan, name: str, meter: _Meter) -> None:
    """Put the file's blob in the cache, resuming a partial copy (_http_get)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import build_hf_headers

    url = hf_hub_url(plan.hub_id.repo_id, name, revision=plan.commit, endpoint=plan.endpoint)
    meta = get_hf_file_metadata(url, token=_token(), endpoint=plan.endpoint)
    blob = _repo_folder(plan) / "blobs" / meta.etag
    if blob.is_file():
        return
    blob.parent.mkdir(parents=True, exist_ok=True)
    partial = blob.with_name(blob.name + PARTIAL_SUFFIX)
    with open(partial, "ab") as fh:
        resume = fh.tell()
        if meta.size is not None and resume > meta.size:  # not this file's bytes: start again
            fh.truncate(0)
            resume = 0
        meter.add(resume, fetched=False, force=True)
        _http_get(meta.location, fh, resume, build_hf_headers(token=_token()), meter)
    _verify(partial, meta.size, meta.etag, name)
    os.replace(partial, blob)


def _link(plan: DownloadPlan, name: str, revision: str) -> Path:
    """huggingface_hub finds the blob in place and makes the snapshot's link and the ref (a small file
    not yet there, it fetches whole)."""
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(plan.hub_id.repo_id, name, revision=revision, cache_dir=plan.cache_dir,
                                endpoint=plan.endpoint, token=_token(), tqdm_class=_SilentBar))


def download(plan: DownloadPlan, *, progress: ProgressCallback | None = None,
             cancel: threading.Event | None = None, report_every_s: float = 0.1, stall_s: float = STALL_S) -> Path:
    """Fetch the plan's files into the Hugging Face cache; return the snapshot folder.

    Raises ValueError (one line) for a refused architecture, too little disk space or a server error,
    DownloadCancelled when `cancel` is set, and OSError (ENOSPC) when the disk fills; in every case
    the cache holds only complete files, and partial ones under PARTIAL_SUFFIX for the next try.
    `progress` is called at most every `report_every_s` seconds, and when a file starts or is found cached.
    Less than STALL_BYTES in `stall_s` seconds is DownloadStalled (a ValueError), the partial file kept."""
    from kvviz.models.hf import read_hf_config

    check_disk_space(plan)
    meter = _Meter(plan, progress, cancel, report_every_s, stall_s)
    meter.check()
    snapshot = None
    for index, f in enumerate(plan.files, start=1):
        meter.file, meter.index = f.name, index
        cached = _cached(plan, f.name)
        if cached is not None:
            meter.add(f.size, fetched=False, force=True)
        else:
            try:
                if f.name == "config.json":
                    # Small: fetched whole, with the requested revision so the cache's ref points at the commit.
                    cached = _link(plan, f.name, plan.hub_id.revision or "main")
                    meter.add(f.size, fetched=True, force=True)
                else:
                    _fetch_blob(plan, f.name, meter)
                    cached = _link(plan, f.name, plan.commit)
            except (DownloadCancelled, KeyboardInterrupt, ValueError):
                raise
            except OSError as exc:
                if exc.errno is not None:  # the disk's own errors (ENOSPC, EACCES, EROFS): the caller says which
                    raise
                raise _server_error(exc, plan.hub_id, plan.endpoint) from None
            except Exception as exc:  # huggingface_hub's HTTP and connection errors
                raise _server_error(exc, plan.hub_id, plan.endpoint) from None
        snapshot = cached.parent
        if f.name == "config.json":
            read_hf_config(snapshot)  # refuses an unsupported architecture before any weight is fetched
    meter.add(0, fetched=False, force=True)
    return snapshot


def download_model(model_id: str, *, progress: ProgressCallback | None = None,
                   cancel: threading.Event | None = None, cache_dir: str | Path | None = None,
                   report_every_s: float = 0.1, stall_s: float = STALL_S) -> Path:
    """plan_download + download in one call (the app's Download button can make just this one)."""
    return download(plan_download(model_id, cache_dir=cache_dir), progress=progress, cancel=cancel,
                    report_every_s=report_every_s, stall_s=stall_s)
