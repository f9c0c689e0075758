"""Model > Download model: fetch a hub checkpoint into the Hugging Face cache, with progress, Cancel and resume.

The work is kvviz.download's (no Qt there); it runs on a worker object (kvviz.ui.download_worker)
moved to a QThread, never on the GUI thread. The dialog knows nothing about engines: when a download
completes it says which id it fetched, and the window adds that id to the model box.
"""
from __future__ import annotations

import os

from PySide6.QtCore import QCoreApplication, QThread, Signal, Slot
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from kvviz.format import fmt_bytes
from kvviz.ui import download_worker
from kvviz.ui.download_worker import DownloadJob
from kvviz.ui.qtutil import translator

_tr = translator("DownloadDialog")


def clock(seconds: float | None) -> str:
    """`1:02:03`, `2:05`, or `--:--` while no time left can be told."""
    if seconds is None:
        return "--:--"
    h, rest = divmod(int(seconds + 0.5), 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class DownloadDialog(QDialog):
    """A model id, Download / Cancel, a progress bar with bytes, rate and time left, and one status line."""

    model_downloaded = Signal(str, str)  # (model id as typed, snapshot folder)

    def __init__(self, parent: QWidget | None = None, model_id: str = "") -> None:
        super().__init__(parent)
        self.setObjectName("download_dialog")
        self.setWindowTitle(self.tr("Download model"))
        self.setMinimumWidth(560)
        self.id_edit = QLineEdit(model_id)
        self.id_edit.setObjectName("download_id")
        self.id_edit.setPlaceholderText(self.tr("ORG/NAME or ORG/NAME@REVISION, e.g. Qwen/Qwen3-0.6B"))
        self.id_edit.textChanged.connect(self._update_buttons)
        self.id_edit.returnPressed.connect(self.start)
        endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
        self.where_label = QLabel(self.tr("From {0} (set HF_ENDPOINT for a mirror) into the Hugging Face cache. "
                                          "Only config.json, tokenizer.json and the safetensors weights are "
                                          "fetched.").format(endpoint))
        self.where_label.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setObjectName("download_bar")
        self.bar.setRange(0, 1000)
        self.bar.setValue(0)
        self.bar.setTextVisible(True)
        self.bar.setFormat("")
        self.status_label = QLabel(" ")
        self.status_label.setObjectName("download_status")
        self.status_label.setWordWrap(True)
        self.download_button = QPushButton(self.tr("Download"))
        self.download_button.setObjectName("download_start")
        self.download_button.clicked.connect(self.start)
        self.cancel_button = QPushButton(self.tr("Cancel"))
        self.cancel_button.setObjectName("download_cancel")
        self.cancel_button.clicked.connect(self.cancel)
        buttons = QDialogButtonBox()
        buttons.addButton(self.download_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.cancel_button, QDialogButtonBox.ButtonRole.ActionRole)
        close = buttons.addButton(QDialogButtonBox.StandardButton.Close)
        close.clicked.connect(self.close)
        form = QFormLayout()
        form.addRow(self.tr("Model id:"), self.id_edit)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.where_label)
        layout.addWidget(self.bar)
        layout.addWidget(self.status_label)
        layout.addWidget(buttons)
        self._thread: QThread | None = None
        self._job: DownloadJob | None = None
        self._update_buttons()

    def busy(self) -> bool:
        return self._thread is not None

    def reset(self) -> None:
        """As opened fresh: no status line and an empty bar (a download in flight keeps its own); the last id
        stays, selected, so typing replaces it and Return fetches it again."""
        if self.busy():
            return
        self.status_label.setText(" ")
        self.bar.setValue(0)
        self.bar.setFormat("")
        self.id_edit.selectAll()
        self.id_edit.setFocus()

    @Slot()
    def start(self) -> None:
        model_id = self.id_edit.text().strip()
        if self.busy() or not model_id:
            return
        self.status_label.setText(self.tr("Asking the server what {0} holds...").format(model_id))
        self.bar.setValue(0)
        self.bar.setFormat("")
        job = DownloadJob(model_id, report_every_s=download_worker.REPORT_EVERY_S)
        thread = QThread(self)
        job.moveToThread(thread)
        thread.started.connect(job.run)
        job.planned.connect(self.status_label.setText)
        job.progressed.connect(self._on_progressed)
        job.downloaded.connect(self._on_downloaded)
        job.failed.connect(self._on_failed)
        job.cancelled.connect(self._on_failed)
        thread.finished.connect(self._on_thread_finished)
        self._thread, self._job = thread, job
        self._update_buttons()
        thread.start()

    @Slot()
    def cancel(self) -> None:
        if self._job is not None:
            self._job.cancel.set()
            self.status_label.setText(self.tr("Cancelling..."))

    @Slot(object)
    def _on_progressed(self, p) -> None:
        share = p.done_bytes / p.total_bytes if p.total_bytes else 1.0
        self.bar.setValue(int(round(1000 * share)))
        self.bar.setFormat(self.tr("{done} of {total} ({share:.0f}%), {rate}/s, {left} left").format(
            done=fmt_bytes(p.done_bytes), total=fmt_bytes(p.total_bytes), share=100 * share,
            rate=fmt_bytes(p.rate_bytes_per_s), left=clock(p.eta_s)))
        self.status_label.setText(self.tr("File {index} of {n}: {file}").format(index=p.file_index, n=p.n_files,
                                                                               file=p.file))

    @Slot(str)
    def _on_downloaded(self, folder: str) -> None:
        self.bar.setValue(1000)
        model_id = self._job.model_id if self._job is not None else ""
        self.status_label.setText(self.tr("Done: {0} is in the model box.").format(model_id))
        self.model_downloaded.emit(model_id, folder)

    @Slot(str)
    def _on_failed(self, line: str) -> None:
        self.status_label.setText(line)

    @Slot()
    def _on_thread_finished(self) -> None:
        if self._thread is not None:
            self._thread.deleteLater()
        if self._job is not None:
            self._job.deleteLater()
        self._thread, self._job = None, None
        self._update_buttons()

    def _update_buttons(self) -> None:
        busy = self.busy()
        self.download_button.setEnabled(not busy and bool(self.id_edit.text().strip()))
        self.cancel_button.setEnabled(busy)
        self.id_edit.setReadOnly(busy)

    def wait(self, timeout_ms: int = 10_000) -> bool:
        """Cancel a download in flight and wait for its thread (the window's close, and tests)."""
        if self._job is not None:
            self._job.cancel.set()
        thread = self._thread
        return thread is None or thread.wait(timeout_ms)

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        self.wait()
        super().closeEvent(event)


def show_download_dialog(window) -> DownloadDialog:
    """Model > Download model: one dialog per window, kept between uses; a fetched id joins the model box."""
    dialog = getattr(window, "download_dialog", None)
    if dialog is None:
        dialog = window.download_dialog = DownloadDialog(window)
        dialog.model_downloaded.connect(lambda model_id, folder: window.form.add_downloaded(model_id, folder))
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(dialog.wait)  # a download in flight is cancelled before the thread is destroyed
    elif not dialog.isVisible():
        dialog.reset()  # the last use's error or "Done" line belongs to that use
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog
