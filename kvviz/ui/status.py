"""The status bar's permanent fields: device and dtype, model, parameter count, KV bytes per token (of
the run the panels show, else of the form's choice, from the model's config), the memory copy
bandwidth (the run's device, else this machine's probe: kvviz.bandwidth), and the device memory the
allocator reports during a run."""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QTimer
from PySide6.QtWidgets import QLabel, QStatusBar

from kvviz.config import ModelConfig
from kvviz.format import fmt_bytes, fmt_count_short, fmt_figure
from kvviz.trace import RunInfo
from kvviz.ui.history import RunHistory


def _tr(text: str) -> str:
    return QCoreApplication.translate("StatusFields", text)


class StatusFields:
    def __init__(self, bar: QStatusBar) -> None:
        self.device, self.model, self.params, self.kv, self.bandwidth, self.mem = (QLabel() for _ in range(6))
        for label in (self.device, self.model, self.params, self.kv, self.bandwidth, self.mem):
            bar.addPermanentWidget(label)
        self.mem.hide()
        self.machine_gbps: float | None = None  # this machine's CPU copy bandwidth, once probed
        self._run_gbps: tuple[float, float, str] | None = None  # (copy, peak, device) of the run shown
        # After the window shows: the figure is read from the per-machine cache file, or probed
        # (~0.1 s, once per machine).
        QTimer.singleShot(0, self._probe)

    def _probe(self) -> None:
        from kvviz.bandwidth import cpu_bandwidth

        try:
            self.machine_gbps = cpu_bandwidth().copy_gbps
        except (MemoryError, ValueError, OSError):
            self.machine_gbps = None
        self._show_bandwidth()

    def _show_bandwidth(self) -> None:
        if self._run_gbps is not None:
            copy, peak, device = self._run_gbps
            text = _tr("copy {0} GB/s ({1})").format(fmt_figure(copy), device)
            if peak > 0:
                text = _tr("copy {0} GB/s of {1} GB/s peak ({2})").format(fmt_figure(copy), fmt_figure(peak), device)
        elif self.machine_gbps is not None:
            text = _tr("copy {0} GB/s (cpu)").format(fmt_figure(self.machine_gbps))
        else:
            text = ""
        self.bandwidth.setText(text)
        self.bandwidth.setToolTip(_tr(
            "Memory copy bandwidth, bytes read plus bytes written per second (1 GB = 10^9 B): the ceiling a "
            "decode step runs against, since every step reads every weight and the K/V it attends over"))

    def show_run(self, info: RunInfo) -> None:
        self.device.setText(_tr("device {0}, {1}").format(info.device or "-", info.dtype or "-"))
        self.model.setText(_tr("model {0}").format(info.model_name))
        self.params.setText(_tr("{0} parameters").format(fmt_count_short(info.param_count)))
        self.kv.setText(_tr("KV {0} per token").format(fmt_bytes(info.kv_bytes_per_token)))
        gbps = info.bandwidth_gbps()
        peak = info.peak_gbps if 0 < info.peak_gbps < float("inf") else 0.0
        self._run_gbps = None if gbps is None else (gbps, peak, info.device or "-")
        self._show_bandwidth()

    def show_choice(self, model: str, device: str, dtype: str, cfg: ModelConfig | None) -> None:
        self.device.setText(_tr("device {0}, {1}").format(device or "-", dtype or "-"))
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
                return
        self.mem.hide()
