"""`kvviz bench`: the JSON's fields, the identity check, and one-line errors with exit code 2."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvviz.cli import main

FIELDS = {"engine", "new_tokens", "total_ms", "tokens_per_s", "speedup", "kv_projections", "bytes_copied",
          "bytes_written", "bytes_gathered", "peak_cache_bytes", "token_ids", "step_ms"}


def test_bench_json(tmp_path, capsys):
    out = tmp_path / "b.json"
    rc = main(["bench", "--model", "tiny-random", "--tokens", "3", "7", "--repeat", "2", "--threads", "1",
               "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "tokens identical across engines: yes" in text
    doc = json.loads(out.read_text())
    assert doc["identical"] is True and doc["device"] == "cpu"
    assert doc["model"]["n_layer"] == 2 and doc["model"]["head_dim"] == 32
    assert len(doc["results"]) == 2 * 4
    for r in doc["results"]:
        assert FIELDS <= set(r)
        assert len(r["step_ms"]) == r["new_tokens"] == len(r["token_ids"])
        assert r["tokens_per_s"] == pytest.approx(r["new_tokens"] / (r["total_ms"] / 1000))
        naive = next(x for x in doc["results"] if x["engine"] == "naive" and x["new_tokens"] == r["new_tokens"])
        assert r["speedup"] == pytest.approx(naive["total_ms"] / r["total_ms"])
        assert r["token_ids"] == naive["token_ids"]
    concat7 = next(x for x in doc["results"] if x["engine"] == "concat" and x["new_tokens"] == 7)
    static7 = next(x for x in doc["results"] if x["engine"] == "static" and x["new_tokens"] == 7)
    assert concat7["bytes_copied"] > 0 and static7["bytes_copied"] == 0
    assert concat7["kv_projections"] < naive["kv_projections"]


def test_bench_without_naive_prints_no_speedup(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert main(["bench", "--model", "tiny-random", "--engines", "concat,static", "--tokens", "4", "--repeat", "1",
                 "--json", str(out)]) == 0
    assert all(r["speedup"] is None for r in json.loads(out.read_text())["results"])


def test_bench_exits_1_when_tokens_differ(monkeypatch, capsys):
    """Break one cache on purpose: the bench must notice and say so."""
    from kvviz.caches.static import StaticCache

    original = StaticCache.update

    def broken(self, layer, k, v):
        kf, vf = original(self, layer, k, v)
        return kf, vf * 0.0

    monkeypatch.setattr(StaticCache, "update", broken)
    rc = main(["bench", "--model", "tiny-random", "--engines", "naive,static", "--tokens", "12", "--repeat", "1"])
    assert rc == 1
    assert "tokens identical across engines: NO" in capsys.readouterr().out


@pytest.mark.parametrize("args, needle", [
    (["--prompt", ""], "prompt is empty"),
    (["--tokens", "3000"], "context"),
    (["--tokens", "0"], "at least 1"),
    (["--tokens", "-5"], "at least 1"),
    (["--engines", "naive,warp"], "unknown engine"),
    (["--temperature", "-1"], "temperature"),
    (["--top-p", "0"], "top-p"),
    (["--top-p", "1.5"], "top-p"),
    (["--top-k", "0"], "top-k"),
    (["--device", "tpu"], "device"),
    (["--device", "cuda:7"], "not available"),
    (["--dtype", "int3"], "dtype"),
    (["--model", "no-such-model"], "unknown model"),
    (["--repeat", "0"], "repeat"),
])
def test_bad_input_is_one_line_exit_2(args, needle, capsys):
    rc = main(["bench", "--model", "tiny-random", *args] if "--model" not in args else ["bench", *args])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert needle in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_argparse_errors_are_exit_2_in_a_real_process():
    proc = subprocess.run([sys.executable, "-m", "kvviz", "bench", "--tokens", "ten"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "whole number expected" in proc.stderr and "Traceback" not in proc.stderr


def test_steady_allocator_is_set_where_glibc_is():
    import platform

    from kvviz.measure.timing import steady_allocator

    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert steady_allocator() is glibc


def test_bench_runs_the_approximate_caches_with_quality(tmp_path, capsys):
    import json

    from kvviz.cli import main

    out = tmp_path / "b.json"
    assert main(["bench", "--model", "tiny-random", "--engines", "static,concat,window,int8", "--tokens", "20",
                 "--repeat", "1", "--window", "8", "--threads", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tokens identical across engines (the exact ones; the approximate: above): yes" in text
    doc = json.loads(out.read_text())
    rows = {r["engine"]: r for r in doc["results"]}
    assert rows["static"]["mean_kl"] is None and rows["window"]["mean_kl"] > 0
    assert f"window against static, teacher-forced: mean KL {rows['window']['mean_kl']:.4g} nats" in text
    assert rows["window"]["peak_cache_bytes"] == 8 * tiny_kv_bytes()
    assert doc["cache_settings"] == {"window": 8, "sinks": 4, "residual": None, "spec_k": 4, "rollback": "overwrite"}


def tiny_kv_bytes() -> int:
    from kvviz.models.presets import PRESETS

    return PRESETS["tiny-random"].config.kv_bytes_per_token()


def test_bench_refuses_bad_cache_settings(capsys):
    from kvviz.cli import main

    for argv, says in ((["--window", "0"], "--window"), (["--engines", "sinks", "--window", "4", "--sinks", "4"],
                                                        "fewer than the window"),
                       (["--engines", "window", "--window", "100000"], "larger than the run")):
        try:
            code = main(["bench", "--model", "tiny-random", "--tokens", "5", *argv])
        except SystemExit as exc:
            code = exc.code
        assert code == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert says in err[-1] and len(err) <= 2
