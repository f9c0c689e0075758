"""One request inside the server (nano-vllm's Sequence): its tokens, its state word, its block table and
where its K/V stand. It knows nothing about the pool's other requests, the model or the clock.
"""
from __future__ import annotations

from kvviz.sampling import Sampler


class Sequence:
    """A request's tokens are its prompt then what it has generated; `computed` of them have their K/V in
    the pool. The last token is fed to the model at the next step (its K/V are computed then)."""

    def __init__(self, index: int, prompt_ids: list[int], new_tokens: int, arrival: int, sampler: Sampler) -> None:
        self.index = index
        self.prompt_ids = list(prompt_ids)
        self.new_tokens = new_tokens
        self.arrival = arrival
        self.sampler = sampler
        self.generated: list[int] = []
        self.state = "waiting"  # waiting | running | preempted | finished
        self.computed = 0
        self.block_table: list[int] = []
        self.block_hashes: list[int] = []  # chained hash of each full block, for the prefix cache
        self.prefilling = True  # its next work is prefill (again, after a preemption) until it emits a token
        self.admitted_step: int | None = None
        self.first_token_step: int | None = None
        self.finish_step: int | None = None
        self.preemptions = 0
        self.cached_tokens = 0
        self.computed_tokens = 0  # prefill positions computed, recomputation included

    @property
    def tokens(self) -> list[int]:
        return self.prompt_ids + self.generated

    def __len__(self) -> int:
        return len(self.prompt_ids) + len(self.generated)

    @property
    def pending(self) -> int:
        """Positions whose K/V are not yet computed: the rest of the prompt, or the one token to feed."""
        return len(self) - self.computed

    @property
    def max_stored(self) -> int:
        """Positions it will ever hold K/V for: its last generated token is never fed back."""
        return len(self.prompt_ids) + self.new_tokens - 1

    @property
    def done(self) -> bool:
        return len(self.generated) >= self.new_tokens
