"""The copy-bandwidth probe: its figure, its per-machine cache file, and the CUDA path (skipped here)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kvviz.measure import bandwidth
from kvviz.measure.bandwidth import Bandwidth, cpu_bandwidth, nominal_peak_gbps, probe_buffer_bytes, probe_cpu


def test_probe_measures_a_positive_copy_rate():
    bw = probe_cpu(buffer_bytes=1 << 20, bursts=2)
    assert bw.device == "cpu" and bw.buffer_bytes == 1 << 20 and bw.bursts == 2
    assert 0.01 < bw.copy_gbps < 10_000
    assert bw.percent_of(bw.copy_gbps / 2) == pytest.approx(50.0)
    with pytest.raises(ValueError, match="positive"):
        probe_cpu(buffer_bytes=1 << 20, bursts=0)


def test_buffer_outgrows_the_last_level_cache():
    assert probe_buffer_bytes(32 << 20) == 64 << 20
    assert probe_buffer_bytes(1 << 20) == bandwidth.MIN_BUFFER_BYTES
    assert probe_buffer_bytes(1 << 30) == bandwidth.MAX_BUFFER_BYTES
    assert probe_buffer_bytes(0) == bandwidth.MIN_BUFFER_BYTES


def _counting_probe(monkeypatch, gbps=12.5):
    calls = []

    def fake(buffer_bytes=None, bursts=bandwidth.BURSTS):
        calls.append(1)
        return Bandwidth(device="cpu", copy_gbps=gbps, buffer_bytes=64, bursts=1, machine=bandwidth.machine_key())

    monkeypatch.setattr(bandwidth, "probe_cpu", fake)
    return calls


def test_cached_per_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = _counting_probe(monkeypatch)
    first = cpu_bandwidth()
    path = tmp_path / "kvviz" / "bandwidth.json"
    doc = json.loads(path.read_text())
    assert doc["schema"] == "kvviz-bandwidth" and doc["machines"][bandwidth.machine_key()]["copy_gbps"] == 12.5
    assert [p.name for p in path.parent.iterdir()] == ["bandwidth.json"]  # no temporary file left
    assert cpu_bandwidth() == first and len(calls) == 1  # the second call reads the file
    cpu_bandwidth(refresh=True)
    assert len(calls) == 2
    # another machine's entry is kept beside this one's
    doc["machines"]["elsewhere"] = dict(doc["machines"][bandwidth.machine_key()], copy_gbps=99.0)
    path.write_text(json.dumps(doc))
    assert cpu_bandwidth().copy_gbps == 12.5 and len(calls) == 2


@pytest.mark.parametrize("text", ["", "{", "[]", '{"schema": "other", "machines": {}}',
                                  '{"schema": "kvviz-bandwidth", "machines": {"%s": {"copy_gbps": -1}}}',
                                  '{"schema": "kvviz-bandwidth", "machines": {"%s": {"copy_gbps": "fast", '
                                  '"device": "cpu", "buffer_bytes": 1, "bursts": 1}}}'])
def test_a_bad_cache_file_means_a_new_probe(tmp_path, monkeypatch, text):
    path = tmp_path / "bw.json"
    path.write_text(text.replace("%s", bandwidth.machine_key()))
    calls = _counting_probe(monkeypatch)
    assert cpu_bandwidth(path=path).copy_gbps == 12.5 and len(calls) == 1
    assert json.loads(path.read_text())["schema"] == "kvviz-bandwidth"


def test_an_unwritable_cache_folder_costs_only_a_probe(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    calls = _counting_probe(monkeypatch)
    assert cpu_bandwidth(path=blocker / "kvviz" / "bandwidth.json").copy_gbps == 12.5 and len(calls) == 1


def test_nominal_peak_by_hand():
    # 2 transfers per clock x 2,619 MHz x 6,144 bits / 8 = 4,022.8 GB/s
    props = SimpleNamespace(memory_clock_rate=2_619_000, memory_bus_width=6144)
    assert nominal_peak_gbps(props) == pytest.approx(4022.784)
    assert nominal_peak_gbps(SimpleNamespace(name="no clock reported")) is None


def test_cuda_copy_probe():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    bw = bandwidth.probe_cuda("cuda", buffer_bytes=64 << 20, bursts=3)
    assert bw.device.startswith("cuda") and bw.copy_gbps > 1
    assert bw.peak_gbps is None or bw.peak_gbps > bw.copy_gbps / 2
