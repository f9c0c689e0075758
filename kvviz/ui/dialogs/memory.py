"""The memory calculator as a dialog: pick a preset or edit a shape, read what its KV cache costs, and the
roofline of a decode step: its bytes, its FLOP a byte at batch 1 and 8, the tokens/s a bandwidth allows.

Every figure comes from kvviz.costs.memory (the same functions as `kvviz memory`); no torch here. The window
passes plain figures with `set_context`: the run it shows (`run_figures`: its model's config, its read
ceiling, its engines' measured decode tokens/s, from RunInfo and the StepTraces) and the form's CPU
threads, and the app's model presets with `add_models`. The bandwidth then defaults to the read ceiling
of that run, else this machine's at those threads (kvviz.measure.bandwidth's cache file; the dialog never
probes), else the chapter's A100 figure; a typed figure stays until "Measured" puts the ceiling back.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QAbstractSpinBox,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QScrollArea,
    QSpinBox,
    QStackedWidget,
    QStyle,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from kvviz.config import ModelConfig, canonical_dtype
from kvviz.costs import memory
from kvviz.costs.cache_math import MLA_PRESETS, SCORE_BYTES, TABLE_STRATEGIES, mla_figures, strategy_figures
from kvviz.format import fmt_bytes, fmt_count, fmt_figure, fmt_ms
from kvviz.measure import bandwidth
from kvviz.options import BOUNDS
from kvviz.ui.history import RunHistory
from kvviz.ui.model_words import preset_text
from kvviz.ui.qtutil import translator

DTYPES = (("bfloat16", "bf16"), ("float16", "fp16"), ("float32", "fp32"))
CUSTOM = "custom"
MIN_TABLE_ROWS = 5  # each figures table shows at least this many rows (the default lengths are five)
MLA_COLUMN = 1 + len(TABLE_STRATEGIES)  # the strategies table: tokens, each strategy, then MLA
ROOFLINE_BATCH = 8  # the roofline's batch beside batch 1 (its sentence says 8)


@dataclass(frozen=True)
class Ceiling:
    """A measured bandwidth the dialog can stand on, and whose it is."""

    gbps: float
    device: str  # "cpu", "cuda:0"
    threads: int  # the CPU threads it was measured at; 0: not a CPU's, or not known
    whose: str  # "machine": this machine's (the cache file, or a run this window ran); "trace": a saved run's
    kind: str = "read"  # "read": a read ceiling; "copy": a trace saved before the read ceiling (not a bound)


@dataclass(frozen=True)
class EngineRate:
    """One engine's decode steps in a run (the prefill left out): measured, and what a ceiling allows the same
    steps at batch 1, each reading its bytes at the ceiling (kvviz.costs.memory.measured_decode)."""

    engine: str
    steps: int
    ms: float  # summed decode step time
    tokens_per_s: float  # decode steps per second of their own time
    allowed_tokens_per_s: float | None  # None: the run recorded no ceiling or no weights figure

    @property
    def share(self) -> float | None:
        return None if not self.allowed_tokens_per_s else self.tokens_per_s / self.allowed_tokens_per_s


@dataclass(frozen=True)
class RunFigures:
    """What the dialog shows of the run the window shows: plain figures (no torch), from `run_figures`."""

    run_id: str
    model: str
    config: ModelConfig | None  # where the window knows it (a preset, a loaded checkpoint): offered and selected
    dtype: str
    threads: int  # the CPU threads it ran with (RunInfo.read_threads; 0: not a CPU run, or not recorded)
    ceiling: Ceiling | None  # the ceiling the run recorded (RunInfo.bandwidth_gbps), None where none
    first_len: int  # positions the first and the last decode step attended over (0: no decode step yet)
    last_len: int
    engines: tuple[EngineRate, ...]


def run_figures(history: RunHistory, config: ModelConfig | None = None, *, own: bool = True) -> RunFigures | None:
    """The run a history holds as the dialog shows it; None before any run. `own`: this window ran it (its
    ceiling is this machine's), else a replayed trace (the ceiling of the machine that ran it)."""
    info = history.info
    if not info.run_id:
        return None
    gbps, kind = info.bandwidth_gbps(), info.ceiling_kind()
    device = info.device or "-"
    threads = info.read_threads if device == "cpu" else 0
    ceiling = None if gbps is None else Ceiling(gbps, device, threads, "machine" if own else "trace", kind or "read")
    shape = info.wall()
    rates, lens = [], []
    for engine, traces in history.traces.items():
        steps = [(t.pos_stop, t.latency_ms) for t in traces if t.phase == "decode"]
        ms = float(sum(latency for _, latency in steps))
        if not steps or not ms > 0:
            continue
        lens += [steps[0][0], steps[-1][0]]
        allowed = None
        if shape is not None and gbps is not None:
            allowed = memory.measured_decode(engine, shape, steps, gbps).allowed_tokens_per_s
        rates.append(EngineRate(engine, len(steps), ms, len(steps) / (ms * 1e-3), allowed))
    return RunFigures(run_id=info.run_id, model=info.model_name, config=config, dtype=info.dtype, threads=threads,
                      ceiling=ceiling, first_len=min(lens, default=0), last_len=max(lens, default=0),
                      engines=tuple(rates))


class MemoryDialog(QDialog):
    """Non-modal; `set_preset(name)`, `set_context(run, threads)` and `report()` drive and read it from code and
    tests."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._configs: dict[str, ModelConfig] = {}
        self._descriptions: dict[str, str] = {}
        self._custom_base: ModelConfig = memory.MEMORY_PRESETS["qwen3-0.6b"].config
        self._report: memory.MemoryReport | None = None
        self._run: RunFigures | None = None  # the run the window shows (set_context)
        self._threads: int | None = None  # the form's CPU threads; None: the ceiling measured last
        self._ceiling: Ceiling | None = None  # the measured ceiling the bandwidth defaults to, and returns to
        self._source = "default"  # the bandwidth: "measured" (_ceiling), "typed", "default" (the chapter's A100)
        self._figures_width = self._figures_height = 0  # the figures' held height, and the width it is for

        self.model_combo = QComboBox()
        # a checkpoint's folder path as a model's name: the box keeps its width, the path shows in the list
        self.model_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model_combo.setMinimumContentsLength(16)
        self.description_label = QLabel()
        self.description_label.setWordWrap(True)
        self.layers_spin = _spin(1, 1024)
        self.kv_heads_spin = _spin(1, 1024)
        self.head_dim_spin = _spin(1, 8192)
        self.dtype_combo = QComboBox()
        for name, short in DTYPES:
            self.dtype_combo.addItem(short, name)
        self.lengths_edit = QLineEdit(" ".join(str(n) for n in memory.DEFAULT_TOKENS))
        self.bandwidth_spin = QDoubleSpinBox()
        self.bandwidth_spin.setRange(0.1, BOUNDS["bandwidth_gbps"].high)  # `kvviz memory --bandwidth-gbps`'s bound
        self.bandwidth_spin.setDecimals(1)
        self.bandwidth_spin.setValue(memory.DEFAULT_BANDWIDTH_GBPS)
        self.bandwidth_spin.setSuffix(" GB/s")
        self.source_label = QLabel()  # whose figure it is: a read ceiling, typed, the chapter's A100
        self.source_label.setWordWrap(True)
        self.measured_button = QToolButton()  # back to the measured ceiling after typing another figure
        self.measured_button.clicked.connect(self.use_measured)
        self.block_spin = _bounded_spin("block_size", memory.DEFAULT_BLOCK_SIZE)
        self.prompt_spin = _bounded_spin("prompt_tokens", 0)

        # Every label kept, so a language switch (retranslate) reaches an open dialog.
        self.labels = {key: QLabel() for key in ("model", "layers", "kv_heads", "head_dim", "shape", "lengths",
                                                 "bandwidth", "block", "prompt", "window", "sinks", "residual",
                                                 "strategies", "mla")}
        form = QFormLayout()
        # A row too wide beside its label goes under it: at 150% zoom the rows had made the content
        # wider than an 800 px dialog, every paragraph below cut off at its right edge.
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.addRow(self.labels["model"], self.model_combo)
        form.addRow("", self.description_label)
        shape = QHBoxLayout()
        for key, spin in (("layers", self.layers_spin), ("kv_heads", self.kv_heads_spin),
                          ("head_dim", self.head_dim_spin)):
            shape.addWidget(self.labels[key])
            shape.addWidget(spin)
        shape.addWidget(self.dtype_combo)
        form.addRow(self.labels["shape"], shape)
        form.addRow(self.labels["lengths"], self.lengths_edit)
        bandwidth_row = QHBoxLayout()
        bandwidth_row.addWidget(self.bandwidth_spin, 1)
        bandwidth_row.addWidget(self.measured_button)
        form.addRow(self.labels["bandwidth"], bandwidth_row)
        form.addRow("", self.source_label)  # a row of its own: wrapped beside the field, it was cut in height
        form.addRow(self.labels["block"], self.block_spin)
        form.addRow(self.labels["prompt"], self.prompt_spin)
        # The cache strategies beside the exact one (kvviz.costs.cache_math): W, S, R and an MLA shape
        self.window_spin, self.sinks_spin = _bounded_spin("window", 4096), _bounded_spin("sinks", 4)
        self.residual_spin = _bounded_spin("residual", 0, low=0)  # 0: off
        strategies = QGridLayout()  # two rows: in one, the three are wider than the dialog at 150% zoom
        for i, (key, spin) in enumerate((("window", self.window_spin), ("sinks", self.sinks_spin),
                                         ("residual", self.residual_spin))):
            strategies.addWidget(self.labels[key], i // 2, 2 * (i % 2))
            strategies.addWidget(spin, i // 2, 2 * (i % 2) + 1)
        strategies.setColumnStretch(1, 1)
        strategies.setColumnStretch(3, 1)
        form.addRow(self.labels["strategies"], strategies)
        self.mla_combo = QComboBox()
        self.mla_combo.addItem("", "")
        for name in MLA_PRESETS:
            self.mla_combo.addItem(name, name)
        form.addRow(self.labels["mla"], self.mla_combo)

        self.per_layer_label = QLabel()
        self.per_token_label = QLabel()
        self.crossover_label = QLabel()  # where the K/V read overtakes the weights read (kvviz.costs.wall)
        self.measured_label = QLabel()  # the run shown: its engines' decode tokens/s beside what the ceiling allows
        for label in (self.per_layer_label, self.per_token_label, self.crossover_label, self.measured_label):
            label.setWordWrap(True)  # to the dialog's width, at any zoom and in Chinese
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.measured_label.hide()
        self.error_label = QLabel()
        self.error_label.setStyleSheet("color: #c62828")
        self.error_label.setWordWrap(True)
        self.error_label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.notes_label = QLabel()
        self.notes_label.setWordWrap(True)
        # The figures or the error in one place of one height: an error had pushed the tables down.
        self.figures = QStackedWidget()
        page = QWidget()
        page_layout = QVBoxLayout(page)
        page_layout.setContentsMargins(0, 0, 0, 0)
        for label in (self.per_layer_label, self.per_token_label, self.crossover_label, self.measured_label,
                      self.notes_label):
            page_layout.addWidget(label)
        page_layout.addStretch(1)
        self.figures.addWidget(page)
        self.figures.addWidget(self.error_label)
        self.figures.installEventFilter(self)  # a new width: its held height again (_hold_figures_height)

        self.table = _table(9)
        self.strategy_table = _table(MLA_COLUMN + 1)
        self.strategy_label = QLabel()
        self.strategy_label.setWordWrap(True)
        self.chapter_check = QCheckBox()
        self.chapter_text = QPlainTextEdit()
        self.chapter_text.setReadOnly(True)
        self.chapter_text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.chapter_text.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        for button in buttons.buttons():  # Return in the lengths field recomputes; it had closed the dialog
            button.setAutoDefault(False)
            button.setDefault(False)

        # Everything but Close in a scroll area: on a short screen it scrolls instead of squeezing the
        # tables to two rows and re-wrapping the labels each time one of them changes.
        content = QWidget()
        layout = QVBoxLayout(content)
        layout.addLayout(form)
        layout.addWidget(self.figures)
        layout.addWidget(self.table, 3)
        layout.addWidget(self.strategy_label)
        layout.addWidget(self.strategy_table, 2)
        layout.addWidget(self.chapter_check)
        layout.addWidget(self.chapter_text, 2)
        scroll = self.scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(content)
        outer = QVBoxLayout(self)
        outer.addWidget(scroll, 1)
        outer.addWidget(buttons)
        self.retranslate()  # the texts first: the width below is theirs, at the app's zoom
        self.resize(max(800, content.sizeHint().width() + 40), 760)  # the opener keeps it on the screen

        for name, preset in memory.MEMORY_PRESETS.items():
            self._add(name, preset.config, preset.description)
        self.model_combo.addItem("", CUSTOM)
        self.model_combo.setItemText(self.model_combo.findData(CUSTOM), self.tr("custom (edit the shape)"))

        self.model_combo.currentIndexChanged.connect(self._on_model_changed)
        for spin in (self.layers_spin, self.kv_heads_spin, self.head_dim_spin):
            spin.valueChanged.connect(self._on_shape_edited)
        self.dtype_combo.currentIndexChanged.connect(self._recompute)
        self.lengths_edit.textChanged.connect(self._recompute)
        self.bandwidth_spin.valueChanged.connect(self._on_bandwidth_typed)
        self.block_spin.valueChanged.connect(self._recompute)
        self.prompt_spin.valueChanged.connect(self._recompute)
        for spin in (self.window_spin, self.sinks_spin, self.residual_spin):
            spin.valueChanged.connect(self._recompute)
        self.mla_combo.currentIndexChanged.connect(self._recompute)
        self.chapter_check.toggled.connect(self.chapter_text.setVisible)
        self.chapter_check.toggled.connect(self._recompute)
        # The wheel scrolls the dialog: a box or a spin under the pointer changes only once clicked or tabbed to
        # (scrolling had switched "Latent attention (MLA)" from none to deepseek-v3 on its way past).
        for box in (*self.findChildren(QComboBox), *self.findChildren(QAbstractSpinBox)):
            box.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            box.installEventFilter(self)
        self._ceiling = self._measured_ceiling()  # alone (no window): shown beside the A100 figure, not used
        self._show_bandwidth_source()
        self.set_preset("qwen3-0.6b")

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        """A wheel over a box or spin that has no focus scrolls the dialog instead of turning into a value:
        handed to the scroll area here (Qt passes an ignored wheel to the parents only when it came from the
        window system, not when sent)."""
        if event.type() == QEvent.Type.Wheel and isinstance(obj, (QComboBox, QAbstractSpinBox)) and not obj.hasFocus():
            QCoreApplication.sendEvent(self.scroll.viewport(), event)
            return True
        if obj is self.figures and event.type() == QEvent.Type.Resize and self.figures.width() != self._figures_width:
            self._hold_figures_height()
        return super().eventFilter(obj, event)

    def retranslate(self) -> None:
        """Every string in the current language (again after a switch, with the dialog open)."""
        self.setWindowTitle(self.tr("KV cache memory calculator"))
        self.lengths_edit.setToolTip(self.tr("Cache lengths n in tokens, separated by spaces or commas"))
        self.measured_button.setText(self.tr("Measured"))
        self._show_bandwidth_source()
        self.bandwidth_spin.setToolTip(self.tr("Memory bandwidth; 1 GB = 10^9 bytes (an A100 has about 2000 GB/s)"))
        self.prompt_spin.setToolTip(self.tr("Tokens written by one prefill before decoding: they copy nothing"))
        texts = {"model": self.tr("Model"), "layers": self.tr("layers"), "kv_heads": self.tr("KV heads"),
                 "head_dim": self.tr("head_dim"), "shape": self.tr("Shape"), "lengths": self.tr("Lengths (tokens)"),
                 "bandwidth": self.tr("Bandwidth"), "block": self.tr("Paged block size"),
                 "prompt": self.tr("Prompt tokens"), "window": self.tr("window W"), "sinks": self.tr("sinks S"),
                 "residual": self.tr("int8 residual R"), "strategies": self.tr("Strategies"),
                 "mla": self.tr("Latent attention (MLA)")}
        for key, text in texts.items():
            self.labels[key].setText(text)
        self.residual_spin.setSpecialValueText(self.tr("off"))
        self.mla_combo.setItemText(0, self.tr("none"))
        self.model_combo.setItemText(self.model_combo.findData(CUSTOM), self.tr("custom (edit the shape)"))
        self.columns = (self.tr("tokens"), self.tr("KV cache"), self.tr("step copy"), self.tr("its time"),
                        self.tr("total copy"), self.tr("its time"), self.tr("blocks"), self.tr("empty slots"),
                        self.tr("wasted"))
        self.table.setHorizontalHeaderLabels(list(self.columns))
        self.table.setToolTip(self.tr(
            "step copy: what torch.cat copies on the step that brings the cache to n tokens (the n-1 already "
            "held, K and V, every layer); total copy: summed over the generation; time: bytes / bandwidth, "
            "each byte counted once; blocks and empty slots: a paged cache's last block"))
        names = {"full": self.tr("full"), "window": self.tr("window"), "sinks": self.tr("sinks"),
                 "int8": self.tr("int8")}  # the score caches go by their methods' names
        self.strategy_columns = (self.tr("tokens"), *(names.get(s, s) for s in TABLE_STRATEGIES), self.tr("MLA"))
        self.strategy_table.setHorizontalHeaderLabels(list(self.strategy_columns))
        self.strategy_table.setToolTip(self.tr(
            "Bytes each cache holds at each length, all layers: full = every exact cache; window and sinks hold "
            "at most W tokens (W counts the sinks); tova, h2o and knorm hold W tokens too, chosen by a score, and "
            "h2o a score per token held besides; snapkv cuts the prompt to W once, then keeps every new "
            "token; int8 holds 1 B a value plus a 4 B scale per token and KV "
            "head, and R tokens at full precision; MLA holds one latent (kv_lora_rank) plus the rotary key per "
            "token per layer, for the chosen published shape"))
        self.chapter_check.setText(self.tr("Show the chapter's copy table (in its own convention)"))
        if self.model_combo.currentIndex() >= 0:
            self._on_model_changed(self.model_combo.currentIndex())  # the description and figures again

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate()
        super().changeEvent(event)

    def _description(self, name: str) -> str:
        """A model's one line in the current language: kvviz.costs.memory's presets and the window's
        (kvviz.ui.model_words); any other text (a checkpoint's) as given."""
        text = self._descriptions.get(name, "")
        known = {
            "the chapter's tiny model: 2 layers, 4 heads of 32, fp32":
                self.tr("the chapter's tiny model: 2 layers, 4 heads of 32, fp32"),
            "Qwen3-0.6B's published config: 28 layers, 16 Q / 8 KV heads, head_dim 128, bf16":
                self.tr("Qwen3-0.6B's published config: 28 layers, 16 Q / 8 KV heads, head_dim 128, bf16"),
            "Qwen3-0.6B as the chapter assumed it: head_dim 64 (hidden 1024 / 16 heads); not the real model":
                self.tr("Qwen3-0.6B as the chapter assumed it: head_dim 64 (hidden 1024 / 16 heads); not the real "
                        "model"),
            "GPT-2 small's published config: 12 layers, 12 heads of 64, every head cached (no grouped-query "
            "attention), fp32":
                self.tr("GPT-2 small's published config: 12 layers, 12 heads of 64, every head cached (no "
                        "grouped-query attention), fp32"),
            "a Llama-3-70B-class model: 80 layers, 64 Q / 8 KV heads, head_dim 128, bf16":
                self.tr("a Llama-3-70B-class model: 80 layers, 64 Q / 8 KV heads, head_dim 128, bf16"),
        }
        return known.get(text) or preset_text(text)

    def _note(self, note: str) -> str:
        """One of kvviz.costs.memory's notes in the current language."""
        if note == memory.QWEN3_NOTE:
            return self.tr("the chapter prints 56 KB per token for Qwen3-0.6B because it took head_dim 64 (hidden "
                           "1024 / 16 heads); the published config sets head_dim 128, so a token holds 114,688 B "
                           "(112 KiB) in bf16 and every figure in the chapter's copy table doubles")
        if note == memory.CHAPTER_NOTE:
            return self.tr("this is the chapter's assumed shape (head_dim 64), not Qwen3-0.6B's published one "
                           "(head_dim 128)")
        found = re.fullmatch(r"(\d+) tokens is beyond the model's context window \((\d+)\)", note)
        if found:
            return self.tr("{0} tokens is beyond the model's context window ({1})").format(*found.groups())
        return note

    # -- driving it ----------------------------------------------------------------------------
    def add_models(self, configs: Mapping[str, ModelConfig], descriptions: Mapping[str, str] | None = None) -> None:
        """Offer more models (the app's presets, a loaded checkpoint): listed before 'custom'."""
        for name, cfg in configs.items():
            self._add(name, cfg, (descriptions or {}).get(name, ""))

    def set_context(self, run: RunFigures | None, threads: int | None = None) -> None:
        """What the window shows: the run (`run_figures`; None before any) and the form's CPU threads. A run
        not shown before has its model offered and selected, at the run's dtype; the bandwidth, unless typed,
        becomes the run's read ceiling, else this machine's at `threads`, else the chapter's A100 figure."""
        new = run is not None and (self._run is None or run.run_id != self._run.run_id)
        self._run, self._threads = run, threads
        self._ceiling = self._measured_ceiling()
        if self._source != "typed":
            self._source = "default" if self._ceiling is None else "measured"
            self._set_bandwidth(self._ceiling.gbps if self._ceiling else memory.DEFAULT_BANDWIDTH_GBPS)
        self._show_bandwidth_source()
        if new and run.config is not None:
            self._add(run.model, run.config, self._descriptions.get(run.model, ""))
            self.set_preset(run.model)
            index = self.dtype_combo.findData(_dtype_name(run.dtype))
            if index >= 0:
                self.dtype_combo.setCurrentIndex(index)
        self._recompute()

    def run_id(self) -> str:
        """The run it shows ("" for none)."""
        return self._run.run_id if self._run is not None else ""

    def use_measured(self) -> None:
        """"Measured": the bandwidth back to the measured ceiling after a typed figure."""
        if self._ceiling is None:
            return
        self._source = "measured"
        self._set_bandwidth(self._ceiling.gbps)
        self._show_bandwidth_source()
        self._recompute()

    def bandwidth_gbps(self) -> float:
        """The figure the times and the roofline are at: the measured ceiling's own (not the field's rounding),
        unless typed."""
        return self._ceiling.gbps if self._source == "measured" else self.bandwidth_spin.value()

    def bandwidth_source(self) -> str:
        """"measured" (a ceiling), "typed" or "default" (the chapter's A100 figure): what bandwidth_gbps is."""
        return self._source

    def _measured_ceiling(self) -> Ceiling | None:
        """The run's read ceiling (its device, its threads), else this machine's at the run's CPU threads or the
        form's from the cache file (alone, with no window: the one measured last), else None."""
        run = self._run
        if run is not None and run.ceiling is not None and run.ceiling.kind == "read":
            return run.ceiling
        threads = run.threads if run is not None and run.threads else self._threads
        found = bandwidth.cached_read_ceiling() if threads is None else bandwidth.cached_read_ceiling(threads)
        return None if found is None else Ceiling(found.read_gbps, "cpu", found.threads, "machine")

    def _ceiling_name(self, c: Ceiling) -> str:
        """"this machine's read ceiling, cpu, 1 thread", "the read ceiling the trace recorded, cuda:0", ..."""
        if c.threads:
            where = (self.tr("{0}, 1 thread") if c.threads == 1 else self.tr("{0}, {1} threads")).format(
                c.device, c.threads)
        else:
            where = c.device
        if c.kind == "copy":
            return self.tr("the copy bandwidth the trace recorded, {0} (not a read ceiling)").format(where)
        if c.whose == "trace":
            return self.tr("the read ceiling the trace recorded, {0}").format(where)
        return self.tr("this machine's read ceiling, {0}").format(where)

    def _show_bandwidth_source(self) -> None:
        source = self.bandwidth_source()
        if source == "measured":
            text = self._ceiling_name(self._ceiling)
        elif source == "typed":
            text = self.tr("typed")
        else:
            text = self.tr("an A100's, as the chapter takes it")
        self.source_label.setText(text)
        self.source_label.setToolTip(self.tr("The bandwidth above is {0}").format(text))
        self.measured_button.setEnabled(self._ceiling is not None and source != "measured")
        self.measured_button.setToolTip(
            self.tr("Back to {0}: {1} GB/s").format(self._ceiling_name(self._ceiling), fmt_figure(self._ceiling.gbps))
            if self._ceiling is not None else self.tr("No read ceiling is measured on this machine yet"))

    def _set_bandwidth(self, gbps: float) -> None:
        self.bandwidth_spin.blockSignals(True)
        self.bandwidth_spin.setValue(gbps)
        self.bandwidth_spin.blockSignals(False)

    def _on_bandwidth_typed(self) -> None:
        self._source = "typed"
        self._show_bandwidth_source()
        self._recompute()

    def set_preset(self, name: str) -> None:
        index = self.model_combo.findData(name)
        if index < 0:
            raise ValueError(f"unknown model {name!r} in the memory calculator")
        if index == self.model_combo.currentIndex():
            self._on_model_changed(index)
        else:
            self.model_combo.setCurrentIndex(index)

    def set_lengths(self, lengths) -> None:
        self.lengths_edit.setText(" ".join(str(n) for n in lengths))

    def report(self) -> memory.MemoryReport | None:
        """The figures shown now, or None while the input is invalid (the reason is shown)."""
        return self._report

    def config(self) -> ModelConfig:
        name = self.model_combo.currentData()
        if name != CUSTOM:
            return self._configs[name]
        base = self._custom_base
        kv = self.kv_heads_spin.value()
        return base.replace(name=CUSTOM, n_layer=self.layers_spin.value(), n_kv_head=kv,
                            n_head=kv * max(1, base.n_head // base.n_kv_head), head_dim=self.head_dim_spin.value())

    # -- internals -----------------------------------------------------------------------------
    def _add(self, name: str, cfg: ModelConfig, description: str) -> None:
        if name in self._configs:
            self._configs[name] = cfg
            self._descriptions[name] = description
            return
        self._configs[name] = cfg
        self._descriptions[name] = description
        custom = self.model_combo.findData(CUSTOM)
        if custom < 0:
            self.model_combo.addItem(name, name)
        else:
            self.model_combo.insertItem(custom, name, name)

    def _on_model_changed(self, index: int) -> None:
        name = self.model_combo.itemData(index)
        if name != CUSTOM:
            cfg = self._configs[name]
            self._custom_base = cfg
            self.description_label.setText(self._description(name))
            self.description_label.setVisible(bool(self.description_label.text()))  # a checkpoint's: none
            for spin, value in ((self.layers_spin, cfg.n_layer), (self.kv_heads_spin, cfg.n_kv_head),
                                (self.head_dim_spin, cfg.head_dim)):
                spin.blockSignals(True)
                spin.setValue(value)
                spin.blockSignals(False)
            self.dtype_combo.blockSignals(True)
            self.dtype_combo.setCurrentIndex(self.dtype_combo.findData(cfg.dtype))
            self.dtype_combo.blockSignals(False)
        else:
            self.description_label.setText(self.tr("Your own shape, starting from {0}").format(self._custom_base.name))
            self.description_label.show()
        self._recompute()

    def _on_shape_edited(self) -> None:
        custom = self.model_combo.findData(CUSTOM)
        if self.model_combo.currentIndex() != custom:
            self.model_combo.blockSignals(True)
            self.model_combo.setCurrentIndex(custom)
            self.model_combo.blockSignals(False)
            self.description_label.setText(self.tr("Your own shape, starting from {0}").format(self._custom_base.name))
            self.description_label.show()
        self._recompute()

    def _recompute(self) -> None:
        try:
            lengths = parse_lengths(self.lengths_edit.text())
            cfg = self.config()
            report = memory.compute(cfg, lengths, dtype=self.dtype_combo.currentData(),
                                    bandwidth_gbps=self.bandwidth_gbps(), block_size=self.block_spin.value(),
                                    prompt_tokens=self.prompt_spin.value())
            if self.sinks_spin.value() >= self.window_spin.value():
                raise ValueError(self.tr("Sinks ({0}) must be fewer than the window ({1}): the window counts "
                                         "them.").format(self.sinks_spin.value(), self.window_spin.value()))
        except ValueError as exc:
            # Nothing of the last good input stays: its notes ("beyond the model's context window")
            # and chapter table beside the error would read as if they held for the text now typed.
            self._report = None
            self.error_label.setText(str(exc))
            self.figures.setCurrentWidget(self.error_label)
            self.table.setRowCount(0)
            self.strategy_table.setRowCount(0)
            self.strategy_label.clear()
            self.per_layer_label.clear()
            self.per_token_label.clear()
            self.crossover_label.clear()
            self.measured_label.clear()
            self.notes_label.clear()
            self.notes_label.hide()
            self.chapter_text.clear()
            return
        self._report = report
        self.figures.setCurrentIndex(0)
        self._show(report)
        self._hold_figures_height()

    def _hold_figures_height(self) -> None:
        """The figures' place keeps the tallest it has been at its width: a shorter text (an error) never pulls
        the tables up, and the next figures never push them down again. Their height at the width they have
        (the labels wrap): a size hint's, at a width of its own, had left a blank the height of three paragraphs
        above the tables once the dialog was wider; a new width starts again."""
        width = self.figures.width()
        page = self.figures.widget(0)
        height = page.heightForWidth(width) if page.hasHeightForWidth() else page.sizeHint().height()
        if width != self._figures_width:
            self._figures_width, self._figures_height = width, 0
        self._figures_height = max(self._figures_height, height)
        self.figures.setMinimumHeight(self._figures_height)

    def _show(self, r: memory.MemoryReport) -> None:
        c = r.config
        self.per_layer_label.setText(self.tr("KV per token per layer: 2 × {0} × {1} × {2} B = {3} B ({4})").format(
            c.n_kv_head, c.head_dim, r.dtype_bytes, fmt_count(r.bytes_per_token_per_layer),
            fmt_bytes(r.bytes_per_token_per_layer)))
        self.per_token_label.setText(self.tr("KV per token, {0} layers: {1} B ({2})").format(
            c.n_layer, fmt_count(r.bytes_per_token), fmt_bytes(r.bytes_per_token)))
        self.crossover_label.setText(self.tr(
            "A decode step reads {0} of weights ({1}, d_model, d_ff, vocab included); from {2} tokens on it "
            "reads more K/V than weights: the cache, not the model, then dominates the step").format(
            fmt_bytes(r.decode_weights_bytes), c.name, fmt_count(r.crossover_tokens))
            + "\n" + self._roofline_text(r))
        measured = self._measured_text()
        self.measured_label.setText(measured)
        self.measured_label.setVisible(bool(measured))
        self.table.setRowCount(len(r.lengths))
        for row, f in enumerate(r.lengths):
            cells = [(fmt_count(f.tokens), None), (fmt_bytes(f.cache_bytes), f.cache_bytes),
                     (fmt_bytes(f.step_copy_bytes), f.step_copy_bytes), (fmt_ms(f.step_copy_ms), None),
                     (fmt_bytes(f.total_copy_bytes), f.total_copy_bytes), (fmt_ms(f.copy_ms), None),
                     (fmt_count(f.blocks), f.paged_bytes), (fmt_count(f.wasted_slots), None),
                     (fmt_bytes(f.wasted_bytes), f.wasted_bytes)]
            for col, (text, exact) in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if exact is not None:
                    item.setToolTip(f"{fmt_count(exact)} B")
                self.table.setItem(row, col, item)
        self._show_strategies(r)
        self.notes_label.setText("\n".join(self._note(n) for n in r.notes))
        self.notes_label.setVisible(bool(r.notes))
        if self.chapter_check.isChecked():
            self.chapter_text.setPlainText("\n".join(memory.chapter_comparison(
                c, [f.tokens for f in r.lengths], dtype=r.dtype, bandwidth_gbps=r.bandwidth_gbps)))


    def _roofline_text(self, r: memory.MemoryReport) -> str:
        """The roofline at the longest length (kvviz.costs.memory.roofline), at the dialog's bandwidth, batch 1 and 8;
        then whose that bandwidth is, or, beside a typed one, the measured ceiling."""
        one, eight = memory.roofline(r.config, [r.lengths[-1].tokens], ceiling_gbps=r.bandwidth_gbps,
                                     batch=ROOFLINE_BATCH, dtype=r.dtype).points[0]
        text = self.tr("Roofline at {0} positions and {1} GB/s: a decode step reads {2}, {3} FLOP a byte, "
                       "{4} tokens/s at most; batch 8 reads {5}, {6} FLOP a byte, {7} tokens/s in all").format(
            fmt_count(one.kv_len), fmt_figure(r.bandwidth_gbps), fmt_bytes(one.bytes_per_step), f"{one.intensity:.2g}",
            fmt_figure(one.tokens_per_s), fmt_bytes(eight.bytes_per_step), f"{eight.intensity:.2g}",
            fmt_figure(eight.tokens_per_s))
        c = self._ceiling
        if self._source == "measured":
            return text + self.tr(" ({0} GB/s is {1})").format(fmt_figure(c.gbps), self._ceiling_name(c))
        if c is not None and c.whose == "machine" and c.device == "cpu" and c.threads:
            return text + self.tr(" (this machine's read ceiling: {0} GB/s at {1} thread(s))").format(
                fmt_figure(c.gbps), c.threads)
        if c is not None:
            return text + self.tr(" ({0}: {1} GB/s)").format(self._ceiling_name(c), fmt_figure(c.gbps))
        if self._source == "default":
            return text + self.tr(" ({0} GB/s is an A100's memory bandwidth, as the chapter takes it: no read "
                                  "ceiling is measured on this machine yet)").format(fmt_figure(r.bandwidth_gbps))
        return text

    def _measured_text(self) -> str:
        """The run shown: each engine's decode tokens/s beside what the run's ceiling allows the same steps at
        batch 1 (empty with no run)."""
        run = self._run
        if run is None:
            return ""
        if not run.engines:
            return self.tr("Measured: the run shown ({0}) has no decode step yet; a run's figures come when it "
                           "ends").format(run.model)
        c = run.ceiling
        shared = c is not None and all(e.share is not None for e in run.engines)
        if shared:
            head = self.tr("Measured in the run shown ({0}, {1}): its decode steps over {2} to {3} positions (the "
                           "prefill left out); allowed: the same steps at batch 1, each reading its bytes at {4} GB/s "
                           "({5}):").format(run.model, run.dtype, fmt_count(run.first_len), fmt_count(run.last_len),
                                            fmt_figure(c.gbps), self._ceiling_name(c))
        else:
            head = self.tr("Measured in the run shown ({0}, {1}): its decode steps over {2} to {3} positions (the "
                           "prefill left out); the trace records no ceiling or no weights figure to set them "
                           "against:").format(run.model, run.dtype, fmt_count(run.first_len), fmt_count(run.last_len))
        lines = [head]
        for e in run.engines:
            if shared:
                lines.append(self.tr("{0}: {1} tokens/s measured, {2}% of the {3} tokens/s allowed").format(
                    e.engine, fmt_figure(e.tokens_per_s), f"{100 * e.share:.0f}", fmt_figure(e.allowed_tokens_per_s)))
            else:
                lines.append(self.tr("{0}: {1} tokens/s measured").format(e.engine, fmt_figure(e.tokens_per_s)))
        return "\n".join(lines)

    def strategy_rows(self) -> list[list[str]]:
        """The strategies table's text, row by row (for tests and copy)."""
        t = self.strategy_table
        return [[t.item(r, c).text() for c in range(t.columnCount()) if not t.isColumnHidden(c)]
                for r in range(t.rowCount())]

    def _show_strategies(self, r: memory.MemoryReport) -> None:
        W, S, R = self.window_spin.value(), self.sinks_spin.value(), self.residual_spin.value() or None
        mla = self.mla_combo.currentData()
        self.strategy_table.setColumnHidden(MLA_COLUMN, not mla)
        prompt = self.prompt_spin.value()
        self.strategy_table.setRowCount(len(r.lengths))
        for row, f in enumerate(r.lengths):
            figs = [strategy_figures(r.config, s, f.tokens, dtype=r.dtype, window=W, sinks=S, residual=R,
                                     prompt=min(prompt, f.tokens)) for s in TABLE_STRATEGIES]
            if mla:
                figs.append(mla_figures(MLA_PRESETS[mla], f.tokens))
            cells = [fmt_count(f.tokens)] + [fmt_bytes(x.total_bytes) for x in figs]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if col:
                    item.setToolTip(f"{fmt_count(figs[col - 1].total_bytes)} B")
                self.strategy_table.setItem(row, col, item)
        q = strategy_figures(r.config, "int8", 1, dtype=r.dtype).bytes_per_token
        text = self.tr("Window and sinks stop growing at {0} tokens ({1}); int8 holds {2} B per token, {3}% of "
                       "{4} B.").format(fmt_count(W), fmt_bytes(W * r.bytes_per_token), fmt_count(q),
                                        f"{100 * q / r.bytes_per_token:.1f}", fmt_count(r.bytes_per_token))
        text += " " + self.tr("tova, h2o and knorm hold the same {0} tokens, chosen by a score; h2o keeps {1} B of "
                              "score per token held besides ({2} at {0}).").format(fmt_count(W), SCORE_BYTES,
                                                                                  fmt_bytes(W * SCORE_BYTES))
        if prompt > W:
            text += " " + self.tr("snapkv cuts the {0}-token prompt to {1} once, then keeps every new token.").format(
                fmt_count(prompt), fmt_count(W))
        else:
            text += " " + self.tr("snapkv keeps every token: a prompt of {0} tokens is within W, nothing to "
                                  "cut.").format(fmt_count(prompt))
        if mla:
            shape = MLA_PRESETS[mla]
            text += " " + self.tr("MLA {0}: ({1} + {2}) values x {3} layers = {4} B per token, {5}% of its {6} "
                                  "heads uncompressed.").format(
                mla, shape.kv_lora_rank, shape.qk_rope_head_dim, shape.n_layer, fmt_count(shape.bytes_per_token()),
                f"{100 * shape.bytes_per_token() / shape.mha_bytes_per_token():.1f}", shape.n_head)
        self.strategy_label.setText(text)


def parse_lengths(text: str) -> list[int]:
    """"100 500, 1000" -> [100, 500, 1000]; ValueError (in the current language) for anything that is not
    a whole number within `kvviz memory --tokens`'s bound (kvviz.options.BOUNDS["tokens"])."""
    items = [s for s in re.split(r"[\s,;]+", text.strip()) if s]
    if not items:
        raise ValueError(_tr("give at least one length in tokens"))
    lengths = []
    for s in items:
        if not re.fullmatch(r"[0-9]+", s) or (len(s) <= 40 and int(s) < 1):
            raise ValueError(_tr("{0} is not a length in tokens (a whole number, at least 1)").format(repr(s)[:40]))
        if len(s) > 40 or not BOUNDS["tokens"].holds(int(s)):  # int() of 4,300 digits and more raises
            raise ValueError(_tr("{0} tokens is more than {1:,}, the most `kvviz memory --tokens` takes").format(
                s if len(s) <= 40 else s[:40] + "…", int(BOUNDS["tokens"].high)))
        lengths.append(int(s))
    return lengths


_tr = translator("MemoryDialog")


def _dtype_name(dtype: str) -> str:
    """A run's dtype as the dtype box holds it ("float32"), or "" for one it does not know."""
    try:
        return canonical_dtype(dtype)
    except ValueError:
        return ""


def _table(columns: int) -> QTableWidget:
    """A read-only figures table that shows at least MIN_TABLE_ROWS rows, whatever the dialog's size (it had
    shown two), its horizontal scroll bar included where the columns are wider than the dialog."""
    table = QTableWidget(0, columns)
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    rows = table.verticalHeader().defaultSectionSize() * MIN_TABLE_ROWS
    scroll_bar = table.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
    table.setMinimumHeight(table.horizontalHeader().sizeHint().height() + rows + 2 * table.frameWidth() + 2
                           + scroll_bar)
    return table


def _bounded_spin(key: str, value: int, low: int | None = None) -> QSpinBox:
    """A spin box over the bound every command takes for `key` (kvviz.options.BOUNDS); `low` for an off value."""
    bound = BOUNDS[key]
    return _spin(int(bound.low) if low is None else low, int(bound.high), value)


def _spin(low: int, high: int, value: int | None = None) -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(low, high)
    spin.setGroupSeparatorShown(True)
    if value is not None:
        spin.setValue(value)
    return spin

