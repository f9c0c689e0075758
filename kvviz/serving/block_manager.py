"""The block pool every request shares (nano-vllm's BlockManager, vLLM's prefix caching): a free queue in
LRU order, a ref count per block, and, with caching on, a map from each full block's chained hash to
the block that holds it. Bookkeeping only: it knows block numbers, never the K/V tensors.

A block's hash chains its parent's hash with its own tokens, so equal hashes mean equal K/V (the K/V of a
position depend on every token before it). Only full blocks are hashed. A finished request returns its
blocks tail first, so the least recently used end of the queue is a shared prefix's tail, and the
prefix's head, which more requests share, stays cached longest.
"""
from __future__ import annotations

from collections import OrderedDict

from kvviz.serving.record import PoolState
from kvviz.serving.sequence import Sequence


class Block:
    __slots__ = ("index", "ref_count", "hash", "parent", "tokens", "filled", "owners")

    def __init__(self, index: int) -> None:
        self.index = index
        self.ref_count = 0
        self.hash: int | None = None  # set while the block is keyed in the prefix cache
        self.parent: int | None = None  # the parent hash and tokens it was keyed with (checked on a hit)
        self.tokens: tuple[int, ...] = ()
        self.filled = 0
        self.owners: list[int] = []


def chain_hash(parent: int | None, tokens: tuple[int, ...]) -> int:
    return hash((parent, tokens))


class BlockManager:
    def __init__(self, n_blocks: int, block_size: int, *, caching: bool = False) -> None:
        if n_blocks < 1 or block_size < 1:
            raise ValueError(f"a pool needs at least one block of at least one token, got {n_blocks} of {block_size}")
        self.block_size = block_size
        self.caching = caching
        self.blocks = [Block(i) for i in range(n_blocks)]
        self.free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(n_blocks))  # front: evicted first
        self.cached: dict[int, int] = {}  # chained hash -> block

    @property
    def n_free(self) -> int:
        """Blocks a request can take now: never used, freed, or cached but held by no table."""
        return len(self.free)

    def blocks_for(self, n_positions: int) -> int:
        return -(-n_positions // self.block_size)

    def needed(self, seq: Sequence, n_new: int) -> int:
        """Blocks `seq` must take before it can store n_new more positions."""
        return max(0, self.blocks_for(seq.computed + n_new) - len(seq.block_table))

    def allocate(self, seq: Sequence, n: int) -> None:
        if n > len(self.free):
            raise MemoryError(f"block pool: {n} blocks asked, {len(self.free)} free")
        for _ in range(n):
            index, _ = self.free.popitem(last=False)
            block = self.blocks[index]
            if block.hash is not None:  # evict: its content is about to be overwritten
                if self.cached.get(block.hash) == index:
                    del self.cached[block.hash]
                block.hash, block.parent, block.tokens = None, None, ()
            block.ref_count, block.filled, block.owners = 1, 0, [seq.index]
            seq.block_table.append(index)

    def match_prefix(self, seq: Sequence) -> list[int]:
        """The longest run of cached full blocks that starts `seq`'s tokens, leaving at least one
        position to compute (the last position's logits give the next token)."""
        if not self.caching:
            return []
        S, tokens, parent, found = self.block_size, seq.tokens, None, []
        for i in range((len(tokens) - 1) // S):
            chunk = tuple(tokens[i * S:(i + 1) * S])
            h = chain_hash(parent, chunk)
            index = self.cached.get(h)
            if index is None or self.blocks[index].parent != parent or self.blocks[index].tokens != chunk:
                break
            found.append(index)
            parent = h
        return found

    def take_cached(self, seq: Sequence, blocks: list[int]) -> None:
        """`seq` (with an empty table) starts from these cached blocks: shared by ref count."""
        for index in blocks:
            block = self.blocks[index]
            if block.ref_count == 0:
                del self.free[index]
            block.ref_count += 1
            block.owners.append(seq.index)
            seq.block_table.append(index)
            seq.block_hashes.append(block.hash)
        seq.computed = len(blocks) * self.block_size

    def written(self, seq: Sequence) -> None:
        """`seq.computed` positions now hold K/V: note what each block holds."""
        S = self.block_size
        for i, index in enumerate(seq.block_table):
            self.blocks[index].filled = max(self.blocks[index].filled, min(S, seq.computed - i * S))

    def key_full_blocks(self, seq: Sequence, upto: int) -> None:
        """Key in the prefix cache every block of `seq` that will be full once its first `upto` positions are
        written (a hash already held by another block stays with that one). Called when a step is planned, as
        vLLM keys blocks when it allocates their slots (kv_cache_manager.allocate_slots): a request admitted
        later in the same step shares the blocks an earlier one computes in that very forward, whose K/V every
        row writes before any row attends."""
        if not self.caching:
            return
        S, tokens = self.block_size, seq.tokens
        while len(seq.block_hashes) < upto // S:
            i = len(seq.block_hashes)
            parent = seq.block_hashes[-1] if seq.block_hashes else None
            chunk = tuple(tokens[i * S:(i + 1) * S])
            h = chain_hash(parent, chunk)
            seq.block_hashes.append(h)
            block = self.blocks[seq.block_table[i]]
            if h not in self.cached and block.hash is None:
                self.cached[h] = block.index
                block.hash, block.parent, block.tokens = h, parent, chunk

    def release(self, seq: Sequence) -> tuple[int, ...]:
        """Return `seq`'s blocks, tail first; a block no table holds goes to the back of the free queue
        (keeping its content and hash if it is cached). Returns the table it held."""
        table = tuple(seq.block_table)
        for index in reversed(table):
            block = self.blocks[index]
            block.ref_count -= 1
            block.owners.remove(seq.index)
            if block.ref_count == 0:
                if block.hash is not None and block.filled < self.block_size:  # keyed this step, never written
                    if self.cached.get(block.hash) == index:
                        del self.cached[block.hash]
                    block.hash, block.parent, block.tokens = None, None, ()
                self.free[index] = None
                if block.hash is None:
                    block.filled = 0
        seq.block_table, seq.block_hashes, seq.computed = [], [], 0
        return table

    def state(self) -> PoolState:
        b = self.blocks
        return PoolState(block_size=self.block_size, ref_counts=tuple(x.ref_count for x in b),
                         owners=tuple(tuple(x.owners) for x in b), filled=tuple(x.filled for x in b),
                         hashed=tuple(x.hash is not None for x in b))
