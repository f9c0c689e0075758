"""`kvviz bench`: the bytes-read and bandwidth columns and `--reference` (figures checked, never timed)."""
from __future__ import annotations

import json
import statistics

import pytest

from kvviz.cli import main


def test_bench_reports_bytes_read_and_the_reference(tmp_path, capsys, monkeypatch):
    from kvviz.measure import bandwidth

    monkeypatch.setattr(bandwidth, "cpu_bandwidth", lambda: bandwidth.Bandwidth("cpu", 15.0, 64 << 20, 4))
    out = tmp_path / "b.json"
    rc = main(["bench", "--model", "tiny", "--prompt", "KV", "--tokens", "5", "--engines", "naive,concat",
               "--repeat", "1", "--threads", "1", "--reference", "--verbose", "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    doc = json.loads(out.read_text())
    cells = {c["engine"]: c for c in doc["results"]}
    # tiny, a 2-token prompt, 5 new tokens on concat: the prefill read 2,230,784 B of weights, 2 rows of 512 B
    # and 2 positions' K/V of 2,048 B (2,235,904); the decodes at 3, 4, 5 and 6 positions one row each and
    # the K/V they hold: 4 x 2,231,296 + 18 x 2,048 (8,962,048)
    assert cells["concat"]["bytes_read"] == 2_235_904 + 8_962_048
    # naive computes every position every step: 2 + 3 + 4 + 5 + 6 = 20 rows and the same K/V
    assert cells["naive"]["bytes_read"] == 5 * 2_230_784 + 20 * 512 + 20 * 2_048
    concat = cells["concat"]
    assert concat["read_gbps"] == pytest.approx(concat["bytes_read"] / (concat["total_ms"] * 1e6))
    assert doc["wall"]["crossover_tokens"] == 1_090 and doc["wall"]["copy_gbps"] == 15.0
    assert [(r["engine"], r["new_tokens"], r["same_tokens"]) for r in doc["reference"]] == [
        ("naive", 5, True), ("concat", 5, True)]
    assert all(r["ratio"]["off"] > 0 and r["ratio"]["full"] > 0 for r in doc["reference"])
    assert "cpu read ceiling " in text and "and more K/V than that from 1,090 tokens on" in text
    assert "kvviz/bare" in text
    assert "; cpu copy bandwidth 15.0 GB/s (read + written, not a decode bound)" in text
    assert doc["wall"]["read_gbps"] > 0 and doc["wall"]["read_threads"] == 1
    # each row against the fastest burst of the probe, at the start or one of those taken before every run
    bursts = doc["wall"]["read_during_runs_gbps"]
    assert len(bursts) == 2 and all(b > 0 for b in bursts)  # one run a row, repeat 1
    assert doc["wall"]["read_fastest_gbps"] == max(doc["wall"]["read_gbps"], *bursts)
    assert concat["read_share"] == pytest.approx(concat["read_gbps"] / doc["wall"]["read_fastest_gbps"])
    assert concat["read_share_of_median"] == pytest.approx(concat["read_gbps"] / statistics.median(bursts))
    assert "read ceiling during the runs (2 bursts, one before each run): fastest " in text
    # the decode steps alone: their bytes (the prefill's left out) over their median step times
    assert concat["decode_bytes_read"] == 8_962_048
    assert concat["decode_read_gbps"] == pytest.approx(8_962_048 / (sum(concat["step_ms"][1:]) * 1e6))
    assert "decode steps alone (prefill left out), GB/s, of ceil / of med: naive at 5 " in text
    assert "decode kernel, every engine alike: PyTorch (torch): " in text
    header = next(line for line in text.splitlines() if line.split()[:2] == ["new", "engine"])
    assert "GB/s" in header  # the table's header names the column


@pytest.mark.parametrize("llc", [4096, 480 << 20])
def test_bench_probes_the_ceiling_beside_its_runs_and_says_when_a_run_beat_it(tmp_path, capsys, monkeypatch, llc):
    """A ceiling cached in another minute is no ceiling for this run: the bench probes again (once, at its
    threads) and names an engine that read faster than the probe did, instead of printing a share over 100%,
    with the likelier cause: a busier probe, or weights that fit in the last-level cache (tiny's 3 MiB do in
    480 MiB, as `wide`'s 104.5 MiB did on a CPU with one that large)."""
    from kvviz.measure import bandwidth

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(bandwidth, "last_level_cache_bytes", lambda: llc)
    monkeypatch.setattr(bandwidth, "cpu_bandwidth", lambda: bandwidth.Bandwidth("cpu", 15.0, 64 << 20, 4))
    probes = []

    def probe(threads=None, buffer_bytes=None, bursts=bandwidth.READ_BURSTS):
        probes.append(threads)
        return bandwidth.ReadCeiling(device="cpu", read_gbps=0.001, threads=threads, buffer_bytes=64, bursts=1,
                                     median_gbps=0.001, machine=bandwidth.machine_key(), measured_at=1.0)

    monkeypatch.setattr(bandwidth, "probe_read_cpu", probe)
    monkeypatch.setattr(bandwidth.ReadProbe, "burst", lambda self: self.bursts.append(0.001) or 0.001)
    cached = bandwidth.ReadCeiling(device="cpu", read_gbps=500.0, threads=1, buffer_bytes=64, bursts=1,
                                   machine=bandwidth.machine_key(), measured_at=0.5)
    bandwidth._write_doc(bandwidth.cache_path(), {"machines": {}, "read": {bandwidth.machine_key(): {"1": {
        k: getattr(cached, k) for k in bandwidth.ReadCeiling.__dataclass_fields__}}}})
    assert bandwidth.cached_read_ceiling(1).read_gbps == 500.0
    out = tmp_path / "b.json"
    rc = main(["bench", "--model", "tiny", "--prompt", "KV", "--tokens", "3", "--engines", "concat", "--repeat", "1",
               "--threads", "1", "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and probes == [1]  # probed once, at the run's thread count, although one was cached
    assert json.loads(out.read_text())["wall"]["read_gbps"] == 0.001
    assert "cpu read ceiling 0.0 GB/s at 1 thread; " in text
    named = "above the read ceiling (0.0 GB/s) probed beside the runs: concat; "
    if llc == 4096:
        assert named + "the machine was busier during the probe than during the runs, so rerun for a share" in text
    else:
        assert named + "a step's " in text
        assert "of weights fit in this CPU's 480.0 MiB last-level cache, which the probe's" in text
    assert bandwidth.cached_read_ceiling(1).read_gbps == 0.001  # the cache holds the newest probe
