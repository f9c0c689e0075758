"""This machine's memory copy bandwidth: the ceiling a memory-bound decode step runs against.

On a CPU, a short numpy copy of a buffer larger than the last-level cache (the fastest of a few
bursts, a few tens of ms), cached per machine in a small JSON file under the user's cache folder. On
CUDA, a device-to-device copy timed with CUDA events, and the nominal peak where torch reports the
memory clock and bus width (torch is imported only there). Bandwidth counts each byte read plus each
byte written, as STREAM's copy and CUDA's bandwidthTest do; 1 GB/s = 10^9 B/s. No Qt.
"""
from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass
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


def _read_cache(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    machines = doc.get("machines") if isinstance(doc, dict) and doc.get("schema") == SCHEMA else None
    return machines if isinstance(machines, dict) else {}


def _from_entry(entry) -> Bandwidth | None:
    try:
        bw = Bandwidth(**entry)
    except TypeError:
        return None
    ok = isinstance(bw.copy_gbps, (int, float)) and 0 < bw.copy_gbps < 1e6
    return bw if ok else None


def cpu_bandwidth(*, refresh: bool = False, path: Path | None = None) -> Bandwidth:
    """This machine's CPU copy bandwidth: from the cache file, else probed now and cached (written to
    a temporary file and renamed; an unwritable cache folder only costs a probe next time)."""
    path = path or cache_path()
    key = machine_key()
    machines = _read_cache(path)
    cached = None if refresh else _from_entry(machines.get(key))
    if cached is not None:
        return cached
    bw = probe_cpu()
    machines[key] = asdict(bw)
    try:
        from kvviz.fileio import atomic_write_text

        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"schema": SCHEMA, "version": 1, "machines": machines}, indent=1))
    except (OSError, ValueError):
        pass
    return bw


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


def device_bandwidth(device) -> Bandwidth:
    """The copy bandwidth of the device a run uses: CUDA measured now, anything else the CPU's."""
    if getattr(device, "type", str(device).split(":")[0]) == "cuda":
        return probe_cuda(device)
    return cpu_bandwidth()
