"""The decode kernels: the run's second axis beside the cache, chosen once per run for every engine.

A kernel is the code that runs each decode step: PyTorch's ops (what the course writes, the default), kvviz's
C step (kvviz.native), numpy's OpenBLAS for every projection (kvviz.kernels.openblas), the static step
compiled by torch.compile or replayed from a CUDA graph (kvviz.engines.graph). This module knows their names,
labels, which engines each can run and why one does not apply on a device; it imports no torch, so the
window's form and the commands ask it before any model loads.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvviz.native import compiler


@dataclass(frozen=True)
class Kernel:
    key: str
    label: str  # a row's and a series' second name: "static · C step"
    help: str
    engines: tuple[str, ...] | None  # the engines it runs; None: every engine
    devices: tuple[str, ...] | None  # the device types it runs on; None: every device
    # Its lanes' shade of their engine's colour in a kernel comparison: toward white (> 0) or black (< 0) by
    # that share; PyTorch's ops, the course's, keep the engine's own colour.
    shade: float = 0.0


KERNELS: dict[str, Kernel] = {k.key: k for k in (
    Kernel("torch", "PyTorch", "PyTorch's ops, one call per operation: what the course's code runs", None, None),
    Kernel("native", "C step", "kvviz's C step: a whole decode step in one C call, each matrix read once "
           "(CPU, float32, Llama-family models)", ("concat", "static", "paged"), ("cpu",), 0.5),
    Kernel("openblas", "OpenBLAS", "every projection through numpy's OpenBLAS, the rest PyTorch's ops "
           "(CPU, float32, Llama-family models)", None, ("cpu",), -0.4),
    Kernel("compiled", "torch.compile", "the static cache's fixed-shape decode step compiled by torch.compile "
           "(the compile happens before the first step)", ("static",), None, 0.3),
    Kernel("cuda-graph", "CUDA graph", "the static cache's fixed-shape decode step captured once as a CUDA "
           "graph and replayed", ("static",), ("cuda",), -0.3),
)}
_DEVICE_NAMES = {"cpu": "a CPU", "cuda": "CUDA", "mps": "Apple's MPS"}
KERNEL_KEYS: tuple[str, ...] = tuple(KERNELS)
DEFAULT_KERNEL = "torch"


# A lane is one engine under one decode kernel, in a kernel comparison: "static@native". A run of one kernel
# names its engines alone ("static"), the kernel said once for the run (RunInfo.decode_kernels). Lanes key the
# records, histories and files as engine names do, so everything keyed by engine holds a kernel comparison too;
# kvviz.catalog's questions about an engine (exact, settings, colour) take a lane as its engine.
LANE_MARK = "@"


def lane(engine: str, kernel: str) -> str:
    return f"{engine}{LANE_MARK}{kernel}"


def lane_engine(name: str) -> str:
    """"static@native" -> "static"; an engine's name is its own."""
    return name.partition(LANE_MARK)[0]


def lane_kernel(name: str) -> str | None:
    """"static@native" -> "native"; None for an engine's name (the run's one kernel decoded it)."""
    _engine, mark, kernel = name.partition(LANE_MARK)
    return kernel if mark else None


def check_kernel(kernel: str) -> str:
    """`kernel` if kvviz has it; else a one-line ValueError naming the choices."""
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; choose from {', '.join(KERNEL_KEYS)}")
    return kernel


def parse_kernels(text: str | list[str]) -> tuple[str, ...]:
    """`"torch,native"` -> ("torch", "native"), refusing unknown or repeated names in one line."""
    from kvviz.names import parse_names

    return parse_names(text, KERNEL_KEYS, "kernel", "kernels")


def covers(kernel: str, engine: str) -> bool:
    """Whether `kernel` can run `engine`'s decode steps (on some device)."""
    engines = KERNELS[check_kernel(kernel)].engines
    return engines is None or engine in engines


def kernels_for(engine: str) -> tuple[str, ...]:
    return tuple(k for k in KERNEL_KEYS if covers(k, engine))


def engines_refusal(kernel: str, engines, _tr: Callable[[str], str] = str,
                    tr_kernels: Callable[[str], str] = str) -> str:
    """Why `kernel` cannot run the first of `engines` it cannot, naming the kernels that engine can use ("" when
    it runs them all): a run never mixes kernels, so one engine that cannot follow refuses the run. A lane of a
    kernel comparison ("static@native", lane) is checked under its own kernel. `_tr` translates the sentence
    (the window passes Qt's, context "kernels"), `tr_kernels` a kernel's label; str keeps English."""
    for name in engines:
        engine, kernel_ = lane_engine(name), check_kernel(lane_kernel(name) or kernel)
        if not covers(kernel_, engine):
            return _tr("{engine} cannot decode with the {label} kernel (--kernel {kernel}); {engine} decodes with "
                       "{kernels}").format(engine=engine, label=tr_kernels(KERNELS[kernel_].label), kernel=kernel_,
                                           kernels=", ".join(kernels_for(engine)))
    return ""


def check_engines(kernel: str, engines) -> None:
    """One-line ValueError (engines_refusal's, in English) for the first of `engines` that `kernel` cannot run."""
    why = engines_refusal(kernel, engines)
    if why:
        raise ValueError(why)


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


def check_static_step(cfg) -> None:
    """ValueError (one line) for a model the static-shape step (compiled, cuda-graph) does not cover."""
    if cfg.arch == "gpt2":
        raise ValueError("the CUDA-graph static step covers Llama-family models only, not gpt2")


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
        check_static_step(model.cfg)


def label(kernel: str) -> str:
    return KERNELS[check_kernel(kernel)].label


def row_name(engine: str, kernel: str, kernel_label=label) -> str:
    """A row's name in a kernel comparison: "static · C step" (`kernel_label`: a kernel's label in the reader's
    language)."""
    return f"{engine} · {kernel_label(kernel)}"


def lanes(engines, kernels) -> tuple[str, ...]:
    """What a run of `engines` under `kernels` records: the engines alone under one kernel; each engine under each
    kernel, side by side, in a kernel comparison (the lanes "static@torch", "static@native"). One-line
    ValueError for a kernel named twice or one that cannot run an engine."""
    kernels = tuple(check_kernel(k) for k in kernels)
    if not kernels:
        raise ValueError("no kernel given")
    for engine in engines:
        if lane_kernel(engine) is not None:
            raise ValueError(f"{engine!r} names a kernel already; give the engines alone and the kernels apart")
    if len(set(kernels)) != len(kernels):
        raise ValueError(f"a kernel is named twice in {','.join(kernels)}")
    for kernel in kernels:
        check_engines(kernel, engines)
    if len(kernels) == 1:
        return tuple(engines)
    return tuple(lane(e, k) for e in engines for k in kernels)


def lane_label(name: str, kernel_label=label) -> str:
    """A lane's name as rows and legends show it ("static · C step"); an engine's name as it is. `kernel_label`:
    a kernel's label in the reader's language."""
    kernel = lane_kernel(name)
    return name if kernel not in KERNELS else row_name(lane_engine(name), kernel, kernel_label)


def shade(color: str, kernel: str) -> str:
    """`color` ("#rrggbb") in `kernel`'s shade: its lanes' colour, one family with the engine's."""
    amount = KERNELS[kernel].shade if kernel in KERNELS else 0.0
    rgb = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    toward = 255 if amount > 0 else 0
    return "#" + "".join(f"{round(c + (toward - c) * abs(amount)):02x}" for c in rgb)


def compared_kernels(engines) -> list[str]:
    """A kernel comparison's kernels, in the order its lanes name them ([] for a run of one kernel)."""
    return list(dict.fromkeys(k for k in map(lane_kernel, engines) if k is not None))


def baselines(engines) -> dict[str, str]:
    """What each engine's speedup is against: naive in a run of one kernel; in a kernel comparison, the same
    engine under the first kernel (its first lane), so the figure is the kernel's alone."""
    if compared_kernels(engines):
        first: dict[str, str] = {}
        for lane in engines:
            first.setdefault(lane_engine(lane), lane)
        return {lane: first[lane_engine(lane)] for lane in engines}
    return {e: "naive" for e in engines} if "naive" in engines else {}
