"""The status bar's permanent fields: device and dtype, model, parameter count, KV bytes per token (of
the run the panels show, else of the form's choice, from the model's config), and the device memory
the allocator reports during a run."""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QLabel, QStatusBar

from kvviz.config import ModelConfig
from kvviz.format import fmt_bytes, fmt_count_short
from kvviz.ui.history import RunHistory, RunInfo


def _tr(text: str) -> str:
    return QCoreApplication.translate("StatusFields", text)


class StatusFields:
    def __init__(self, bar: QStatusBar) -> None:
        self.device, self.model, self.params, self.kv, self.mem = (QLabel() for _ in range(5))
        for label in (self.device, self.model, self.params, self.kv, self.mem):
            bar.addPermanentWidget(label)
        self.mem.hide()

    def show_run(self, info: RunInfo) -> None:
        self.device.setText(_tr("device {0}, {1}").format(info.device or "-", info.dtype or "-"))
        self.model.setText(_tr("model {0}").format(info.model_name))
        self.params.setText(_tr("{0} parameters").format(fmt_count_short(info.param_count)))
        self.kv.setText(_tr("KV {0} per token").format(fmt_bytes(info.kv_bytes_per_token)))

    def show_choice(self, model: str, device: str, dtype: str, cfg: ModelConfig | None) -> None:
        self.device.setText(_tr("device {0}, {1}").format(device or "-", dtype or "-"))
        self.model.setText(_tr("model {0}").format(model or "-"))
        if cfg is None:
            self.params.setText(_tr("parameters: read when loaded") if model else "")
            self.kv.setText("")
            return
        self.params.setText(_tr("{0} parameters").format(fmt_count_short(cfg.param_count())))
        self.kv.setText(_tr("KV {0} per token").format(fmt_bytes(cfg.kv_bytes_per_token(dtype))))

    def show_memory(self, history: RunHistory) -> None:
        """The allocator's figure of the newest step that has one (a CUDA run); hidden otherwise."""
        for key in history.engines:
            steps = history.traces[key]
            if steps and steps[-1].device_mem_bytes is not None:
                self.mem.setText(_tr("device memory {0}").format(fmt_bytes(steps[-1].device_mem_bytes)))
                self.mem.show()
                return
        self.mem.hide()
