"""Turn an exception from a run into one line a person can act on (the CLI prints it, the app shows it).

Stdlib only, so the app's panels may use it: torch is consulted only when something already imported it.
"""
from __future__ import annotations

import os
import sys

OOM_HINT = "try fewer new tokens, one engine at a time, --dtype bf16, a smaller model, or --device cpu"


class InsufficientMemory(MemoryError):
    """Refused before allocating: what a load or a run needs is more than the machine has free. The
    message says both figures; the CLI prints it as one line with exit code 1, as for out of memory."""


# torch's CPU allocator, refused by the kernel (a process limit such as `ulimit -v`, or no memory left):
# "DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes. Error code 12 (Cannot allocate memory)"
HOST_ALLOCATOR_WORDS = ("can't allocate memory", "cannot allocate memory")


def is_out_of_memory(exc: BaseException) -> bool:
    """An allocation failed, on the host or on a device: MemoryError (Python's own, and InsufficientMemory),
    torch.OutOfMemoryError (CUDA), the RuntimeError MPS raises, or the RuntimeError of torch's CPU
    allocator (which says "can't allocate memory", not "out of memory", under a process limit)."""
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    return _host_allocator(exc) or "out of memory" in str(exc).lower()


def _host_allocator(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(words in text for words in HOST_ALLOCATOR_WORDS)


def process_memory_limit() -> int | None:
    """The address space this process may use (`ulimit -v`, RLIMIT_AS) in bytes, or None where unlimited."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY or soft < 0 else soft


def process_memory_room() -> int | None:
    """Bytes this process may still map under its own limit (RLIMIT_AS less what it maps now, from
    /proc/self/statm), or None where there is no limit: what a pool sized to free memory must also fit."""
    limit = process_memory_limit()
    if limit is None:
        return None
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            mapped = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return limit
    return max(0, limit - mapped)


def _host_memory() -> str:
    """` (this process is limited to 2.0 GiB by ulimit -v)` where a limit applies, else empty."""
    limit = process_memory_limit()
    return "" if limit is None else f" (this process is limited to {limit / (1 << 30):.1f} GiB by ulimit -v)"


def _device_memory() -> str:
    """`12.3 GiB allocated of 80.0 GiB` on CUDA, else empty: said only when the device can tell."""
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_available():
            return ""
        free, total = torch.cuda.mem_get_info()
        used = torch.cuda.memory_allocated()
    except Exception:  # a device in a bad state after the failure: the message still goes out
        return ""
    gib = 1 << 30
    return f" ({used / gib:.1f} GiB allocated by kvviz, {free / gib:.1f} GiB free of {total / gib:.1f} GiB)"


def one_line(text: str, limit: int = 400) -> str:
    """`text` as one line of at most `limit` characters: a hostile file's value echoed in a message
    (a 100,000-character token, a name with newlines) must not become the message."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def friendly_error(exc: BaseException) -> str:
    """One line, no traceback: the message of a ValueError as it is, a clear word for the rest."""
    if isinstance(exc, InsufficientMemory):
        return f"{exc}; {OOM_HINT}"
    if isinstance(exc, MemoryError) or _host_allocator(exc):
        return f"out of memory{_host_memory()}; {OOM_HINT}"
    if is_out_of_memory(exc):
        return f"out of device memory{_device_memory()}; {OOM_HINT}"
    if isinstance(exc, ValueError):
        return str(exc)
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or exc}"
    if isinstance(exc, ImportError) and exc.name:
        return f"the {exc.name!r} package is needed for this (pip install {exc.name})"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
