"""The child process of kvviz.peers.vllm: runs workloads through vLLM's LLMEngine, step by step, in an
interpreter where vLLM is importable. Stdlib and vLLM only (kvviz is not importable there).

Protocol: `python vllm_child.py JOB.json RESULT.json PARENT_PID`. It prints `hello VERSION` once vLLM is
imported, `ready` once the engine is built, and writes the result as JSON to RESULT.json; a refusal or failure is
written there as {"error": ONE LINE, "kind": WORD} instead. vLLM's own logs go to stderr.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

# This file's folder holds kvviz's own vllm.py, which must not stand in for the vllm package.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]


def die_with_parent(parent: int) -> None:
    """Die with the parent process, even when it is killed outright (it cannot kill this group then): on Linux
    the kernel's parent-death signal (prctl PR_SET_PDEATHSIG), elsewhere a thread that watches the parent."""
    try:
        import ctypes

        armed = ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL) == 0  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        armed = False
    if os.getppid() != parent:  # it died before the signal was armed
        os._exit(1)
    if armed:
        return

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def write_result(path: str, doc: dict) -> None:
    tmp = f"{path}.part"
    with open(tmp, "w") as fh:
        json.dump(doc, fh)
    os.replace(tmp, path)


class Refused(Exception):
    """A checkpoint or setting vLLM does not take, said before its start-up spends a minute on it."""


def precheck(job: dict) -> None:
    """Head size and block size against vLLM's own CPU attention backend (CPUAttentionBackend's
    get_supported_head_sizes and get_supported_kernel_block_sizes)."""
    try:
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
    except ImportError:  # another layout of vLLM: its start-up says what it refuses
        return
    heads = CPUAttentionBackend.get_supported_head_sizes()
    if job["head_dim"] not in heads:
        raise Refused(f"vLLM's CPU attention takes head sizes {', '.join(map(str, heads))}; the checkpoint's "
                      f"is {job['head_dim']}")
    for size in CPUAttentionBackend.get_supported_kernel_block_sizes():
        base = getattr(size, "base", size)
        if isinstance(base, int) and job["block_size"] % base:
            raise Refused(f"vLLM's CPU attention needs blocks of a multiple of {base} tokens, got "
                          f"{job['block_size']}")


def stat_logger(steps: list[dict]):
    """A vLLM stat logger (vllm.v1.metrics.loggers.StatLoggerBase) that keeps what each engine step reports."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class Keep(StatLoggerBase):
        def __init__(self, vllm_config, engine_index: int = 0) -> None:
            pass

        def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx: int = 0, **_) -> None:
            row = {"running": 0, "waiting": 0, "kv_usage": 0.0, "preempted": 0, "prompt_computed": 0,
                   "prompt_cached": 0, "prompt_total": 0, "finished": []}
            if scheduler_stats is not None:
                row.update(running=scheduler_stats.num_running_reqs, waiting=scheduler_stats.num_waiting_reqs,
                           kv_usage=float(scheduler_stats.kv_cache_usage))
            if iteration_stats is not None:
                p = iteration_stats.prompt_token_stats
                row.update(preempted=iteration_stats.num_preempted_reqs, prompt_computed=p.computed,
                           prompt_cached=p.cached_tokens, prompt_total=p.total,
                           finished=[{"id": f.request_id, "preemptions": f.num_preemptions,
                                      "cached": f.num_cached_tokens} for f in iteration_stats.finished_requests])
            steps.append(row)

        def log_engine_initialized(self) -> None:
            pass

    return Keep


def run(job: dict) -> dict:
    """Build the engine once, then run each of the job's workloads on it, the prefix cache emptied between them."""
    from vllm import EngineArgs, LLMEngine

    started = time.perf_counter()
    reported: list[dict] = []
    args = EngineArgs(model=job["model"], dtype="float32", enforce_eager=True, block_size=job["block_size"],
                      num_gpu_blocks_override=job["num_gpu_blocks"], max_num_seqs=job["max_num_seqs"],
                      max_num_batched_tokens=job["max_num_batched_tokens"], max_model_len=job["max_model_len"],
                      enable_prefix_caching=job["prefix_caching"], enable_chunked_prefill=job["chunked_prefill"],
                      disable_log_stats=False, seed=0, skip_tokenizer_init=job["skip_tokenizer_init"])
    engine = LLMEngine.from_engine_args(args, stat_loggers=[stat_logger(reported)])
    cfg = engine.vllm_config
    settings = {"block_size": cfg.cache_config.block_size, "num_gpu_blocks": cfg.cache_config.num_gpu_blocks,
                "max_num_seqs": cfg.scheduler_config.max_num_seqs,
                "max_num_batched_tokens": cfg.scheduler_config.max_num_batched_tokens,
                "enable_prefix_caching": bool(cfg.cache_config.enable_prefix_caching),
                "enable_chunked_prefill": bool(cfg.scheduler_config.enable_chunked_prefill),
                "dtype": str(cfg.model_config.dtype).replace("torch.", ""),
                "max_model_len": cfg.model_config.max_model_len,
                "async_scheduling": bool(cfg.scheduler_config.async_scheduling)}
    startup_s = time.perf_counter() - started
    say("ready")
    if job.get("warmup") and job["runs"]:  # the first forward of each shape is slow: keep it out of the figures
        run_workload(engine, job["runs"][0]["requests"], reported, job["skip_tokenizer_init"])
    runs = []
    for work in job["runs"]:
        engine.reset_prefix_cache()
        reported.clear()
        runs.append(run_workload(engine, work["requests"], reported, job["skip_tokenizer_init"]))
    return {"settings": settings, "startup_s": startup_s, "runs": runs}


def run_workload(engine, reqs: list[dict], reported: list[dict], skip_tokenizer_init: bool) -> dict:
    """One workload, request i handed to the engine before the step of its arrival; greedy, exactly
    new_tokens each. Steps are counted as kvviz counts them: a stretch with nothing to run until the next
    arrival is skipped over, its steps counted."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    started = time.perf_counter()
    order = sorted(range(len(reqs)), key=lambda i: (reqs[i]["arrival"], i))
    tokens: dict[int, list[int]] = {}
    texts: dict[int, str] = {}
    cached: dict[int, int | None] = {}
    first_step: dict[int, int] = {}
    finish_step: dict[int, int] = {}
    per_step: list[dict] = []
    clock, step_ms = 0, []
    while order or engine.has_unfinished_requests():
        if not engine.has_unfinished_requests() and reqs[order[0]]["arrival"] > clock:
            clock = reqs[order[0]]["arrival"]
        added = []
        while order and reqs[order[0]]["arrival"] <= clock:
            i = order.pop(0)
            params = SamplingParams(temperature=0.0, max_tokens=reqs[i]["new_tokens"], ignore_eos=True,
                                    detokenize=not skip_tokenizer_init)
            engine.add_request(str(i), TokensPrompt(prompt_token_ids=reqs[i]["prompt_ids"]), params)
            added.append(i)
        t0 = time.perf_counter()
        outputs = engine.step()
        step_ms.append((time.perf_counter() - t0) * 1000.0)
        stats = reported[:]  # what the stat logger was given during this step (one record, or none)
        reported.clear()
        per_step.append({**(stats[-1] if stats else {}), "step": clock, "added": added,
                         "emitted": [int(o.request_id) for o in outputs]})
        for out in outputs:
            i = int(out.request_id)
            ids = list(out.outputs[0].token_ids)
            if ids and i not in first_step:
                first_step[i] = clock
            tokens[i] = ids
            texts[i] = out.outputs[0].text or ""
            cached[i] = out.num_cached_tokens
            if out.finished:
                finish_step[i] = clock
        clock += 1
    return {"run_s": time.perf_counter() - started, "step_ms": step_ms, "per_step": per_step,
            "requests": [{"token_ids": tokens.get(i, []), "text": texts.get(i, ""), "num_cached_tokens": cached.get(i),
                          "first_token_step": first_step.get(i), "finish_step": finish_step.get(i)}
                         for i in range(len(reqs))]}


def main(argv: list[str]) -> int:
    job_path, result_path = argv[1], argv[2]
    die_with_parent(int(argv[3]))
    with open(job_path) as fh:
        job = json.load(fh)
    try:
        import vllm
    except Exception as exc:  # noqa: BLE001 - any failure to import is "vLLM is not usable here"
        write_result(result_path, {"error": f"cannot import vllm ({type(exc).__name__}: {exc})", "kind": "missing"})
        return 3
    say(f"hello {vllm.__version__}")
    try:
        precheck(job)
        doc = run(job)
    except Refused as exc:
        write_result(result_path, {"error": str(exc), "kind": "refused"})
        return 2
    except Exception as exc:  # noqa: BLE001 - vLLM's own refusals come as many types; the parent says it in one line
        write_result(result_path, {"error": f"{type(exc).__name__}: {exc}", "kind": "failed"})
        return 1
    doc["vllm_version"] = vllm.__version__
    write_result(result_path, doc)
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
