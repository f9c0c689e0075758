"""The read ceiling: the probe's figure, its place in the cache file beside the copy figure,
per machine and thread count, and what RunInfo hands the window (figures checked, never timed)."""
from __future__ import annotations

import json
import math

import pytest

from kvviz.measure import bandwidth
from kvviz.measure.bandwidth import Bandwidth, ReadCeiling, cached_read_ceiling, cpu_bandwidth, read_ceiling
from kvviz.records.trace import RunInfo


def test_probe_reads_the_whole_matrix_at_the_threads_asked():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    c = bandwidth.probe_read_cpu(threads=1, buffer_bytes=4 << 20, bursts=3)
    assert c.device == "cpu" and c.threads == 1 and c.bursts == 3
    assert c.buffer_bytes == 4 << 20  # 256 rows of 4,096 float32
    assert 0.01 < c.median_gbps <= c.read_gbps < 10_000  # the fastest burst is the ceiling
    assert "row-major" in c.method and "column-major" in c.method  # both layouts, each figure named
    assert torch.get_num_threads() == before  # the caller's thread count is restored
    assert c.percent_of(c.read_gbps / 4) == pytest.approx(25.0)
    with pytest.raises(ValueError, match="one burst"):
        bandwidth.probe_read_cpu(threads=1, buffer_bytes=4 << 20, bursts=0)


def test_buffer_is_four_last_level_caches_within_bounds():
    assert bandwidth.read_buffer_bytes(32 << 20) == 128 << 20
    assert bandwidth.read_buffer_bytes(100 << 20) == 400 << 20
    assert bandwidth.read_buffer_bytes(1 << 30) == bandwidth.READ_MAX_BUFFER_BYTES
    assert bandwidth.read_buffer_bytes(0) == bandwidth.READ_MIN_BUFFER_BYTES


def test_tokens_per_s_the_ceiling_allows():
    c = ReadCeiling(device="cpu", read_gbps=20.0, threads=1, buffer_bytes=1, bursts=1)
    assert c.tokens_per_s(100_000_000) == pytest.approx(200.0)  # 20e9 B/s over 1e8 B a step
    assert c.tokens_per_s(0) == math.inf


def _fake_probes(monkeypatch, read=(15.0, 29.0)):
    calls = []

    def probe(threads=None, buffer_bytes=None, bursts=bandwidth.READ_BURSTS):
        calls.append(("read", threads))
        return ReadCeiling(device="cpu", read_gbps=read[threads - 1], threads=threads, buffer_bytes=64, bursts=1,
                           machine=bandwidth.machine_key(), measured_at=float(len(calls)))

    def copy(buffer_bytes=None, bursts=bandwidth.BURSTS):
        calls.append(("copy", None))
        return Bandwidth(device="cpu", copy_gbps=25.8, buffer_bytes=64, bursts=1, machine=bandwidth.machine_key())

    monkeypatch.setattr(bandwidth, "probe_read_cpu", probe)
    monkeypatch.setattr(bandwidth, "probe_cpu", copy)
    return calls


def test_cached_per_machine_and_thread_count_beside_the_copy(tmp_path, monkeypatch):
    path = tmp_path / "bw.json"
    calls = _fake_probes(monkeypatch)
    assert cached_read_ceiling(1, path=path) is None  # nothing measured yet: no probe from the window's call
    one = read_ceiling("cpu", 1, path=path)
    assert (one.read_gbps, one.threads, one.copy_gbps) == (15.0, 1, 25.8)
    two = read_ceiling("cpu", 2, path=path)
    assert (two.read_gbps, two.threads) == (29.0, 2)
    assert calls == [("copy", None), ("read", 1), ("read", 2)]  # the copy probed once, then read from the file
    doc = json.loads(path.read_text())
    key = bandwidth.machine_key()
    assert doc["schema"] == "kvviz-bandwidth" and doc["machines"][key]["copy_gbps"] == 25.8
    assert {k: e["read_gbps"] for k, e in doc["read"][key].items()} == {"1": 15.0, "2": 29.0}
    # a second look reads the file, for each thread count; the window's lookup needs no torch and no probe
    assert read_ceiling("cpu", 1, path=path) == one and read_ceiling("cpu", 2, path=path) == two
    assert cached_read_ceiling(2, path=path) == two and cached_read_ceiling(3, path=path) is None
    assert cached_read_ceiling(None, path=path) == two  # the one measured last
    assert len(calls) == 3
    # the copy figure's own refresh keeps the read section
    cpu_bandwidth(refresh=True, path=path)
    assert cached_read_ceiling(1, path=path) == one
    read_ceiling("cpu", 1, path=path, refresh=True)
    assert calls[-1] == ("read", 1)


@pytest.mark.parametrize("entry", [{"read_gbps": -1}, {"read_gbps": "fast", "device": "cpu", "threads": 1,
                                                        "buffer_bytes": 1, "bursts": 1},
                                   {"read_gbps": 5.0, "device": "cpu", "threads": 0, "buffer_bytes": 1, "bursts": 1},
                                   "not an object"])
def test_a_bad_read_entry_means_a_new_probe(tmp_path, monkeypatch, entry):
    path = tmp_path / "bw.json"
    path.write_text(json.dumps({"schema": "kvviz-bandwidth", "machines": {},
                                "read": {bandwidth.machine_key(): {"1": entry}}}))
    calls = _fake_probes(monkeypatch)
    assert cached_read_ceiling(1, path=path) is None
    assert read_ceiling("cpu", 1, path=path).read_gbps == 15.0 and ("read", 1) in calls


def test_run_info_hands_the_window_the_read_ceiling_and_its_name():
    assert RunInfo(copy_gbps=25.8, read_gbps=15.0).bandwidth_gbps() == 15.0
    assert RunInfo(copy_gbps=25.8, read_gbps=15.0).ceiling_kind() == "read"
    # a trace saved before the read ceiling was measured: the copy figure, named as such
    assert RunInfo(copy_gbps=25.8).bandwidth_gbps() == 25.8 and RunInfo(copy_gbps=25.8).ceiling_kind() == "copy"
    for bad in (math.nan, math.inf, -1.0, 0.0):
        assert RunInfo(copy_gbps=25.8, read_gbps=bad).ceiling_kind() == "copy"
    assert RunInfo().bandwidth_gbps() is None and RunInfo().ceiling_kind() is None


def test_a_saved_trace_keeps_the_read_ceiling(tmp_path):
    from kvviz.records import traceio

    info = RunInfo(run_id="r", model_name="tiny", engines=("concat",), copy_gbps=25.8, read_gbps=15.0,
                   read_threads=2)
    loaded = traceio.info_from_dict(json.loads(json.dumps(traceio.run_to_dict(info, {})["info"])))
    assert (loaded.read_gbps, loaded.read_threads, loaded.copy_gbps) == (15.0, 2, 25.8)
    traceio.check_info(loaded)
    with pytest.raises(ValueError, match="read_gbps"):
        traceio.check_info(RunInfo(read_gbps=math.nan))


def test_session_records_the_read_ceiling(monkeypatch):
    from kvviz.config import ModelConfig
    from kvviz.runtime.session import _wall_fields

    monkeypatch.setattr(bandwidth, "read_ceiling", lambda device: ReadCeiling(
        device="cpu", read_gbps=15.0, threads=2, buffer_bytes=1, bursts=1, copy_gbps=25.8))
    fields = _wall_fields(ModelConfig(), "float32", "cpu")
    assert (fields["read_gbps"], fields["read_threads"], fields["copy_gbps"]) == (15.0, 2, 25.8)


def test_cuda_read_probe():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    c = bandwidth.probe_read_cuda("cuda", buffer_bytes=256 << 20, bursts=3)
    assert c.device.startswith("cuda") and c.read_gbps > 1
    assert c.peak_gbps is None or c.peak_gbps > c.read_gbps / 2


def test_the_probe_reads_with_the_engines_kernels_and_keeps_the_faster():
    """The engines' default decode step on a CPU is kvviz's C step where it builds: its own product is probed
    beside torch's over the same matrix, each figure named, and the ceiling is the faster kernel's."""
    pytest.importorskip("torch")
    from kvviz import native

    if native.build_error() is not None:
        pytest.skip(f"kvviz/native/step.c cannot be built here: {native.build_error()}")
    c = bandwidth.probe_read_cpu(threads=1, buffer_bytes=4 << 20, bursts=3)
    assert "F.linear" in c.method and "kvviz's native step's product" in c.method
    figures = [float(x.split(" (")[0].replace(",", "")) for x in c.method.replace(";", ",").split("-major ")[1:]]
    assert len(figures) == 4 and c.read_gbps == pytest.approx(max(figures), rel=0.06)  # printed to 0.1 GB/s
    torch_best, native_best = max(figures[:2]), max(figures[2:])
    if abs(native_best - torch_best) > 0.2:  # printed to 0.1 GB/s: which one won is readable from the line
        assert c.method.endswith("the ceiling is the native's") == (native_best > torch_best)
    assert c.version == bandwidth.READ_PROBE_VERSION


def test_a_figure_cached_by_the_torch_only_probe_is_measured_again(tmp_path, monkeypatch):
    path = tmp_path / "bw.json"
    old = {k: v for k, v in ReadCeiling(device="cpu", read_gbps=21.0, threads=1, buffer_bytes=64, bursts=1,
                                        machine=bandwidth.machine_key()).__dict__.items() if k != "version"}
    path.write_text(json.dumps({"schema": "kvviz-bandwidth", "machines": {},
                                "read": {bandwidth.machine_key(): {"1": old}}}))
    calls = _fake_probes(monkeypatch)
    assert cached_read_ceiling(1, path=path) is None  # no version: written by the probe of torch's kernel alone
    assert read_ceiling("cpu", 1, path=path).read_gbps == 15.0 and ("read", 1) in calls
    assert cached_read_ceiling(1, path=path).read_gbps == 15.0  # the new figure kept, with its version


def test_a_read_probe_takes_one_burst_at_a_time_beside_a_run():
    pytest.importorskip("torch")
    probe = bandwidth.ReadProbe(1, buffer_bytes=4 << 20)
    assert probe.nbytes == 4 << 20 and probe.bursts == []
    first = probe.burst()
    probe.burst()
    assert len(probe.bursts) == 2 and probe.bursts[0] == first and all(0.01 < b < 10_000 for b in probe.bursts)
