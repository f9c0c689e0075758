"""The Serve window's File > Export and File > Open serve record: the view as PNG or SVG, the serve record
as JSON (the library's kvviz-serve file, what `kvviz serve --json` writes) and CSV (a row per scheduler
step), the steps as a GIF or MP4; a saved record replayed without any model.

Renders with kvviz.ui.exporters, reads and writes records with kvviz.serving.record. No torch.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from PySide6.QtCore import QCoreApplication
from PySide6.QtGui import QAction, QImage
from PySide6.QtWidgets import QApplication, QFileDialog, QMenu

from kvviz.serving import record
from kvviz.serving.history import ServeHistory
from kvviz.ui import exporters

FOLDER_KEY = "export/folder"  # the main window's exports keep their folder under the same key
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


def load(path: str | Path) -> ServeHistory:
    """A saved serve record as a history to replay (ValueError, one line, for anything else)."""
    return ServeHistory.from_runs(record.load_runs(path), run_id=f"replay:{Path(path).name}")


class ServeExports:
    """File > Export's actions for a Serve window and the functions behind them."""

    def __init__(self, window) -> None:
        self.window = window
        self.actions: dict[str, QAction] = {}
        for kind in ("png", "svg", "json", "csv", "gif"):
            act = QAction(window)
            act.triggered.connect(lambda _checked=False, k=kind: self.dialog(k))
            self.actions[kind] = act
        self.actions["png"].setShortcut("Ctrl+E")
        window.addAction(self.actions["png"])

    def fill_menu(self, menu: QMenu) -> None:
        for act in self.actions.values():
            menu.addAction(act)

    def retranslate(self) -> None:
        texts = {"png": _tr("View as PNG..."), "svg": _tr("View as SVG..."), "json": _tr("Serve record (JSON)..."),
                 "csv": _tr("Steps (CSV)..."), "gif": _tr("Steps as GIF or MP4...")}
        for kind, act in self.actions.items():
            act.setText(texts[kind])

    # -- the functions ----------------------------------------------------------------------------
    def image(self, scale: float = 1.0) -> QImage:
        """The window's panel area (transport, narration and panels) as drawn now."""
        self.window.draw()
        QApplication.processEvents()
        return exporters.render_widget(self.window.panel_area, scale)

    def export(self, kind: str, path: str | Path) -> Path:
        run = self.window.run
        if kind == "png":
            return exporters.save_png(self.image(), path)
        if kind == "svg":
            self.window.draw()
            return exporters.save_svg(self.window.panel_area, path)
        if kind == "json":
            return save_json(run, path)
        if kind == "csv":
            return save_csv(run, path)
        if kind == "gif":
            return self.animation(path)
        raise ValueError(f"unknown export {kind!r}")

    def animation(self, path: str | Path, fps: float = 4.0) -> Path:
        """Every step of the shown run where something can change, one frame each (a stretch of idle steps is
        one), as a GIF or an MP4 (by the suffix)."""
        run, window = self.window.run, self.window
        check_steps(run)
        kept = window.step

        def frames():
            for step in run.event_steps():
                window.select_step(int(step))
                yield exporters.image_array(self.image())

        try:
            exporters.write_animation(path, frames(), fps)
        finally:
            window.select_step(kept)
        return Path(path)

    def dialog(self, kind: str) -> None:
        filters = {"png": "PNG (*.png)", "svg": "SVG (*.svg)", "json": "JSON (*.json)", "csv": "CSV (*.csv)",
                   "gif": "GIF (*.gif);;MP4 (*.mp4)"}
        name = {"png": "kvviz-serve.png", "svg": "kvviz-serve.svg", "json": "kvviz-serve.json",
                "csv": "kvviz-serve-steps.csv", "gif": "kvviz-serve.gif"}[kind]
        path, _ = QFileDialog.getSaveFileName(self.window, _tr("Export"), str(Path(self.folder()) / name),
                                              filters[kind])
        if not path:
            return
        self.window.settings.setValue(FOLDER_KEY, str(Path(path).parent))
        try:
            saved = self.export(kind, path)
        except ValueError as exc:
            self.window.show_error(str(exc))
            return
        self.window.statusBar().showMessage(_tr("saved {0}").format(saved), 10_000)

    def folder(self) -> str:
        """Where the save and open dialogs start: the folder last saved to, the main window's too (its
        exports keep it under the same key), else the home folder; never the process's working folder."""
        return self.window.settings.value(FOLDER_KEY, str(Path.home()), type=str)

    def open_record(self, path: str | Path) -> bool:
        try:
            run = load(path)
        except ValueError as exc:
            self.window.show_error(str(exc))
            return False
        self.window.clear_error()
        self.window.replay(run, str(path))
        return True
