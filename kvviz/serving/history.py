"""The serve history: every scheduler's ServeStep records (kvviz.serving.record), appended as
they arrive or loaded from a saved serve record, and the numpy arrays the panels draw derived from
them (the timeline's cells, the pool's owners, the per-step series, each request's latency so far).

No Qt, no torch: records and numpy only, so the Serve view's panels, its exports, replay and the HTML page
share it. Scrubbing is in lockstep: step k of every scheduler, each clamped to its last step. A stretch with
no request to run is one record (ServeStep.span) and one timeline column: memory follows the records.
vLLM's run beside the schedulers (the "vllm" lane, VllmLane) is held apart: it reports other things per step
(kvviz.peers.vllm.VllmStep), so the panels draw it in their own column and rows.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from kvviz.peers.vllm import VllmRun, VllmStep
from kvviz.records.history import History, count_steps, index_at
from kvviz.serving.record import (
    LaneRecord,
    ModelInfo,
    PeerProgress,
    RequestResult,
    SchedulerSettings,
    ServeRun,
    ServeStarted,
    ServeStep,
    SoloCheck,
    compare_solo,
    emitted_at,
    vllm_of,
    with_vllm,
)
from kvviz.serving.workload import Workload
from kvviz.textshow import label_bytes

# Timeline cell codes: what a request's slot did at a step (ordered for the colour table).
NONE, WAITING, PREFILL, DECODE, PADDING, IDLE, PREEMPTED, FINISHED = range(8)
CELL_KINDS = ("none", "waiting", "prefill", "decode", "padding", "idle", "preempted", "finished")
_WORK_CODE = {"prefill": PREFILL, "decode": DECODE, "padding": PADDING, "idle": IDLE}
_STATE_CODE = {"waiting": WAITING, "running": WAITING, "preempted": PREEMPTED, "finished": FINISHED}


class StepColumns:
    """A timeline's first column of each step, indexed by step (length: steps + 1), so that step k spans
    columns x0[k]..x0[k + 1]. Held as one entry per record: the steps of a stretch (ServeStep.span) share its
    column in equal fractions; every other step's columns are whole numbers."""

    def __init__(self, starts: np.ndarray, columns: np.ndarray) -> None:
        self.starts = starts  # int [records + 1]: each record's first step, then the step count
        self.columns = columns  # int [records + 1]: each record's first column, then the column count

    def __len__(self) -> int:
        return int(self.starts[-1]) + 1

    def __getitem__(self, step: int) -> int | float:
        n = len(self)
        if step < 0:
            step += n
        if not 0 <= step < n:
            raise IndexError(f"step {step} of {n - 1}")
        i = int(np.searchsorted(self.starts, step, side="right")) - 1
        if self.starts[i] == step:
            return int(self.columns[i])
        return float(self.columns[i] + (step - self.starts[i]) / (self.starts[i + 1] - self.starts[i])
                     * (self.columns[i + 1] - self.columns[i]))

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """Every step's first column (one entry per step: for tests and short runs)."""
        out = np.interp(np.arange(len(self)), self.starts, self.columns)
        return out.astype(dtype) if dtype is not None else out


@dataclass
class Timeline:
    """One scheduler's cells: `cells` uint8 [requests, columns]; record i takes columns columns[i]..columns[i+1]
    and starts at step starts[i] (a stretch of idle steps is one record); step k spans x0[k]..x0[k+1]."""

    cells: np.ndarray
    columns: np.ndarray  # int [records + 1]
    starts: np.ndarray  # int [records + 1]: the last is the step count

    @property
    def x0(self) -> StepColumns:
        return StepColumns(self.starts, self.columns)

    def step_at(self, column: int) -> int:
        """The step a column shows (a stretch's column: its first step)."""
        return int(self.starts[max(0, int(np.searchsorted(self.columns, column, side="right")) - 1)])

    def multiples(self, interval: int) -> list[int]:
        """The steps that are multiples of `interval`, at most one per record (a stretch's first multiple): the
        candidates for the step numbers under the timeline, as many as there are records at most."""
        first = -(-self.starts[:-1] // interval) * interval
        return first[first < self.starts[1:]].tolist()


@dataclass(frozen=True)
class LatencyMarks:
    """One request's latency as its tokens come: steps[i] emitted token i; TTFT (ms, NaN before a token) and
    the TPOT after token i (tpot_ms[i], ms; NaN for i = 0)."""

    steps: np.ndarray  # int [tokens]
    ttft_ms: float
    tpot_ms: np.ndarray  # float [tokens]


VLLM = "vllm"  # the lane's key in a batch from the session and in the panels


@dataclass
class VllmLane:
    """vLLM beside the schedulers: its state ("starting", "running", "failed", "done"), how long it has been
    waited for, a failure's one line, its whole run once it arrived, and its steps shown so far (they come in
    lockstep with the schedulers' records)."""

    state: str = "starting"
    waited_s: float = 0.0
    message: str = ""
    run: VllmRun | None = None
    steps: list[VllmStep] = field(default_factory=list)
    counterpart: str = ""  # the ticked scheduler vLLM's settings were mapped from ("prefix", "paged", ...)

    @property
    def n_steps(self) -> int:
        return count_steps(self.steps)

    def record_at(self, step: int) -> VllmStep | None:
        """The engine step that stands for `step` (clamped to the last): the last one at or before it."""
        return self.steps[index_at(self.steps, step)] if self.steps else None

    def upto(self, step: int) -> list[VllmStep]:
        return [s for s in self.steps if s.step <= step]


@dataclass
class ServeHistory(History[ServeStep]):
    """Records per scheduler, in step order (kvviz.records.history.History, lanes keyed by scheduler; vLLM's steps
    are the VLLM lane's records); `version` bumps on every change (the repaint cue)."""

    HOLD_LAST: ClassVar[bool] = True
    run_id: str = ""
    workload: Workload | None = None
    model: ModelInfo | None = None
    settings: dict[str, SchedulerSettings] = field(default_factory=dict)
    steps: dict[str, list[ServeStep]] = field(default_factory=dict)
    # Each request's generated tokens as text, per scheduler (the worker decodes them; a replay of a
    # record without per-token text has them from the byte model, else only the result's whole text).
    token_texts: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    results: dict[str, tuple[RequestResult, ...]] = field(default_factory=dict)
    prompt_lens: tuple[int, ...] = ()
    finished: bool = False
    version: int = 0
    vllm: VllmLane | None = None
    _cache: dict = field(default_factory=dict, repr=False)

    # -- building -------------------------------------------------------------------------------
    @classmethod
    def from_started(cls, started: ServeStarted) -> ServeHistory:
        """A live run about to stream in, from the session's ServeStarted (the worker's run_started)."""
        if not isinstance(started, ServeStarted):
            raise ValueError(f"a live serve run starts from a ServeStarted, not a {type(started).__name__}")
        h = cls(run_id=started.run_id, workload=started.workload, model=started.model,
                settings=dict(started.settings), prompt_lens=started.prompt_lens)
        h.steps = {k: [] for k in h.settings}
        h.token_texts = {k: {} for k in h.settings}
        if started.vllm:  # the scheduler vLLM's settings follow
            h.vllm = VllmLane(counterpart=started.vllm)
        return h

    @classmethod
    def from_runs(cls, runs: tuple[ServeRun, ...], run_id: str = "replay") -> ServeHistory:
        """A whole saved record (or a finished run): every scheduler's steps and results."""
        first = runs[0]
        h = cls(run_id=run_id, workload=first.workload, model=first.model,
                settings={r.scheduler: r.settings for r in runs},
                prompt_lens=tuple(len(r.prompt_ids) for r in first.results))
        byte_model = first.model.arch == "kvviz"
        for r in runs:
            h.steps[r.scheduler] = list(r.steps)
            h.results[r.scheduler] = r.results
            h.token_texts[r.scheduler] = {
                res.request: ([_byte_text(t) for t in res.token_ids] if byte_model else []) for res in r.results}
        beside = vllm_of(runs)
        if beside is not None:
            h.vllm = VllmLane(state="done", run=beside, steps=list(beside.steps),
                              counterpart=counterpart_of(h.schedulers, beside.settings.prefix_caching))
            h.token_texts[VLLM] = {r.request: ([_byte_text(t) for t in r.token_ids] if byte_model else [])
                                   for r in beside.requests}
        h.finished = True
        h.version += 1
        return h

    @property
    def _lanes(self) -> dict[str, list[ServeStep]]:
        return self.steps

    @_lanes.setter
    def _lanes(self, lanes: dict[str, list[ServeStep]]) -> None:
        self.steps = lanes

    def add(self, batch: Iterable[LaneRecord], run_id: str | None = None) -> bool:
        """A batch from the worker (ServeBatch.records) of the run `run_id` (None: this history's): each
        scheduler's ServeStep with its tokens' text; vLLM's lane's PeerProgress, VllmRun or VllmStep. False when
        it is a late batch of an earlier run, dropped."""
        if run_id is not None and run_id != self.run_id:
            return False
        batch = tuple(batch)
        for item in batch:
            if not isinstance(item, LaneRecord):
                raise ValueError(f"a serve batch holds LaneRecords, not a {type(item).__name__}")
        for scheduler, step, texts in ((r.lane, r.record, r.texts) for r in batch):
            if scheduler == VLLM:
                self._add_vllm(step, texts)
                continue
            self.append(scheduler, step)
            mine = self.token_texts.setdefault(scheduler, {})
            for request, text in texts.items():
                mine.setdefault(request, []).append(text)
        self.version += 1
        return True

    def _add_vllm(self, item, texts: Mapping[int, str]) -> None:
        lane = self.vllm if self.vllm is not None else VllmLane()
        self.vllm = lane
        if isinstance(item, PeerProgress):
            lane.state, lane.waited_s, lane.message = item.state, item.waited_s, item.message
        elif isinstance(item, VllmRun):
            lane.run, lane.state = item, "running"
        elif isinstance(item, VllmStep):
            if lane.steps and item.step <= lane.steps[-1].step:
                raise ValueError(f"vllm: step {item.step} arrived after step {lane.steps[-1].step}")
            lane.steps.append(item)
            if lane.run is not None and len(lane.steps) == len(lane.run.steps):
                lane.state = "done"
            mine = self.token_texts.setdefault(VLLM, {})
            for request, text in texts.items():
                mine.setdefault(request, []).append(text)
        else:
            raise ValueError(f"vllm: a {type(item).__name__} is not a vLLM lane's record")

    def set_results(self, results: dict[str, tuple[RequestResult, ...]]) -> None:
        self.results = dict(results)
        self.version += 1

    def runs(self) -> tuple[ServeRun, ...]:
        """The record as the library's ServeRuns (what the JSON export writes)."""
        runs = tuple(ServeRun(scheduler=k, settings=self.settings[k], model=self.model, workload=self.workload,
                              results=self.results.get(k) or self.live_results(k), steps=tuple(self.steps[k]))
                     for k in self.schedulers if self.steps.get(k))
        return with_vllm(runs, self.vllm.run if self.vllm is not None else None)

    # -- reading --------------------------------------------------------------------------------
    @property
    def schedulers(self) -> tuple[str, ...]:
        return tuple(self.settings)

    @property
    def lanes(self) -> tuple[str, ...]:
        """The schedulers' lanes, then vLLM's when it runs beside them."""
        return (*self.steps, VLLM) if self.vllm is not None else tuple(self.steps)

    def lane(self, key: str) -> list[ServeStep] | list[VllmStep]:
        if key == VLLM:
            return self.vllm.steps if self.vllm is not None else ()
        return self.steps.get(key, ())

    @property
    def workload_name(self) -> str:
        return self.workload.name if self.workload is not None else ""

    def n_requests(self) -> int:
        return len(self.workload.requests) if self.workload is not None else 0

    def at(self, scheduler: str, step: int) -> ServeStep | None:
        """The scheduler's record at `step`, clamped to its last (lockstep: a scheduler that finished
        earlier shows its final state); inside a stretch, the stretch numbered as that step."""
        record = super().at(scheduler, step)
        step = self.clamp(scheduler, step)
        if record is None or scheduler == VLLM or record.step == step:
            return record
        return replace(record, step=step, span=record.last_step - step + 1)

    def event_steps(self) -> np.ndarray:
        """Every step at which some scheduler's record starts, in order: the steps where anything can change
        (a stretch with no request to run is one of them, its first step)."""
        return np.unique(np.concatenate([self.starts(k)[:-1] for k in self.schedulers] or [np.zeros(0, int)]))

    def step_widths(self, scheduler: str) -> np.ndarray:
        """Slots of each record's columns: the most one request put into it (a static prefill: the longest
        prompt, padding included; a decode, or a stretch with no request to run: one)."""
        return self.cached("widths", scheduler, lambda: np.array(
            [max((sum(w.n_slots for w in s.work if w.request == r) for r in {w.request for w in s.work}),
                 default=1) for s in self.steps.get(scheduler, [])], dtype=int))

    def timeline(self, scheduler: str, cap: int | None = None) -> Timeline:
        """Every request's cells over every recorded step, a column per slot, so padding and idle slots
        show one cell each, as the course's padding bars do. With `cap`, a step wider than cap slots
        takes cap columns, its runs of slots shortened in proportion (a long prefill beside one-slot
        decodes). A request without work in a step fills it with its state: waiting, preempted,
        finished; blank before it arrives."""
        return self.cached(f"timeline:{cap}", scheduler,
                           lambda: _timeline(self.steps.get(scheduler, []), self.n_requests(), cap))

    def series(self, scheduler: str) -> dict[str, np.ndarray]:
        """Per record, at its step ("step", the x to plot against): pool blocks used, cached, batch size
        (requests with work), slots, latency, preemptions; a stretch of steps has a second point, alike, at
        its last step, so that a line drawn through the points is flat across it."""
        return self.cached("series", scheduler, lambda: _series(self.steps.get(scheduler, [])))

    def latency(self, scheduler: str, step: int) -> tuple[np.ndarray, np.ndarray]:
        """(TTFT ms, TPOT ms) per request as of `step` (NaN: not known yet). TTFT runs from the start of
        the arrival step to the end of the step that emitted the first token; TPOT is the time after
        the first token over the tokens after it (the library's RequestResult definitions)."""
        shown = self.clamp(scheduler, step)
        n = self.n_requests()
        ttft = np.full(n, np.nan)
        tpot = np.full(n, np.nan)
        for r, mark in enumerate(self.latency_marks(scheduler)):
            count = int(np.searchsorted(mark.steps, shown, side="right"))  # its tokens emitted by `shown`
            if count >= 1:
                ttft[r] = mark.ttft_ms
            if count >= 2:
                tpot[r] = mark.tpot_ms[count - 1]
        return ttft, tpot

    def latency_marks(self, scheduler: str) -> list[LatencyMarks]:
        """Per request the steps at which it emitted its tokens, its TTFT once it has one, and its TPOT after
        each token (NaN after the first): ServeHistory.latency at any step reads them by the tokens emitted."""
        return self.cached("latency_marks", scheduler, lambda: _latency_marks(
            self.steps.get(scheduler, []), [r.arrival for r in self.workload.requests] if self.n_requests() else []))

    def counters(self, scheduler: str, step: int) -> dict[str, float]:
        """The run's figures up to `step` (the counters panel's column)."""
        steps = self.upto(scheduler, step)
        padding = sum(s.slots_of("padding") for s in steps)
        prefill = sum(s.slots_of("prefill") for s in steps)
        idle = sum(s.slots_of("idle") for s in steps)
        tokens = sum(len(s.emitted) for s in steps)
        saved = sum(h.tokens for s in steps for h in s.prefix_hits)
        wall = sum(s.latency_ms for s in steps)
        return {
            "steps": self.clamp(scheduler, step) + 1 if steps else 0, "padding": padding,
            "padding_share": padding / (prefill + padding) if prefill + padding else 0.0,
            "idle": idle, "idle_share": idle / (tokens + idle) if tokens + idle else 0.0,
            "saved": saved, "hit_rate": saved / (saved + prefill) if saved + prefill else 0.0,
            "prefill": prefill, "preemptions": sum(len(s.preemptions) for s in steps), "tokens": tokens,
            "tokens_per_s": tokens / (wall / 1000) if wall > 0 else 0.0, "wall_ms": wall,
            "peak_blocks": max((s.pool.used_blocks for s in steps), default=0),
        }

    # -- vLLM's lane ------------------------------------------------------------------------------
    def vllm_counters(self, step: int) -> dict[str, float]:
        """vLLM's figures up to `step`, under the counters' keys where vLLM reports the same thing (steps,
        prompt tokens from its prefix cache and their share, prompt tokens computed, preemptions, tokens,
        tokens/s of its steps' time, peak blocks in use); the rest (padding, idle) is not in its reports."""
        steps = self.vllm.upto(step) if self.vllm is not None else []
        saved = sum(s.prompt_cached for s in steps)
        prefill = sum(s.prompt_computed for s in steps)
        tokens = sum(len(s.emitted) for s in steps)
        wall = sum(s.latency_ms for s in steps)
        return {"steps": min(step, self.vllm.n_steps - 1) + 1 if steps else 0, "saved": saved,
                "hit_rate": saved / (saved + prefill) if saved + prefill else 0.0, "prefill": prefill,
                "preemptions": sum(s.preempted for s in steps), "tokens": tokens,
                "tokens_per_s": tokens / (wall / 1000) if wall > 0 else 0.0, "wall_ms": wall,
                "peak_blocks": max((s.blocks_in_use for s in steps), default=0)}

    def vllm_counts(self, step: int) -> tuple[dict[str, int] | None, dict[str, int] | None]:
        """What vLLM reported after the engine step at `step` (None where it ran none: a stretch, or past its
        end), and the counterpart scheduler's same counts at that step (None where it recorded none of its own
        there): requests running and waiting (preempted included), blocks in use, prompt tokens from the prefix
        cache, preemptions."""
        lane = self.vllm
        s = lane.record_at(step) if lane is not None else None
        if s is None or s.step != step:
            return None, None
        ours = {"running": s.running, "waiting": s.waiting, "blocks": s.blocks_in_use, "cached": s.prompt_cached,
                "preempted": s.preempted}
        k = lane.counterpart
        record = self.at(k, step) if k and k in self.steps and step < self.n_steps(k) else None
        if record is None or record.step != step or record.span != 1:
            return ours, None
        states = [r.state for r in record.requests]
        return ours, {"running": states.count("running"),
                      "waiting": states.count("waiting") + states.count("preempted"),
                      "blocks": record.pool.used_blocks, "cached": sum(h.tokens for h in record.prefix_hits),
                      "preempted": len(record.preemptions)}

    def vllm_timeline(self, cap: int | None = None) -> Timeline:
        """vLLM's request rows from what it reported per step: a record per engine step and one for each
        stretch it skipped to the next arrival; a request is waiting from its arrival, prefill at the step of
        its first token, decode at each later token, finished after its last. vLLM does not say how many slots
        each request took: a step takes as many columns as the counterpart scheduler's same step (its
        timeline at `cap`), so that the two line up step by step (one column past its steps, or without one)."""
        lane = self.vllm
        k = lane.counterpart if lane is not None else ""
        x0 = self.timeline(k, cap).x0 if k and self.steps.get(k) else None
        return self.cached(f"vllm_timeline:{cap}", VLLM,  # its columns follow its counterpart's steps too
                           lambda: _vllm_timeline(lane.steps if lane is not None else [], self.workload,
                                                  lane.run if lane is not None else None, x0), k)

    def vllm_series(self) -> dict[str, np.ndarray]:
        """Per engine step: blocks in use, requests running and waiting, preemptions (the usage panel's lines)."""
        steps = self.vllm.steps if self.vllm is not None else []
        return {"step": np.array([s.step for s in steps], dtype=float),
                "used": np.array([s.blocks_in_use for s in steps], dtype=float),
                "batch": np.array([s.running for s in steps], dtype=float),
                "waiting": np.array([s.waiting for s in steps], dtype=float),
                "preemptions": np.array([s.preempted for s in steps], dtype=float)}

    def text_of(self, scheduler: str, request: int, step: int) -> tuple[str, str]:
        """(prompt, generated text as of `step`) of one request under one scheduler."""
        prompt = self.workload.requests[request].prompt if self.workload is not None else ""
        if scheduler == VLLM:  # vLLM's steps name who got a token; the token's text came with them
            lane = self.vllm
            n = sum(1 for s in (lane.upto(step) if lane is not None else []) for r in s.emitted if r == request)
        else:
            n = sum(1 for s in self.upto(scheduler, step) for r, _t in s.emitted if r == request)
        texts = self.token_texts.get(scheduler, {}).get(request, [])
        if len(texts) >= n:
            return prompt, label_bytes("".join(texts[:n])).decode("utf-8", errors="replace")
        result = next((r for r in self.results.get(scheduler, ()) if r.request == request), None)
        if result is not None and n >= len(result.token_ids):
            return prompt, result.text
        return prompt, f"[{n} tokens]"

    def solo_checks(self, scheduler: str) -> tuple[SoloCheck, ...] | None:
        """Each request's tokens under the scheduler against its own solo run (kvviz.serving.record.SoloCheck),
        once the run's results carry the solo runs' tokens; None before (a run going or stopped, a record saved
        without them)."""
        results = self.results.get(scheduler)
        if not results or any(r.solo_token_ids is None for r in results):
            return None
        at = emitted_at(self.steps.get(scheduler, []))
        return tuple(compare_solo(scheduler, r.request, r.token_ids, r.solo_token_ids, at.get(r.request, []))
                     for r in results)

    def live_results(self, scheduler: str) -> tuple[RequestResult, ...]:
        """RequestResults derived from the steps so far (a run stopped early, exported before its end)."""
        ttft, tpot = self.latency(scheduler, self.n_steps(scheduler))
        steps = self.steps.get(scheduler, [])
        out = []
        for i, req in enumerate(self.workload.requests):
            ids = tuple(t for s in steps for r, t in s.emitted if r == i)
            emitted = [s.step for s in steps for r, _t in s.emitted if r == i]
            admitted = next((s.step for s in steps if i in s.admitted), 0)
            text = "".join(self.token_texts.get(scheduler, {}).get(i, []))
            out.append(RequestResult(
                request=i, prompt_ids=(0,) * (self.prompt_lens[i] if i < len(self.prompt_lens) else 0),
                token_ids=ids, text=text, arrival=req.arrival, admitted_step=admitted,
                first_token_step=emitted[0] if emitted else 0, finish_step=emitted[-1] if emitted else 0,
                ttft_ms=0.0 if np.isnan(ttft[i]) else float(ttft[i]),
                tpot_ms=None if np.isnan(tpot[i]) else float(tpot[i]),
                preemptions=sum(1 for s in steps for p in s.preemptions if p.request == i),
                cached_tokens=sum(h.tokens for s in steps for h in s.prefix_hits if h.request == i),
                computed_tokens=sum(w.n_slots for s in steps for w in s.work
                                    if w.request == i and w.kind == "prefill")))
        return tuple(out)


def counterpart_of(schedulers, prefix_caching: bool) -> str:
    """The ticked scheduler vLLM's settings follow (kvviz.peers.vllm.map_settings): prefix when prefix caching
    is on; else chunked, paged or continuous, the first ticked; "" when none of them is."""
    if prefix_caching:
        return "prefix" if "prefix" in schedulers else ""
    return next((k for k in ("chunked", "paged", "continuous") if k in schedulers), "")


def _vllm_timeline(steps: list[VllmStep], workload: Workload | None, run: VllmRun | None,
                   x0: StepColumns | None = None) -> Timeline:
    n = len(workload.requests) if workload is not None else 0
    firsts: list[int] = []  # each record's first step: an engine step, or a stretch vLLM skipped (None below)
    engine: list[VllmStep | None] = []
    for s in steps:
        after = firsts[-1] + 1 if firsts else 0  # the record before is always an engine step
        if s.step > after:  # nothing to run until an arrival: one column for the stretch
            firsts.append(after)
            engine.append(None)
        firsts.append(s.step)
        engine.append(s)
    cells = np.full((n, len(firsts)), NONE, dtype=np.uint8)
    arrival = [r.arrival for r in workload.requests] if workload is not None else []
    finish = {r.request: r.finish_step for r in run.requests} if run is not None else {}
    seen: set[int] = set()
    for c, (first, s) in enumerate(zip(firsts, engine)):
        emitted = set(s.emitted) if s is not None else set()
        for q in range(n):
            if arrival[q] > first:
                continue
            if q in emitted:
                cells[q, c] = DECODE if q in seen else PREFILL
                seen.add(q)
            elif q in seen and finish.get(q) is not None and finish[q] < first:
                cells[q, c] = FINISHED
            else:
                cells[q, c] = WAITING
    starts = np.array(firsts + [steps[-1].step + 1 if steps else 0], dtype=np.int64)
    widths = np.ones(len(firsts), dtype=int)
    if x0 is not None:
        def at(step: int) -> int:
            return round(x0[min(step, len(x0) - 1)])

        widths = np.array([max(1, at(b) - at(a)) if b < len(x0) else 1 for a, b in zip(starts[:-1], starts[1:])],
                          dtype=int)
    columns = np.concatenate([[0], np.cumsum(widths)]).astype(int)
    wide = np.repeat(cells, widths, axis=1)
    for c in range(len(firsts)):  # a decode is one slot, as the schedulers' rows draw it; the rest of its step blank
        rows = cells[:, c] == DECODE
        wide[rows, columns[c] + 1:columns[c + 1]] = NONE
    return Timeline(cells=wide, columns=columns, starts=starts)


def _byte_text(token_id: int) -> str:
    from kvviz.tokenizer import ByteTokenizer

    return ByteTokenizer().token_text(token_id) if 0 <= token_id < 256 else f"<{token_id}>"


def _timeline(steps: list[ServeStep], n_requests: int, cap: int | None = None) -> Timeline:
    widths = []
    per_step: list[dict[int, list[tuple[int, int]]]] = []
    for s in steps:
        rows: dict[int, list[tuple[int, int]]] = {}
        for w in s.work:
            rows.setdefault(w.request, []).append((_WORK_CODE[w.kind], w.n_slots))
        widest = max((sum(n for _c, n in v) for v in rows.values()), default=1)
        if cap is not None and widest > cap:  # runs shortened in proportion, each at least one column
            rows = {r: _shorten(v, widest, cap) for r, v in rows.items()}
            widest = cap
        per_step.append(rows)
        widths.append(widest)
    x0 = np.concatenate([[0], np.cumsum(widths)]).astype(int)
    starts = np.array([s.step for s in steps] + [count_steps(steps)], dtype=np.int64)
    cells = np.full((n_requests, int(x0[-1])), NONE, dtype=np.uint8)
    state_before = {}  # request -> its state after the previous step
    for k, s in enumerate(steps):
        a, b = x0[k], x0[k + 1]
        rows = per_step[k]
        for r, codes in rows.items():
            x = a
            for code, n in codes:
                cells[r, x:x + n] = code
                x += n
        for st in s.requests:
            if st.request in rows:
                continue
            code = _STATE_CODE[st.state]
            # A request that finished in an earlier step is drawn finished from the step after.
            if st.state == "finished" and state_before.get(st.request) not in ("finished", None):
                code = FINISHED
            cells[st.request, a:b] = code
        state_before = {st.request: st.state for st in s.requests}
    return Timeline(cells=cells, columns=x0, starts=starts)


def _shorten(runs: list[tuple[int, int]], widest: int, cap: int) -> list[tuple[int, int]]:
    """Runs of (code, slots) of a step `widest` slots wide, in `cap` columns: each run's end rounded."""
    out, at, done = [], 0, 0
    for code, n in runs:
        at += n
        end = max(done + 1, round(at * cap / widest))
        out.append((code, min(end, cap) - done))
        done = min(end, cap)
    return [(c, n) for c, n in out if n > 0]


def _latency_marks(steps: list[ServeStep], arrival: list[int]) -> list[LatencyMarks]:
    lat = np.array([s.latency_ms for s in steps], dtype=float)
    ends = np.cumsum(lat)
    starts = ends - lat
    record_of = np.searchsorted([s.step for s in steps], arrival, side="right") - 1  # each arrival's record
    at: list[list[int]] = [[] for _ in arrival]  # records, not steps
    for i, s in enumerate(steps):
        for request, _token in s.emitted:
            at[request].append(i)
    out = []
    for r, records in enumerate(at):
        if not records:
            out.append(LatencyMarks(np.zeros(0, np.int64), float("nan"), np.zeros(0)))
            continue
        first = records[0]
        tpot = np.array([np.nan] + [(ends[last] - ends[first]) / c for c, last in enumerate(records[1:], 1)])
        out.append(LatencyMarks(np.array([steps[i].step for i in records], dtype=np.int64),
                                float(ends[first] - starts[record_of[r]]), tpot))
    return out


def _series(steps: list[ServeStep]) -> dict[str, np.ndarray]:
    points = [(x, s) for s in steps for x in ((s.step,) if s.span == 1 else (s.step, s.last_step))]
    return {
        "step": np.array([x for x, _s in points], dtype=float),
        "used": np.array([s.pool.used_blocks for _x, s in points], dtype=float),
        "cached": np.array([s.pool.cached_blocks for _x, s in points], dtype=float),
        "batch": np.array([len({w.request for w in s.work if w.kind in ("prefill", "decode")}) for _x, s in points],
                          dtype=float),
        "slots": np.array([s.slots for _x, s in points], dtype=float),
        "latency_ms": np.array([s.latency_ms for _x, s in points], dtype=float),
        "preemptions": np.array([len(s.preemptions) for _x, s in points], dtype=float),
    }
