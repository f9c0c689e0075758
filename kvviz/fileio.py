"""Write files so that nothing partial is ever left: a temporary name in the same folder, then rename."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call `write(tmp_path)`, then rename tmp over `path`; on any error remove tmp and re-raise."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        write(tmp_path)
        # mkstemp makes the file private (0600); give it the mode a plain open() would have.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


PROBE_BYTES = 4096  # one file-system block: a full disk refuses it, an empty file would not show that


def check_writable(path: str | Path, label: str = "") -> Path:
    """Raise ValueError (one line) unless a file can be written at `path`: not a folder, its folder exists
    and takes a file of one block (made, synced and removed, so a read-only mount, a refused folder or a
    full disk shows up before any work). Call it before a run for every output path."""
    path = Path(path).expanduser()
    name = f"{label} {path}" if label else str(path)
    if path.is_dir():
        raise ValueError(f"cannot write {name}: it is a folder")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        raise ValueError(f"cannot write {name}: the folder {parent} {what}")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"cannot write {name}: no permission to replace it")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=parent)
    except OSError as exc:
        raise ValueError(f"cannot write {name}: {_why(exc, parent)}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"\0" * PROBE_BYTES)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise ValueError(f"cannot write {name}: {_why(exc, parent)}") from None
    finally:
        Path(probe).unlink(missing_ok=True)
    return path


def write_output(path: str | Path, text: str, label: str = "") -> Path:
    """Atomically write `text` (synced before the rename); any OSError becomes one-line ValueError and
    leaves no partial file, the old file (if any) untouched."""
    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    path = Path(path).expanduser()
    try:
        return atomic_write(path, write)
    except OSError as exc:
        name = f"{label} {path}" if label else str(path)
        raise ValueError(f"cannot write {name}: {_why(exc, path.parent)}") from None


def _why(exc: OSError, folder: Path) -> str:
    import errno

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"no permission to write in {folder}"
    if exc.errno == errno.EROFS:
        return f"{folder} is on a read-only file system"
    return exc.strerror or str(exc)


def check_depth(doc, limit: int, what: str) -> None:
    """ValueError if `doc` nests lists/objects deeper than `limit` (iterative: no recursion to exhaust).
    Every JSON file kvviz reads has a known, shallow shape; deeper nesting is never data it reads."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (list, dict)):
            if depth > limit:
                raise ValueError(f"{what}: the JSON nests more than {limit} levels deep")
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))


def read_json(path: str | Path, max_depth: int, max_bytes: int = 64 << 20):
    """A small JSON file kvviz reads (a config, an index): one-line ValueError naming the file for a
    missing file, a file too large for its kind, bad UTF-8 or JSON, or nesting past `max_depth`."""
    import json

    path = Path(path)
    try:
        text = read_bytes(path, max_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    try:
        doc = json.loads(text)
    except RecursionError:
        raise ValueError(f"{path}: the JSON nests deeper than Python reads") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    check_depth(doc, max_depth, str(path))
    return doc


def read_bytes(path: str | Path, max_bytes: int, kind: str = "file") -> bytes:
    """The file's bytes; one-line ValueError naming it when missing, a folder, unreadable, or larger than
    any file of its `kind` (so a huge file is refused before it is read)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise IsADirectoryError
        if size > max_bytes:
            raise ValueError(f"{path}: {size:,} bytes, more than a {kind} holds ({max_bytes:,})")
        return path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{path}: a folder, not a {kind}") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
