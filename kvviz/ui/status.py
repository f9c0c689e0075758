"""The status bar's permanent fields: device and dtype, the run's decode kernel, model, parameter count, KV bytes
per token (of the run the panels show, else of the form's choice), the memory read ceiling a decode step runs
against (kvviz.measure.bandwidth), the device memory the allocator reports during a run, and the window's own cost: the
CPU its process used while the last run stepped (the engine runs in a process of its own)."""
from __future__ import annotations

import os
import time

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QLabel, QStatusBar, QStyle

from kvviz.config import ModelConfig
from kvviz.format import fmt_bytes, fmt_count_short, fmt_figure
from kvviz.kernels import compared_kernels
from kvviz.records.trace import RunInfo
from kvviz.ui.history import RunHistory
from kvviz.ui.narration import kernel_label, kernels_ran, kernels_text
from kvviz.ui.qtutil import translator

NO_WIDTH_LIMIT = (1 << 24) - 1  # Qt's QWIDGETSIZE_MAX, which PySide6 does not export

_tr = translator("StatusFields")


class WindowCost:
    """This process's CPU time over the wall time in which a run was stepping (paused time left out)."""

    def __init__(self) -> None:
        self.cpu_s = self.wall_s = 0.0
        self._since: tuple[float, float] | None = None  # (cpu, wall) when the run last started stepping

    def reset(self) -> None:
        self.cpu_s = self.wall_s = 0.0
        self._since = None

    def resume(self) -> None:
        if self._since is None:
            self._since = (time.process_time(), time.perf_counter())

    def pause(self) -> None:
        if self._since is not None:
            cpu, wall = self._since
            self.cpu_s += time.process_time() - cpu
            self.wall_s += time.perf_counter() - wall
            self._since = None

    def cores(self) -> float | None:
        """Cores' worth of CPU the window used while the run stepped (None before half a second of it)."""
        return self.cpu_s / self.wall_s if self.wall_s >= 0.5 else None


class StatusFields:
    def __init__(self, bar: QStatusBar) -> None:
        self.device, self.kernel, self.model, self.params, self.kv, self.bandwidth, self.mem, self.cost = (
            QLabel() for _ in range(8))
        self.kernel.setObjectName("kernel")
        for label in self._fields():
            bar.addPermanentWidget(label)
        self.kernel.hide()
        self.mem.hide()
        self.cost.hide()
        self._bar = bar
        self._squeezed: list[QLabel] = []  # the fields narrowed to nothing while a message needs their room
        bar.messageChanged.connect(self._fit_message)
        self.machine_gbps: float | None = None  # this machine's CPU read ceiling (else copy bandwidth), once read
        self._machine_kind, self._machine_threads = "copy", 0  # what machine_gbps is
        self._run_gbps: tuple[float, float, str] | None = None  # (ceiling, peak, device) of the run shown
        self._run_kind, self._run_threads = "copy", 0
        # After the window shows: the figure is read from the per-machine cache file, or probed
        # (~0.1 s, once per machine).
        QTimer.singleShot(0, self._probe)

    def _fit_message(self, message: str | None = None) -> None:
        """A message (a run finished, a file saved, a note) is shown left of the fields, in what room they leave:
        at 1280x720 and 150% they left it none ("finished: 150 ste" ran into "device cpu"). While one shows, the
        fields it needs the room of step aside, the least needed first (the window's cost, the parameter count,
        KV per token, the model, the device; never the kernel, the read ceiling or the device memory), and come back
        when it goes. They are narrowed, not hidden, so that show()/hide() elsewhere keep meaning what they say.
        Called when the message changes and when a field does (the window shows its cost after "finished")."""
        if message is None:
            message = self._bar.currentMessage()
        for label in self._squeezed:
            label.setMaximumWidth(NO_WIDTH_LIMIT)
        self._squeezed = []
        if not message:
            return
        spacing = self._bar.style().pixelMetric(QStyle.PixelMetric.PM_LayoutHorizontalSpacing) + 6
        need = self._bar.fontMetrics().horizontalAdvance(message) + 4 * spacing

        def room() -> int:
            shown = [w for w in self._fields() if w.isVisible() and w not in self._squeezed]
            return self._bar.width() - sum(w.sizeHint().width() + spacing for w in shown)

        for label in (self.cost, self.params, self.kv, self.model, self.device):
            if room() >= need:
                break
            if label.isVisible():
                label.setMaximumWidth(0)
                self._squeezed.append(label)

    def _fields(self) -> tuple[QLabel, ...]:
        return self.device, self.kernel, self.model, self.params, self.kv, self.bandwidth, self.mem, self.cost

    def _probe(self) -> None:
        from kvviz.measure.bandwidth import cached_read_ceiling, cpu_bandwidth

        read = cached_read_ceiling()  # measured by the engine process (torch); the window only reads the file
        if read is not None:
            self.machine_gbps, self._machine_kind, self._machine_threads = read.read_gbps, "read", read.threads
        else:
            try:
                self.machine_gbps, self._machine_kind = cpu_bandwidth().copy_gbps, "copy"
            except (MemoryError, ValueError, OSError):
                self.machine_gbps = None
        self._show_bandwidth()

    @staticmethod
    def _ceiling_text(kind: str, gbps: float, device: str, threads: int) -> str:
        if kind == "read" and threads:
            text = _tr("read {0} GB/s ({1}, 1 thread)") if threads == 1 else _tr("read {0} GB/s ({1}, {2} threads)")
            return text.format(fmt_figure(gbps), device, threads)
        if kind == "read":
            return _tr("read {0} GB/s ({1})").format(fmt_figure(gbps), device)
        return _tr("copy {0} GB/s ({1})").format(fmt_figure(gbps), device)

    def _show_bandwidth(self) -> None:
        if self._run_gbps is not None:
            gbps, peak, device = self._run_gbps
            cuda = device.startswith("cuda")
            text = self._ceiling_text(self._run_kind, gbps, device, 0 if cuda else self._run_threads)
            if peak > 0 and self._run_kind == "copy":
                text = _tr("copy {0} GB/s of {1} GB/s peak ({2})").format(fmt_figure(gbps), fmt_figure(peak), device)
            elif peak > 0:
                text = _tr("read {0} GB/s of {1} GB/s peak ({2})").format(fmt_figure(gbps), fmt_figure(peak), device)
        elif self.machine_gbps is not None:
            text = self._ceiling_text(self._machine_kind, self.machine_gbps, "cpu", self._machine_threads)
        else:
            text = ""
        self.bandwidth.setText(text)
        self._fit_message()
        self.bandwidth.setToolTip(_tr(
            "Read: the memory read ceiling a decode step runs against, since every step reads every weight and "
            "the K/V it attends over and writes next to nothing: a float32 matrix-vector product over a matrix "
            "larger than the last-level cache, at the run's threads (1 GB = 10^9 B). Copy (a trace saved before "
            "the read ceiling was measured): bytes read plus bytes written per second of a memory copy, not a "
            "bound on a decode step"))

    def show_run(self, info: RunInfo) -> None:
        self.device.setText(_tr("device {0}, {1}").format(info.device or "-", info.dtype or "-"))
        self.model.setText(_tr("model {0}").format(info.model_name))
        self.params.setText(_tr("{0} parameters").format(fmt_count_short(info.param_count)))
        self.kv.setText(_tr("KV {0} per token").format(fmt_bytes(info.kv_bytes_per_token)))
        gbps = info.bandwidth_gbps()  # the read ceiling, or an older trace's copy figure (ceiling_kind)
        peak = info.peak_gbps if 0 < info.peak_gbps < float("inf") else 0.0
        self._run_gbps = None if gbps is None else (gbps, peak, info.device or "-")
        self._run_kind, self._run_threads = info.ceiling_kind() or "copy", info.read_threads
        self._show_kernel(info)
        self._show_bandwidth()

    def _show_kernel(self, info: RunInfo | None) -> None:
        """The run's decode kernel ("kernel PyTorch"); a kernel comparison's kernels ("kernels PyTorch vs C step", its
        lanes named in the tip: "static · C step"); an older trace whose engines ran different kernels says which ran
        where; hidden where the trace does not say, and while the form's choice is described."""
        groups = kernels_ran(info) if info is not None else []
        self.kernel.setVisible(bool(groups))
        if not groups:
            return
        compared = compared_kernels(info.engines)
        if compared:
            from kvviz.ui.style import engine_label  # pyqtgraph: loaded with the panels that drew the run

            self.kernel.setText(_tr("kernels {0}").format(_tr(" vs ").join(kernel_label(k) for k in compared)))
            self.kernel.setToolTip(_tr("A kernel comparison: every engine ran its decode steps under each kernel, "
                                       "side by side as lanes ({0})").format(
                _tr(", ").join(engine_label(e) for e in info.engines)))
        elif len(groups) == 1:
            self.kernel.setText(_tr("kernel {0}").format(kernels_text(groups)))
            self.kernel.setToolTip(_tr("The decode kernel: what ran every engine's decode steps, one for the "
                                       "whole run, so that the engines' times differ by their cache alone"))
        else:
            self.kernel.setText(_tr("kernels {0}").format(kernels_text(groups)))
            self.kernel.setToolTip(_tr("A trace saved when a run could mix kernels: its engines' decode steps "
                                       "ran on different kernels, so their times differ by kernel as well as by "
                                       "cache"))

    def show_choice(self, model: str, device: str, dtype: str, cfg: ModelConfig | None) -> None:
        self.device.setText(_tr("device {0}, {1}").format(device or "-", dtype or "-"))
        self._show_kernel(None)
        self.model.setText(_tr("model {0}").format(model or "-"))
        if cfg is None:
            self.params.setText(_tr("parameters: read when loaded") if model else "")
            self.kv.setText("")
            self._run_gbps = None
            self._show_bandwidth()
            return
        self.params.setText(_tr("{0} parameters").format(fmt_count_short(cfg.param_count())))
        self.kv.setText(_tr("KV {0} per token").format(fmt_bytes(cfg.kv_bytes_per_token(dtype))))
        self._run_gbps = None
        self._show_bandwidth()

    def show_memory(self, history: RunHistory) -> None:
        """The allocator's figure of the newest step that has one (a CUDA run); hidden otherwise."""
        for key in history.engines:
            steps = history.traces[key]
            if steps and steps[-1].device_mem_bytes is not None:
                self.mem.setText(_tr("device memory {0}").format(fmt_bytes(steps[-1].device_mem_bytes)))
                self.mem.show()
                self._fit_message()
                return
        self.mem.hide()

    def show_cost(self, cost: WindowCost) -> None:
        """After a run: what drawing it cost, beside the engine's step times (hidden when too short to say)."""
        cores = cost.cores()
        if cores is None:
            self.cost.hide()
            return
        n = os.cpu_count() or 1
        self.cost.setText(_tr("window {0} core").format(f"{cores:.2f}"))
        self.cost.setToolTip(_tr(
            "While the last run stepped ({0} s), this window used {1} s of CPU drawing it: {2} of a core, of the "
            "{3} this machine has. The engine runs in a process of its own; where the two share too few cores, "
            "its step times read higher than `kvviz bench` measures with no window open.").format(
                f"{cost.wall_s:.1f}", f"{cost.cpu_s:.1f}", f"{cores:.2f}", n))
        self.cost.show()
        self._fit_message()
