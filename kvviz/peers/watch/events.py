"""vLLM's KV cache event messages (vllm/distributed/kv_events.py, vLLM 0.32) mirrored as msgspec structs, so
kvviz decodes them as vLLM encodes them without importing vLLM; and the one decoder of a published frame
(topic, 8-byte big-endian sequence number, msgpack KVEventBatch). tests/test_watch_vllm.py holds these
definitions against vLLM's own. Knows no socket and no server.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

# vLLM's ExternalBlockHash: a 64-bit integer (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES, the default) or sha256 bytes.
ExternalBlockHash = bytes | int
END_SEQ = -1  # the replay socket's end-of-replay marker (ZmqEventPublisher.END_SEQ)


class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    """Base class of the events; each is tagged with its class name on the wire."""


class BlockStored(KVCacheEvent):
    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[ExternalBlockHash]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(EventBatch):
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]


STRUCTS = (EventBatch, KVCacheEvent, BlockStored, BlockRemoved, AllBlocksCleared, KVEventBatch)
_DECODER = msgspec.msgpack.Decoder(type=KVEventBatch)


class MalformedFrame(ValueError):
    """A frame that is not (topic, 8-byte sequence number, msgpack KVEventBatch): counted, never fatal."""


@dataclass(frozen=True)
class DecodedFrame:
    topic: bytes
    seq: int
    batch: KVEventBatch


def frame_seq(frames: list[bytes] | tuple[bytes, ...]) -> int:
    """The sequence number of a published frame; MalformedFrame unless it has three parts, the second 8 bytes."""
    if len(frames) != 3:
        raise MalformedFrame(f"a frame of {len(frames)} parts, not 3 (topic, sequence number, payload)")
    if len(frames[1]) != 8:
        raise MalformedFrame(f"a sequence number of {len(frames[1])} bytes, not 8")
    return int.from_bytes(frames[1], "big", signed=True)


def decode_frame(frames: list[bytes] | tuple[bytes, ...]) -> DecodedFrame:
    """(topic, seq, payload) decoded against vLLM's message definitions; MalformedFrame (one line) otherwise."""
    seq = frame_seq(frames)
    try:
        batch = _DECODER.decode(frames[2])
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise MalformedFrame(f"payload of sequence number {seq}: {str(exc)[:200]}") from None
    return DecodedFrame(bytes(frames[0]), seq, batch)


def hash_key(h: ExternalBlockHash) -> int:
    """A block hash as one Python int (bytes read big-endian), the mirror's key for either kind."""
    return h if isinstance(h, int) else int.from_bytes(h, "big")
