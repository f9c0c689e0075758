"""Hub ids (`ORG/NAME`, `ORG/NAME@REVISION`) found offline in the caches people already have.

The Hugging Face cache is read through huggingface_hub's own functions (`snapshot_download` with
`local_files_only=True`, `scan_cache_dir`); ModelScope's cache is a plain folder per model. Nothing here
touches the network, and nothing imports torch until a checkpoint's config is read for a listing.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kvviz.fileio import read_bytes

# The files kvviz reads from a checkpoint (the rest of a repo is neither needed nor checked).
NEEDED_PATTERNS = ("config.json", "tokenizer.json", "*.safetensors", "model.safetensors.index.json")
# A repo id as the Hub allows it: letters, digits, '-', '_', '.'; no '--' or '..'; 96 characters at most.
_PART = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,254}")
MAX_ID_CHARS = 96 + 1 + 96 + 1 + 255 + 1  # ORG/NAME@REVISION at the Hub's own limits
HF_SOURCE = "Hugging Face"
MS_SOURCE = "ModelScope"


@dataclass(frozen=True)
class HubId:
    org: str
    name: str
    revision: str | None = None

    @property
    def repo_id(self) -> str:
        return f"{self.org}/{self.name}"

    def __str__(self) -> str:
        return self.repo_id + (f"@{self.revision}" if self.revision else "")


def looks_like_hub_id(text: str) -> bool:
    """A name meant as a hub id rather than a path: has a '/', and neither starts like a path nor exists."""
    if "/" not in text or text.startswith(("/", ".", "~")) or "\\" in text:
        return False
    return not os.path.lexists(text)  # False, not OSError, for a name too long to be a path


def parse_hub_id(text: str) -> HubId:
    """`ORG/NAME` or `ORG/NAME@REVISION`; a ValueError of one line for anything else."""
    if len(text) > MAX_ID_CHARS:
        raise ValueError(f"a model id of {len(text):,} characters is not one: the Hub allows at most 96 "
                         f"characters for ORG and for NAME, 255 for a revision")
    repo, _, revision = text.partition("@")
    parts = repo.split("/")
    good = (len(parts) == 2 and all(_PART.fullmatch(p) and "--" not in p and ".." not in p for p in parts)
            and (not _ or _REVISION.fullmatch(revision) is not None))
    if not good:
        raise ValueError(f"{text!r} is not a model id: expected ORG/NAME or ORG/NAME@REVISION "
                         "(letters, digits, '-', '_', '.'), a preset, or a folder path")
    return HubId(parts[0], parts[1], revision or None)


# -- where the caches are (read from the environment at each call, so a changed variable counts) ----

def hf_cache_dir() -> Path:
    """HF_HUB_CACHE, else HF_HOME/hub, else huggingface_hub's default (~/.cache/huggingface/hub)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE).expanduser()


def modelscope_cache_dirs() -> list[Path]:
    """MODELSCOPE_CACHE (older ModelScope releases put models in its hub/ subfolder, newer ones in it
    directly: both are searched), else ~/.cache/modelscope/hub."""
    if os.environ.get("MODELSCOPE_CACHE"):
        root = Path(os.environ["MODELSCOPE_CACHE"]).expanduser()
        return [root, root / "hub"]
    return [Path.home() / ".cache" / "modelscope" / "hub"]


def searched_caches() -> str:
    """The caches a lookup searched, for the message when an id is in none of them."""
    ms = " or ".join(str(p) for p in modelscope_cache_dirs())
    return f"the Hugging Face cache ({hf_cache_dir()}) and ModelScope's ({ms})"


def _modelscope_candidates(root: Path, hub_id: HubId) -> list[Path]:
    """ModelScope stores `ORG/NAME` as models/ORG/NAME (older releases: ORG/NAME), with each '.' of the
    name written '___' by the releases that mask it (Qwen3-0.6B -> Qwen3-0___6B)."""
    names = dict.fromkeys([hub_id.name, hub_id.name.replace(".", "___")])
    return [base / hub_id.org / name for base in (root / "models", root) for name in names]


# -- resolving one id ---------------------------------------------------------------------------

def _check_readable(folder: Path) -> None:
    try:
        os.listdir(folder)
    except PermissionError:
        raise ValueError(f"{folder}: cannot read this cache folder (permission denied)") from None


def _find_hf(hub_id: HubId) -> Path | None:
    """The snapshot folder huggingface_hub's cache holds for this id and revision, or None."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import IncompleteSnapshotError, LocalEntryNotFoundError
    from huggingface_hub.file_download import repo_folder_name

    cache = hf_cache_dir()
    if cache.is_dir():
        _check_readable(cache)
    ref = cache / repo_folder_name(repo_id=hub_id.repo_id, repo_type="model") / "refs" / (hub_id.revision or "main")
    if os.path.lexists(ref):  # huggingface_hub reads it with a plain open(): a FIFO there would hang it
        read_bytes(ref, 4096, "ref file (a commit hash)")
    try:
        path = snapshot_download(hub_id.repo_id, revision=hub_id.revision, cache_dir=cache,
                                 local_files_only=True, allow_patterns=list(NEEDED_PATTERNS))
    except LocalEntryNotFoundError as exc:  # IncompleteSnapshotError is one: files the tree listing names are absent
        repo = cache / repo_folder_name(repo_id=hub_id.repo_id, repo_type="model")
        if repo.is_dir():
            _check_readable(repo)
        if isinstance(exc, IncompleteSnapshotError):
            raise ValueError(f"{hub_id}: the cached snapshot in {repo} is incomplete (a download was interrupted); "
                             f"finish it with `kvviz download {hub_id}`") from None
        return None
    except PermissionError as exc:
        raise ValueError(f"{exc.filename or cache}: cannot read this cache folder (permission denied)") from None
    except UnicodeDecodeError:  # huggingface_hub reads refs/<revision> as text and does not say which file
        raise ValueError(f"{ref}: not UTF-8 text, so not a commit hash (a damaged cache; "
                         f"`kvviz download {hub_id}` fetches it again)") from None
    except OSError as exc:  # a name too long, a loop of links inside the cache
        raise ValueError(f"{hub_id}: cannot read the Hugging Face cache at {cache} ({exc.strerror or exc})") from None
    return Path(path)


def _find_modelscope(hub_id: HubId) -> Path | None:
    if hub_id.revision:  # ModelScope's cache keeps one copy per model, with no revision in its path
        return None
    for root in modelscope_cache_dirs():
        for folder in _modelscope_candidates(root, hub_id):
            if folder.is_dir():
                _check_readable(folder)
                return folder
    return None


def find_cached(hub_id: HubId) -> tuple[Path, str] | None:
    """(folder, source) of the first cache holding this id, Hugging Face's first; None when none does."""
    for source, find in ((HF_SOURCE, _find_hf), (MS_SOURCE, _find_modelscope)):
        folder = find(hub_id)
        if folder is not None:
            return folder, source
    return None


def resolve_hub_id(text: str) -> Path:
    """The complete local checkpoint folder for a hub id, or one line saying why there is none."""
    hub_id = parse_hub_id(text)
    found = find_cached(hub_id)
    if found is None:
        where = searched_caches() if not hub_id.revision else f"the Hugging Face cache ({hf_cache_dir()})"
        raise ValueError(f"{hub_id}: no such folder, and not in any cache (searched {where}); "
                         f"fetch it with `kvviz download {hub_id}`")
    folder, source = found
    from kvviz.checkpoint_files import missing_files

    missing = missing_files(folder)
    if missing:
        raise ValueError(f"{hub_id}: the {source} cache's copy in {folder} is incomplete: missing "
                         f"{'; '.join(missing)}; finish it with `kvviz download {hub_id}`")
    return folder


# -- listing every cached checkpoint ------------------------------------------------------------

@dataclass(frozen=True)
class CachedModel:
    """One checkpoint found in a cache. `problem` is empty when kvviz can open it, else one line why not."""
    model_id: str
    source: str
    folder: Path
    size_bytes: int
    config: object | None = None  # a kvviz ModelConfig when config.json was readable
    problem: str = ""

    @property
    def openable(self) -> bool:
        return not self.problem


def _describe(model_id: str, source: str, folder: Path, size: int) -> CachedModel:
    from kvviz.checkpoint_files import CONFIG_NAME, missing_files
    from kvviz.models.hf import read_hf_config

    config, problem = None, ""
    try:
        if (folder / CONFIG_NAME).is_file():
            config = read_hf_config(folder)
        missing = missing_files(folder)
        if missing:
            problem = f"files missing: {'; '.join(missing)}"
    except ValueError as exc:
        problem = str(exc).removeprefix(f"{folder / CONFIG_NAME}: ").removeprefix(f"{folder}: ")
    except PermissionError as exc:
        problem = f"{exc.filename}: permission denied"
    return CachedModel(model_id, source, folder, size, config, problem)


def _hf_entries() -> list[CachedModel]:
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    blocking = _unreadable_refs(hf_cache_dir())
    if blocking:  # huggingface_hub's scan opens every ref with a plain open(): a FIFO there would hang it
        return [CachedModel(str(blocking), HF_SOURCE, blocking, 0,
                            problem=f"cannot list this cache: {blocking} is not a regular file")]
    try:
        info = scan_cache_dir(hf_cache_dir())
    except CacheNotFound:
        return []
    except PermissionError as exc:
        return [CachedModel(str(exc.filename), HF_SOURCE, Path(str(exc.filename)), 0,
                            problem="cannot read this cache folder (permission denied)")]
    out = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model" or not repo.revisions:
            continue
        # The revision `main` names, else the newest: the one an id without @REVISION resolves to.
        revision = next((r for r in repo.revisions if "main" in r.refs),
                        max(repo.revisions, key=lambda r: r.last_modified))
        out.append(_describe(repo.repo_id, HF_SOURCE, Path(revision.snapshot_path), revision.size_on_disk))
    return out


def _unreadable_refs(cache: Path) -> Path | None:
    """The first ref file in the cache that is not a regular file once links are followed (a FIFO, a
    device, a loop, a folder where a file belongs), or None. Refs are a few small files per repo."""
    import stat

    if not cache.is_dir():
        return None
    for refs in sorted(cache.glob("models--*/refs")):
        for root, _dirs, files in os.walk(refs):
            for name in files:
                path = Path(root) / name
                try:
                    if not stat.S_ISREG(os.stat(path).st_mode):
                        return path
                except OSError:  # a loop of links, a dangling one
                    return path
    return None


def _folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _modelscope_entries() -> list[CachedModel]:
    out, seen = [], set()
    for root in modelscope_cache_dirs():
        for base in (root / "models", root):
            if not base.is_dir():
                continue
            for folder in sorted(base.glob("*/*")):
                if not (folder / "config.json").is_file() or folder.resolve() in seen:
                    continue
                seen.add(folder.resolve())
                model_id = f"{folder.parent.name}/{folder.name.replace('___', '.')}"
                out.append(_describe(model_id, MS_SOURCE, folder, _folder_size(folder)))
    return out


def list_cached_models() -> list[CachedModel]:
    """Every checkpoint in the Hugging Face and ModelScope caches, openable or not (see `problem`).
    Offline; reads each config.json (and so imports torch)."""
    return _hf_entries() + _modelscope_entries()
