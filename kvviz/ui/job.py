"""An offscreen run's job: what `kvviz export` (or a lesson scene) asks of the window, and the form filled from it.

Imports nothing of the app or the window, so the lesson capture and the headless exporter can both use it."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kvviz.kernels import DEFAULT_KERNEL

DATA_FILES = {"json": ("json", "trace.json"), "csv": ("steps_csv", "steps.csv"),
              "summary_csv": ("summary_csv", "summary.csv"), "md": ("summary_md", "summary.md")}


@dataclass
class ExportJob:
    """What `kvviz export` was asked for, already checked for shape (not against the model)."""

    out: Path
    prompt: str
    tokens: int
    engines: tuple[str, ...]
    model: str | None  # None: the app's default model
    panels: tuple[str, ...]  # "window" (export_actions.WINDOW) and panel keys
    images: tuple[str, ...] = ()  # "png", "svg"
    animations: tuple[str, ...] = ()  # "gif", "mp4"
    data: tuple[str, ...] = ()  # keys of DATA_FILES
    device: str = "auto"
    dtype: str = "auto"
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0
    threads: int | None = None
    block_size: int = 16
    window: int = 32  # W, S, R of the approximate caches (kvviz.options defaults)
    sinks: int = 4
    residual: int | None = None
    spec_k: int = 4  # the speculative engines' drafts per round and rollback rule (kvviz.options defaults)
    rollback: str = "overwrite"
    kernel: str = DEFAULT_KERNEL  # what runs every engine's decode steps, one for the run
    lang: str = "en"
    size: tuple[int, int] = (1600, 1000)
    scale: float = 1.0
    fps: float = 4.0
    step: int | None = None  # for images; None = the last step
    first: int | None = None  # animation range; None = all steps
    last: int | None = None
    written: list[tuple[Path, str]] = field(default_factory=list)  # (path, note) as written


def fill_form(window, job: ExportJob) -> None:
    """Set the window's form from the job; ValueError (a usage error) for what the form refuses."""
    unknown = [e for e in job.engines if e not in window.form.engine_checks]
    if unknown:
        raise ValueError(f"unknown engine {unknown[0]!r}; choose from {', '.join(window.form.engine_checks)}")
    window.form.prompt_edit.setPlainText(job.prompt)
    window.form.set_model(job.model or window.env.default_model)
    form = window.form
    for combo, value, what in ((form.device_combo, job.device, "device"), (form.dtype_combo, job.dtype, "dtype"),
                               (form.kernel_combo, job.kernel, "kernel")):
        index = combo.findData(value)
        if index < 0:
            choices = ", ".join(combo.itemData(i) for i in range(combo.count()))
            raise ValueError(f"{what} {value!r} is not available here; choose from {choices}")
        combo.setCurrentIndex(index)
    window.form.set_engines(job.engines)
    for option, spin, value in (("--tokens", window.form.tokens_spin, job.tokens),
                                ("--block-size", window.form.block_spin, job.block_size),
                                ("--window", window.form.window_spin, job.window),
                                ("--sinks", window.form.sinks_spin, job.sinks),
                                ("--residual", window.form.residual_spin, job.residual or 0),
                                ("--spec-k", window.form.spec_k_spin, job.spec_k)):
        spin.setValue(value)
        if spin.value() != value:  # a spin box clamps silently: say so instead
            raise ValueError(f"{option} {value} is outside {spin.minimum()}..{spin.maximum()}")
    window.form.rollback_combo.setCurrentIndex(window.form.rollback_combo.findData(job.rollback))
    greedy = job.temperature <= 0
    window.form.greedy_check.setChecked(greedy)
    if not greedy:
        window.form.temperature_spin.setValue(job.temperature)
        window.form.top_k_spin.setValue(job.top_k or 0)
        window.form.top_p_spin.setValue(1.0 if job.top_p is None else job.top_p)
    window.form.seed_spin.setValue(job.seed)
    window.torch_threads = job.threads
    reason = window.validation_text()
    if reason:
        raise ValueError(reason)
