"""Pick the device and dtype: `auto` means CUDA, then MPS, then CPU. Synchronise before a clock read."""
from __future__ import annotations

import torch

from kvviz.config import canonical_dtype

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(name: str | None = "auto") -> torch.device:
    name = (name or "auto").strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise ValueError(f"unknown device {name!r}; choose auto, cpu, cuda, cuda:N or mps") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} is not available: this torch sees no CUDA GPU")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r} is not available: {torch.cuda.device_count()} CUDA device(s)")
    elif dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(f"device {name!r} is not available on this machine")
    elif dev.type != "cpu":
        raise ValueError(f"unsupported device {name!r}; choose auto, cpu, cuda or mps")
    return dev


def resolve_dtype(name: str | None, device: torch.device, model_default: str = "float32") -> torch.dtype:
    """An explicit name wins; else bf16 on CUDA, else the model's own dtype."""
    if name and name != "auto":
        return TORCH_DTYPES[canonical_dtype(name)]
    if device.type == "cuda":
        return torch.bfloat16
    return TORCH_DTYPES[canonical_dtype(model_default)]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def allocated_bytes(device: torch.device) -> int | None:
    """Bytes the framework's allocator holds on the device, where it reports them (every step asks)."""
    kind = device.type
    if kind == "cpu":
        return None
    if kind == "cuda":
        return int(torch.cuda.memory_allocated(device))
    if kind == "mps":
        return int(torch.mps.current_allocated_memory())
    return None
