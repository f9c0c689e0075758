"""Save and load a run's traces: JSON with everything (schema "kvviz-trace", docs/trace-format.md),
CSV of the scalar fields, and the per-engine summary as CSV and Markdown.

Stdlib and numpy only: no torch, no Qt, so the app replays a saved run without a model. Every file
is written to a temporary name and renamed; any failure leaves the old file (if any) untouched and
raises ValueError with one line. Loading anything that is not a complete version-1 trace is a
ValueError too.
"""
from __future__ import annotations

import base64
import csv
import dataclasses
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from kvviz.fileio import atomic_write_text
from kvviz.trace import MaskSpec, RunSummary, StepTrace, speedup
from kvviz.ui.history import RunInfo  # a plain dataclass: importing it imports no Qt

SCHEMA = "kvviz-trace"
VERSION = 1
ARRAY_DTYPES = {"float32": "<f4", "float16": "<f2"}

_SCALAR_ORDER = ("run_id", "step", "phase", "token_id", "token_text", "pos_start", "pos_stop", "cache_len",
                 "cache_capacity", "cache_bytes", "bytes_copied", "bytes_written", "bytes_gathered",
                 "kv_projections", "latency_ms")
_INT_FIELDS = ("step", "token_id", "pos_start", "pos_stop", "cache_len", "cache_capacity", "cache_bytes",
               "bytes_copied", "bytes_written", "bytes_gathered", "kv_projections")
_STR_FIELDS = ("run_id", "phase", "token_text")
_OPTIONAL_INT_FIELDS = ("weights_layer", "weights_head", "block_size", "device_mem_bytes")
_ARRAY_FIELDS = ("attn_weights", "logits")


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
    for key in _ARRAY_FIELDS:
        value = getattr(t, key)
        if value is not None:
            doc[key] = encode_array(value, array_dtype)
    for key in _OPTIONAL_INT_FIELDS:
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
    return {"schema": SCHEMA, "version": VERSION, "info": dataclasses.asdict(info), "engines": engines}


def dumps_run(info: RunInfo, traces: Mapping[str, Sequence[StepTrace]], *, array_dtype: str = "float32") -> str:
    # ASCII escapes keep any token text (a lone surrogate from a split UTF-8 sequence included) writable.
    return json.dumps(run_to_dict(info, traces, array_dtype=array_dtype), indent=1) + "\n"


# -- JSON: decode ------------------------------------------------------------------------------
def decode_array(doc: Any) -> np.ndarray:
    """A float32 array from encode_array's object (float16 data is widened)."""
    if not isinstance(doc, dict):
        raise ValueError("an array must be an object with dtype, shape and data")
    dtype, shape, data = doc.get("dtype"), doc.get("shape"), doc.get("data")
    if dtype not in ARRAY_DTYPES:
        raise ValueError(f"array dtype {dtype!r} is not one of {', '.join(ARRAY_DTYPES)}")
    if not (isinstance(shape, list) and all(_is_int(d) and d >= 0 for d in shape)):
        raise ValueError(f"array shape {shape!r} is not a list of sizes")
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
    return np.frombuffer(raw, dtype=ARRAY_DTYPES[dtype]).astype(np.float32).reshape(shape)


def decode_step(doc: Any, engine: str) -> StepTrace:
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
    mask = doc.get("mask")
    if mask is not None:
        if not (isinstance(mask, list) and len(mask) == 3 and all(_is_int(v) and v >= 0 for v in mask)):
            raise ValueError(f"mask must be [q_len, kv_len, past_len], got {mask!r}")
        kw["mask_spec"] = MaskSpec(*mask)
    for key in _ARRAY_FIELDS:
        if doc.get(key) is not None:
            try:
                kw[key] = decode_array(doc[key])
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
        if f.name not in doc:
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
    return RunInfo(**kw)


def run_from_dict(doc: Any) -> SavedRun:
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
                t = decode_step(step_doc, name)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"engine {name!r}, step {i}: {exc}") from None
            if t.step != i:
                raise ValueError(f"engine {name!r}: step {t.step} is at place {i}")
            steps.append(t)
        traces[name] = steps
    return SavedRun(info, traces)


def loads_run(text: str) -> SavedRun:
    if not text.strip():
        raise ValueError("the file is empty")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        # kvviz writes one value per line, so a file that fails on its last line of many was cut short.
        on_last_line = "\n" in text[: exc.pos] and "\n" not in text[exc.pos:]
        if on_last_line or exc.pos >= len(text.rstrip()):
            raise ValueError(f"the JSON ends early at line {exc.lineno}: the file is truncated") from None
        raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    return run_from_dict(doc)


def load_run(path: str | Path) -> SavedRun:
    """Read a saved run; ValueError with one line naming the file for anything wrong."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{path}: a folder, not a trace file") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text file, so not a kvviz trace") from None
    try:
        return loads_run(text)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


# -- CSV and Markdown --------------------------------------------------------------------------
STEP_COLUMNS = ("run_id", "engine", "step", "phase", "token_id", "token_text", "pos_start", "pos_stop",
                "cache_len", "cache_capacity", "cache_bytes", "bytes_copied", "bytes_written", "bytes_gathered",
                "kv_projections", "latency_ms", "q_len", "kv_len", "past_len", "weights_layer", "weights_head",
                "block_size", "blocks", "device_mem_bytes")
SUMMARY_COLUMNS = ("engine", "new_tokens", "total_ms", "tokens_per_s", "speedup_vs_naive", "kv_projections",
                   "bytes_copied", "bytes_written", "bytes_gathered", "peak_cache_bytes", "same_tokens_as_naive")


def step_rows(traces: Mapping[str, Sequence[StepTrace]]) -> list[dict[str, Any]]:
    """One row per engine and step, scalar fields only (the mask as its three numbers)."""
    rows = []
    for steps in traces.values():
        for t in steps:
            row = {k: getattr(t, k) for k in STEP_COLUMNS if hasattr(t, k)}
            m = t.mask_spec
            row.update(q_len=m.q_len if m else None, kv_len=m.kv_len if m else None,
                       past_len=m.past_len if m else None,
                       blocks=len(t.block_table) if t.block_table is not None else None)
            rows.append(row)
    return rows


def summary_rows(traces: Mapping[str, Sequence[StepTrace]]) -> list[dict[str, Any]]:
    """Per engine: RunSummary's totals, speedup vs naive (same token count only) and whether the
    tokens equal naive's over the steps both ran."""
    summaries = {k: RunSummary.from_traces(v) for k, v in traces.items() if v}
    naive = summaries.get("naive")
    rows = []
    for name, s in summaries.items():
        same = None
        fast = None
        if naive is not None:
            n = min(len(s.token_ids), len(naive.token_ids))
            same = s.token_ids[:n] == naive.token_ids[:n]
            if s.new_tokens == naive.new_tokens:
                fast = speedup(s, naive)
        rows.append(dict(engine=name, new_tokens=s.new_tokens, total_ms=s.total_ms, tokens_per_s=s.tokens_per_s,
                         speedup_vs_naive=fast, kv_projections=s.kv_projections, bytes_copied=s.bytes_copied,
                         bytes_written=s.bytes_written, bytes_gathered=s.bytes_gathered,
                         peak_cache_bytes=s.peak_cache_bytes, same_tokens_as_naive=same))
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


def summary_csv(traces: Mapping[str, Sequence[StepTrace]]) -> str:
    return _csv(SUMMARY_COLUMNS, summary_rows(traces))


def summary_markdown(traces: Mapping[str, Sequence[StepTrace]]) -> str:
    from kvviz.format import fmt_bytes

    head = ("engine", "new tokens", "total ms", "tokens/s", "speedup vs naive", "K/V projections", "copied",
            "written", "gathered", "peak cache", "same tokens as naive")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * 9 + [":---:"]) + "|"]
    for r in summary_rows(traces):
        sp = "-" if r["speedup_vs_naive"] is None else f"{r['speedup_vs_naive']:.2f}×"
        same = {None: "-", True: "yes", False: "no"}[r["same_tokens_as_naive"]]
        cells = [r["engine"], str(r["new_tokens"]), f"{r['total_ms']:.2f}", f"{r['tokens_per_s']:.1f}", sp,
                 f"{r['kv_projections']:,}", fmt_bytes(r["bytes_copied"]), fmt_bytes(r["bytes_written"]),
                 fmt_bytes(r["bytes_gathered"]), fmt_bytes(r["peak_cache_bytes"]), same]
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


def save_summary_csv(path: str | Path, traces: Mapping[str, Sequence[StepTrace]]) -> Path:
    return write_text(path, summary_csv(traces))


def save_summary_markdown(path: str | Path, traces: Mapping[str, Sequence[StepTrace]]) -> Path:
    return write_text(path, summary_markdown(traces))


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
