"""Files in and out. Out: written so that nothing partial is ever left (a temporary name in the same
folder, then rename). In: the one reader (open_regular, read_bytes) every file kvviz reads goes through:
regular files only, opened non-blocking, bytes counted against a cap as they are read."""
from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO


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
    if not isinstance(doc, (list, dict)):
        return
    stack = [(doc, 1)]
    while stack:  # only containers are pushed: a list of a million numbers is one filter, not a million pops
        value, depth = stack.pop()
        if depth > limit:
            raise ValueError(f"{what}: the JSON nests more than {limit} levels deep")
        children = value.values() if type(value) is dict else value
        stack.extend((v, depth + 1) for v in children if type(v) is list or type(v) is dict)


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


CHUNK_BYTES = 1 << 20
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _refusal(path: Path, exc: OSError, kind: str) -> ValueError:
    """One line for an OSError met while opening `path`."""
    if exc.errno == errno.ENOENT:
        return ValueError(f"{_short(path)}: no such file")
    if exc.errno == errno.ELOOP:
        return ValueError(f"{_short(path)}: a loop of symbolic links, not a {kind}")
    if exc.errno == errno.ENAMETOOLONG:
        return ValueError(f"{_short(path)}: the name is too long for this file system ({len(str(path)):,} characters)")
    if exc.errno == errno.EISDIR:
        return ValueError(f"{_short(path)}: a folder, not a {kind}")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return ValueError(f"{_short(path)}: cannot read it (permission denied)")
    return ValueError(f"{_short(path)}: cannot read it ({exc.strerror or exc})")


def _short(path: Path | str) -> str:
    """A path for a message: a 5,000-character name is cut, not echoed whole."""
    text = str(path)
    return text if len(text) <= 200 else text[:120] + "..." + text[-40:]


def resolve(path: str | Path, kind: str = "file") -> Path:
    """`path` with every link followed; a loop or an over-long name is a one-line ValueError
    (Path.resolve raises RuntimeError or OSError for them)."""
    path = Path(path)
    try:
        real = os.path.realpath(path)
        os.stat(real)  # a loop that realpath stopped at, or a name too long, fails here
    except FileNotFoundError:
        return Path(real)
    except OSError as exc:
        raise _refusal(path, exc, kind) from None
    except RuntimeError:
        raise ValueError(f"{_short(path)}: a loop of symbolic links, not a {kind}") from None
    return Path(real)


@contextlib.contextmanager
def open_regular(path: str | Path, kind: str = "file") -> Iterator[BinaryIO]:
    """The one way kvviz opens a file it reads: links followed, then refused in one line unless it is a
    regular file (a FIFO, a device, a socket, a folder, a loop of links, a name too long). Opened
    non-blocking, so a FIFO with no writer cannot hang the open."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _refusal(path, exc, kind) from None
    except ValueError:  # a NUL in the name
        raise ValueError(f"{_short(path)!r}: not a file name") from None
    try:
        mode = os.fstat(fd).st_mode
        for test, what in _KINDS:
            if test(mode):
                raise ValueError(f"{_short(path)}: {what}, not a {kind}")
        if not stat.S_ISREG(mode):
            raise ValueError(f"{_short(path)}: not a regular file, so not a {kind}")
        os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def check_regular(path: str | Path, kind: str = "file") -> Path:
    """`path` if open_regular would open it (for a file a library opens itself, e.g. a safetensors shard)."""
    with open_regular(path, kind):
        return Path(path)


def read_bytes(path: str | Path, max_bytes: int, kind: str = "file") -> bytes | bytearray:
    """The file's bytes through open_regular, counted against `max_bytes` as they are read (st_size is
    not trusted: /dev/zero says 0, a /proc file says 0 and holds text, a file may grow while read).
    A file that says it is empty yet has bytes is a pseudo-file (/proc, /sys), never a file kvviz wrote."""
    path = Path(path)
    with open_regular(path, kind) as fh:
        try:
            claimed = os.fstat(fh.fileno()).st_size
            if claimed > max_bytes:
                raise ValueError(f"{_short(path)}: {claimed:,} bytes, more than a {kind} holds ({max_bytes:,})")
            buf = bytearray(claimed + 1)  # one byte more than claimed: a read that fills it saw more
            view, got = memoryview(buf), 0
            while True:
                if got == len(buf):
                    if claimed == 0 and got:
                        raise ValueError(f"{_short(path)}: says it is empty but holds bytes (a /proc or /sys "
                                         f"file?), not a {kind}")
                    if got > max_bytes:
                        raise ValueError(f"{_short(path)}: more than {max_bytes:,} bytes, more than a {kind} holds")
                    view.release()
                    buf.extend(bytes(min(max(len(buf), CHUNK_BYTES), max_bytes + 1 - got)))
                    view = memoryview(buf)
                n = fh.readinto(view[got:got + CHUNK_BYTES])
                if not n:
                    break
                got += n
            view.release()
        except OSError as exc:
            raise _refusal(path, exc, kind) from None
    del buf[got:]
    return bytes(buf) if len(buf) < 1 << 16 else buf  # a large file stays one buffer, not copied
