"""The download worker: plans and fetches one hub id on a QThread for Model > Download model.

The work is kvviz.download's (no torch, no Qt: config.json is read as JSON); the dialog that shows its
progress imports only this module. It knows nothing about the window.
"""
from __future__ import annotations

import errno
import threading

from PySide6.QtCore import QObject, Signal, Slot

from kvviz.errors import one_line
from kvviz.format import fmt_bytes
from kvviz.ui.qtutil import translator

REPORT_EVERY_S = 0.1  # how often progress is reported (huggingface_hub calls back per chunk)

_tr = translator("DownloadDialog")


class DownloadJob(QObject):
    """Plans and fetches one id on its own thread; `cancel` (a threading.Event) may be set from any thread."""

    progressed = Signal(object)  # DownloadProgress
    planned = Signal(str)  # what will be fetched, in words
    downloaded = Signal(str)  # the snapshot folder
    failed = Signal(str)  # one line
    cancelled = Signal(str)  # one line: what is kept for the next try

    def __init__(self, model_id: str, report_every_s: float = REPORT_EVERY_S) -> None:
        super().__init__()
        self.model_id = model_id
        self.report_every_s = report_every_s
        self.cancel = threading.Event()

    @Slot()
    def run(self) -> None:
        from kvviz.download import DownloadCancelled, download, needed_bytes, plan_download

        plan = None
        try:
            plan = plan_download(self.model_id)
            self.planned.emit(_tr("{id} from {endpoint}: {n} files, {total} ({fetch} to fetch)").format(
                id=str(plan.hub_id), endpoint=plan.endpoint, n=len(plan.files), total=fmt_bytes(plan.total_bytes),
                fetch=fmt_bytes(needed_bytes(plan))))
            folder = download(plan, progress=self.progressed.emit, cancel=self.cancel,
                              report_every_s=self.report_every_s)
        except DownloadCancelled:
            kept = plan.total_bytes - needed_bytes(plan) if plan is not None else 0
            total = plan.total_bytes if plan is not None else 0
            self.cancelled.emit(_tr("Cancelled: {kept} of {total} kept; Download resumes from there.").format(
                kept=fmt_bytes(kept), total=fmt_bytes(total)))
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                self.failed.emit(_tr("The disk filled up; free some space and press Download to resume."))
            else:
                self.failed.emit(one_line(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")))
        except Exception as exc:  # ValueError (one line by contract) or anything unforeseen: said, not raised
            self.failed.emit(one_line(str(exc) or type(exc).__name__))
        else:
            self.downloaded.emit(str(folder))
        finally:
            self.thread().quit()  # thread-safe: a GUI thread waiting on this thread (close) is not needed for it
