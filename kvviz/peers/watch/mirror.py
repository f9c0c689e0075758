"""The mirror of one vLLM engine's prefix cache, kept from its KV events: blocks stored minus blocks removed,
each with its parent's hash, so the hash chains form a tree (a system prompt shared by N requests is one
trunk with N branches). `state()` is a frozen snapshot of numpy arrays a view or a page draws.

Knows the event structs (kvviz.peers.watch.events) and Said only: no socket, no clock, no Qt.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kvviz.peers.watch.events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch, hash_key
from kvviz.peers.watch.said import Said, Translate, _tr

MAX_BLOCKS = 1 << 20  # the mirror's bound where the server's pool size is not known


@dataclass
class _Block:
    parent: int | None  # the parent's hash key (None: the first block of a chain)
    tokens: tuple[int, ...]
    stored_t: float
    depth: int  # blocks before this one in its chain, as far as the mirror knows the chain
    children: int = 0


@dataclass(frozen=True)
class BatchEffect:
    """What one event batch did to the mirror."""

    t: float  # the batch's own timestamp (the server's clock)
    stored: int  # blocks newly cached
    removed: int  # blocks evicted (known to the mirror)
    reported_reuse: int  # blocks stored again while cached (vLLM's "full" report mode: a prefix reused)
    branches: tuple[int, ...]  # per new branch off a cached chain: the length of the shared prefix in blocks
    cleared: int  # blocks dropped by AllBlocksCleared
    unknown_removed: int  # removals of blocks the mirror never saw stored (history before it attached)
    dropped: int  # blocks dropped to keep the mirror within the pool's size (removals it never received)


@dataclass(frozen=True)
class Segment:
    """A run of blocks with one child each: a trunk when it ends in several branches."""

    first: int  # row of its first block in MirrorState's arrays
    length: int
    parent: int  # the segment it hangs from (-1: a root)
    branches: int  # segments hanging from its last block


@dataclass(frozen=True)
class MirrorState:
    """The mirror at one moment, rows in storing order: parent row (-1: first of a chain, or its parent
    unknown), depth in blocks, tokens per block, when stored (the server's clock), tokens as text when a
    tokenizer was given (else empty)."""

    parent: np.ndarray  # (N,) int32
    depth: np.ndarray  # (N,) int32
    n_tokens: np.ndarray  # (N,) int32
    stored_t: np.ndarray  # (N,) float64
    tokens: tuple[tuple[int, ...], ...]
    texts: tuple[str, ...] = field(default=())

    @property
    def n_blocks(self) -> int:
        return int(self.parent.shape[0])

    def children(self) -> np.ndarray:
        """(N,) int32: blocks whose parent each block is."""
        out = np.zeros(self.n_blocks, dtype=np.int32)
        has = self.parent >= 0
        np.add.at(out, self.parent[has], 1)
        return out

    def segments(self) -> tuple[Segment, ...]:
        """The tree as segments: a chain is cut where a block has other than one child."""
        children = self.children()
        kids: dict[int, list[int]] = {}
        for row, p in enumerate(self.parent.tolist()):
            kids.setdefault(p, []).append(row)
        out: list[Segment] = []
        stack = [(row, -1) for row in reversed(kids.get(-1, []))]
        while stack:
            row, parent_seg = stack.pop()
            first, length = row, 1
            while children[row] == 1:
                row = kids[row][0]
                length += 1
            out.append(Segment(first, length, parent_seg, int(children[row])))
            here = len(out) - 1
            stack.extend((c, here) for c in reversed(kids.get(row, [])))
        return tuple(out)

    def chains(self) -> list[list[int]]:
        """Every chain from a root to a leaf, as rows."""
        children = self.children()
        out = []
        for leaf in np.flatnonzero(children == 0).tolist():
            chain = [leaf]
            while self.parent[chain[-1]] >= 0:
                chain.append(int(self.parent[chain[-1]]))
            out.append(chain[::-1])
        return out

    def shape_said(self) -> Said:
        """The tree in words: "9 blocks in 2 chains; a trunk of 3 blocks with 4 branches" (kvviz.peers.watch.said)."""
        segs = self.segments()
        roots = sum(1 for s in segs if s.parent < 0)
        trunks = [s for s in segs if s.branches > 1]
        if not self.n_blocks:
            return Said.of(_tr("no blocks cached"))
        said = [Said.of(_tr("{n} blocks in 1 chain") if roots == 1 else _tr("{n} blocks in {roots} chains"),
                        n=self.n_blocks, roots=roots)]
        for s in trunks[:3]:
            said.append(Said.of(_tr("a trunk of 1 block with {branches} branches") if s.length == 1 else
                                _tr("a trunk of {n} blocks with {branches} branches"), n=s.length,
                                branches=s.branches))
        if len(trunks) > 3:
            said.append(Said.of(_tr("1 more trunk") if len(trunks) == 4 else _tr("{n} more trunks"),
                                n=len(trunks) - 3))
        return Said.joined(said)

    def shape_text(self, _tr: Translate = str) -> str:
        """shape_said in the reader's language (`_tr` translates; str keeps English)."""
        return self.shape_said().text(_tr)


class PrefixMirror:
    """Blocks stored minus blocks removed, keyed by hash, in storing order (oldest first)."""

    def __init__(self, max_blocks: int = MAX_BLOCKS) -> None:
        self._blocks: dict[int, _Block] = {}
        self.max_blocks = max_blocks

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, key: int) -> bool:
        return key in self._blocks

    def keys(self) -> list[int]:
        return list(self._blocks)

    def clear(self) -> int:
        n = len(self._blocks)
        self._blocks.clear()
        return n

    def apply(self, batch: KVEventBatch) -> BatchEffect:
        stored = removed = reused = cleared = unknown = dropped = 0
        branches: list[int] = []
        for event in batch.events:
            if isinstance(event, BlockStored):
                s, r, b = self._store(event, batch.ts)
                stored, reused = stored + s, reused + r
                branches += b
            elif isinstance(event, BlockRemoved):
                for h in event.block_hashes:
                    block = self._blocks.pop(hash_key(h), None)
                    if block is None:
                        unknown += 1
                        continue
                    removed += 1
                    parent = self._blocks.get(block.parent) if block.parent is not None else None
                    if parent is not None:
                        parent.children -= 1
            elif isinstance(event, AllBlocksCleared):
                cleared += self.clear()
        while len(self._blocks) > self.max_blocks:  # removals lost: the oldest stored go first
            key = next(iter(self._blocks))
            block = self._blocks.pop(key)
            parent = self._blocks.get(block.parent) if block.parent is not None else None
            if parent is not None:
                parent.children -= 1
            dropped += 1
        return BatchEffect(batch.ts, stored, removed, reused, tuple(branches), cleared, unknown, dropped)

    def _store(self, event: BlockStored, ts: float) -> tuple[int, int, list[int]]:
        hashes = [hash_key(h) for h in event.block_hashes]
        size = max(1, event.block_size)
        parent = hash_key(event.parent_block_hash) if event.parent_block_hash is not None else None
        stored = reused = 0
        branches = []
        for i, key in enumerate(hashes):
            tokens = tuple(event.token_ids[i * size:(i + 1) * size])
            if key in self._blocks:  # stored again while cached: vLLM reports a reused prefix this way
                reused += 1
                parent = key
                continue
            above = self._blocks.get(parent) if parent is not None else None
            if above is not None and above.children > 0:
                branches.append(above.depth + 1)  # a new branch off a cached chain of depth+1 blocks
            depth = above.depth + 1 if above is not None else 0
            if above is not None:
                above.children += 1
            self._blocks[key] = _Block(parent if above is not None else None, tokens, ts, depth)
            stored += 1
            parent = key
        return stored, reused, branches

    def state(self, text_of: Callable[[tuple[int, ...]], str] | None = None) -> MirrorState:
        keys = list(self._blocks)
        row = {k: i for i, k in enumerate(keys)}
        blocks = list(self._blocks.values())
        parent = np.fromiter((row.get(b.parent, -1) if b.parent is not None else -1 for b in blocks), np.int32,
                             len(blocks))
        tokens = tuple(b.tokens for b in blocks)
        return MirrorState(
            parent=parent, depth=np.fromiter((b.depth for b in blocks), np.int32, len(blocks)),
            n_tokens=np.fromiter((len(b.tokens) for b in blocks), np.int32, len(blocks)),
            stored_t=np.fromiter((b.stored_t for b in blocks), np.float64, len(blocks)), tokens=tokens,
            texts=tuple(text_of(t) for t in tokens) if text_of is not None else ())
