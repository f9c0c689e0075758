"""Files in and out. Out: one rule for every file kvviz writes (a regular file whole under a temporary
name, then renamed; an existing device or FIFO written in place, never replaced; any other node refused).
In: the one reader (open_regular, read_bytes) every file kvviz reads goes through: regular files only,
opened non-blocking, bytes counted against a cap as they are read."""
from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

# -- out: one rule for every file kvviz writes ------------------------------------------------------
# A regular file (or a new name) is written whole under a temporary name in its folder, then renamed over
# it (a link is followed: the file it names is replaced, the link kept). An existing character device or
# FIFO (/dev/null, /dev/stdout, a named pipe), or a name reached through /proc (/dev/stdout when it is a
# file the shell opened), is written in place through an open() of it: a rename would take the node away
# from everyone else who uses it. A socket, a block device or a folder is refused in one line.
NAME_MAX = 255  # where the file system does not say (os.pathconf)
SUFFIX_CHARS = 8  # what mkstemp adds between the prefix and the suffix


@dataclass(frozen=True)
class Target:
    """Where an output's bytes go: `path` (the file a link names, for a rename) and whether the node is
    written in place (an existing device, FIFO or descriptor) rather than replaced."""

    path: Path
    in_place: bool


def output_target(path: str | Path, label: str = "") -> Target:
    """The output rule applied to `path`; ValueError (one line) for a folder, a socket, a block device, a
    loop of links, a name too long or with a NUL."""
    path = Path(path)
    name = _named(path, label)
    try:
        mode = os.stat(path).st_mode  # links followed: /dev/stdout is the file or pipe it stands for
    except FileNotFoundError:
        mode = None
    except ValueError:
        raise ValueError(f"cannot write {name!r}: not a file name") from None
    except OSError as exc:
        raise ValueError(f"cannot write {name}: {_why(exc, _folder(path))}") from None
    if mode is None or stat.S_ISREG(mode):
        real = os.path.realpath(path)
        if mode is not None and (real == "/proc" or real.startswith("/proc/") or real.startswith("/sys/")):
            raise ValueError(f"cannot write {name}: it is one of the kernel's own files, not a file to write")
        if mode is not None and _via_proc(path):
            return Target(path, True)
        return Target(Path(os.path.realpath(path)), False)
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return Target(path, True)
    what = next((what for test, what in _KINDS if test(mode)), "not a regular file")
    raise ValueError(f"cannot write {name}: it is {what}; kvviz writes a file, a character device or a FIFO, "
                     f"and never replaces another kind of node")


def _via_proc(path: Path) -> bool:
    """Whether `path` reaches its file through /proc (/dev/stdout, /dev/fd/1, /proc/self/fd/1): an open
    descriptor's file, which a rename would take away from whoever holds it."""
    here = os.path.abspath(path)
    for _ in range(40):  # the kernel's own bound on links followed
        folder = os.path.realpath(os.path.dirname(here))
        if folder == "/proc" or folder.startswith("/proc/"):
            return True
        here = os.path.join(folder, os.path.basename(here))
        if not os.path.islink(here):
            return False
        here = os.path.join(folder, os.readlink(here))  # an absolute link replaces the folder
    return False


def _folder(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def _named(path: Path, label: str) -> str:
    return f"{label} {_short(path)}" if label else _short(path)


def temp_prefix(folder: Path, name: str, suffix: str) -> str:
    """`.name.` where `.name.XXXXXXXX<suffix>` fits the folder's longest name, else `.kvviz.`: a legal
    name of 249 characters must not fail for the characters its temporary name adds."""
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = NAME_MAX
    prefix = f".{name}."
    if len(os.fsencode(prefix + suffix)) + SUFFIX_CHARS > (limit if limit > 0 else NAME_MAX):
        return ".kvviz."
    return prefix


def _replace(path: Path, write: Callable[[Path], None]) -> None:
    """`write(tmp)` into a temporary name beside `path`, then a rename over it; tmp removed on any error."""
    folder = _folder(path)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(folder, path.name, ".part"), suffix=".part", dir=folder)
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


def _write_in_place(path: Path, chunks: Iterable[bytes], label: str = "") -> None:
    """The bytes written into the existing node at `path` through an open() of it (never created,
    truncated or replaced). A FIFO is opened non-blocking, so one with nothing reading it is refused in
    one line rather than waited on; a file reached through /proc is appended to, as a shell's `>>`."""
    flags = os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise ValueError(f"cannot write {_named(path, label)}: a FIFO with nothing reading it") from None
        raise
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.lseek(fd, 0, os.SEEK_END)
        os.set_blocking(fd, True)
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view[:CHUNK_BYTES]):]
    finally:
        os.close(fd)


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call `write(tmp_path)`, then deliver it by the output rule: a rename over a regular file or a new
    name (tmp removed and the old file untouched on any error, re-raised), or for an existing device or
    FIFO, tmp's bytes written into it (tmp then in a private temporary folder, never beside the node)."""
    target = output_target(path)
    if not target.in_place:
        _replace(target.path, write)
        return Path(path)
    with tempfile.TemporaryDirectory(prefix="kvviz-out-") as staging:
        staged = Path(staging) / "staged.part"
        write(staged)
        with open(staged, "rb") as fh:
            _write_in_place(target.path, iter(lambda: fh.read(CHUNK_BYTES), b""))
    return Path(path)


def atomic_write_bytes(path: str | Path, data: bytes, *, sync: bool = False, label: str = "") -> Path:
    """`data` delivered by the output rule (see atomic_write), synced before the rename when `sync`."""
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())

    return _deliver(path, data, write, label)


def atomic_write_text(path: str | Path, text: str) -> Path:
    return _deliver(path, text.encode("utf-8"), lambda tmp: tmp.write_text(text, encoding="utf-8"))


def _deliver(path: str | Path, data: bytes, write: Callable[[Path], None], label: str = "") -> Path:
    """`data` written into an existing device or FIFO in place, else `write(tmp)` renamed over the file."""
    target = output_target(path, label)
    if target.in_place:
        _write_in_place(target.path, (data,), label)
    else:
        _replace(target.path, write)
    return Path(path)


PROBE_BYTES = 4096  # one file-system block: a full disk refuses it, an empty file would not show that


def check_writable(path: str | Path, label: str = "") -> Path:
    """Raise ValueError (one line) unless a file can be written at `path` by the output rule: a device or
    FIFO that this process may write (no probe beside it); else its folder exists and takes a file of
    one block (made, synced and removed, so a read-only mount, a refused folder or a full disk shows up
    before any work). Call it before a run for every output path."""
    path = Path(path).expanduser()
    name = _named(path, label)
    target = output_target(path, label)
    if target.in_place:
        if not os.access(path, os.W_OK):
            raise ValueError(f"cannot write {name}: no permission to write it")
        return path
    parent = _folder(target.path)
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        raise ValueError(f"cannot write {name}: the folder {parent} {what}")
    if target.path.exists() and not os.access(target.path, os.W_OK):
        raise ValueError(f"cannot write {name}: no permission to replace it")
    try:
        fd, probe = tempfile.mkstemp(prefix=temp_prefix(parent, target.path.name, ".probe"), suffix=".probe",
                                     dir=parent)
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
    """`text` delivered by the output rule, synced before the rename; any OSError becomes a one-line
    ValueError ("the disk is full" for /dev/full too) and leaves no partial file, the old file untouched."""
    path = Path(path).expanduser()
    try:
        return atomic_write_bytes(path, text.encode("utf-8"), sync=True, label=label)
    except OSError as exc:
        raise ValueError(f"cannot write {_named(path, label)}: {_why(exc, _folder(path))}") from None


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


def read_json(path: str | Path, max_depth: int, max_bytes: int = 64 << 20, kind: str = "file"):
    """A small JSON file kvviz reads (a config, an index): one-line ValueError naming the file for a
    missing file, one not a regular file (`kind` names what it should be), one too large for its kind,
    bad UTF-8 or JSON, or nesting past `max_depth`."""
    import json

    path = Path(path)
    try:
        text = read_bytes(path, max_bytes, kind).decode("utf-8")
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
