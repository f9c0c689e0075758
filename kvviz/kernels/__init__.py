"""The decode kernels: the run's second axis beside the cache, chosen once per run for every engine.

A kernel is the code that runs each decode step: PyTorch's ops (what the course writes, the default), kvviz's
C step (kvviz.native), numpy's OpenBLAS for every projection (kvviz.kernels.openblas), the static step
compiled by torch.compile or replayed from a CUDA graph (kvviz.engines.graph). This module knows their names,
labels, which engines each can run and why one does not apply on a device; it imports no torch, so the
window's form and the commands ask it before any model loads.
"""
from __future__ import annotations

from dataclasses import dataclass

from kvviz.native import compiler


@dataclass(frozen=True)
class Kernel:
    key: str
    label: str  # a row's and a series' second name: "static · C step"
    help: str
    engines: tuple[str, ...] | None  # the engines it runs; None: every engine
    devices: tuple[str, ...] | None  # the device types it runs on; None: every device


KERNELS: dict[str, Kernel] = {k.key: k for k in (
    Kernel("torch", "PyTorch", "PyTorch's ops, one call per operation: what the course's code runs", None, None),
    Kernel("native", "C step", "kvviz's C step: a whole decode step in one C call, each matrix read once "
           "(CPU, float32, Llama-family models)", ("concat", "static", "paged"), ("cpu",)),
    Kernel("openblas", "OpenBLAS", "every projection through numpy's OpenBLAS, the rest PyTorch's ops "
           "(CPU, float32, Llama-family models)", None, ("cpu",)),
    Kernel("compiled", "torch.compile", "the static cache's fixed-shape decode step compiled by torch.compile "
           "(the compile happens before the first step)", ("static",), None),
    Kernel("cuda-graph", "CUDA graph", "the static cache's fixed-shape decode step captured once as a CUDA "
           "graph and replayed", ("static",), ("cuda",)),
)}
_DEVICE_NAMES = {"cpu": "a CPU", "cuda": "CUDA", "mps": "Apple's MPS"}
KERNEL_KEYS: tuple[str, ...] = tuple(KERNELS)
DEFAULT_KERNEL = "torch"


def check_kernel(kernel: str) -> str:
    """`kernel` if kvviz has it; else a one-line ValueError naming the choices."""
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; choose from {', '.join(KERNEL_KEYS)}")
    return kernel


def parse_kernels(text: str | list[str]) -> tuple[str, ...]:
    """`"torch,native"` -> ("torch", "native"), refusing unknown or repeated names in one line."""
    from kvviz.options import parse_names

    return parse_names(text, KERNEL_KEYS, "kernel", "kernels")


def covers(kernel: str, engine: str) -> bool:
    """Whether `kernel` can run `engine`'s decode steps (on some device)."""
    engines = KERNELS[check_kernel(kernel)].engines
    return engines is None or engine in engines


def kernels_for(engine: str) -> tuple[str, ...]:
    return tuple(k for k in KERNEL_KEYS if covers(k, engine))


def check_engines(kernel: str, engines) -> None:
    """One-line ValueError for the first of `engines` that `kernel` cannot run, naming the kernels it can use:
    a run never mixes kernels, so one engine that cannot follow refuses the run."""
    for engine in engines:
        if not covers(kernel, engine):
            raise ValueError(f"{engine} cannot decode with the {KERNELS[kernel].label} kernel (--kernel {kernel}); "
                             f"{engine} decodes with {', '.join(kernels_for(engine))}")


def unavailable(kernel: str, device_type: str) -> str | None:
    """Why `kernel` does not run on a device of this type here (one line), or None where it may. What needs a
    model (its dtype and family) is checked when the run starts (check_model)."""
    spec = KERNELS[check_kernel(kernel)]
    if spec.devices is not None and device_type not in spec.devices:
        where = " or ".join(_DEVICE_NAMES.get(d, d) for d in spec.devices)
        return f"the {spec.label} kernel runs on {where} only, not on {_DEVICE_NAMES.get(device_type, device_type)}"
    if kernel == "native" and not compiler():
        return "the C step needs a C compiler (cc or $CC), and none was found"
    if kernel == "openblas":
        try:
            from kvviz.kernels.openblas import openblas

            openblas()
        except ValueError as exc:
            return str(exc)
    return None


def check_cpu_llama(model, kernel: str) -> None:
    """ValueError (one line) unless `model` is a float32 Llama-family model on a CPU, what the CPU kernels
    (openblas, native) cover: GPT-2's forward takes no kernel."""
    import torch

    param = next(model.parameters())
    if param.device.type != "cpu" or param.dtype != torch.float32:
        raise ValueError(f"--kernel {kernel} is for float32 on a CPU, not {str(param.dtype).replace('torch.', '')} "
                         f"on {param.device.type}")
    if model.cfg.arch == "gpt2":
        raise ValueError(f"--kernel {kernel} covers Llama-family models only, not gpt2")


def check_model(kernel: str, model) -> None:
    """One-line ValueError where `model` on its device cannot decode with `kernel` (before any run)."""
    param = next(model.parameters())
    why = unavailable(kernel, param.device.type)
    if why:
        raise ValueError(why)
    if kernel == "native":
        from kvviz import native

        native.check_supported(model)
    elif kernel == "openblas":
        from kvviz.kernels.openblas import check_supported

        check_supported(model)
    elif kernel in ("compiled", "cuda-graph"):
        from kvviz.engines.graph import check_supported

        check_supported(model.cfg)


def label(kernel: str) -> str:
    return KERNELS[check_kernel(kernel)].label


def row_name(engine: str, kernel: str) -> str:
    """A row's name in a kernel comparison: "static · C step"."""
    return f"{engine} · {label(kernel)}"
