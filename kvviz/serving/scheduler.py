"""Who runs this step, with how many tokens, and who is preempted: one Scheduler class per policy.

A scheduler sees Sequences and the BlockManager, and returns a `Batch` (rows of work, in batch order).
It never touches the model, tensors or the clock's time: a step is a number here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kvviz.serving.block_manager import BlockManager
from kvviz.serving.record import Preemption, PrefixHit
from kvviz.serving.sequence import Sequence


@dataclass
class Row:
    """One run of slots in the batch: positions [start, start + n) of `seq`, of kind `kind`."""

    seq: Sequence
    start: int
    n: int
    kind: str  # prefill | decode | padding | idle

    @property
    def real(self) -> bool:
        """Its K/V go into the request's own blocks, and its last position may emit a token."""
        return self.kind in ("prefill", "decode")

    @property
    def emits(self) -> bool:
        return self.real and self.start + self.n == len(self.seq)


@dataclass
class Batch:
    step: int
    rows: list[Row] = field(default_factory=list)
    admitted: list[int] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    prefix_hits: list[PrefixHit] = field(default_factory=list)


class Scheduler:
    """FCFS over the requests that have arrived. Subclasses say what a step runs."""

    key = ""

    def __init__(self, seqs: list[Sequence], pool: BlockManager, *, max_batch: int,
                 token_budget: int | None = None) -> None:
        self.seqs = seqs
        self.pool = pool
        self.max_batch = max_batch
        self.token_budget = token_budget
        self.running: list[Sequence] = []  # in admission order: the last is preempted first
        self.waiting: list[Sequence] = []  # arrived, not running: preempted ones at the front
        self._arrivals = sorted(seqs, key=lambda s: (s.arrival, s.index))

    @property
    def finished(self) -> bool:
        return all(s.state == "finished" for s in self.seqs)

    def _arrive(self, step: int) -> None:
        while self._arrivals and self._arrivals[0].arrival <= step:
            self.waiting.append(self._arrivals.pop(0))

    def _admit(self, seq: Sequence, batch: Batch) -> None:
        self.waiting.remove(seq)
        hit = self.pool.match_prefix(seq)
        if hit:
            self.pool.take_cached(seq, hit)
            seq.cached_tokens += seq.computed
            batch.prefix_hits.append(PrefixHit(seq.index, tuple(hit), seq.computed))
        seq.state, seq.prefilling = "running", True
        if seq.admitted_step is None:
            seq.admitted_step = batch.step
        self.running.append(seq)
        batch.admitted.append(seq.index)

    def _preempt(self, seq: Sequence, batch: Batch) -> None:
        lost = seq.computed
        blocks = self.pool.release(seq)
        seq.state, seq.prefilling = "preempted", True
        seq.preemptions += 1
        self.running.remove(seq)
        self.waiting.insert(0, seq)
        batch.preemptions.append(Preemption(seq.index, blocks, lost))

    def finish(self, seq: Sequence) -> None:
        self.pool.release(seq)
        seq.state = "finished"
        self.running.remove(seq)

    def next_arrival(self) -> int | None:
        """With no arrived request left to run, the step at which the next one arrives; else None (something
        runs, or nothing is left to arrive)."""
        if self.waiting or self.running or not self._arrivals:
            return None
        return self._arrivals[0].arrival

    def schedule(self, step: int) -> Batch:
        self._arrive(step)
        batch = Batch(step)
        self._fill(batch)
        return batch

    def _fill(self, batch: Batch) -> None:
        raise NotImplementedError


class StaticScheduler(Scheduler):
    """The course's static batching: up to max_batch arrived requests form one batch; every prompt is
    padded to the longest and prefilled in one step; then every row decodes, a finished request's
    row idling, until the longest is done. Only then does the next batch form."""

    key = "static"

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.batch: list[Sequence] = []

    def _fill(self, batch: Batch) -> None:
        if self.batch and all(s.state == "finished" for s in self.batch):
            self.batch = []
        if not self.batch:
            if not self.waiting:
                return
            for seq in list(self.waiting[:self.max_batch]):
                self._admit(seq, batch)
                self.pool.allocate(seq, self.pool.needed(seq, seq.max_stored))  # never short: see engine
            self.batch = list(self.running)
            longest = max(len(s.prompt_ids) for s in self.batch)
            for seq in self.batch:
                batch.rows.append(Row(seq, 0, len(seq.prompt_ids), "prefill"))
                if len(seq.prompt_ids) < longest:
                    batch.rows.append(Row(seq, len(seq.prompt_ids), longest - len(seq.prompt_ids), "padding"))
            return
        for seq in self.batch:
            if seq.state == "finished":
                batch.rows.append(Row(seq, len(seq) - 1, 1, "idle"))
            else:
                batch.rows.append(Row(seq, seq.computed, 1, "decode"))


class ContinuousScheduler(Scheduler):
    """Continuous batching: a finished request leaves and a waiting one joins at the next step, up to
    max_batch running. A joining request prefills its whole prompt in the step it joins, beside the
    others' decode tokens, in the one forward."""

    key = "continuous"

    def _chunk(self, pending: int, budget: int | None) -> int:
        """Positions a request with `pending` to compute runs this step: all of them (chunked: what the
        budget allows)."""
        return pending

    def _room(self, seq: Sequence, n: int, batch: Batch) -> bool:
        """Take the blocks `seq` needs for n more positions, preempting if the policy does; False: it
        cannot run this step (it was preempted itself)."""
        self.pool.allocate(seq, self.pool.needed(seq, n))
        return True

    def _can_admit(self, seq: Sequence, budget: int | None) -> bool:
        return True

    def _fill(self, batch: Batch) -> None:
        budget = self.token_budget
        plans: list[tuple[Sequence, int]] = []
        # decode tokens first, then the prefill work of those already running (chunked), in admission order
        ordered = [s for s in self.running if not s.prefilling] + [s for s in self.running if s.prefilling]
        for seq in ordered:
            if seq.state != "running" or (budget is not None and budget <= 0):
                continue
            n = self._chunk(seq.pending, budget)
            if not self._room(seq, n, batch):
                continue
            plans.append((seq, n))
            self.pool.key_full_blocks(seq, seq.computed + n)
            budget = None if budget is None else budget - n
        while self.waiting and len(self.running) < self.max_batch and (budget is None or budget > 0):
            seq = self.waiting[0]
            if not self._can_admit(seq, budget):
                break
            self._admit(seq, batch)  # takes its cached prefix blocks, if any
            n = self._chunk(seq.pending, budget)
            self._room(seq, n, batch)  # _can_admit saw to it that no one is preempted for this
            plans.append((seq, n))
            self.pool.key_full_blocks(seq, seq.computed + n)
            budget = None if budget is None else budget - n
        for seq, n in plans:
            if seq.state == "running":  # not preempted later in this step
                batch.rows.append(Row(seq, seq.computed, n, "prefill" if seq.prefilling else "decode"))


class ChunkedScheduler(ContinuousScheduler):
    """Chunked prefill: a token budget per step, shared by every decode token (served first) and chunks
    of prompts, so a long prompt does not stall everyone's decode."""

    key = "chunked"

    def _chunk(self, pending: int, budget: int | None) -> int:
        return pending if budget is None else min(pending, budget)


class PagedScheduler(ContinuousScheduler):
    """Continuous batching over a block pool with a budget in blocks: a request takes a block only when
    its last one is full; when a step needs more blocks than are free, the most recently admitted
    running request is preempted (its blocks freed, its tokens recomputed when it is admitted again)."""

    key = "paged"

    def _room(self, seq: Sequence, n: int, batch: Batch) -> bool:
        need = self.pool.needed(seq, n)
        while need > self.pool.n_free:
            victim = self.running[-1]
            self._preempt(victim, batch)
            if victim is seq:
                return False
        self.pool.allocate(seq, need)
        return True

    def _can_admit(self, seq: Sequence, budget: int | None) -> bool:
        """Room for its first step's blocks without preempting anyone; cached blocks it reuses that no
        table holds leave the free queue, so they count as taken."""
        hit = self.pool.match_prefix(seq)
        cached = len(hit) * self.pool.block_size
        n = self._chunk(len(seq) - cached, budget)
        reused_free = sum(1 for b in hit if self.pool.blocks[b].ref_count == 0)
        return self.pool.blocks_for(cached + n) - len(hit) + reused_free <= self.pool.n_free


class PrefixScheduler(PagedScheduler):
    """`paged` with prefix caching: a request is admitted with its longest cached run of full blocks
    and prefills only the rest (the pool keys full blocks by chained hash; see block_manager)."""

    key = "prefix"


class ReserveScheduler(ContinuousScheduler):
    """Contiguous reservation, the chapter's warning ("按照max_len预申请存在碎片的风险"): a request is
    admitted only when the pool has room for its maximum length (prompt + new tokens), which it holds
    from its first step to its last. Nothing is ever preempted; what is reserved but unused is waste."""

    key = "reserve"

    def _can_admit(self, seq: Sequence, budget: int | None) -> bool:
        return self.pool.blocks_for(seq.max_stored) <= self.pool.n_free

    def _room(self, seq: Sequence, n: int, batch: Batch) -> bool:
        self.pool.allocate(seq, self.pool.needed(seq, seq.max_stored - seq.computed))
        return True


SCHEDULER_CLASSES: dict[str, type[Scheduler]] = {
    c.key: c for c in (StaticScheduler, ContinuousScheduler, ChunkedScheduler, PagedScheduler, PrefixScheduler,
                       ReserveScheduler)}
# the schedulers that keep to --blocks; the others are given every block they can use
MEMORY_BOUND = ("paged", "prefix", "reserve")
CACHING = ("prefix",)
