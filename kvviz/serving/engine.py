"""The serving engine (nano-vllm's LLMEngine): a workload in, one ServeStep record per scheduler step out,
and a ServeRun at the end. `step()` is three lines: schedule, run, postprocess.

It knows the tokenizer only to turn prompts into ids and tokens into text; sampling is one seeded
Sampler per request, so a request draws exactly what its own solo run draws (kvviz.serving.solo).
"""
from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import replace

import torch

from kvviz.costs.wall import WallShape
from kvviz.names import parse_names
from kvviz.runtime.devices import synchronize
from kvviz.sampling import Sampler
from kvviz.serving.block_manager import BlockManager
from kvviz.serving.model_runner import ModelRunner, check_supported
from kvviz.serving.record import ModelInfo, RequestResult, RequestState, SchedulerSettings, ServeRun, ServeStep, Work
from kvviz.serving.scheduler import CACHING, MEMORY_BOUND, SCHEDULER_CLASSES, Batch
from kvviz.serving.sequence import Sequence
from kvviz.serving.solo import request_sampling
from kvviz.serving.workload import Workload

DEFAULT_TOKEN_BUDGET = 64


def parse_schedulers(text: str) -> tuple[str, ...]:
    """`"static,paged"` -> ("static", "paged"), refusing unknown or repeated names."""
    return parse_names(text, tuple(SCHEDULER_CLASSES), "scheduler", "schedulers")


def tokenize(workload: Workload, tokenizer) -> list[list[int]]:
    return [list(r.prompt_ids) if r.prompt_ids is not None else tokenizer.encode(r.prompt) for r in workload.requests]


def request_name(index: int) -> str:
    """How a user reads request `index`: from 0, as every panel of the Serve view, its page and the main window's
    steps count (the workload table numbers its rows the same way)."""
    return f"request {index}"


def blocks_word(n: int) -> str:
    return f"{n} block" if n == 1 else f"{n} blocks"


def blocks_needed(prompts: list[list[int]], workload: Workload, block_size: int) -> list[int]:
    """Blocks each request holds at its longest (its last generated token is never stored)."""
    return [-(-(len(p) + r.new_tokens - 1) // block_size) for p, r in zip(prompts, workload.requests)]


def check_workload(cfg, prompts: list[list[int]], workload: Workload, settings: SchedulerSettings,
                   schedulers: tuple[str, ...]) -> None:
    """One-line ValueError for a request no scheduler could serve with these settings."""
    if settings.max_batch < 1:
        raise ValueError(f"the batch size must be at least 1, got {settings.max_batch}")
    if settings.token_budget is not None and settings.token_budget < settings.block_size:
        raise ValueError(f"a token budget of {settings.token_budget} is smaller than one block of "
                         f"{settings.block_size} tokens")
    for i, (p, r) in enumerate(zip(prompts, workload.requests)):
        if not p:
            raise ValueError(f"{request_name(i)}: the prompt is empty after tokenizing")
        if max(p) >= cfg.vocab_size:
            raise ValueError(f"{request_name(i)}: token id {max(p)} is outside the model's vocabulary of "
                             f"{cfg.vocab_size}")
        if len(p) + r.new_tokens > cfg.max_seq_len:
            raise ValueError(f"{request_name(i)}: prompt ({len(p)} tokens) + new tokens ({r.new_tokens}) = "
                             f"{len(p) + r.new_tokens} exceeds the model's context of {cfg.max_seq_len}")
    if set(schedulers) & set(MEMORY_BOUND):
        need = blocks_needed(prompts, workload, settings.block_size)
        worst = max(range(len(need)), key=need.__getitem__)
        if need[worst] > settings.blocks:
            raise ValueError(f"a pool of {blocks_word(settings.blocks)} of {settings.block_size} is smaller than "
                             f"{request_name(worst)} needs ({blocks_word(need[worst])})")


def ample_blocks(prompts: list[list[int]], workload: Workload, settings: SchedulerSettings) -> int:
    """A pool that never runs short: the max_batch largest requests at their longest."""
    need = sorted(blocks_needed(prompts, workload, settings.block_size), reverse=True)
    return sum(need[:settings.max_batch])


class ServeEngine:
    def __init__(self, model, tokenizer, workload: Workload, scheduler: str, settings: SchedulerSettings) -> None:
        check_supported(model)
        self.model, self.tokenizer, self.workload = model, tokenizer, workload
        self.prompts = tokenize(workload, tokenizer)
        if scheduler not in MEMORY_BOUND:
            settings = replace(settings, blocks=ample_blocks(self.prompts, workload, settings))
        if scheduler != "chunked":
            settings = replace(settings, token_budget=None)
        elif settings.token_budget is None:
            settings = replace(settings, token_budget=max(DEFAULT_TOKEN_BUDGET, settings.block_size))
        check_workload(model.cfg, self.prompts, workload, settings, (scheduler,))
        self.key, self.settings = scheduler, settings
        self.seqs = [Sequence(i, p, r.new_tokens, r.arrival, Sampler(request_sampling(settings, workload, i)))
                     for i, (p, r) in enumerate(zip(self.prompts, workload.requests))]
        self.pool = BlockManager(settings.blocks, settings.block_size, caching=scheduler in CACHING)
        self.scheduler = SCHEDULER_CLASSES[scheduler](self.seqs, self.pool, max_batch=settings.max_batch,
                                                      token_budget=settings.token_budget)
        self.runner = ModelRunner(model, settings.blocks, settings.block_size)
        param = next(model.parameters())
        self.device = param.device
        dtype = str(param.dtype).replace("torch.", "")
        self.wall = WallShape.from_config(model.cfg, dtype)
        cfg = model.cfg
        self.info = ModelInfo(name=cfg.name, arch=cfg.arch, n_layer=cfg.n_layer, n_head=cfg.n_head,
                              n_kv_head=cfg.n_kv_head, head_dim=cfg.head_dim, max_seq_len=cfg.max_seq_len, dtype=dtype,
                              device=self.device.type, threads=torch.get_num_threads(),
                              weights_bytes=self.wall.weights_bytes, kv_bytes_per_token=self.wall.kv_bytes_per_token)
        self.clock = 0
        self.step_start_ms: list[float] = []  # wall time at the start of each record, from the first
        self.steps: list[ServeStep] = []
        self._elapsed_ms = 0.0

    def step(self) -> ServeStep:
        batch = self.scheduler.schedule(self.clock)
        logits = self.runner.run(batch.rows) if batch.rows else None
        return self.postprocess(batch, logits)

    def postprocess(self, batch: Batch, logits: torch.Tensor | None) -> ServeStep:
        work, finished, emitted, e = [], [], [], 0
        for row in batch.rows:
            seq, token = row.seq, None
            if row.real:
                seq.computed = row.start + row.n
                if row.kind == "prefill":
                    seq.computed_tokens += row.n
                if row.emits:
                    token = seq.sampler.pick(logits[e])
                    e += 1
                    seq.generated.append(token)
                    seq.prefilling = False
                    emitted.append(seq)
                    if seq.first_token_step is None:
                        seq.first_token_step = self.clock
                self.pool.written(seq)
            work.append(Work(seq.index, row.kind, row.start, row.start + row.n, token))
        for seq in emitted:
            if seq.done:
                seq.finish_step = self.clock
                self.scheduler.finish(seq)
                finished.append(seq.index)
        kv_tokens = sum(r.start + r.n if r.real else r.n for r in batch.rows)
        n_slots = sum(r.n for r in batch.rows)
        return ServeStep(
            step=self.clock, work=tuple(work),
            requests=tuple(RequestState(s.index, s.state, s.computed, len(s.generated), tuple(s.block_table))
                           for s in self.seqs if s.arrival <= self.clock),
            pool=self.pool.state(), prefix_hits=tuple(batch.prefix_hits), preemptions=tuple(batch.preemptions),
            admitted=tuple(batch.admitted), finished=tuple(finished),
            weights_bytes=self.wall.weights_bytes + n_slots * self.wall.row_bytes if batch.rows else 0,
            kv_bytes=kv_tokens * self.wall.kv_bytes_per_token)

    def steps_iter(self) -> Iterator[ServeStep]:
        """Run to the end, yielding each step's record (latency filled in) as it is made. A step with no
        arrived request left to run stands for every step up to the next arrival (ServeStep.span): the
        clock jumps there, so idle time costs one record, not one per step."""
        limit = 4 * sum(len(p) + r.new_tokens for p, r in zip(self.prompts, self.workload.requests)) + \
            max(r.arrival for r in self.workload.requests) + 16
        while not self.scheduler.finished:
            if self.clock > limit:  # a scheduler bug, never a workload: every step does some work
                raise RuntimeError(f"{self.key}: no progress after {self.clock} steps")
            synchronize(self.device)
            t0 = time.perf_counter()
            record = self.step()
            synchronize(self.device)
            ms = (time.perf_counter() - t0) * 1000.0
            self.step_start_ms.append(self._elapsed_ms)
            self._elapsed_ms += ms
            arrival = self.scheduler.next_arrival()
            span = arrival - self.clock if arrival is not None and not record.work else 1
            record = replace(record, latency_ms=ms, span=max(1, span))
            self.steps.append(record)
            self.clock += record.span
            yield record

    def run(self) -> ServeRun:
        for _ in self.steps_iter():
            pass
        return self.result()

    def result(self) -> ServeRun:
        starts = [s.step for s in self.steps]

        def start(step: int) -> float:  # wall time at the start of a step (a stretch's steps: its start)
            return self.step_start_ms[bisect_right(starts, step) - 1]

        def end(step: int) -> float:
            i = bisect_right(starts, step) - 1
            return self.step_start_ms[i] + self.steps[i].latency_ms

        results = []
        for s in self.seqs:
            ttft = end(s.first_token_step) - start(s.arrival)
            n = len(s.generated)
            tpot = (end(s.finish_step) - end(s.first_token_step)) / (n - 1) if n > 1 else None
            results.append(RequestResult(
                request=s.index, prompt_ids=tuple(s.prompt_ids), token_ids=tuple(s.generated),
                text=self.tokenizer.decode(s.generated), arrival=s.arrival, admitted_step=s.admitted_step,
                first_token_step=s.first_token_step, finish_step=s.finish_step, ttft_ms=ttft, tpot_ms=tpot,
                preemptions=s.preemptions, cached_tokens=s.cached_tokens, computed_tokens=s.computed_tokens))
        return ServeRun(scheduler=self.key, settings=self.settings, model=self.info, workload=self.workload,
                        results=tuple(results), steps=tuple(self.steps))


def serve(model, tokenizer, workload: Workload, scheduler: str, settings: SchedulerSettings) -> ServeRun:
    return ServeEngine(model, tokenizer, workload, scheduler, settings).run()
