"""The serve form (the Serve window's Inputs dock): the workload as an editable table (prompt, new tokens,
arrival step), the presets that fill it, the schedulers to compare, and the pool's and batch's sizes;
the first reason it cannot run and the ServeSpec it describes.

It knows no panels and no worker: the window asks it for a ServeSpec. The presets come from the
library's workload module (kvviz.serving.workload: plain Python, no torch).
"""
from __future__ import annotations

import html
import json

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from kvviz import errors
from kvviz.options import MAX_MODEL_CHARS
from kvviz.serving.spec import PRESETS, SCHEDULERS, ServeSpec, WorkRequest, preset_requests, vllm_refusal
from kvviz.serving.workload import request_from_dict
from kvviz.ui.qtutil import blocked, translator
from kvviz.ui.settings_file import SettingsReader

DEFAULT_CHECKED = ("static", "continuous", "paged", "prefix")
MAX_REQUESTS = 256

_tr = translator("ServeForm")


def scheduler_help(key: str) -> str:
    """One line per scheduler, in the window's language."""
    return {
        "static": _tr("one batch padded to its longest prompt, run until its longest request ends"),
        "continuous": _tr("a finished request leaves, a waiting one joins at the next step"),
        "chunked": _tr("continuous, with a token budget per step shared by decodes and prefill chunks"),
        "paged": _tr("continuous over one block pool; the newest request is preempted when it runs out"),
        "prefix": _tr("paged, with full blocks shared by a chained hash (prefix caching)"),
        "reserve": _tr("each request reserves its maximum length up front: the chapter's fragmentation"),
    }.get(key, "")


class ServeForm(QWidget):
    """Read `spec()`; `problem()` is the first reason it cannot run ("" when it can)."""

    changed = Signal()
    run_clicked = Signal()

    def __init__(self, settings: QSettings | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)

        self.model_combo = QComboBox()
        self.model_combo.setObjectName("serve_model")
        self.model_combo.setEditable(True)  # a checkpoint folder may be typed
        self.models_loading = False  # set_models_loading(): the list is on its way
        self.model_label = QLabel()
        model_row = QFormLayout()
        model_row.addRow(self.model_label, self.model_combo)
        outer.addLayout(model_row)

        self.workload_box = QGroupBox()
        box = QVBoxLayout(self.workload_box)
        self.table = QTableWidget(0, 3)
        self.table.setObjectName("workload_table")
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in (1, 2):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        self.table.setMinimumHeight(150)
        self.table.itemChanged.connect(lambda *_: self.changed.emit())
        box.addWidget(self.table, 1)
        buttons = QHBoxLayout()
        self.add_button = QPushButton()
        self.add_button.clicked.connect(lambda: self.add_request(WorkRequest("", 8, 0)))
        self.remove_button = QPushButton()
        self.remove_button.clicked.connect(self.remove_selected)
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        box.addLayout(buttons)
        presets = QHBoxLayout()
        self.preset_combo = QComboBox()
        self.preset_combo.setObjectName("preset")
        for name in PRESETS:
            self.preset_combo.addItem(name, name)
        self.random_spin = QSpinBox()
        self.random_spin.setRange(1, 64)
        self.random_spin.setValue(16)
        self.random_spin.setPrefix("N = ")
        self.preset_combo.currentIndexChanged.connect(
            lambda *_: self.random_spin.setEnabled(self.preset_combo.currentData() == "random"))
        self.preset_button = QPushButton()
        self.preset_button.setObjectName("load_preset")
        self.preset_button.clicked.connect(lambda: self.load_preset(self.preset_name()))
        presets.addWidget(self.preset_combo, 1)
        presets.addWidget(self.random_spin)
        presets.addWidget(self.preset_button)
        box.addLayout(presets)
        outer.addWidget(self.workload_box, 1)

        self.scheduler_box = QGroupBox()
        sched = QVBoxLayout(self.scheduler_box)
        sched.setSpacing(0)
        self.scheduler_checks: dict[str, QCheckBox] = {}
        for key in SCHEDULERS:
            check = QCheckBox(key)
            check.setObjectName(f"sched_{key}")
            check.setChecked(key in DEFAULT_CHECKED)
            check.toggled.connect(lambda *_: self.changed.emit())
            sched.addWidget(check)
            self.scheduler_checks[key] = check
        self.vllm_check = QCheckBox()
        self.vllm_check.setObjectName("serve_vllm_beside")
        self.vllm_check.toggled.connect(lambda *_: self.changed.emit())
        sched.addWidget(self.vllm_check)
        self._vllm_found: str | None = None  # "" when vLLM was found, else why not (looked up once)
        outer.addWidget(self.scheduler_box)

        sizes = QFormLayout()
        self.max_batch = self._spin("max_batch", 1, 256, 8)
        self.blocks = self._spin("pool_blocks", 1, 65536, 32)
        self.token_budget = self._spin("token_budget", 1, 65536, 64)
        self.block_size = self._spin("block_size", 1, 1024, 16)
        self.size_labels = [QLabel() for _ in range(4)]
        for label, spin in zip(self.size_labels, (self.max_batch, self.blocks, self.token_budget, self.block_size)):
            sizes.addRow(label, spin)
        outer.addLayout(sizes)

        self.problem_label = QLabel()
        self.problem_label.setObjectName("serve_problem")
        self.problem_label.setWordWrap(True)
        self.problem_label.setStyleSheet("color: #b00020;")
        outer.addWidget(self.problem_label)
        self.run_button = QPushButton()
        self.run_button.setObjectName("serve_run")
        self.run_button.clicked.connect(self.run_clicked)
        outer.addWidget(self.run_button)
        self.changed.connect(self.show_problem)
        self.retranslate()
        self.load_preset("course-batch")

    def _spin(self, name: str, low: int, high: int, value: int) -> QSpinBox:
        spin = QSpinBox()
        spin.setObjectName(name)
        spin.setRange(low, high)
        spin.setValue(value)
        spin.valueChanged.connect(lambda *_: self.changed.emit())
        return spin

    def retranslate(self) -> None:
        self.model_label.setText(_tr("Model"))
        self.workload_box.setTitle(_tr("Requests"))
        self.table.setHorizontalHeaderLabels([_tr("prompt"), _tr("new"), _tr("arrives")])
        self.table.horizontalHeaderItem(1).setToolTip(_tr("new tokens to generate"))
        self.table.horizontalHeaderItem(2).setToolTip(_tr("the scheduler step at which the request arrives"))
        self.add_button.setText(_tr("Add"))
        self.remove_button.setText(_tr("Remove"))
        self.preset_button.setText(_tr("Load preset"))
        self.preset_button.setToolTip(_tr("Replace the table with a preset workload"))
        self.scheduler_box.setTitle(_tr("Schedulers"))
        for key, check in self.scheduler_checks.items():
            check.setToolTip(scheduler_help(key))
        self.vllm_check.setText(_tr("vLLM beside"))
        for label, text in zip(self.size_labels, (_tr("Max batch"), _tr("Pool blocks"), _tr("Token budget"),
                                                  _tr("Block size"))):
            label.setText(text)
        self.max_batch.setToolTip(_tr("most requests running in one step"))
        self.blocks.setToolTip(_tr("physical KV blocks in the shared pool"))
        self.token_budget.setToolTip(_tr("most tokens one step computes (chunked prefill)"))
        self.block_size.setToolTip(_tr("tokens per KV block"))
        self.run_button.setText(_tr("Run (Ctrl+R)"))
        self.show_problem()

    # -- the workload table ------------------------------------------------------------------------
    def preset_name(self) -> str:
        name = self.preset_combo.currentData()
        return f"random:{self.random_spin.value()}" if name == "random" else name

    def load_preset(self, name: str) -> None:
        self.set_requests(preset_requests(name))
        key = name.split(":")[0]
        with blocked(self.preset_combo):
            self.preset_combo.setCurrentIndex(max(0, self.preset_combo.findData(key)))
        self.random_spin.setEnabled(key == "random")
        if key == "random" and ":" in name:
            self.random_spin.setValue(int(name.split(":")[1]))

    def set_requests(self, requests) -> None:
        with blocked(self.table):
            self.table.setRowCount(0)
            for req in requests:
                self._append(req)
        self.changed.emit()

    def add_request(self, req: WorkRequest) -> None:
        with blocked(self.table):
            self._append(req)
        self.table.setCurrentCell(self.table.rowCount() - 1, 0)
        self.changed.emit()

    def _append(self, req: WorkRequest) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        self.table.setItem(row, 0, QTableWidgetItem(req.prompt))
        for col, value in ((1, req.new_tokens), (2, req.arrival)):
            item = QTableWidgetItem()
            item.setData(Qt.ItemDataRole.EditRole, int(value))
            self.table.setItem(row, col, item)
        self._number_rows()

    def _number_rows(self) -> None:
        """Rows numbered from 0, as the panels, the narration and every message name requests ("request 1 needs
        3 blocks" is the second row); Qt's own numbers start at 1."""
        self.table.setVerticalHeaderLabels([str(i) for i in range(self.table.rowCount())])

    def remove_selected(self) -> None:
        rows = sorted({i.row() for i in self.table.selectedIndexes()}, reverse=True)
        if not rows and self.table.rowCount():
            rows = [self.table.rowCount() - 1]
        with blocked(self.table):
            for row in rows:
                self.table.removeRow(row)
            self._number_rows()
        self.changed.emit()

    def requests(self) -> list[WorkRequest]:
        out = []
        for row in range(self.table.rowCount()):
            cells = [self.table.item(row, c) for c in range(3)]
            prompt = cells[0].text() if cells[0] is not None else ""
            try:
                new, arrival = (int(cells[c].data(Qt.ItemDataRole.EditRole)) for c in (1, 2))
            except (TypeError, ValueError, AttributeError):
                new, arrival = -1, -1
            out.append(WorkRequest(prompt, new, arrival))
        return out

    # -- the rest ----------------------------------------------------------------------------------
    def set_models_loading(self) -> None:
        """The model list is on its way (the main window's worker has not listed the environment yet): the
        picker says so, and so does problem() until set_models() fills it, unless a model is typed."""
        self.models_loading = True
        self.model_combo.lineEdit().setPlaceholderText(_tr("loading the model list..."))
        self.changed.emit()

    def set_models(self, names: list[str], current: str = "") -> None:
        self.models_loading = False
        self.model_combo.lineEdit().setPlaceholderText("")
        with blocked(self.model_combo):
            self.model_combo.clear()
            for name in names:
                self.model_combo.addItem(name)
            if current:
                self.model_combo.setCurrentText(current)
        self.changed.emit()

    def checked_schedulers(self) -> tuple[str, ...]:
        return tuple(k for k, c in self.scheduler_checks.items() if c.isChecked())

    def set_schedulers(self, keys) -> None:
        for k, check in self.scheduler_checks.items():
            with blocked(check):
                check.setChecked(k in keys)
        self.changed.emit()

    def apply(self, spec: ServeSpec) -> None:
        """Fill the form from a spec (the compare view's Continue, a test)."""
        if spec.model:
            self.model_combo.setCurrentText(spec.model)
        self.set_requests(spec.requests)
        self.set_schedulers(spec.schedulers)
        self.vllm_check.setChecked(spec.vllm_beside)
        for spin, value in ((self.max_batch, spec.max_batch), (self.blocks, spec.blocks),
                            (self.token_budget, spec.token_budget), (self.block_size, spec.block_size)):
            spin.setValue(value)

    def spec(self) -> ServeSpec:
        return ServeSpec(model=self.model_combo.currentText().strip(), requests=tuple(self.requests()),
                         schedulers=self.checked_schedulers(), max_batch=self.max_batch.value(),
                         blocks=self.blocks.value(), token_budget=self.token_budget.value(),
                         block_size=self.block_size.value(), vllm_beside=self.vllm_beside())

    # -- vLLM beside -------------------------------------------------------------------------------
    def vllm_found(self) -> str:
        """"" when vLLM can be found (kvviz.peers.vllm.find_vllm_python, looked up once), else why not."""
        if self._vllm_found is None:
            from kvviz.peers.vllm import find_vllm_python

            try:
                find_vllm_python()
                self._vllm_found = ""
            except ValueError as exc:
                self._vllm_found = errors.one_line(str(exc))
        return self._vllm_found

    def vllm_refusal(self) -> str:
        """Why "vLLM beside" cannot run with this form ("" when it can): vLLM missing, a block size or a model
        folder's head size vLLM's CPU attention refuses."""
        return vllm_refusal(self.model_combo.currentText().strip(), self.block_size.value(), self.vllm_found(), self.tr)

    def vllm_beside(self) -> bool:
        return self.vllm_check.isChecked() and self.vllm_check.isEnabled()

    def show_vllm(self) -> None:
        """The option greyed, with the reason as its tooltip, where vLLM cannot run."""
        reason = self.vllm_refusal()
        self.vllm_check.setEnabled(not reason)
        # as a paragraph: Qt wraps a rich-text tooltip, where a plain one runs across the screen in one line
        self.vllm_check.setToolTip(f"<p>{html.escape(reason, quote=False)}</p>" if reason else "<p>" + _tr(
            "vLLM runs the same requests in its own process (35-50 s to start on a CPU) and reports each step "
            "beside the schedulers: its settings follow prefix if ticked (prefix caching on), else chunked, "
            "paged or continuous") + "</p>")

    def problem(self) -> str:
        """The first reason this form cannot run, in the window's language ("" when it can)."""
        reqs = self.requests()
        if not self.model_combo.currentText().strip():
            return _tr("the model list is loading...") if self.models_loading else _tr("choose a model")
        if not reqs:
            return _tr("add at least one request")
        if len(reqs) > MAX_REQUESTS:
            return _tr("at most {0} requests").format(MAX_REQUESTS)
        for i, r in enumerate(reqs):
            if not r.prompt:
                return _tr("request {0}: the prompt is empty").format(i)
            if r.new_tokens < 1:
                return _tr("request {0}: new tokens must be at least 1").format(i)
            if r.arrival < 0:
                return _tr("request {0}: the arrival step must be 0 or more").format(i)
        if not self.checked_schedulers():
            return _tr("tick at least one scheduler")
        if self.token_budget.value() < self.block_size.value() and "chunked" in self.checked_schedulers():
            return _tr("the token budget is smaller than one block")
        return ""

    # -- saved values (QSettings, under serve/: the compare window's form keeps run/) ---------------
    def sizes(self) -> dict[str, QSpinBox]:
        return {"max_batch": self.max_batch, "blocks": self.blocks, "token_budget": self.token_budget,
                "block_size": self.block_size}

    def save(self, settings: QSettings) -> None:
        s = settings
        s.setValue("serve/model", self.model_combo.currentText().strip())
        s.setValue("serve/requests", json.dumps([[r.prompt, r.new_tokens, r.arrival] for r in self.requests()]))
        s.setValue("serve/schedulers", ",".join(self.checked_schedulers()))
        s.setValue("serve/vllm_beside", "true" if self.vllm_check.isChecked() else "false")
        s.setValue("serve/preset", self.preset_combo.currentData() or "")
        s.setValue("serve/random_n", self.random_spin.value())
        for key, spin in self.sizes().items():
            s.setValue(f"serve/{key}", spin.value())

    def restore(self, settings: QSettings) -> None:
        """The values `save` kept, through the one settings reader (kvviz.ui.settings_file; the window hands
        its SettingsReader): a value the field's range does not hold, or a request a workload file could not
        hold (kvviz.serving.workload), is refused in one line naming the file and the key; the default stays."""
        r = SettingsReader.of(settings)
        if r.settings.contains("serve/model"):
            self.model_combo.setCurrentText(r.text("serve/model", "", limit=MAX_MODEL_CHARS))
        r.spin("serve/random_n", self.random_spin)
        with blocked(self.preset_combo):
            index = self.preset_combo.findData(r.text("serve/preset", ""))
            if index >= 0:
                self.preset_combo.setCurrentIndex(index)
        self.random_spin.setEnabled(self.preset_combo.currentData() == "random")
        requests = saved_requests(r)
        if requests:
            self.set_requests(requests)
        if r.settings.contains("serve/schedulers"):
            self.set_schedulers([k for k in r.text("serve/schedulers", "").replace(" ", "").split(",") if k])
        for key, spin in self.sizes().items():
            r.spin(f"serve/{key}", spin)
        if r.settings.contains("serve/vllm_beside"):
            with blocked(self.vllm_check):
                self.vllm_check.setChecked(r.text("serve/vllm_beside", "false") == "true")
        self.changed.emit()

    def show_problem(self) -> None:
        self.show_vllm()
        reason = self.problem()
        self.problem_label.setText(reason)
        self.problem_label.setVisible(bool(reason))
        self.run_button.setEnabled(not reason)


def saved_requests(r: SettingsReader) -> list[WorkRequest] | None:
    """serve/requests ([[prompt, new tokens, arrival], ...] as JSON), each row checked as a workload file's
    request is (kvviz.serving.workload.request_from_dict); None where missing or refused."""
    text = r.text("serve/requests", "")
    if not text:
        return None
    try:
        rows = json.loads(text)
        if not isinstance(rows, list) or not rows or len(rows) > MAX_REQUESTS:
            raise ValueError(_tr("not a list of 1 to {0} requests").format(MAX_REQUESTS))
        requests = []
        for i, row in enumerate(rows):
            if not (isinstance(row, list) and len(row) == 3):
                raise ValueError(_tr("request {0} is not [prompt, new tokens, arrival]").format(i))
            req = request_from_dict({"prompt": row[0], "new_tokens": row[1], "arrival": row[2]}, f"request {i}")
            requests.append(WorkRequest(req.prompt, req.new_tokens, req.arrival))
    except (ValueError, RecursionError) as exc:
        r.refuse("serve/requests", text, errors.one_line(str(exc)))
        return None
    return requests
