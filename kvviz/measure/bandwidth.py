"""This machine's memory bandwidth, two figures: the READ ceiling a decode step runs against, and the copy.

A batch-1 decode step streams every weight once and writes next to nothing, so the ceiling that applies
is how fast memory can be *read* with the run's thread count, as torch reads it: `read_ceiling` times a
float32 matrix-vector product (`F.linear` of one row against a matrix well beyond the last-level cache,
the op a decode step is made of), fastest of a few bursts, counting the matrix's bytes. It imports torch;
`cached_read_ceiling` only reads the cache file (stdlib, for the window). On CUDA the same product over
a 1 GiB matrix, timed with CUDA events.

The copy figure (`cpu_bandwidth`, `probe_cuda`: a numpy copy on a CPU, a device-to-device copy on
CUDA) counts each byte read plus each byte written, as STREAM's copy and CUDA's bandwidthTest do. It is
kept beside the read ceiling, named as what it is; it is not a bound on a decode step (on the 2-core
development machine one thread's product read 15-18 GB/s where the copy reported 16-26 GB/s).

Both are cached per machine (the read ceiling per thread count too) in one small JSON file under the
user's cache folder; 1 GB/s = 10^9 B/s. No Qt.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

SCHEMA = "kvviz-bandwidth"
MIN_BUFFER_BYTES = 32 << 20
MAX_BUFFER_BYTES = 256 << 20
BURSTS = 4


@dataclass(frozen=True)
class Bandwidth:
    """A measured copy bandwidth: where, how, and the fastest burst's figure."""

    device: str  # "cpu", "cuda:0"
    copy_gbps: float  # (read + written) bytes per second of the fastest burst, in GB/s
    buffer_bytes: int  # bytes copied per burst
    bursts: int
    peak_gbps: float | None = None  # nominal, from the memory clock and bus width (CUDA only)
    machine: str = ""  # what the figure is cached under
    measured_at: float = 0.0  # time.time() of the measurement

    def percent_of(self, gbps: float) -> float:
        """An achieved bandwidth as a percentage of this copy bandwidth."""
        return 100.0 * gbps / self.copy_gbps


# -- CPU ----------------------------------------------------------------------------------------
def last_level_cache_bytes() -> int | None:
    """The largest CPU cache Linux reports (sysfs), else None."""
    best = None
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        entries = list(root.glob("index*/size"))
    except OSError:
        return None
    for size_file in entries:
        try:
            text = size_file.read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text[:-1] if text[-1:] in "KMG" else text
        if digits.isdigit():
            best = max(best or 0, int(digits) * scale)
    return best


def probe_buffer_bytes(llc_bytes: int | None = None) -> int:
    """Twice the last-level cache, so a burst streams from memory, bounded to keep the probe short."""
    llc = last_level_cache_bytes() if llc_bytes is None else llc_bytes
    return min(MAX_BUFFER_BYTES, max(MIN_BUFFER_BYTES, 2 * (llc or 0)))


def probe_cpu(buffer_bytes: int | None = None, bursts: int = BURSTS) -> Bandwidth:
    """Copy a buffer `bursts` times with numpy and keep the fastest; pages are touched first."""
    import numpy as np

    n = buffer_bytes or probe_buffer_bytes()
    if n < 1 or bursts < 1:
        raise ValueError(f"a probe needs a positive buffer and burst count, got {n} B x {bursts}")
    src = np.ones(n, dtype=np.uint8)
    dst = np.zeros(n, dtype=np.uint8)  # zeros is lazy on Linux: the first copy below faults it in
    np.copyto(dst, src)
    best = float("inf")
    for _ in range(bursts):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return Bandwidth(device="cpu", copy_gbps=2 * n / best / 1e9, buffer_bytes=n, bursts=bursts,
                     machine=machine_key(), measured_at=time.time())


def machine_key() -> str:
    """The host and its CPU: a cached figure belongs to this pair."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()} | {cpu} | {os.cpu_count() or 0} cpus"


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvviz" / "bandwidth.json"


CACHE_MAX_BYTES = 1 << 20  # a few machines' figures at a few thread counts: some kilobytes
CACHE_MAX_DEPTH = 5  # {"read": {machine: {threads: {figure: value}}}}
_WARNED: set[str] = set()  # cache files already said to be unreadable: one line a process


def _read_doc(path: Path) -> dict:
    """The cache file's two sections: "machines" (copy figures by machine) and "read" (read ceilings by
    machine, then thread count). Read through kvviz.fileio's reader (a regular file of at most
    CACHE_MAX_BYTES: a FIFO cannot hang it, /dev/zero cannot grow it); a missing or foreign file reads as
    empty, an unreadable one too, said once on stderr, so the figures are probed again."""
    from kvviz.fileio import read_json

    empty = {"machines": {}, "read": {}}
    if not os.path.lexists(path):
        return empty
    try:
        doc = read_json(path, max_depth=CACHE_MAX_DEPTH, max_bytes=CACHE_MAX_BYTES, kind="bandwidth cache")
    except ValueError as exc:
        if str(path) not in _WARNED:
            _WARNED.add(str(path))
            from kvviz.errors import one_line

            print(f"kvviz: the cached bandwidth file is not used: {one_line(str(exc))}; measuring again",
                  file=sys.stderr)
        return empty
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return empty
    return {k: doc[k] if isinstance(doc.get(k), dict) else {} for k in ("machines", "read")}


def _write_doc(path: Path, doc: dict) -> None:
    """Written to a temporary file and renamed; an unwritable cache folder only costs a probe next time."""
    try:
        from kvviz.fileio import atomic_write_text

        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"schema": SCHEMA, "version": 2, **doc}, indent=1))
    except (OSError, ValueError):
        pass


def _from_entry(entry) -> Bandwidth | None:
    try:
        bw = Bandwidth(**entry)
    except TypeError:
        return None
    ok = isinstance(bw.copy_gbps, (int, float)) and 0 < bw.copy_gbps < 1e6
    return bw if ok else None


def cpu_bandwidth(*, refresh: bool = False, path: Path | None = None) -> Bandwidth:
    """This machine's CPU copy bandwidth: from the cache file, else probed now and cached."""
    path = path or cache_path()
    key = machine_key()
    doc = _read_doc(path)
    cached = None if refresh else _from_entry(doc["machines"].get(key))
    if cached is not None:
        return cached
    bw = probe_cpu()
    doc["machines"][key] = asdict(bw)
    _write_doc(path, doc)
    return bw


# -- the read ceiling ---------------------------------------------------------------------------
READ_MIN_BUFFER_BYTES = 128 << 20
READ_MAX_BUFFER_BYTES = 512 << 20
READ_COLUMNS = 4096  # the matrix is (rows, 4096) float32: a 7B-class model's hidden width
READ_BURSTS = 9
READ_PROBE_VERSION = 2  # 2: the native step's kernel probed beside torch's (a cached version-1 figure is torch's)
CUDA_READ_BUFFER_BYTES = 1 << 30  # well past any GPU's L2 (50-60 MiB on an H100/H200)


@dataclass(frozen=True)
class ReadCeiling:
    """The read bandwidth a batch-1 decode step can reach: a float32 matrix-vector product over a matrix
    beyond the last-level cache, as the engines' kernels run it with `threads` threads (torch's, and on a
    CPU kvviz's native step's where it builds, the faster); the matrix's bytes over the fastest burst. The
    copy figure of the same machine rides beside it, named as what it is."""

    device: str  # "cpu", "cuda:0"
    read_gbps: float  # matrix bytes read per second, fastest burst, GB/s (10^9 B/s)
    threads: int  # torch CPU threads it ran with (a CUDA figure: the host's, irrelevant)
    buffer_bytes: int  # the matrix's bytes
    bursts: int
    median_gbps: float = 0.0  # the median burst's figure: what a loaded machine gives most of the time
    copy_gbps: float | None = None  # the copy probe (read + written bytes), not a decode bound
    peak_gbps: float | None = None  # nominal, from the memory clock and bus width (CUDA only)
    method: str = "float32 matrix-vector product (F.linear)"
    machine: str = ""
    measured_at: float = 0.0
    version: int = READ_PROBE_VERSION  # of the probe that measured it: an older probe's cached figure is stale

    def percent_of(self, gbps: float) -> float:
        """An achieved read bandwidth as a percentage of this ceiling."""
        return 100.0 * gbps / self.read_gbps

    def tokens_per_s(self, bytes_per_step: int) -> float:
        """Decode steps per second this ceiling allows for a step that must read `bytes_per_step`."""
        return self.read_gbps * 1e9 / bytes_per_step if bytes_per_step > 0 else float("inf")


def read_buffer_bytes(llc_bytes: int | None = None) -> int:
    """Four times the last-level cache (so no read is served from it), at least 128 MiB, at most 512 MiB."""
    llc = last_level_cache_bytes() if llc_bytes is None else llc_bytes
    return min(READ_MAX_BUFFER_BYTES, max(READ_MIN_BUFFER_BYTES, 4 * (llc or 0)))


def read_matrix(buffer_bytes: int | None = None):
    """The read probe's float32 numpy matrix (rows, READ_COLUMNS) of about `buffer_bytes` (beyond the last-level
    cache by default), for the kernels whose products are timed outside torch (step.c, OpenBLAS)."""
    import numpy as np

    n = buffer_bytes or read_buffer_bytes()
    return np.full((max(1, n // (4 * READ_COLUMNS)), READ_COLUMNS), 1.0 / READ_COLUMNS, dtype=np.float32)


def read_ceiling_native(threads: int, buffer_bytes: int | None = None, bursts: int | None = None) -> float:
    """What step.c's matrix-vector product (kvviz.native) reads at `threads` threads, in GB/s: the fastest of
    `bursts` products against the read probe's matrix, in both layouts, as the other kernels' ceilings are probed."""
    from kvviz import native

    matrix = read_matrix(buffer_bytes)
    times = native.gemv_seconds(matrix, threads, bursts or READ_BURSTS)
    return matrix.nbytes / min(min(v) for v in times.values()) / 1e9


def _wall_seconds(fn) -> float:
    """Seconds one call of `fn` takes on the host's clock (a CPU's probe bursts)."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _gemv_bursts(torch, matrix, bursts: int, timer, warm: bool = True) -> tuple[list[float], str]:
    """Seconds of each of `bursts` products of one row against `matrix`, after a warm-up, in the faster of
    its two layouts: y = x W^T over the stored (rows, cols) matrix, and y = x W over the same bytes read as
    its transpose (the column-major case: kvviz lays out its wide projections so, see
    Transformer._read_layout). The layouts take turns, burst by burst; `timer(fn)` times one call.
    Returns (the faster layout's times, a line naming both figures)."""
    import statistics

    import torch.nn.functional as F

    nbytes = matrix.numel() * matrix.element_size()
    sides = {"row-major": (torch.full((1, matrix.shape[1]), 1.0, dtype=matrix.dtype, device=matrix.device), matrix),
             "column-major": (torch.full((1, matrix.shape[0]), 1.0, dtype=matrix.dtype, device=matrix.device),
                              matrix.t())}
    times: dict[str, list[float]] = {k: [] for k in sides}
    with torch.inference_mode():
        for x, w in sides.values():  # pages touched, kernels picked
            for _ in range(2 if warm else 0):
                F.linear(x, w)
        for _ in range(bursts):
            for key, (x, w) in sides.items():
                times[key].append(timer(lambda x=x, w=w: F.linear(x, w)))
    best = min(times, key=lambda k: min(times[k]))
    line = ", ".join(f"{k} {nbytes / min(v) / 1e9:,.1f} (median {nbytes / statistics.median(v) / 1e9:,.1f})"
                     for k, v in times.items())
    return times[best], f"float32 matrix-vector product (F.linear), the faster of two layouts, GB/s: {line}"


def probe_read_cpu(threads: int | None = None, buffer_bytes: int | None = None,
                   bursts: int = READ_BURSTS) -> ReadCeiling:
    """Time `bursts` float32 matrix-vector products over a matrix beyond the last-level cache with torch's
    CPU kernels at `threads` threads (default: torch's current count, restored after), and with kvviz's
    native step's kernel where it builds; the faster kernel's figure is the ceiling."""
    import statistics

    import torch

    n = buffer_bytes or read_buffer_bytes()
    if n < 4 * READ_COLUMNS or bursts < 1:
        raise ValueError(f"a read probe needs at least one row and one burst, got {n} B x {bursts}")
    before = torch.get_num_threads()
    threads = threads or before
    rows = n // (4 * READ_COLUMNS)
    matrix = torch.full((rows, READ_COLUMNS), 1.0 / READ_COLUMNS, dtype=torch.float32)
    nbytes = matrix.numel() * 4
    try:
        if threads != before:
            torch.set_num_threads(threads)
        times, method = _gemv_bursts(torch, matrix, bursts, _wall_seconds)
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
    # The engines' default decode step on a CPU is kvviz's C step (kvviz.native) where it builds: its own
    # product over the same matrix is probed beside torch's, and the ceiling is the faster kernel's (on one
    # AMD EPYC here it read 34 GB/s on one thread where torch's read 21: torch's figure was no ceiling there)
    from kvviz import native

    if native.build_error() is None:
        own = native.gemv_seconds(matrix, threads, bursts)
        best = min(own, key=lambda k: min(own[k]))
        line = ", ".join(f"{k} {nbytes / min(v) / 1e9:,.1f} (median {nbytes / statistics.median(v) / 1e9:,.1f})"
                         for k, v in own.items())
        faster = min(own[best]) < min(times)
        method = (f"{method}; kvviz's native step's product (kvviz.native), GB/s: {line}; the ceiling is "
                  f"{'the native' if faster else 'torch'}'s")
        if faster:
            times = own[best]
    del matrix
    return ReadCeiling(device="cpu", read_gbps=nbytes / min(times) / 1e9, threads=threads, buffer_bytes=nbytes,
                       bursts=bursts, median_gbps=nbytes / statistics.median(times) / 1e9, method=method,
                       machine=machine_key(), measured_at=time.time())


class ReadProbe:
    """The CPU read ceiling's products one burst at a time, over one matrix held for a whole bench, so that
    the bench samples the ceiling in the same minutes as its runs, a burst before each run: on the shared
    development machine (load average 0) the fastest burst moved from 29 to 40 GB/s from one minute to the
    next, and an engine's run measured against a probe taken minutes before it read 65-87% of it."""

    def __init__(self, threads: int, buffer_bytes: int | None = None) -> None:
        import torch

        n = buffer_bytes or read_buffer_bytes()
        self.threads = threads
        self.matrix = torch.full((max(1, n // (4 * READ_COLUMNS)), READ_COLUMNS), 1.0 / READ_COLUMNS)
        self.nbytes = self.matrix.numel() * 4
        from kvviz import native

        self._native = native if native.build_error() is None else None
        self.bursts: list[float] = []

    def burst(self) -> float:
        """GB/s of this burst's fastest product (torch's F.linear and the native step's, both layouts); kept."""
        import torch

        before = torch.get_num_threads()
        try:
            if self.threads != before:
                torch.set_num_threads(self.threads)
            times, _ = _gemv_bursts(torch, self.matrix, 1, _wall_seconds, warm=False)
        finally:
            if torch.get_num_threads() != before:
                torch.set_num_threads(before)
        best = min(times)
        if self._native is not None:
            own = self._native.gemv_seconds(self.matrix, self.threads, 1, warm=False)
            best = min(best, *(min(v) for v in own.values()))
        self.bursts.append(self.nbytes / best / 1e9)
        return self.bursts[-1]


def probe_read_cuda(device, buffer_bytes: int = CUDA_READ_BUFFER_BYTES, bursts: int = READ_BURSTS) -> ReadCeiling:
    """The same product on a CUDA device, each burst timed with CUDA events."""
    import statistics

    import torch

    device = torch.device(device)
    rows = buffer_bytes // (4 * READ_COLUMNS)
    matrix = torch.full((rows, READ_COLUMNS), 1.0 / READ_COLUMNS, dtype=torch.float32, device=device)
    nbytes = matrix.numel() * 4
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timer(fn) -> float:
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) * 1e-3

    times, method = _gemv_bursts(torch, matrix, bursts, timer)
    props = torch.cuda.get_device_properties(device)
    del matrix
    return ReadCeiling(device=str(device), read_gbps=nbytes / min(times) / 1e9, threads=torch.get_num_threads(),
                       buffer_bytes=nbytes, bursts=bursts, median_gbps=nbytes / statistics.median(times) / 1e9,
                       method=method, peak_gbps=nominal_peak_gbps(props), machine=f"{machine_key()} | {props.name}",
                       measured_at=time.time())


def _ceiling_from_entry(entry) -> ReadCeiling | None:
    if not isinstance(entry, dict) or entry.get("version", 1) != READ_PROBE_VERSION:
        return None  # written by an older probe (torch's kernel alone): probed again
    try:
        c = ReadCeiling(**entry)
    except TypeError:
        return None
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (c.read_gbps, c.threads))
    return c if ok and 0 < c.read_gbps < 1e6 and c.threads >= 1 else None


def cached_read_ceiling(threads: int | None = None, *, path: Path | None = None) -> ReadCeiling | None:
    """This machine's CPU read ceiling at `threads` from the cache file, without probing or importing torch
    (the window's status bar); threads None: the one measured last. None where none is cached."""
    entries = _read_doc(path or cache_path())["read"].get(machine_key())
    if not isinstance(entries, dict):
        return None
    found = [c for k, e in entries.items() if threads is None or k == str(threads)
             for c in [_ceiling_from_entry(e)] if c is not None]
    return max(found, key=lambda c: c.measured_at, default=None)


def read_ceiling(device="cpu", threads: int | None = None, *, refresh: bool = False,
                 path: Path | None = None) -> ReadCeiling:
    """The read ceiling of the device a run uses, at `threads` torch threads (default: torch's current
    count), with the copy figure beside it. A CPU's is cached per machine and thread count (probed once,
    ~0.3 s); a CUDA device's is measured on each call, as its copy figure is."""
    if getattr(device, "type", str(device).split(":")[0]) == "cuda":
        c = probe_read_cuda(device)
        copy = probe_cuda(device)
        return replace(c, copy_gbps=copy.copy_gbps, peak_gbps=c.peak_gbps or copy.peak_gbps)
    if threads is None:
        import torch

        threads = torch.get_num_threads()
    copy = cpu_bandwidth(path=path) if path else cpu_bandwidth()  # its own section of the file
    path = path or cache_path()
    cached = None if refresh else cached_read_ceiling(threads, path=path)
    if cached is not None:
        return replace(cached, copy_gbps=copy.copy_gbps)
    c = replace(probe_read_cpu(threads), copy_gbps=copy.copy_gbps)
    doc = _read_doc(path)  # read after cpu_bandwidth, which may have just written its section
    entries = doc["read"].get(machine_key())
    doc["read"][machine_key()] = {**(entries if isinstance(entries, dict) else {}), str(threads): asdict(c)}
    _write_doc(path, doc)
    return c


# -- CUDA ---------------------------------------------------------------------------------------
def nominal_peak_gbps(props) -> float | None:
    """2 transfers per clock x memory clock x bus width, where the device properties report both
    (CUDA's deviceQuery arithmetic); None otherwise."""
    clock_khz = getattr(props, "memory_clock_rate", None)
    bus_bits = getattr(props, "memory_bus_width", None)
    if not clock_khz or not bus_bits:
        return None
    return 2.0 * clock_khz * 1e3 * (bus_bits / 8) / 1e9


def probe_cuda(device, buffer_bytes: int = 256 << 20, bursts: int = 5) -> Bandwidth:
    """A device-to-device copy timed with CUDA events, fastest of `bursts`."""
    import torch

    device = torch.device(device)
    src = torch.ones(buffer_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm-up
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best_ms = float("inf")
    for _ in range(bursts):
        start.record()
        dst.copy_(src)
        stop.record()
        stop.synchronize()
        best_ms = min(best_ms, start.elapsed_time(stop))
    props = torch.cuda.get_device_properties(device)
    del src, dst
    return Bandwidth(device=str(device), copy_gbps=2 * buffer_bytes / (best_ms * 1e-3) / 1e9,
                     buffer_bytes=buffer_bytes, bursts=bursts, peak_gbps=nominal_peak_gbps(props),
                     machine=f"{machine_key()} | {props.name}", measured_at=time.time())
