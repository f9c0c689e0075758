"""The Serve window's File > Export and File > Open serve record: the view as PNG or SVG, the run as one
offline HTML page (kvviz.page.serve, as `kvviz export --from SERVE.json --html` writes it), the serve record
as JSON (the library's kvviz-serve file, what `kvviz serve --json` writes) and CSV (a row per scheduler
step), the steps as a GIF or MP4; a saved record replayed without any model.

The actions, the dialog and the images are the shell's (kvviz.ui.shell.exports); records are read and written
with kvviz.serving.record. No torch.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from PySide6.QtCore import QCoreApplication

from kvviz.serving import record
from kvviz.serving.history import ServeHistory
from kvviz.ui import exporters
from kvviz.ui.shell.exports import ExportKind, ShellExports

CSV_COLUMNS = ("scheduler", "step", "latency_ms", "slots", "prefill_slots", "decode_slots", "padding_slots",
               "idle_slots", "requests_in_batch", "admitted", "finished", "preempted", "prefix_hit_tokens",
               "blocks_used", "blocks_cached", "blocks_free", "weights_bytes", "kv_bytes")


def _tr(text: str) -> str:
    return QCoreApplication.translate("ServeExports", text)


def steps_csv(run: ServeHistory) -> str:
    """A row per scheduler step: what the batch held, who came and went, the pool, the bytes read."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for k in run.schedulers:
        for s in run.steps.get(k, []):
            pool = s.pool
            writer.writerow([k, s.step, f"{s.latency_ms:.4f}", s.slots, s.slots_of("prefill"), s.slots_of("decode"),
                             s.slots_of("padding"), s.slots_of("idle"), len({w.request for w in s.work}),
                             " ".join(map(str, s.admitted)), " ".join(map(str, s.finished)),
                             " ".join(str(p.request) for p in s.preemptions), sum(h.tokens for h in s.prefix_hits),
                             pool.used_blocks, pool.cached_blocks,
                             pool.n_blocks - pool.used_blocks - pool.cached_blocks,
                             s.weights_bytes, s.kv_bytes])
    return out.getvalue()


def check_steps(run: ServeHistory) -> None:
    if not run.n_steps():
        raise ValueError(_tr("nothing to export: run a workload or open a serve record first"))


def save_json(run: ServeHistory, path: str | Path) -> Path:
    check_steps(run)
    return record.save_runs(path, run.runs())


def save_csv(run: ServeHistory, path: str | Path) -> Path:
    check_steps(run)
    return exporters.write_bytes(path, steps_csv(run).encode("utf-8"))


def save_page(run: ServeHistory, path: str | Path, step: int | None = None) -> Path:
    """The run as the page `kvviz export --from SERVE.json --html` writes, opening at `step` (default: the last)
    in the interface's language."""
    from kvviz.page.serve import write_serve_page
    from kvviz.ui import i18n

    check_steps(run)
    return write_serve_page(path, run.runs(), step=step, lang=i18n.current_language())


def load(path: str | Path) -> ServeHistory:
    """A saved serve record as a history to replay (ValueError, one line, for anything else)."""
    return ServeHistory.from_runs(record.load_runs(path), run_id=f"replay:{Path(path).name}")


def texts() -> dict[str, str]:
    """File > Export's texts in the current language (ShellExports' texts)."""
    return {"png": _tr("View as PNG..."), "svg": _tr("View as SVG..."),
            "page": _tr("Run as a page (HTML)..."), "json": _tr("Serve record (JSON)..."),
            "csv": _tr("Steps (CSV)..."), "gif": _tr("Steps as GIF or MP4..."), "title": _tr("Export"),
            "saved": _tr("saved {0}")}


class ServeExports(ShellExports):
    """File > Export's actions for a Serve window (the shell's, with the run's page, the serve record, its steps
    and their animation), and File > Open serve record."""

    def __init__(self, window) -> None:
        super().__init__(window, {
            "png": ExportKind("PNG (*.png)", "kvviz-serve.png"),
            "svg": ExportKind("SVG (*.svg)", "kvviz-serve.svg"),
            "page": ExportKind("HTML (*.html)", "kvviz-serve.html",
                               lambda path: save_page(window.run, path, window.step), lambda: check_steps(window.run)),
            "json": ExportKind("JSON (*.json)", "kvviz-serve.json", lambda path: save_json(window.run, path)),
            "csv": ExportKind("CSV (*.csv)", "kvviz-serve-steps.csv", lambda path: save_csv(window.run, path)),
            "gif": ExportKind("GIF (*.gif);;MP4 (*.mp4)", "kvviz-serve.gif", self.steps_animation),
        }, texts, window.draw)

    def steps_animation(self, path: str | Path, fps: float = 4.0) -> Path:
        """Every step of the shown run where something can change, one frame each (a stretch of idle steps is
        one), as a GIF or an MP4 (by the suffix)."""
        window = self.window
        check_steps(window.run)
        kept = window.step
        return self.animation(path, (int(step) for step in window.run.event_steps()), window.select_step,
                              lambda: window.select_step(kept), fps)

    def open_record(self, path: str | Path) -> bool:
        try:
            run = load(path)
        except ValueError as exc:
            self.window.show_error(str(exc))
            return False
        self.window.clear_error()
        self.window.replay(run, str(path))
        return True
