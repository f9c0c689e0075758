"""Save and load a model as `config.json` + `model.safetensors` in one folder; every failure names the file."""
from __future__ import annotations

import math
import os
from pathlib import Path

import torch
from torch import nn

from kvviz.checkpoint_files import CONFIG_NAME, WEIGHTS_NAME, inside
from kvviz.config import ModelConfig
from kvviz.fileio import atomic_write, check_regular, open_regular, resolve
from kvviz.models import build_decoder


def save_model(model: nn.Module, folder: str | Path) -> Path:
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    atomic_write(folder / WEIGHTS_NAME, lambda tmp: save_file(state, str(tmp), metadata={"format": "pt"}))
    model.cfg.save_json(folder / CONFIG_NAME)
    return folder


def load_state(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of one safetensors file, each checked finite (check_finite)."""
    from safetensors.torch import load_file

    check_regular(path, "weights file")
    try:
        state = load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types for corrupt headers
        raise ValueError(f"{path}: not a readable safetensors file ({exc})") from None
    check_finite(state, path)
    return state


FINITE_CHUNK = 1 << 24  # elements checked at a time: the check's scratch stays 16 MiB, whatever the tensor


def check_finite(state: dict[str, torch.Tensor], source: Path) -> None:
    """ValueError naming the first tensor (in file order) holding a NaN or an infinity: a model with
    one computes garbage that greedy decoding would still turn into tokens."""
    for name, tensor in state.items():
        if not tensor.is_floating_point():
            continue
        # One reduction first: a sum is finite when every element is (a finite sum cannot hide a NaN or an
        # infinity); a reduction costs a tenth of an elementwise isfinite (0.6 vs 6 s for a 0.6B model here).
        # Only a non-finite sum, which may also be finite values adding past float32's range, is searched.
        if math.isfinite(float(torch.sum(tensor, dtype=torch.float32))):
            continue
        flat = tensor.reshape(-1)
        for at in range(0, flat.numel(), FINITE_CHUNK):
            part = flat[at:at + FINITE_CHUNK]
            if not bool(torch.isfinite(part).all()):
                bad = at + int((~torch.isfinite(part)).nonzero()[0])
                value = float(flat[bad])
                raise ValueError(f"{source}: tensor {name!r} holds {value} at element {bad:,} (weights must be "
                                 f"finite numbers)")


def load_into(model: nn.Module, state: dict[str, torch.Tensor], source: Path) -> nn.Module:
    """Copy `state` into `model`, refusing missing, unexpected or mis-shaped tensors by name."""
    check_shapes(model, {k: tuple(v.shape) for k, v in state.items()}, source)
    model.load_state_dict(state, strict=True)
    return model


def load_model_folder(folder: str | Path) -> nn.Module:
    """A kvviz folder (config.json in kvviz's schema + model.safetensors), in fp32 on the CPU."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such model folder")
    cfg = ModelConfig.load_json(inside(folder, CONFIG_NAME, str(folder)))
    weights = inside(folder, WEIGHTS_NAME, str(folder))
    header = read_safetensors_header(weights)
    check_dtypes(header, weights)
    plan_load(cfg, {k: shape for k, (_, shape) in header.items()}, weights.stat().st_size, weights)
    state = load_state(weights)
    model = build_decoder(cfg)
    return load_into(model, {k: v.float() for k, v in state.items()}, folder / WEIGHTS_NAME)


# -- checks before anything is allocated ---------------------------------------------------------------
WEIGHT_DTYPES = ("F32", "F16", "BF16")  # what kvviz's models compute in; anything else is refused, not cast
SAFETENSORS_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                      "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
MAX_HEADER_BYTES = 100 << 20  # safetensors' own limit on the JSON header


def checkpoint_name(folder: str | Path) -> str:
    """What a checkpoint is called in figures: ORG/NAME for a Hugging Face cache snapshot
    (.../models--ORG--NAME/snapshots/<commit>), the folder's own name otherwise."""
    folder = resolve(folder, "checkpoint folder")
    repo = folder.parent.parent.name
    if folder.parent.name == "snapshots" and repo.startswith("models--"):
        return repo.removeprefix("models--").replace("--", "/", 1)
    return folder.name


def check_dtypes(header: dict[str, tuple[str, tuple[int, ...]]], source: Path, skip=lambda name: False) -> None:
    """Refuse the first tensor stored in a dtype kvviz does not compute in (int8, bool, float64, fp8):
    casting it to float would run a model that was never meant to be read that way."""
    for name, (dtype, _) in header.items():
        if dtype not in WEIGHT_DTYPES and not skip(name):
            raise ValueError(f"{source}: tensor {name!r} is stored as {dtype}; kvviz reads weights in "
                             f"{', '.join(WEIGHT_DTYPES)} only")


def read_safetensors_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name -> (dtype, shape) from a safetensors file's header, reading nothing else: every tensor's byte
    range is checked to lie inside the file and to match its shape, so a lying header is refused here."""
    import json

    from kvviz.fileio import check_depth

    with open_regular(path, "weights file") as fh:
        total = os.fstat(fh.fileno()).st_size
        head = fh.read(8)
        if len(head) < 8:
            raise ValueError(f"{path}: not a readable safetensors file (shorter than its 8-byte header length)")
        n = int.from_bytes(head, "little")
        if n > min(MAX_HEADER_BYTES, total - 8):
            raise ValueError(f"{path}: not a readable safetensors file (a header of {n:,} bytes in a "
                             f"{total:,}-byte file)")
        raw = fh.read(n)
    try:
        doc = json.loads(raw.decode("utf-8"))
        check_depth(doc, 4, "its header")  # {name: {"shape": [..]}}: 3 levels
    except RecursionError:
        raise ValueError(f"{path}: not a readable safetensors file (its header nests too deeply)") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable safetensors file (its header is not JSON: {exc})") from None
    except ValueError as exc:
        raise ValueError(f"{path}: not a readable safetensors file ({exc})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a readable safetensors file (its header is not a JSON object)")
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    data_bytes = total - 8 - n
    for name, entry in doc.items():
        if name == "__metadata__":
            continue
        ok = isinstance(entry, dict) and isinstance(entry.get("dtype"), str) \
            and entry["dtype"] in SAFETENSORS_DTYPES \
            and isinstance(entry.get("shape"), list) and isinstance(entry.get("data_offsets"), list) \
            and len(entry["data_offsets"]) == 2 \
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                    for v in [*entry["shape"], *entry["data_offsets"]])
        if not ok:
            raise ValueError(f"{path}: tensor {name!r} has a malformed header entry")
        start, stop = entry["data_offsets"]
        size = SAFETENSORS_DTYPES[entry["dtype"]]
        for d in entry["shape"]:
            size *= d
        if not start <= stop <= data_bytes or stop - start != size:
            raise ValueError(f"{path}: tensor {name!r} of shape {entry['shape']} claims bytes {start}..{stop} "
                             f"of {data_bytes:,}")
        out[name] = (entry["dtype"], tuple(entry["shape"]))
    return out


def check_layer_count(cfg: ModelConfig, names, source: Path, marker: str) -> None:
    """The config's layer count against the layers the weights hold (`marker` precedes the index:
    `layers.` or `h.`), before a model of that many layers is built."""
    found = set()
    for name in names:
        head, sep, rest = name.partition(marker)
        if sep and (not head or head.endswith(".")):
            index = rest.split(".", 1)[0]
            if index.isdigit():
                found.add(int(index))
    if len(found) != cfg.n_layer or (found and max(found) != cfg.n_layer - 1):
        raise ValueError(f"{source}: weights do not match the config: the config says {cfg.n_layer:,} layers, "
                         f"the weights hold {len(found)}")


def check_shapes(model: nn.Module, shapes: dict[str, tuple[int, ...]], source: Path) -> None:
    """A model built on the meta device (no storage) against the weights' header shapes, by name."""
    own = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    missing = sorted(set(own) - set(shapes))
    unexpected = sorted(set(shapes) - set(own))
    if missing:
        raise ValueError(f"{source}: weights do not match the config: missing {', '.join(missing[:3])}"
                         + (f" and {len(missing) - 3} more" if len(missing) > 3 else ""))
    if unexpected:
        raise ValueError(f"{source}: weights do not match the config: unexpected {', '.join(unexpected[:3])}"
                         + (f" and {len(unexpected) - 3} more" if len(unexpected) > 3 else ""))
    for name, shape in shapes.items():
        if shape != own[name]:
            raise ValueError(f"{source}: weights do not match the config: {name} has shape {shape}, "
                             f"the config implies {own[name]}")


def available_ram() -> int | None:
    """Bytes a new allocation can have: what the kernel says is free (MemAvailable), and no more than this
    process's own limit leaves it (ulimit -v, kvviz.errors.process_memory_room); None where neither is known."""
    from kvviz.errors import process_memory_room

    room = process_memory_room()
    free = _free_ram()
    return room if free is None else free if room is None else min(free, room)


def _free_ram() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(need: int, what: str, available: int | None = None) -> None:
    """Raise InsufficientMemory (exit 1, one line) if `need` bytes exceed what the machine has free."""
    from kvviz.errors import InsufficientMemory
    from kvviz.format import fmt_bytes

    have = available_ram() if available is None else available
    if have is not None and need > have:
        raise InsufficientMemory(f"{what} needs {fmt_bytes(need)} of memory to load, {fmt_bytes(have)} is available")


def load_bytes_needed(model: nn.Module, file_bytes: int) -> int:
    """Peak host bytes of a load: the file's tensors read whole, their fp32 copies, the fp32 model."""
    numel = sum(t.numel() for t in model.state_dict().values())
    return file_bytes + 2 * 4 * numel


def plan_load(cfg: ModelConfig, shapes: dict[str, tuple[int, ...]], file_bytes: int, source: Path) -> None:
    """Everything that can be said about a load before a byte is allocated: the layer count, every
    tensor's shape (a model built on the meta device), the memory it will take."""
    check_layer_count(cfg, shapes, source, "h." if cfg.arch == "gpt2" else "layers.")
    with torch.device("meta"):
        model = build_decoder(cfg)
    check_shapes(model, shapes, source)
    check_memory(load_bytes_needed(model, file_bytes), f"{cfg.name} ({cfg.param_count() / 1e6:,.1f} M parameters)")
