"""The run form (the Inputs dock's body): prompt, model, device, dtype, engines, lengths, sampling and
the traced attention head; what it offers (from the worker's Environment), the first reason it
cannot run, the RunConfig it describes, and its saved values.

It knows no panels, no transport and no worker: the window asks it for a RunConfig and shows it the
Environment.
"""
from __future__ import annotations

import os
from dataclasses import replace

from PySide6.QtCore import QCoreApplication, QSettings, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDockWidget,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from kvviz import catalog
from kvviz.checkpoint_files import check_model_folder
from kvviz.config import RunConfig, SamplingConfig, TraceOptions, canonical_dtype
from kvviz.errors import one_line
from kvviz.format import DEFAULT_PROMPT
from kvviz.kernels import (
    DEFAULT_KERNEL,
    KERNEL_KEYS,
    KERNELS,
    engines_refusal,
    lane_engine,
    lane_kernel,
    lanes,
    unavailable,
)
from kvviz.options import (
    BOUNDS,
    ROLLBACK_DEFAULT,
    ROLLBACKS,
    SINKS_DEFAULT,
    SPEC_K_DEFAULT,
    WINDOW_DEFAULT,
    check_run_config,
)
from kvviz.records.trace import RunInfo
from kvviz.runtime.messages import Environment, ModelChoice
from kvviz.ui.dock_title import zooming_title_bar
from kvviz.ui.model_words import preset_text
from kvviz.ui.qtutil import blocked

DTYPES = ("auto", "fp32", "bf16", "fp16")


def _range(key: str) -> tuple:
    """A field's range: the bounds every command applies (kvviz.options.BOUNDS), so the form and the
    command line accept the same values."""
    bound = BOUNDS[key]
    return (int(bound.low), int(bound.high)) if bound.integer else (bound.low, bound.high)


class RunForm(QWidget):
    """Read `checked_engines()`, `current_model()`, `current_device()`, `dtype()`, `build_run()`;
    `problem()` is the first reason it cannot run ("" when it can)."""

    changed = Signal()  # any field changed: validation, the status bar and the estimate follow
    run_clicked = Signal()

    def __init__(self, settings: QSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.env: Environment | None = None
        self.models: dict[str, ModelChoice] = {}
        self.engine_checks: dict[str, QCheckBox] = {}
        self._engine_help: dict[str, str] = {}  # engine key -> one-line help, from the environment
        self._wanted: dict[str, str] = {}  # picker choices restored before the environment arrives
        outer = QVBoxLayout(self)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.form = form

        self.prompt_edit = QPlainTextEdit()
        self.prompt_edit.setObjectName("prompt")
        self.prompt_edit.setFixedHeight(84)
        self.prompt_edit.setTabChangesFocus(True)
        self.model_combo = QComboBox()
        self.model_combo.setObjectName("model")
        self.model_combo.setMinimumContentsLength(12)
        self.model_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.open_button = QToolButton()
        model_row = QHBoxLayout()
        model_row.setContentsMargins(0, 0, 0, 0)
        model_row.addWidget(self.model_combo, 1)
        model_row.addWidget(self.open_button)
        self.device_combo = QComboBox()
        self.device_combo.setObjectName("device")
        self.dtype_combo = QComboBox()
        self.dtype_combo.setObjectName("dtype")
        for key in DTYPES:
            self.dtype_combo.addItem(key, key)
        self.engine_box = QGroupBox()
        self.engine_layout = QVBoxLayout(self.engine_box)
        self.engine_layout.setContentsMargins(6, 4, 6, 4)
        self.engine_placeholder = QLabel()
        self.engine_layout.addWidget(self.engine_placeholder)
        # One decode kernel for every engine of the run (kvviz.kernels); greyed where this device has none.
        self.kernel_combo = QComboBox()
        self.kernel_combo.setObjectName("kernel")
        for key in KERNEL_KEYS:
            self.kernel_combo.addItem(KERNELS[key].label, key)
        self.kernel_combo.setCurrentIndex(self.kernel_combo.findData(DEFAULT_KERNEL))
        self.kernel_label = QLabel()
        # A kernel comparison: every ticked engine under the decode kernel and under this one, side by side.
        self.compare_combo = QComboBox()
        self.compare_combo.setObjectName("compare_kernel")
        self.compare_combo.addItem("", "")
        for key in KERNEL_KEYS:
            self.compare_combo.addItem(KERNELS[key].label, key)
        self.compare_label = QLabel()
        # The same comparison run this many times: the summary gives each engine's median and their spread.
        self.repeat_spin = QSpinBox()
        self.repeat_spin.setObjectName("repeat")
        self.repeat_spin.setRange(*_range("repeat"))
        self.repeat_label = QLabel()
        self._kernel_why: dict[tuple[str, str], str | None] = {}  # (kernel, device type) -> why it does not run
        self.tokens_spin = QSpinBox()
        self.tokens_spin.setObjectName("max_new_tokens")
        self.tokens_spin.setRange(*_range("tokens"))
        self.tokens_spin.setValue(40)
        self.block_spin = QSpinBox()
        self.block_spin.setObjectName("block_size")
        self.block_spin.setRange(*_range("block_size"))
        self.block_spin.setValue(16)
        # W, S, R of the approximate caches: shown while an engine that reads them is ticked
        self.window_spin, self.sinks_spin, self.residual_spin = QSpinBox(), QSpinBox(), QSpinBox()
        for spin, name, low, value in ((self.window_spin, "window", 1, WINDOW_DEFAULT),
                                       (self.sinks_spin, "sinks", 1, SINKS_DEFAULT),
                                       (self.residual_spin, "residual", 0, 0)):
            spin.setObjectName(name)
            spin.setRange(low, 1_000_000)
            spin.setValue(value)
        self.window_label, self.sinks_label, self.residual_label = QLabel(), QLabel(), QLabel()
        # k and the rollback rule of the speculative engines: shown while one of them is ticked
        self.spec_k_spin = QSpinBox()
        self.spec_k_spin.setObjectName("spec_k")
        self.spec_k_spin.setRange(*_range("spec_k"))
        self.spec_k_spin.setValue(SPEC_K_DEFAULT)
        self.rollback_combo = QComboBox()
        self.rollback_combo.setObjectName("rollback")
        for rule in ROLLBACKS:
            self.rollback_combo.addItem(rule, rule)
        self.rollback_combo.setCurrentIndex(ROLLBACKS.index(ROLLBACK_DEFAULT))
        self.spec_k_label, self.rollback_label = QLabel(), QLabel()

        self.sampling_box = QGroupBox()
        sform = QFormLayout(self.sampling_box)
        self.greedy_check = QCheckBox()
        self.greedy_check.setChecked(True)
        self.temperature_spin = QDoubleSpinBox()
        self.temperature_spin.setRange(*_range("temperature"))
        self.temperature_spin.setSingleStep(0.1)
        self.temperature_spin.setValue(0.8)
        self.top_k_spin = QSpinBox()
        self.top_k_spin.setRange(0, _range("top_k")[1])  # 0: off
        self.top_p_spin = QDoubleSpinBox()
        self.top_p_spin.setRange(*_range("top_p"))
        self.top_p_spin.setSingleStep(0.05)
        self.top_p_spin.setValue(1.0)
        self.seed_spin = QSpinBox()
        self.seed_spin.setRange(*_range("seed"))
        self.temperature_label, self.top_k_label, self.top_p_label, self.seed_label = (QLabel() for _ in range(4))
        sform.addRow(self.greedy_check)
        sform.addRow(self.temperature_label, self.temperature_spin)
        sform.addRow(self.top_k_label, self.top_k_spin)
        sform.addRow(self.top_p_label, self.top_p_spin)
        sform.addRow(self.seed_label, self.seed_spin)

        self.layer_spin = QSpinBox()
        self.layer_spin.setObjectName("weights_layer")
        self.layer_spin.setRange(-1, 1)
        self.layer_spin.setValue(0)
        self.head_spin = QSpinBox()
        self.head_spin.setObjectName("weights_head")
        self.head_spin.setRange(0, 3)
        attn_row = QHBoxLayout()
        attn_row.setContentsMargins(0, 0, 0, 0)
        self.layer_label, self.head_label = QLabel(), QLabel()
        attn_row.addWidget(self.layer_label)
        attn_row.addWidget(self.layer_spin, 1)
        attn_row.addWidget(self.head_label)
        attn_row.addWidget(self.head_spin, 1)

        self.prompt_label, self.model_label, self.device_label, self.dtype_label = (QLabel() for _ in range(4))
        self.tokens_label, self.attention_label, self.block_label = QLabel(), QLabel(), QLabel()
        form.addRow(self.prompt_label)
        form.addRow(self.prompt_edit)
        form.addRow(self.model_label, model_row)
        form.addRow(self.device_label, self.device_combo)
        form.addRow(self.dtype_label, self.dtype_combo)
        form.addRow(self.engine_box)
        form.addRow(self.kernel_label, self.kernel_combo)
        form.addRow(self.compare_label, self.compare_combo)
        form.addRow(self.repeat_label, self.repeat_spin)
        form.addRow(self.tokens_label, self.tokens_spin)
        form.addRow(self.block_label, self.block_spin)
        form.addRow(self.window_label, self.window_spin)
        form.addRow(self.sinks_label, self.sinks_spin)
        form.addRow(self.residual_label, self.residual_spin)
        form.addRow(self.spec_k_label, self.spec_k_spin)
        form.addRow(self.rollback_label, self.rollback_combo)
        form.addRow(self.sampling_box)
        form.addRow(self.attention_label, attn_row)
        outer.addLayout(form)

        self.validation_label = QLabel()
        self.validation_label.setObjectName("validation")
        self.validation_label.setWordWrap(True)
        self.validation_label.setStyleSheet("color: #b00020;")
        outer.addWidget(self.validation_label)
        # A replayed run's settings are shown read-only (File > Open trace); Edit gives the fields back.
        self.replay_row = QWidget()
        replay_layout = QHBoxLayout(self.replay_row)
        replay_layout.setContentsMargins(0, 0, 0, 0)
        self.replay_note = QLabel()
        self.replay_note.setObjectName("replay_note")
        self.replay_note.setWordWrap(True)
        self.replay_note.setStyleSheet("color: #5c4400;")
        self.edit_button = QPushButton()
        self.edit_button.clicked.connect(lambda: self.set_read_only(False))
        replay_layout.addWidget(self.replay_note, 1)
        replay_layout.addWidget(self.edit_button)
        self.replay_row.hide()
        outer.addWidget(self.replay_row)
        self.run_button = QPushButton()
        self.run_button.clicked.connect(self.run_clicked)
        outer.addWidget(self.run_button)
        # How long the form's run will take, when that is long enough to matter (the window says).
        self.estimate_label = QLabel()
        self.estimate_label.setObjectName("estimate")
        self.estimate_label.setWordWrap(True)
        self.estimate_label.setStyleSheet("color: #5f5f5f;")
        self.estimate_label.hide()
        outer.addWidget(self.estimate_label)
        outer.addStretch(1)

        for widget, signal in ((self.prompt_edit, "textChanged"), (self.model_combo, "currentIndexChanged"),
                               (self.device_combo, "currentIndexChanged"), (self.dtype_combo, "currentIndexChanged"),
                               (self.kernel_combo, "currentIndexChanged"),
                               (self.compare_combo, "currentIndexChanged"), (self.repeat_spin, "valueChanged"),
                               (self.tokens_spin, "valueChanged"), (self.block_spin, "valueChanged"),
                               (self.window_spin, "valueChanged"), (self.sinks_spin, "valueChanged"),
                               (self.residual_spin, "valueChanged"), (self.spec_k_spin, "valueChanged"),
                               (self.rollback_combo, "currentIndexChanged"),
                               (self.greedy_check, "toggled"),
                               (self.temperature_spin, "valueChanged"), (self.top_k_spin, "valueChanged"),
                               (self.top_p_spin, "valueChanged"), (self.seed_spin, "valueChanged"),
                               (self.layer_spin, "valueChanged"), (self.head_spin, "valueChanged")):
            getattr(widget, signal).connect(self._on_changed)
        self.model_combo.currentIndexChanged.connect(self._on_model_changed)
        # a kernel picked by hand that an engine cannot use: its one-line reason is under the form, which a
        # short screen scrolls out of sight; bring it into view (never while the user types elsewhere)
        self.kernel_combo.activated.connect(lambda _i: QTimer.singleShot(0, self._reveal_problem))
        self.compare_combo.activated.connect(lambda _i: QTimer.singleShot(0, self._reveal_problem))

    def _reveal_problem(self) -> None:
        viewport = self.parentWidget()
        area = viewport.parentWidget() if viewport is not None else None
        if isinstance(area, QScrollArea) and self.validation_label.isVisibleTo(self):
            area.ensureWidgetVisible(self.validation_label)

    def set_open_action(self, act: QAction) -> None:
        """The "..." beside the model picker: Model > Open checkpoint."""
        self.open_button.setDefaultAction(act)
        self.open_button.setText("...")

    def retranslate(self) -> None:
        self.open_button.setText("...")
        self.prompt_label.setText(self.tr("Prompt"))
        self.prompt_edit.setPlaceholderText(self.tr("Type a prompt, then Run (Ctrl+R)"))
        self.model_label.setText(self.tr("Model"))
        for index in range(self.model_combo.count()):
            self._show_model_tip(index)
        self.device_label.setText(self.tr("Device"))
        self.dtype_label.setText(self.tr("Dtype"))
        self.dtype_combo.setItemText(0, self.tr("auto"))
        self.dtype_combo.setToolTip(self.tr("auto: bf16 on CUDA, else the model's own dtype"))
        self.engine_box.setTitle(self.tr("Engines"))
        self.engine_placeholder.setText(self.tr("loading PyTorch..."))
        for key, box in self.engine_checks.items():
            box.setText(key)
            box.setToolTip(QCoreApplication.translate("engines", self._engine_help.get(key, "")))
        self.kernel_label.setText(self.tr("Decode kernel"))
        self.kernel_combo.setToolTip(self.tr("What runs every engine's decode steps, one kernel for the whole run, "
                                             "so that the engines differ by their cache alone"))
        self.compare_label.setText(self.tr("Compare kernel"))
        self.compare_combo.setItemText(0, self.tr("none"))
        self.compare_combo.setToolTip(self.tr("A kernel comparison: every engine also under this kernel, as a "
                                              "lane of its own (\u201cstatic \u00b7 C step\u201d) in a shade of "
                                              "the engine's colour: same cache, another kernel"))
        self.repeat_label.setText(self.tr("Repeat"))
        self.repeat_spin.setSuffix(self.tr(" \u00d7"))
        self.repeat_spin.setToolTip(self.tr("Run the comparison this many times: the summary gives each engine's "
                                            "median time and the spread of the runs, as kvviz bench does"))
        self._show_kernels()
        self.tokens_label.setText(self.tr("New tokens"))
        self.block_label.setText(self.tr("Block size"))
        self.block_spin.setToolTip(self.tr("Tokens per block of the paged cache"))
        self.window_label.setText(self.tr("Window (W)"))
        self.window_spin.setToolTip(self.tr("window and sinks caches: tokens kept, sinks included"))
        self.sinks_label.setText(self.tr("Sinks (S)"))
        self.sinks_spin.setToolTip(self.tr("sinks cache: the first tokens, kept for ever (fewer than W)"))
        self.residual_label.setText(self.tr("Residual (R)"))
        self.residual_spin.setToolTip(self.tr("int8 cache: the newest tokens kept in full precision"))
        self.residual_spin.setSpecialValueText(self.tr("off"))
        self.spec_k_label.setText(self.tr("Draft tokens k"))
        self.spec_k_spin.setToolTip(self.tr("speculative engines: tokens drafted per round, checked by the model "
                                            "in one forward"))
        self.rollback_label.setText(self.tr("Rollback"))
        self.rollback_combo.setToolTip(self.tr("how rejected drafts' K/V are undone: overwrite moves the position "
                                               "back and the next round writes over them (gpt-fast, vLLM); crop "
                                               "cuts them from the cache (transformers, SGLang)"))
        self.sampling_box.setTitle(self.tr("Sampling"))
        self.greedy_check.setText(self.tr("Greedy (always the most likely token)"))
        self.temperature_label.setText(self.tr("Temperature"))
        self.top_k_label.setText(self.tr("Top-k"))
        self.top_k_spin.setSpecialValueText(self.tr("off"))
        self.top_p_label.setText(self.tr("Top-p"))
        self.top_p_spin.setToolTip(self.tr("1.00 keeps every token"))
        self.seed_label.setText(self.tr("Seed"))
        self.attention_label.setText(self.tr("Attention"))
        self.layer_label.setText(self.tr("layer"))
        self.head_label.setText(self.tr("head"))
        self.layer_spin.setSpecialValueText(self.tr("off"))
        tip = self.tr("Which layer and head the engines copy attention weights from (applies to the next run)")
        self.layer_spin.setToolTip(tip)
        self.head_spin.setToolTip(tip)
        self.run_button.setText(self.tr("Run (Ctrl+R)"))
        self.replay_note.setText(self.tr("The saved run's settings, read-only while it is shown."))
        self.edit_button.setText(self.tr("Edit"))
        self.edit_button.setToolTip(self.tr("Change the settings for a new run (the saved run stays shown)"))

    # ------------------------------------------------------------------ what it offers
    def set_environment(self, env: Environment) -> None:
        """The models, devices and engines the worker listed; the saved choices picked among them."""
        self.env = env
        self._engine_help = dict(env.engines)
        self.models = {m.name: m for m in (*env.models, *env.cached_models)}
        for path in self._saved_list("models/checkpoints"):
            if path not in self.models:
                self.models[path] = self._saved_folder(path)
        cached = {m.name for m in env.cached_models}
        with blocked(self.model_combo):
            self.model_combo.clear()
            for choice in self.models.values():
                if choice.name in cached and choice.name == env.cached_models[0].name:
                    self.model_combo.insertSeparator(self.model_combo.count())  # presets above, caches below
                self._add_model_item(choice)
        wanted = self._wanted.get("model")
        if wanted in self.models and not self.models[wanted].available:
            wanted = None  # e.g. the trained model's weights went away: fall back to the default
        self._select_combo(self.model_combo, wanted, fallback=env.default_model)
        with blocked(self.device_combo):
            self.device_combo.clear()
            for dev in env.devices:
                label = self.tr("auto ({0})").format(env.auto_device) if dev == "auto" else dev
                self.device_combo.addItem(label, dev)
        self._select_combo(self.device_combo, self._wanted.get("device"), fallback="auto")
        self.engine_placeholder.hide()
        wanted = self._wanted.get("engines")
        # by default the chapter's comparison; the others (approximate, speculative) when asked for
        checked = set(wanted.split(",")) if wanted is not None else set(catalog.DEFAULT_ENGINES)
        for key, _ in env.engines:
            box = QCheckBox(key)
            box.setObjectName(f"engine_{key}")
            box.setChecked(key in checked)
            box.toggled.connect(self._on_changed)
            self.engine_layout.addWidget(box)
            self.engine_checks[key] = box
        self.retranslate()
        self._on_model_changed()

    def _saved_folder(self, path: str) -> ModelChoice:
        """A checkpoint folder kept from an earlier Open checkpoint. One that is there but holds no model (emptied,
        or kept before the window checked folders) is offered unavailable, with the line a run of it would give."""
        choice = ModelChoice(name=path, description=self.tr("checkpoint folder"))
        if os.path.isdir(path):
            try:
                check_model_folder(path)
            except ValueError as exc:
                return replace(choice, available=False, reason=one_line(str(exc)))
        return choice

    def kernel_unavailable(self, kernel: str) -> str | None:
        """Why `kernel` does not run on the chosen device (kvviz.kernels.unavailable), or None; None too
        before the environment says which device "auto" is."""
        device = self.current_device().split(":")[0]
        if not device or device == "auto":
            return None
        if (kernel, device) not in self._kernel_why:  # the C compiler and OpenBLAS are looked for once
            self._kernel_why[kernel, device] = unavailable(kernel, device)
        return self._kernel_why[kernel, device]

    def _show_kernels(self) -> None:
        """Each kernel named in the reader's language; one the chosen device cannot run is greyed out with
        the reason as its tooltip, the others' tooltip is their help."""
        for combo, first in ((self.kernel_combo, 0), (self.compare_combo, 1)):
            model = combo.model()
            for index, key in enumerate(KERNEL_KEYS, first):
                why = self.kernel_unavailable(key)
                combo.setItemText(index, QCoreApplication.translate("kernels", KERNELS[key].label))
                combo.setItemData(index, why or QCoreApplication.translate("kernels", KERNELS[key].help),
                                  Qt.ItemDataRole.ToolTipRole)
                model.item(index).setEnabled(why is None)

    def _add_model_item(self, choice: ModelChoice) -> None:
        self.model_combo.addItem(choice.name, choice.name)
        self._show_model_tip(self.model_combo.count() - 1)

    def _show_model_tip(self, index: int) -> None:
        """The picker's item `index` explained in the current language: its description, warning, reason."""
        choice = self.models.get(self.model_combo.itemData(index))
        if choice is not None:
            tip = "\n".join(preset_text(t) for t in (choice.description, choice.warning, choice.reason) if t)
            self.model_combo.setItemData(index, tip, Qt.ItemDataRole.ToolTipRole)

    def model_loaded(self, choice: ModelChoice) -> None:
        """The worker read a model's config (a checkpoint folder's, first known when it loads)."""
        old = self.models.get(choice.name)
        if old is None or old.config is None:
            self.models[choice.name] = ModelChoice(name=choice.name, description=old.description if old else "",
                                                   config=choice.config)
            self._on_model_changed()

    def add_downloaded(self, model_id: str, folder: str) -> None:
        """A checkpoint Model > Download model fetched: offered by its id (it resolves from the cache) and chosen."""
        if model_id not in self.models or not self.models[model_id].available:
            self.models[model_id] = ModelChoice(name=model_id, description=f"Hugging Face: {folder}")
            index = self.model_combo.findData(model_id)
            if index >= 0:
                self.model_combo.removeItem(index)
            self._add_model_item(self.models[model_id])
        self.model_combo.setCurrentIndex(self.model_combo.findData(model_id))

    def add_model_path(self, path: str) -> None:
        """Add a model folder to the picker; the worker reads and loads it when a run starts."""
        if path not in self.models:
            self.models[path] = ModelChoice(name=path, description=self.tr("checkpoint folder"))
        if self.model_combo.findData(path) < 0:
            self._add_model_item(self.models[path])
        paths = self._saved_list("models/checkpoints")
        if path not in paths:
            self.settings.setValue("models/checkpoints", "\n".join([*paths, path]))

    @staticmethod
    def _select_combo(combo: QComboBox, wanted: str | None, fallback: str) -> None:
        index = combo.findData(wanted) if wanted else -1
        if index < 0 or not (combo.model().flags(combo.model().index(index, 0)) & Qt.ItemFlag.ItemIsEnabled):
            index = combo.findData(fallback)
        combo.setCurrentIndex(max(index, 0))

    def _saved_list(self, key: str) -> list[str]:
        text = self.settings.value(key, "", type=str)
        return [p for p in text.split("\n") if p]

    # ------------------------------------------------------------------ what it describes
    def checked_engines(self) -> tuple[str, ...]:
        return tuple(k for k, box in self.engine_checks.items() if box.isChecked())

    def show_run(self, info: RunInfo) -> None:
        """A replayed run's settings (model, device, dtype, prompt, engines, lengths, cache sizes),
        read-only until Edit or a new Run. A model or device this machine does not offer is left as is."""
        self.set_read_only(False)
        if info.model_name and (info.model_name in self.models or self.model_combo.findData(info.model_name) >= 0):
            self.model_combo.setCurrentIndex(self.model_combo.findData(info.model_name))
        for combo, value in ((self.device_combo, info.device), (self.dtype_combo, info.dtype)):
            if value and combo.findData(value) >= 0:
                combo.setCurrentIndex(combo.findData(value))
        set_prompt_text(self.prompt_edit, info.prompt)
        self.set_engines(info.engines)
        ran = list(dict.fromkeys(info.decode_kernels))  # a kernel comparison's, in its lanes' order
        comparison = any(lane_kernel(e) for e in info.engines) and len(ran) == 2
        if (info.kernel is not None or comparison) and self.kernel_combo.findData(ran[0]) >= 0:
            self.kernel_combo.setCurrentIndex(self.kernel_combo.findData(ran[0]))
        self.compare_combo.setCurrentIndex(max(0, self.compare_combo.findData(ran[1])) if comparison else 0)
        self.repeat_spin.setValue(info.repeat)
        for spin, value in ((self.tokens_spin, info.max_new_tokens), (self.block_spin, info.block_size),
                            (self.window_spin, info.window), (self.sinks_spin, info.sinks),
                            (self.residual_spin, info.residual), (self.spec_k_spin, info.spec_k)):
            if value:
                spin.setValue(value)
        if info.rollback in ROLLBACKS:
            self.rollback_combo.setCurrentIndex(ROLLBACKS.index(info.rollback))
        self.set_read_only(True)

    def set_read_only(self, on: bool) -> None:
        """The fields locked (a replay shown) or editable again; Run stays, and unlocks them."""
        for widget in (self.prompt_edit, self.model_combo, self.open_button, self.device_combo, self.dtype_combo,
                       self.engine_box, self.kernel_combo, self.compare_combo, self.repeat_spin, self.tokens_spin,
                       self.block_spin, self.window_spin, self.sinks_spin, self.residual_spin, self.spec_k_spin,
                       self.rollback_combo, self.sampling_box, self.layer_spin, self.head_spin):
            widget.setEnabled(not on)
        self.replay_row.setVisible(on)

    def read_only(self) -> bool:
        return self.replay_row.isVisibleTo(self)

    def set_engines(self, engines) -> None:
        """Tick `engines` (a kernel comparison's lanes: their engines), untick the rest."""
        ticked = {lane_engine(e) for e in engines}
        for key, box in self.engine_checks.items():
            box.setChecked(key in ticked)

    def set_model(self, name: str) -> None:
        if self.model_combo.findData(name) < 0:
            self.add_model_path(name)
        self.model_combo.setCurrentIndex(self.model_combo.findData(name))

    def current_model(self) -> str:
        return self.model_combo.currentData() or ""

    def model_choice(self) -> ModelChoice | None:
        return self.models.get(self.current_model())

    def current_kernel(self) -> str:
        """The decode kernel chosen (kvviz.kernels)."""
        return self.kernel_combo.currentData() or DEFAULT_KERNEL

    def current_kernels(self) -> tuple[str, ...]:
        """The run's kernels: the decode kernel, then the one it is compared with where one is chosen."""
        other = self.compare_combo.currentData()
        return (self.current_kernel(), other) if other else (self.current_kernel(),)

    def repeat_count(self) -> int:
        """How many times the comparison runs (the summary's medians are over these)."""
        return self.repeat_spin.value()

    def current_device(self) -> str:
        dev = self.device_combo.currentData() or ""
        if dev == "auto" and self.env is not None:
            return self.env.auto_device
        return dev

    def dtype(self) -> str:
        """The dtype a run would use: what `resolve_dtype` picks for "auto", from the config."""
        choice = self.model_choice()
        picked = self.dtype_combo.currentData() or "auto"
        if picked != "auto":
            return canonical_dtype(picked)
        if self.current_device().startswith("cuda"):
            return "bfloat16"
        return choice.config.dtype if choice is not None and choice.config is not None else ""

    def sampling(self) -> SamplingConfig:
        if self.greedy_check.isChecked():
            return SamplingConfig(temperature=0.0, seed=self.seed_spin.value())
        top_k = self.top_k_spin.value() or None
        top_p = self.top_p_spin.value()
        return SamplingConfig(temperature=self.temperature_spin.value(), top_k=top_k,
                              top_p=None if top_p >= 1.0 else top_p, seed=self.seed_spin.value())

    def build_run(self) -> RunConfig:
        layer = self.layer_spin.value()
        return RunConfig(
            prompt=self.prompt_edit.toPlainText(),
            max_new_tokens=self.tokens_spin.value(),
            engines=self._lanes(),
            sampling=self.sampling(),
            block_size=self.block_spin.value(),
            window=self.window_spin.value(),
            sinks=self.sinks_spin.value(),
            residual=self.residual_spin.value() or None,
            spec_k=self.spec_k_spin.value(),
            rollback=self.rollback_combo.currentData() or ROLLBACK_DEFAULT,
            kernel=self.current_kernel(),
            trace=TraceOptions(masks=True, weights_layer=None if layer < 0 else layer,
                               weights_head=self.head_spin.value()),
        )

    def _lanes(self) -> tuple[str, ...]:
        """The ticked engines, or in a kernel comparison each under each kernel (kvviz.kernels.lanes); what a
        comparison cannot run (a kernel named twice, an engine a kernel cannot decode) is the engines' own
        check's to refuse (check_run_config), so the engines are given as they are."""
        try:
            return lanes(self.checked_engines(), self.current_kernels())
        except ValueError:
            return self.checked_engines()

    def validation_text(self) -> str:
        return self.validation_label.text()

    def show_problem(self, reason: str) -> None:
        """The first reason the form cannot run, under the form (hidden when there is none)."""
        self.validation_label.setText(reason)
        self.validation_label.setVisible(bool(reason))
        self.run_button.setEnabled(not reason)

    def problem(self) -> str:
        if self.env is None:
            return self.tr("Starting: loading PyTorch and the model list...")
        prompt = self.prompt_edit.toPlainText()
        if not prompt.strip():
            return self.tr("Type a prompt.")
        choice = self.model_choice()
        if choice is None:
            return self.tr("Choose a model.")
        if not choice.available:
            return choice.reason or self.tr("This model is not available.")
        if not self.checked_engines():
            return self.tr("Check at least one engine.")
        if "sinks" in self.checked_engines() and self.sinks_spin.value() >= self.window_spin.value():
            return self.tr("Sinks ({0}) must be fewer than the window ({1}): the window counts them.").format(
                self.sinks_spin.value(), self.window_spin.value())
        greedy = self.greedy_check.isChecked()
        if not greedy and self.temperature_spin.value() <= 0:
            return self.tr("Temperature must be above 0 when sampling (tick Greedy for the most likely token).")
        if not greedy and self.top_p_spin.value() <= 0:
            return self.tr("Top-p must be above 0 (1.00 keeps every token).")
        try:
            self.sampling()
        except ValueError as exc:
            return self.tr("Sampling: {0}").format(exc)
        kernels = self.current_kernels()
        if len(set(kernels)) < len(kernels):
            return self.tr("Compare the decode kernel with another kernel (both are {0}).").format(
                QCoreApplication.translate("kernels", KERNELS[kernels[0]].label))
        def tr_kernels(text: str) -> str:
            return QCoreApplication.translate("kernels", text)

        for kernel in kernels:  # an engine the kernel cannot decode with, in the reader's language
            why = engines_refusal(kernel, self.checked_engines(), tr_kernels, tr_kernels)
            if why:
                return why[:1].upper() + why[1:] + "."
        try:  # the commands' bounds, one set (kvviz.options); RunConfig refuses what check_run_config reports
            shared = check_run_config(self.build_run())
            lanes(self.checked_engines(), kernels)  # the compared kernel, too, must run every ticked engine
        except ValueError as exc:  # e.g. a kernel one of the ticked engines cannot decode with
            shared = [str(exc)]
        if shared:
            return shared[0][:1].upper() + shared[0][1:] + "."
        for kernel in kernels:
            why = self.kernel_unavailable(kernel)
            if why:  # a saved or replayed choice this device cannot run (the list greys it out)
                return why[:1].upper() + why[1:] + "."
        cfg = choice.config
        if cfg is not None:
            n_new = self.tokens_spin.value()
            if cfg.tokenizer == "bytes":
                n_prompt = len(prompt.encode("utf-8"))  # the byte tokenizer: one token per UTF-8 byte
                if n_prompt + n_new > cfg.max_seq_len:
                    return self.tr("The prompt ({0} tokens) + new tokens ({1}) = {2} exceeds the model's "
                                   "context of {3}.").format(n_prompt, n_new, n_prompt + n_new, cfg.max_seq_len)
            elif n_new >= cfg.max_seq_len:
                return self.tr("New tokens ({0}) must leave room for the prompt in the model's context of "
                               "{1}.").format(n_new, cfg.max_seq_len)
            if cfg.tokenizer == "bytes":
                stored = n_prompt + n_new - 1  # the last new token is sampled, never stored
                used = catalog.used_settings(self.checked_engines())
                if "window" in used and self.window_spin.value() > stored:
                    return self.tr("Window ({0}) is larger than the run, which stores {1} tokens: it would drop "
                                   "nothing.").format(self.window_spin.value(), stored)
                if "residual" in used and self.residual_spin.value() > stored:
                    return self.tr("Residual ({0}) is larger than the run, which stores {1} tokens.").format(
                        self.residual_spin.value(), stored)
            if self.layer_spin.value() >= cfg.n_layer:
                return self.tr("Attention layer must be below {0}.").format(cfg.n_layer)
            if self.head_spin.value() >= cfg.n_head:
                return self.tr("Attention head must be below {0}.").format(cfg.n_head)
        return ""

    @Slot()
    def _on_changed(self, *_args) -> None:
        self._show_kernels()  # the device may have changed
        self.temperature_spin.setEnabled(not self.greedy_check.isChecked())
        self.top_k_spin.setEnabled(not self.greedy_check.isChecked())
        self.top_p_spin.setEnabled(not self.greedy_check.isChecked())
        used = catalog.used_settings(self.checked_engines())
        for name, label, spin in (("window", self.window_label, self.window_spin),
                                  ("sinks", self.sinks_label, self.sinks_spin),
                                  ("residual", self.residual_label, self.residual_spin),
                                  ("spec_k", self.spec_k_label, self.spec_k_spin),
                                  ("rollback", self.rollback_label, self.rollback_combo)):
            label.setVisible(name in used)
            spin.setVisible(name in used)
        self.changed.emit()

    @Slot()
    def _on_model_changed(self, *_args) -> None:
        choice = self.model_choice()
        if choice is not None and choice.config is not None:
            cfg = choice.config
            self.layer_spin.setMaximum(cfg.n_layer - 1)
            self.head_spin.setMaximum(cfg.n_head - 1)
        else:  # a checkpoint not read yet: the worker checks the range when it loads it
            self.layer_spin.setMaximum(255)
            self.head_spin.setMaximum(255)
        self._on_changed()

    # ------------------------------------------------------------------ saved values
    def save(self, settings: QSettings) -> None:
        s = settings
        s.setValue("run/prompt", self.prompt_edit.toPlainText())
        if self.env is not None:
            s.setValue("run/model", self.current_model())
            s.setValue("run/device", self.device_combo.currentData() or "auto")
            s.setValue("run/engines", ",".join(self.checked_engines()))
        s.setValue("run/kernel", self.current_kernel())
        s.setValue("run/compare_kernel", self.compare_combo.currentData() or "")
        s.setValue("run/repeat", self.repeat_spin.value())
        s.setValue("run/dtype", self.dtype_combo.currentData() or "auto")
        s.setValue("run/tokens", self.tokens_spin.value())
        s.setValue("run/block_size", self.block_spin.value())
        for spin in (self.window_spin, self.sinks_spin, self.residual_spin, self.spec_k_spin):
            s.setValue(f"run/{spin.objectName()}", spin.value())
        s.setValue("run/rollback", self.rollback_combo.currentData() or ROLLBACK_DEFAULT)
        s.setValue("sampling/greedy", self.greedy_check.isChecked())
        s.setValue("sampling/temperature", self.temperature_spin.value())
        s.setValue("sampling/top_k", self.top_k_spin.value())
        s.setValue("sampling/top_p", self.top_p_spin.value())
        s.setValue("sampling/seed", self.seed_spin.value())
        s.setValue("trace/layer", self.layer_spin.value())
        s.setValue("trace/head", self.head_spin.value())

    def restore(self, settings: QSettings) -> None:
        """The values `save` kept, each through the one settings reader (kvviz.ui.settings_file; the window
        hands its SettingsReader in place of the QSettings): a value its field's range (the commands'
        bounds) does not hold is refused there, in one line naming the file and the key, the default kept."""
        from kvviz.ui.settings_file import SettingsReader

        r = SettingsReader.of(settings)
        set_prompt_text(self.prompt_edit, r.text("run/prompt", DEFAULT_PROMPT))
        for key in ("model", "device", "engines"):
            if r.settings.contains(f"run/{key}"):
                self._wanted[key] = r.text(f"run/{key}", "")
        index = self.dtype_combo.findData(r.text("run/dtype", "auto"))
        self.dtype_combo.setCurrentIndex(max(index, 0))
        self._select_combo(self.kernel_combo, r.text("run/kernel", DEFAULT_KERNEL), DEFAULT_KERNEL)
        self._select_combo(self.compare_combo, r.text("run/compare_kernel", ""), "")
        r.spin("run/repeat", self.repeat_spin)
        r.spin("run/tokens", self.tokens_spin)
        r.spin("run/block_size", self.block_spin)
        for spin in (self.window_spin, self.sinks_spin, self.residual_spin, self.spec_k_spin):
            r.spin(f"run/{spin.objectName()}", spin)
        self._select_combo(self.rollback_combo, r.text("run/rollback", ROLLBACK_DEFAULT), ROLLBACK_DEFAULT)
        self.greedy_check.setChecked(r.flag("sampling/greedy", True))
        r.spin("sampling/temperature", self.temperature_spin)
        self.top_k_spin.setValue(0)
        r.spin("sampling/top_k", self.top_k_spin)
        self.top_p_spin.setValue(1.0)
        r.spin("sampling/top_p", self.top_p_spin)
        self.seed_spin.setValue(0)
        r.spin("sampling/seed", self.seed_spin)
        self.layer_spin.setMaximum(255)
        self.head_spin.setMaximum(255)
        self.layer_spin.setValue(0)
        r.spin("trace/layer", self.layer_spin)
        self.head_spin.setValue(0)
        r.spin("trace/head", self.head_spin)


LONG_RUN_CHARS = 2_000  # characters without a space past which the prompt box wraps anywhere


def set_prompt_text(edit: QPlainTextEdit, text: str) -> None:
    """`text` in the prompt box. Qt's word wrap lays out a line with no break in time that grows with its
    square (300,000 characters: 13 s, a million: minutes), so text holding such a run of LONG_RUN_CHARS
    is wrapped anywhere instead (a million characters: 0.5 s); a prompt of words keeps the word wrap."""
    import re

    from PySide6.QtGui import QTextOption

    unbroken = re.search(rf"\S{{{LONG_RUN_CHARS}}}", text) is not None
    edit.setWordWrapMode(QTextOption.WrapMode.WrapAnywhere if unbroken
                         else QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    edit.setPlainText(text)


def inputs_dock(form: RunForm, window: QWidget) -> QDockWidget:
    """The Inputs dock: the form in a scroll area (it scrolls on a short screen, never sideways)."""
    dock = QDockWidget(window)
    dock.setObjectName("inputs_dock")
    # Closable: View > Inputs (its toggle action) is greyed out on a dock that cannot be closed.
    dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                     | QDockWidget.DockWidgetFeature.DockWidgetClosable)
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    scroll.setWidget(form)
    dock.setWidget(scroll)
    zooming_title_bar(dock)  # the title and its buttons grow with View > Zoom as the form does
    return dock
