"""A model and its tokenizer loaded for a run, as every command and engine session loads them: the steady
allocator, torch's threads, the device, the dtype. No Qt, no argparse: commands and sessions call it alike.
"""
from __future__ import annotations

import sys


def load_for_run(name: str, device: str = "auto", dtype: str = "auto", threads: int | None = None, *,
                 warn: bool = True):
    """(model, tokenizer, device) for the model `name` (a preset or a folder) on `device` ("auto", "cpu",
    "cuda", ...) at `dtype` ("auto": the model's own where the device runs it), torch at `threads` threads
    (None: as it is). A preset's warning goes to stderr (`warn`: for an engine process, whose stderr nobody
    reads, False); a bad name or device is a one-line ValueError."""
    import torch

    from kvviz.measure.timing import steady_allocator
    from kvviz.models.presets import load_model, load_tokenizer, preset_warning
    from kvviz.runtime.devices import resolve_device, resolve_dtype

    steady_allocator()  # the allocator regime of the app's engine process, too
    if threads is not None:  # bounds: kvviz.options, at parse time
        torch.set_num_threads(threads)
    resolved = resolve_device(device)
    warning = preset_warning(name) if warn else None
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    tokenizer = load_tokenizer(name)
    model = load_model(name, resolved, None)
    model = model.to(resolve_dtype(None if dtype == "auto" else dtype, resolved, model.cfg.dtype))
    return model, tokenizer, resolved
