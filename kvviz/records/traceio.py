"""Save and load a run's traces: JSON with everything (schema "kvviz-trace", docs/trace-format.md),
CSV of the scalar fields, and the per-engine summary as CSV and Markdown.

Stdlib and numpy only: no torch, no Qt, so the app replays a saved run without a model. Every file
is written to a temporary name and renamed; any failure leaves the old file (if any) untouched and
raises ValueError with one line. Loading anything that is not a complete version-1 trace is a
ValueError too.
"""
from __future__ import annotations

import base64
import binascii
import csv
import dataclasses
import io
import json
import math
import re
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from kvviz import catalog
from kvviz.errors import one_line
from kvviz.fileio import atomic_write_text, check_depth, read_bytes
from kvviz.kernels import KERNEL_KEYS, LANE_MARK, baselines, lane_engine, lane_kernel
from kvviz.records.repeats import check_earlier
from kvviz.records.trace import MaskSpec, RunInfo, RunSummary, StepTrace, speedup
from kvviz.textshow import display_labels, label_bytes

SCHEMA = "kvviz-trace"
VERSION = 1
ARRAY_DTYPES = {"float32": "<f4", "float16": "<f2"}

_SCALAR_ORDER = ("run_id", "step", "phase", "token_id", "token_text", "pos_start", "pos_stop", "cache_len",
                 "cache_capacity", "cache_bytes", "bytes_copied", "bytes_written", "bytes_gathered",
                 "kv_projections", "latency_ms")
_INT_FIELDS = ("step", "token_id", "pos_start", "pos_stop", "cache_len", "cache_capacity", "cache_bytes",
               "bytes_copied", "bytes_written", "bytes_gathered", "kv_projections")
_STR_FIELDS = ("run_id", "phase", "token_text")
_OPTIONAL_INT_FIELDS = ("weights_layer", "weights_head", "block_size", "device_mem_bytes", "window", "sinks",
                        "residual",  # window, sinks, residual: the approximate caches' W, S, R
                        "spec_k", "spec_proposed", "spec_accepted", "spec_rolled_back", "spec_index",
                        "target_forwards", "draft_forwards", "bytes_undone", "bytes_overwritten",
                        "spec_stale")  # a speculative engine's round (StepTrace)
_ARRAY_FIELDS = ("attn_weights", "logits")
# RunInfo's record of a repeated comparison (kvviz.records.repeats): read only where the file names a repeat, so a
# file of a run made once loads as one whatever else it holds
_REPEAT_FIELDS = ("repeat", "earlier_ms")


class SavedRun(NamedTuple):
    info: RunInfo
    traces: dict[str, list[StepTrace]]


# -- JSON: encode ------------------------------------------------------------------------------
def encode_array(a: np.ndarray, dtype: str = "float32") -> dict[str, Any]:
    """{"dtype", "shape", "data"}: data is base64 of the little-endian values in C order."""
    if dtype not in ARRAY_DTYPES:
        raise ValueError(f"array dtype must be one of {', '.join(ARRAY_DTYPES)}, got {dtype!r}")
    a = np.asarray(a)
    if dtype == "float16":
        finite = a[np.isfinite(a)]
        if finite.size and np.abs(finite).max() > np.finfo(np.float16).max:
            raise ValueError("a value exceeds float16's range; save arrays as float32")
    raw = np.ascontiguousarray(a, dtype=ARRAY_DTYPES[dtype]).tobytes()
    return {"dtype": dtype, "shape": list(a.shape), "data": base64.b64encode(raw).decode("ascii")}


def encode_step(t: StepTrace, array_dtype: str = "float32") -> dict[str, Any]:
    """One step as a JSON object; optional fields that are None are left out."""
    doc: dict[str, Any] = {k: getattr(t, k) for k in _SCALAR_ORDER}
    if t.mask_spec is not None:
        doc["mask"] = [t.mask_spec.q_len, t.mask_spec.kv_len, t.mask_spec.past_len]
        if t.mask_spec.held is not None:
            doc["mask_held"] = list(t.mask_spec.held)
    for key in _ARRAY_FIELDS:
        value = getattr(t, key)
        if value is not None:
            doc[key] = encode_array(value, array_dtype)
    for key in _OPTIONAL_INT_FIELDS + ("kl_to_exact", "top1_agrees"):
        if getattr(t, key) is not None:
            doc[key] = getattr(t, key)
    if t.block_table is not None:
        doc["block_table"] = list(t.block_table)
    return doc


def run_to_dict(info: RunInfo, traces: Mapping[str, Sequence[StepTrace]], *,
                array_dtype: str = "float32") -> dict[str, Any]:
    engines = []
    for name, steps in traces.items():
        for i, t in enumerate(steps):
            if t.engine != name:
                raise ValueError(f"a step of engine {t.engine!r} is filed under {name!r}")
            if t.step != i:
                raise ValueError(f"engine {name!r}: step {t.step} is at place {i}")
        engines.append({"name": name, "steps": [encode_step(t, array_dtype) for t in steps]})
    doc = dataclasses.asdict(info)
    if info.repeat == 1 and not info.earlier_ms:
        for key in _REPEAT_FIELDS:  # a run made once is saved without them, as it loads (info_from_dict)
            del doc[key]
    return {"schema": SCHEMA, "version": VERSION, "info": doc, "engines": engines}


def dumps_run(info: RunInfo, traces: Mapping[str, Sequence[StepTrace]], *, array_dtype: str = "float32") -> str:
    # ASCII escapes keep any token text (a lone surrogate from a split UTF-8 sequence included) writable.
    return json.dumps(run_to_dict(info, traces, array_dtype=array_dtype), indent=1) + "\n"


# -- JSON: decode ------------------------------------------------------------------------------
def decode_array(doc: Any, blobs: _Blobs | None = None) -> np.ndarray:
    """A float32 array from encode_array's object (float16 data is widened). `blobs`: the arrays' bytes
    taken out of the file before its JSON was parsed (_Blobs), which the object refers to."""
    if not isinstance(doc, dict):
        raise ValueError("an array must be an object with dtype, shape and data")
    dtype, shape, data = doc.get("dtype"), doc.get("shape"), doc.get("data")
    if dtype not in ARRAY_DTYPES:
        raise ValueError(f"array dtype {dtype!r} is not one of {', '.join(ARRAY_DTYPES)}")
    if not (isinstance(shape, list) and all(_is_int(d) and d >= 0 for d in shape)):
        raise ValueError(f"array shape {shape!r} is not a list of sizes")
    raw = blobs.take(data) if blobs is not None else None
    if raw is None:
        if not isinstance(data, str):
            raise ValueError("array data is not a base64 string")
        try:
            raw = base64.b64decode(data, validate=True)
        except ValueError:
            raise ValueError("array data is not valid base64") from None
    itemsize = np.dtype(ARRAY_DTYPES[dtype]).itemsize
    if len(raw) != math.prod(shape) * itemsize:
        raise ValueError(f"array data holds {len(raw)} bytes, shape {shape} of {dtype} needs "
                         f"{math.prod(shape) * itemsize}")
    array = np.frombuffer(raw, dtype=ARRAY_DTYPES[dtype]).reshape(shape)
    # float32 is kept as read: a read-only view of its own bytes, no copy (the record is frozen anyway)
    return array if dtype == "float32" else array.astype(np.float32)


# An array's data as the file holds it: `"data": "<base64>"`. Inside a JSON string every quote is
# escaped, so this matches only the key and value themselves.
_NOT_SPACE = re.compile(rb"[^ \t\r\n]")
_DATA = re.compile(rb'"data"\s*:\s*"([A-Za-z0-9+/=]*)"')


class _Blobs:
    """The arrays' bytes, decoded from base64 straight out of the file's bytes before the JSON is parsed,
    so that parsing never holds a Python string per array beside the file (the old loader peaked at
    3.5-4.5x a trace's size). Each `"data"` is replaced by a reference the file cannot forge: an object
    keyed by a random token, naming the blob."""

    def __init__(self, raw: bytes | bytearray) -> None:
        self.key = "kvviz-blob-" + secrets.token_hex(16)
        self.blobs: list[bytes | None] = []
        pieces, at, view = [], 0, memoryview(raw)
        try:
            for match in _DATA.finditer(raw):
                start, stop = match.span(1)
                try:
                    blob = binascii.a2b_base64(view[start:stop], strict_mode=True)
                except (binascii.Error, ValueError):
                    continue  # left in place: decode_array says it is not valid base64
                pieces.append(view[at:match.start()].tobytes())
                pieces.append(f'"data": {{"{self.key}": {len(self.blobs)}}}'.encode("ascii"))
                self.blobs.append(blob)
                at = match.end()
            pieces.append(view[at:].tobytes())
        finally:
            view.release()
        self.skeleton = b"".join(pieces)

    def take(self, data: Any) -> bytes | None:
        """The blob `data` refers to (once: a reference used twice is refused), or None if it is no reference."""
        if not (isinstance(data, dict) and len(data) == 1 and _is_int(data.get(self.key))):
            return None
        index = data[self.key]
        blob = self.blobs[index] if 0 <= index < len(self.blobs) else None
        if blob is None:
            raise ValueError("array data refers to no array")
        self.blobs[index] = None
        return blob


def decode_step(doc: Any, engine: str, blobs: _Blobs | None = None) -> StepTrace:
    if not isinstance(doc, dict):
        raise ValueError("a step must be a JSON object")
    kw: dict[str, Any] = {"engine": engine}
    for key in _INT_FIELDS:
        kw[key] = _field(doc, key, _is_int, "a whole number")
    for key in _STR_FIELDS:
        kw[key] = _field(doc, key, lambda v: isinstance(v, str), "a string")
    kw["latency_ms"] = float(_field(doc, "latency_ms", _is_number, "a number"))
    for key in _OPTIONAL_INT_FIELDS:
        kw[key] = _field(doc, key, _is_int, "a whole number", optional=True)
    kw["sinks"] = kw["sinks"] or 0
    kl = _field(doc, "kl_to_exact", lambda v: _is_number(v) and 0 <= v < float("inf"), "a number >= 0",
                optional=True)
    kw["kl_to_exact"] = None if kl is None else float(kl)
    kw["top1_agrees"] = _field(doc, "top1_agrees", lambda v: isinstance(v, bool), "true or false", optional=True)
    mask = doc.get("mask")
    if mask is not None:
        if not (isinstance(mask, list) and len(mask) == 3 and all(_is_int(v) and v >= 0 for v in mask)):
            raise ValueError(f"mask must be [q_len, kv_len, past_len], got {mask!r}")
        bounded = kw["window"] is not None
        held = doc.get("mask_held")
        if held is not None and not (isinstance(held, list) and all(_is_int(v) and 0 <= v < mask[2] for v in held)
                                     and held == sorted(set(held))):
            raise ValueError(f"mask_held must be positions before {mask[2]} in order, got {held!r}"[:200])
        kw["mask_spec"] = MaskSpec(*mask, window=kw["window"] - kw["sinks"] if bounded else None, sinks=kw["sinks"],
                                   held=None if held is None else tuple(held))
    for key in _ARRAY_FIELDS:
        if doc.get(key) is not None:
            try:
                kw[key] = decode_array(doc[key], blobs)
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None
    table = doc.get("block_table")
    if table is not None:
        if not (isinstance(table, list) and all(_is_int(v) for v in table)):
            raise ValueError("block_table must be a list of block numbers")
        kw["block_table"] = tuple(table)
    return StepTrace(**kw)


def info_from_dict(doc: Any) -> RunInfo:
    """RunInfo from its saved fields; fields this kvviz does not know are ignored, missing ones default."""
    if not isinstance(doc, dict):
        raise ValueError("'info' must be a JSON object")
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(RunInfo):
        if f.name not in doc or f.name in _REPEAT_FIELDS:
            continue
        value = doc[f.name]
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        if isinstance(default, tuple):
            if not isinstance(value, list):
                raise ValueError(f"info.{f.name} must be a list")
            value = tuple(value)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"info.{f.name} must be true or false")
        elif isinstance(default, int):
            if not _is_int(value):
                raise ValueError(f"info.{f.name} must be a whole number")
        elif isinstance(default, float):
            if not _is_number(value):
                raise ValueError(f"info.{f.name} must be a number")
            value = float(value)
        elif isinstance(default, str) and not isinstance(value, str):
            raise ValueError(f"info.{f.name} must be a string")
        kw[f.name] = value
    if "repeat" not in doc:
        return RunInfo(**kw)
    # a repeated comparison (kvviz.records.repeats): its earlier runs' step times, checked by check_meaning
    earlier = doc.get("earlier_ms", {})
    if not isinstance(earlier, dict):
        raise ValueError("info.earlier_ms must be an object of step times per engine")
    return RunInfo(**kw, repeat=doc["repeat"], earlier_ms={
        name: tuple(tuple(run) if isinstance(run, list) else run for run in runs) if isinstance(runs, list) else runs
        for name, runs in earlier.items()})


# -- meaning: what a real run can produce ----------------------------------------------------------
# A saved run is checked against what kvviz's engines can produce, so a panel never has to draw
# something no run makes (a negative byte count, a 100,000-character token, a block of 10^9 tokens).
# ENGINES: the engines a trace may name, the catalog's, read at each use.
__getattr__ = catalog.live_names(__name__, ENGINES=catalog.engine_keys)
DECODE_KERNELS = KERNEL_KEYS  # RunInfo.decode_kernels
MAX_DEPTH = 8  # doc > engines > [] > step > array > shape > []: 7 levels in a file kvviz writes
MAX_TOKEN_CHARS = 256  # one id decodes to a few bytes: the longest tokens of real vocabularies are < 256
MAX_TOKEN_ID = (1 << 24) - 1  # vocabularies are < 2^18 tokens; 16M leaves room and bounds any table
MAX_TEXT_CHARS = 1 << 22  # the prompt: 4 Mi characters, far past any model's context of text
MAX_MODEL_DIM = 1 << 16  # layers, heads, head_dim: far past any published model
MAX_PARAMS = 10**13
MAX_BYTES = 1 << 50  # a byte count on one step or one device: a pebibyte
MAX_TRACE_BYTES = 4 << 30  # a file past 4 GiB is no trace kvviz wrote that a window could hold


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_text(value: str, what: str, limit: int) -> None:
    if len(value) > limit:
        raise ValueError(f"{what} is {len(value):,} characters, more than {limit:,} (no tokenizer makes that)")
    found = _SURROGATE.search(value)
    if found:
        raise ValueError(f"{what} holds a lone surrogate (U+{ord(found.group()):04X}), which no tokenizer decodes to")


def _check_range(value: int | float, what: str, low: float, high: float) -> None:
    if not (low <= value <= high):  # NaN fails both
        raise ValueError(f"{what} is {value!r}, outside {low:,}..{high:,}")


def check_info(info: RunInfo) -> None:
    """The run's description: sizes within a real model's, texts within a tokenizer's."""
    from kvviz.options import BLOCK_SIZE_MAX, BOUNDS, ROLLBACKS

    _check_text(info.prompt, "info.prompt", MAX_TEXT_CHARS)
    for key in ("run_id", "model_name", "device", "dtype"):
        _check_text(getattr(info, key), f"info.{key}", 4096)
    if len(info.prompt_ids) > MAX_TEXT_CHARS:
        raise ValueError(f"info.prompt_ids holds {len(info.prompt_ids):,} ids, more than {MAX_TEXT_CHARS:,}")
    ids = info.prompt_ids  # a million-token prompt: checked by builtins, not a Python loop per id
    if ids and (not set(map(type, ids)) <= {int} or min(ids) < 0 or max(ids) > MAX_TOKEN_ID):
        bad = next(i for i in ids if not _is_int(i) or not 0 <= i <= MAX_TOKEN_ID)
        raise ValueError(f"info.prompt_ids holds {bad!r}, not a token id (0..{MAX_TOKEN_ID:,})")
    if info.prompt_labels and len(info.prompt_labels) != len(info.prompt_ids):
        raise ValueError(f"info.prompt_labels has {len(info.prompt_labels)} labels for "
                         f"{len(info.prompt_ids)} prompt ids")
    labels = info.prompt_labels
    if labels and not set(map(type, labels)) <= {str}:
        bad = next(label for label in labels if not isinstance(label, str))
        raise ValueError(f"info.prompt_labels holds {one_line(repr(bad), 60)}, not a string")
    if labels and (max(map(len, labels)) > MAX_TOKEN_CHARS or _SURROGATE.search("".join(labels))):
        for label in labels:
            _check_text(label, "a prompt label", MAX_TOKEN_CHARS)
    for name in info.engines:
        _check_lane(name, "info.engines names")
    _check_range(info.max_new_tokens, "info.max_new_tokens", 0, BOUNDS["tokens"].high)
    for key in ("n_layer", "n_head", "n_kv_head", "head_dim"):
        _check_range(getattr(info, key), f"info.{key}", 0, MAX_MODEL_DIM)
    _check_range(info.param_count, "info.param_count", 0, MAX_PARAMS)
    _check_range(info.kv_bytes_per_token, "info.kv_bytes_per_token", 0,
                 2 * 4 * MAX_MODEL_DIM * MAX_MODEL_DIM)
    _check_range(info.block_size, "info.block_size", 1, BLOCK_SIZE_MAX)
    for key in ("weights_read_bytes", "embed_row_bytes", "cache_bytes"):  # the memory wall's figures (kvviz.costs.wall)
        _check_range(getattr(info, key), f"info.{key}", 0, MAX_BYTES)
    for key in ("copy_gbps", "peak_gbps", "read_gbps"):  # 0: not measured; a billion GB/s is no memory there is
        _check_range(getattr(info, key), f"info.{key}", 0, 1e9)
    _check_range(info.read_threads, "info.read_threads", 0, 1 << 16)
    _check_range(info.spec_k, "info.spec_k", 0, BOUNDS["spec_k"].high)  # 0: not set
    if info.rollback not in ("", *ROLLBACKS):
        raise ValueError(f"info.rollback must be {' or '.join(ROLLBACKS)}, got {one_line(repr(info.rollback), 60)}")
    if info.decode_kernels and len(info.decode_kernels) != len(info.engines):
        raise ValueError(f"info.decode_kernels names {len(info.decode_kernels)} kernels for "
                         f"{len(info.engines)} engines")
    for kernel in info.decode_kernels:
        if kernel not in DECODE_KERNELS:
            raise ValueError(f"info.decode_kernels names {one_line(repr(kernel), 60)}, not a kernel kvviz runs "
                             f"({', '.join(DECODE_KERNELS)})")
    for name, kernel in zip(info.engines, info.decode_kernels):
        if lane_kernel(name) not in (None, kernel):
            raise ValueError(f"info.decode_kernels names {kernel!r} for the lane {name!r}")


def _check_lane(name: str, what: str) -> None:
    """`name` is an engine kvviz runs, or a kernel comparison's lane of one ("static@native", kvviz.kernels.lane)."""
    if not isinstance(name, str):
        raise ValueError(f"{what} {one_line(repr(name), 60)}, not an engine's name")
    engine, kernel = lane_engine(name), lane_kernel(name)
    if engine not in catalog.engine_keys() or kernel not in (None, *DECODE_KERNELS):
        raise ValueError(f"{what} {one_line(repr(name), 60)}, not an engine kvviz runs "
                         f"({', '.join(catalog.engine_keys())}) nor one under a kernel "
                         f"(engine{LANE_MARK}kernel: {', '.join(DECODE_KERNELS)})")


def check_steps(info: RunInfo, name: str, steps: Sequence[StepTrace]) -> None:
    """One engine's steps against the rules every engine's records keep: step k computes positions up
    to n_prompt + k, the mask says the same, caches hold no more than the run's length (rounded up to
    a block), byte counts fit the cache, the text fits a token."""
    from kvviz.options import BLOCK_SIZE_MAX, BOUNDS

    _check_lane(name, "engine")
    if not steps:
        return
    if len(steps) > BOUNDS["tokens"].high or (info.max_new_tokens and len(steps) > info.max_new_tokens):
        raise ValueError(f"engine {name!r} has {len(steps):,} steps, more than the run asked for "
                         f"({info.max_new_tokens or int(BOUNDS['tokens'].high):,})")
    n_prompt = len(info.prompt_ids) or steps[0].pos_stop
    _check_range(n_prompt, f"engine {name!r}: the prompt's length", 1, MAX_TEXT_CHARS)
    length = n_prompt + max(len(steps), info.max_new_tokens)  # the longest sequence the run could hold
    kv_bytes = info.kv_bytes_per_token
    for t in steps:
        where = f"engine {name!r}, step {t.step}"
        if t.phase != ("prefill" if t.step == 0 else "decode"):
            raise ValueError(f"{where}: phase {t.phase!r}, but step 0 is the prefill and the rest decode")
        block = t.block_size if t.block_size is not None else 1
        _check_range(block, f"{where}: block_size", 1, BLOCK_SIZE_MAX)
        room = length + block - 1  # a cache's capacity: the run's length rounded up to a whole block
        for key in ("token_id",):
            _check_range(getattr(t, key), f"{where}: {key}", 0, MAX_TOKEN_ID)
        _check_text(t.token_text, f"{where}: token_text", MAX_TOKEN_CHARS)
        _check_text(t.run_id, f"{where}: run_id", 4096)
        if t.pos_stop != n_prompt + t.step:
            raise ValueError(f"{where}: pos_stop {t.pos_stop}, but step {t.step} of a {n_prompt}-token prompt "
                             f"computes up to position {n_prompt + t.step}")
        _check_range(t.pos_start, f"{where}: pos_start", 0, t.pos_stop - 1)
        _check_range(t.cache_capacity, f"{where}: cache_capacity", 0, room)
        _check_range(t.cache_len, f"{where}: cache_len", 0, min(t.pos_stop, max(t.cache_capacity, 0)))
        if t.run_id != steps[0].run_id or (info.run_id and t.run_id != info.run_id):
            raise ValueError(f"{where}: run_id {t.run_id!r} is not the run's ({info.run_id or steps[0].run_id!r})")
        # the cache's bytes are its capacity's (panels divide one by the other)
        if t.window is not None:
            _check_range(t.window, f"{where}: window", 1, room)
        # int8 payload and scales: fewer bytes than its capacity at full precision
        quantised = lane_engine(name) == "int8"
        if kv_bytes and (t.cache_bytes > t.cache_capacity * kv_bytes if quantised
                         else t.cache_bytes != t.cache_capacity * kv_bytes):
            raise ValueError(f"{where}: cache_bytes {t.cache_bytes:,} for a capacity of {t.cache_capacity} tokens "
                             f"at {kv_bytes:,} bytes each")
        if (t.cache_bytes == 0) != (t.cache_capacity == 0):
            raise ValueError(f"{where}: cache_bytes {t.cache_bytes:,} with a capacity of {t.cache_capacity} tokens")
        top_bytes = room * kv_bytes if kv_bytes else MAX_BYTES
        for key in ("cache_bytes", "bytes_copied", "bytes_written", "bytes_gathered"):
            _check_range(getattr(t, key), f"{where}: {key}", 0, top_bytes)
        _check_range(t.kv_projections, f"{where}: kv_projections", 0,
                     t.computed_positions * (info.n_layer or MAX_MODEL_DIM))
        _check_range(t.latency_ms, f"{where}: latency_ms", 0.0, 3.6e6)  # an hour for one step
        if t.device_mem_bytes is not None:
            _check_range(t.device_mem_bytes, f"{where}: device_mem_bytes", 0, MAX_BYTES)
        expected = (t.computed_positions, t.pos_stop, t.pos_start)
        if t.mask_spec is not None:
            got = (t.mask_spec.q_len, t.mask_spec.kv_len, t.mask_spec.past_len)
            if got != expected:
                raise ValueError(f"{where}: mask {list(got)} disagrees with positions {t.pos_start}..{t.pos_stop} "
                                 f"(expected {list(expected)})")
        if t.attn_weights is not None:
            if t.attn_weights.shape != expected[:2]:
                raise ValueError(f"{where}: attn_weights of shape {list(t.attn_weights.shape)}, the positions "
                                 f"make {list(expected[:2])}")
            if t.weights_layer is None:
                raise ValueError(f"{where}: attn_weights without weights_layer")
            w = t.attn_weights
            if w.size and not (np.isfinite(w).all() and w.min() >= 0.0 and w.max() <= 1.0 + 1e-3):
                raise ValueError(f"{where}: attn_weights outside 0..1 (softmax weights never are)")
        for key, count in (("weights_layer", info.n_layer), ("weights_head", info.n_head)):
            value = getattr(t, key)
            if value is not None:
                _check_range(value, f"{where}: {key}", 0, (count or MAX_MODEL_DIM) - 1)
        if t.logits is not None and not (t.logits.ndim == 1 and 1 <= t.logits.size <= MAX_TOKEN_ID + 1):
            raise ValueError(f"{where}: logits of shape {list(t.logits.shape)}, not one row of a vocabulary")
        if t.block_table is not None:
            if t.block_size is None:
                raise ValueError(f"{where}: a block_table without a block_size")
            n_blocks = -(-room // block)
            held = -(-t.cache_len // block)  # the blocks the cached tokens fill
            if len(t.block_table) != held:
                raise ValueError(f"{where}: {len(t.block_table)} blocks in the table for {t.cache_len} tokens "
                                 f"in blocks of {block} ({held} expected)")
            if len(set(t.block_table)) != len(t.block_table):
                raise ValueError(f"{where}: a block appears twice in the block table")
            for b in t.block_table:
                _check_range(b, f"{where}: a block number", 0, n_blocks - 1)


def check_meaning(info: RunInfo, traces: Mapping[str, Sequence[StepTrace]]) -> None:
    """The one validator of a saved run (the loader and the window's replay both go through it): the run
    as a whole (check_run), its description, every engine's steps."""
    from kvviz.options import BOUNDS

    check_info(info)
    check_run(info, traces)
    check_earlier(info, {name: len(steps) for name, steps in traces.items()}, int(BOUNDS["repeat"].high), 3.6e6)
    for name, steps in traces.items():
        check_steps(info, name, steps)


def check_run(info: RunInfo, traces: Mapping[str, Sequence[StepTrace]]) -> None:
    """What makes steps one run: at least one engine with steps, one run id on every step (the info's, when
    it names one), the engines the info lists being those the steps come from, in the same order, and
    as many steps of each (they run in lockstep)."""
    if not traces or not any(traces.values()):
        raise ValueError("the trace holds no steps")
    run_ids = {t.run_id for steps in traces.values() for t in steps}
    if len(run_ids) > 1:
        raise ValueError(f"the trace mixes steps of {len(run_ids)} runs ({', '.join(sorted(map(repr, run_ids))[:3])})")
    if info.run_id and run_ids != {info.run_id}:
        raise ValueError(f"the steps' run id {next(iter(run_ids))!r} is not info.run_id {info.run_id!r}")
    if info.engines and tuple(info.engines) != tuple(traces):
        raise ValueError(f"info.engines lists {', '.join(info.engines)}; the steps are of {', '.join(traces)}")
    counts = {name: len(steps) for name, steps in traces.items()}
    if len(set(counts.values())) > 1:
        raise ValueError("the engines have different numbers of steps ("
                         + ", ".join(f"{name} {n}" for name, n in counts.items()) + "); they run in lockstep")


def run_from_dict(doc: Any, blobs: _Blobs | None = None) -> SavedRun:
    if not isinstance(doc, dict):
        raise ValueError(f"not a kvviz trace (the JSON is a {type(doc).__name__}, not an object)")
    if "schema" not in doc:
        raise ValueError("not a kvviz trace (no 'schema' field)")
    if doc["schema"] != SCHEMA:
        raise ValueError(f"not a kvviz trace: schema {doc['schema']!r}, expected {SCHEMA!r}")
    version = doc.get("version")
    if not _is_int(version):
        raise ValueError(f"kvviz trace without a valid version number (got {version!r})")
    if version > VERSION:
        raise ValueError(f"kvviz trace format version {version} is newer than this kvviz reads "
                         f"(version {VERSION}); update kvviz")
    if version != VERSION:
        raise ValueError(f"unknown kvviz trace format version {version} (this kvviz reads version {VERSION})")
    info = info_from_dict(doc.get("info", {}))
    engines = doc.get("engines")
    if not isinstance(engines, list):
        raise ValueError("'engines' must be a list")
    traces: dict[str, list[StepTrace]] = {}
    for group in engines:
        if not (isinstance(group, dict) and isinstance(group.get("name"), str)
                and isinstance(group.get("steps"), list)):
            raise ValueError("each entry of 'engines' needs a 'name' and a list of 'steps'")
        name = group["name"]
        if name in traces:
            raise ValueError(f"engine {name!r} appears twice")
        steps = []
        for i, step_doc in enumerate(group["steps"]):
            try:
                t = decode_step(step_doc, name, blobs)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"engine {name!r}, step {i}: {exc}") from None
            if t.step != i:
                raise ValueError(f"engine {name!r}: step {t.step} is at place {i}")
            steps.append(t)
        traces[name] = steps
    check_meaning(info, traces)
    return SavedRun(info, traces)


def loads_run(text: str | bytes | bytearray) -> SavedRun:
    """A saved run from the file's text or bytes (bytes: as read, never copied into one string)."""
    raw = text.encode("utf-8", errors="surrogatepass") if isinstance(text, str) else text
    if _NOT_SPACE.search(raw) is None:  # (not raw.strip(): that copies the whole file)
        raise ValueError("the file is empty")
    blobs = _Blobs(raw)
    del raw, text  # the arrays are out; what is left to parse is the skeleton
    try:
        text = blobs.skeleton.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not a text file, so not a kvviz trace") from None
    blobs.skeleton = b""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise ValueError(f"not a kvviz trace: JSON nested deeper than Python reads (a trace nests "
                         f"{MAX_DEPTH} levels at most)") from None
    except json.JSONDecodeError as exc:
        # kvviz writes one value per line, so a file that fails on its last line of many was cut short.
        on_last_line = "\n" in text[: exc.pos] and "\n" not in text[exc.pos:]
        if on_last_line or exc.pos >= len(text.rstrip()):
            raise ValueError(f"the JSON ends early at line {exc.lineno}: the file is truncated") from None
        raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    check_depth(doc, MAX_DEPTH, "not a kvviz trace")
    try:
        return run_from_dict(doc, blobs)
    except ValueError as exc:  # a hostile value echoed in the message is cut to one short line
        raise ValueError(one_line(str(exc))) from None


def load_run(path: str | Path) -> SavedRun:
    """Read a saved run; ValueError with one line naming the file for anything wrong."""
    path = Path(path)
    try:
        held = [read_bytes(path, MAX_TRACE_BYTES, "trace file")]
        return loads_run(held.pop())  # popped: no name here keeps the file's bytes once the arrays are out
    except MemoryError:
        raise ValueError(f"{path}: not enough memory to open it (opening a trace takes up to twice its "
                         f"size)") from None
    except ValueError as exc:
        if str(exc).startswith(str(path)[:120]):
            raise  # the reader's refusal names the file already
        raise ValueError(f"{path}: {exc}") from None


# -- CSV and Markdown --------------------------------------------------------------------------
STEP_COLUMNS = ("run_id", "engine", "step", "phase", "token_id", "token_text", "token_bytes", "pos_start",
                "pos_stop", "cache_len", "cache_capacity", "cache_bytes", "bytes_copied", "bytes_written",
                "bytes_gathered", "kv_projections", "latency_ms", "q_len", "kv_len", "past_len", "weights_layer",
                "weights_head", "block_size", "blocks", "device_mem_bytes")
SUMMARY_COLUMNS = ("engine", "new_tokens", "total_ms", "tokens_per_s", "speedup_vs_naive", "kv_projections",
                   "bytes_copied", "bytes_written", "bytes_gathered", "peak_cache_bytes", "bytes_read", "read_gbps",
                   "copy_share", "same_tokens_as_naive")


def step_rows(traces: Mapping[str, Sequence[StepTrace]]) -> list[dict[str, Any]]:
    """One row per engine and step, scalar fields only (the mask as its three numbers). token_text is the
    text as people read it: a character split over several tokens is written once, on its first token (the
    others empty); token_bytes is each token's own bytes in hex."""
    rows = []
    for steps in traces.values():
        readable = display_labels([t.token_text for t in steps])
        for t, text in zip(steps, readable):
            row = {k: getattr(t, k) for k in STEP_COLUMNS if hasattr(t, k)}
            row.update(token_text=text, token_bytes=label_bytes(t.token_text).hex(" "))
            m = t.mask_spec
            row.update(q_len=m.q_len if m else None, kv_len=m.kv_len if m else None,
                       past_len=m.past_len if m else None,
                       blocks=len(t.block_table) if t.block_table is not None else None)
            rows.append(row)
    return rows


def summary_rows(traces: Mapping[str, Sequence[StepTrace]], info: RunInfo | None = None) -> list[dict[str, Any]]:
    """Per engine: RunSummary's totals, speedup vs naive (same token count only) and whether the
    tokens equal naive's over the steps both ran (in a kernel comparison both against the engine under the first
    kernel: kvviz.kernels.baselines); with the run's RunInfo, the memory wall as the summary
    panel shows it (bytes read, GB/s, share of the copy bandwidth: None where the run did not record them)."""
    from kvviz.costs.wall import achieved_gbps, bytes_read

    summaries = {k: RunSummary.from_traces(v) for k, v in traces.items() if v}
    against = baselines(list(summaries))
    wall = info.wall() if info is not None else None
    copy = info.bandwidth_gbps() if info is not None else None
    rows = []
    for name, s in summaries.items():
        read = gbps = share = None
        if wall is not None:
            read = bytes_read(wall, traces[name])
            gbps = achieved_gbps(read, s.total_ms)
            gbps = gbps if gbps < math.inf else None  # NaN: no step time recorded
            share = gbps / copy if gbps is not None and copy is not None else None
        same = None
        fast = None
        naive = summaries.get(against.get(name, ""))
        if naive is not None:
            n = min(len(s.token_ids), len(naive.token_ids))
            same = s.token_ids[:n] == naive.token_ids[:n]
            if s.new_tokens == naive.new_tokens:
                fast = speedup(s, naive)
        rows.append(dict(engine=name, new_tokens=s.new_tokens, total_ms=s.total_ms, tokens_per_s=s.tokens_per_s,
                         speedup_vs_naive=fast, kv_projections=s.kv_projections, bytes_copied=s.bytes_copied,
                         bytes_written=s.bytes_written, bytes_gathered=s.bytes_gathered,
                         peak_cache_bytes=s.peak_cache_bytes, bytes_read=read, read_gbps=gbps, copy_share=share,
                         same_tokens_as_naive=same))
    return rows


def _csv(columns: Sequence[str], rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in columns})
    return out.getvalue()


def steps_csv(traces: Mapping[str, Sequence[StepTrace]]) -> str:
    return _csv(STEP_COLUMNS, step_rows(traces))


def summary_csv(traces: Mapping[str, Sequence[StepTrace]], info: RunInfo | None = None) -> str:
    return _csv(SUMMARY_COLUMNS, summary_rows(traces, info))


def summary_markdown(traces: Mapping[str, Sequence[StepTrace]], info: RunInfo | None = None) -> str:
    from kvviz.format import fmt_bytes

    head = ("engine", "new tokens", "total ms", "tokens/s", "speedup vs naive", "K/V projections", "copied",
            "written", "gathered", "peak cache", "read", "read GB/s",
            "of read ceiling" if info is not None and info.ceiling_kind() == "read" else "of copy bandwidth",
            "same tokens as naive")  # the share's ceiling: RunInfo.bandwidth_gbps(), named by ceiling_kind()
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * 12 + [":---:"]) + "|"]
    for r in summary_rows(traces, info):
        sp = "-" if r["speedup_vs_naive"] is None else f"{r['speedup_vs_naive']:.2f}×"
        same = {None: "-", True: "yes", False: "no"}[r["same_tokens_as_naive"]]
        cells = [r["engine"], str(r["new_tokens"]), f"{r['total_ms']:.2f}", f"{r['tokens_per_s']:.1f}", sp,
                 f"{r['kv_projections']:,}", fmt_bytes(r["bytes_copied"]), fmt_bytes(r["bytes_written"]),
                 fmt_bytes(r["bytes_gathered"]), fmt_bytes(r["peak_cache_bytes"]),
                 "-" if r["bytes_read"] is None else fmt_bytes(r["bytes_read"]),
                 "-" if r["read_gbps"] is None else f"{r['read_gbps']:.3g}",
                 "-" if r["copy_share"] is None else f"{100 * r['copy_share']:.0f}%", same]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# -- writing -----------------------------------------------------------------------------------
def write_text(path: str | Path, text: str) -> Path:
    """Atomically write `text`; an OSError (no such folder, no permission, disk full) becomes one-line
    ValueError and no partial file is left."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"cannot write {path}: it is a folder")
    try:
        return atomic_write_text(path, text)
    except OSError as exc:
        raise ValueError(f"cannot write {path}: {exc.strerror or exc}") from exc


def save_run(path: str | Path, info: RunInfo, traces: Mapping[str, Sequence[StepTrace]], *,
             array_dtype: str = "float32") -> Path:
    return write_text(path, dumps_run(info, traces, array_dtype=array_dtype))


def save_steps_csv(path: str | Path, traces: Mapping[str, Sequence[StepTrace]]) -> Path:
    return write_text(path, steps_csv(traces))


def save_summary_csv(path: str | Path, traces: Mapping[str, Sequence[StepTrace]], info: RunInfo | None = None) -> Path:
    return write_text(path, summary_csv(traces, info))


def save_summary_markdown(path: str | Path, traces: Mapping[str, Sequence[StepTrace]],
                          info: RunInfo | None = None) -> Path:
    return write_text(path, summary_markdown(traces, info))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _field(doc: dict, key: str, check, kind: str, optional: bool = False) -> Any:
    if key not in doc or doc[key] is None:
        if optional:
            return None
        raise ValueError(f"missing field {key!r}")
    value = doc[key]
    if not check(value):
        raise ValueError(f"{key} must be {kind}, got {value!r}")
    return value
