"""The memory calculator as a dialog: pick a preset or edit a shape, read what its KV cache costs.

Every figure comes from kvviz.memory (the same functions as `kvviz memory`); no torch here. The
window may pass the model presets' configs with `add_models` (it learns them from the worker).
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from kvviz import memory
from kvviz.cache_math import MLA_PRESETS, mla_figures, strategy_figures
from kvviz.config import ModelConfig
from kvviz.format import fmt_bytes, fmt_count, fmt_ms

DTYPES = (("bfloat16", "bf16"), ("float16", "fp16"), ("float32", "fp32"))
CUSTOM = "custom"


class MemoryDialog(QDialog):
    """Non-modal; `set_preset(name)` and `report()` drive and read it from code and tests."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("KV cache memory calculator"))
        self._configs: dict[str, ModelConfig] = {}
        self._descriptions: dict[str, str] = {}
        self._custom_base: ModelConfig = memory.MEMORY_PRESETS["qwen3-0.6b"].config
        self._report: memory.MemoryReport | None = None

        self.model_combo = QComboBox()
        self.description_label = QLabel()
        self.description_label.setWordWrap(True)
        self.layers_spin = _spin(1, 1024)
        self.kv_heads_spin = _spin(1, 1024)
        self.head_dim_spin = _spin(1, 8192)
        self.dtype_combo = QComboBox()
        for name, short in DTYPES:
            self.dtype_combo.addItem(short, name)
        self.lengths_edit = QLineEdit(" ".join(str(n) for n in memory.DEFAULT_TOKENS))
        self.lengths_edit.setToolTip(self.tr("Cache lengths n in tokens, separated by spaces or commas"))
        self.bandwidth_spin = QDoubleSpinBox()
        self.bandwidth_spin.setRange(0.1, 1e6)
        self.bandwidth_spin.setDecimals(1)
        self.bandwidth_spin.setValue(memory.DEFAULT_BANDWIDTH_GBPS)
        self.bandwidth_spin.setSuffix(" GB/s")
        self.bandwidth_spin.setToolTip(self.tr("Memory bandwidth; 1 GB = 10^9 bytes (an A100 has about 2000 GB/s)"))
        self.block_spin = _spin(1, 1 << 16, memory.DEFAULT_BLOCK_SIZE)
        self.prompt_spin = _spin(0, 10_000_000, 0)
        self.prompt_spin.setToolTip(self.tr("Tokens written by one prefill before decoding: they copy nothing"))

        form = QFormLayout()
        form.addRow(self.tr("Model"), self.model_combo)
        form.addRow("", self.description_label)
        shape = QHBoxLayout()
        for label, spin in ((self.tr("layers"), self.layers_spin), (self.tr("KV heads"), self.kv_heads_spin),
                            (self.tr("head_dim"), self.head_dim_spin)):
            shape.addWidget(QLabel(label))
            shape.addWidget(spin)
        shape.addWidget(self.dtype_combo)
        form.addRow(self.tr("Shape"), shape)
        form.addRow(self.tr("Lengths (tokens)"), self.lengths_edit)
        form.addRow(self.tr("Bandwidth"), self.bandwidth_spin)
        form.addRow(self.tr("Paged block size"), self.block_spin)
        form.addRow(self.tr("Prompt tokens"), self.prompt_spin)
        # The cache strategies beside the exact one (kvviz.cache_math): W, S, R and an MLA shape
        self.window_spin, self.sinks_spin, self.residual_spin = _spin(1, 1 << 24, 4096), _spin(1, 1 << 24, 4), \
            _spin(0, 1 << 24, 0)
        self.residual_spin.setSpecialValueText(self.tr("off"))
        strategies = QHBoxLayout()
        for text, spin in ((self.tr("window W"), self.window_spin), (self.tr("sinks S"), self.sinks_spin),
                           (self.tr("int8 residual R"), self.residual_spin)):
            strategies.addWidget(QLabel(text))
            strategies.addWidget(spin, 1)
        form.addRow(self.tr("Strategies"), strategies)
        self.mla_combo = QComboBox()
        self.mla_combo.addItem(self.tr("none"), "")
        for name in MLA_PRESETS:
            self.mla_combo.addItem(name, name)
        form.addRow(self.tr("Latent attention (MLA)"), self.mla_combo)

        self.per_layer_label = QLabel()
        self.per_token_label = QLabel()
        self.crossover_label = QLabel()  # where the K/V read overtakes the weights read (kvviz.wall)
        self.crossover_label.setWordWrap(True)
        for label in (self.per_layer_label, self.per_token_label, self.crossover_label):
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label = QLabel()
        self.error_label.setStyleSheet("color: #c62828")
        self.error_label.setWordWrap(True)
        self.error_label.hide()

        self.columns = (self.tr("tokens"), self.tr("KV cache"), self.tr("step copy"), self.tr("its time"),
                        self.tr("total copy"), self.tr("its time"), self.tr("blocks"), self.tr("empty slots"),
                        self.tr("wasted"))
        self.table = QTableWidget(0, len(self.columns))
        self.table.setHorizontalHeaderLabels(list(self.columns))
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setToolTip(self.tr(
            "step copy: what torch.cat copies on the step that brings the cache to n tokens (the n-1 already "
            "held, K and V, every layer); total copy: summed over the generation; time: bytes / bandwidth, "
            "each byte counted once; blocks and empty slots: a paged cache's last block"))

        self.strategy_columns = (self.tr("tokens"), self.tr("full"), self.tr("window"), self.tr("sinks"),
                                 self.tr("int8"), self.tr("MLA"))
        self.strategy_table = QTableWidget(0, len(self.strategy_columns))
        self.strategy_table.setHorizontalHeaderLabels(list(self.strategy_columns))
        self.strategy_table.verticalHeader().hide()
        self.strategy_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.strategy_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.strategy_table.setToolTip(self.tr(
            "Bytes each cache holds at each length, all layers: full = every exact cache; window and sinks hold "
            "at most W tokens (W counts the sinks); int8 holds 1 B a value plus a 4 B scale per token and KV "
            "head, and R tokens at full precision; MLA holds one latent (kv_lora_rank) plus the rotary key per "
            "token per layer, for the chosen published shape"))
        self.strategy_label = QLabel()
        self.strategy_label.setWordWrap(True)
        self.notes_label = QLabel()
        self.notes_label.setWordWrap(True)
        self.chapter_check = QCheckBox(self.tr("Show the chapter's copy table (in its own convention)"))
        self.chapter_text = QPlainTextEdit()
        self.chapter_text.setReadOnly(True)
        self.chapter_text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.chapter_text.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.per_layer_label)
        layout.addWidget(self.per_token_label)
        layout.addWidget(self.crossover_label)
        layout.addWidget(self.error_label)
        layout.addWidget(self.table)
        layout.addWidget(self.strategy_label)
        layout.addWidget(self.strategy_table)
        layout.addWidget(self.notes_label)
        layout.addWidget(self.chapter_check)
        layout.addWidget(self.chapter_text)
        layout.addWidget(buttons)
        self.resize(760, 560)

        for name, preset in memory.MEMORY_PRESETS.items():
            self._add(name, preset.config, preset.description)
        self.model_combo.addItem(self.tr("custom (edit the shape)"), CUSTOM)

        self.model_combo.currentIndexChanged.connect(self._on_model_changed)
        for spin in (self.layers_spin, self.kv_heads_spin, self.head_dim_spin):
            spin.valueChanged.connect(self._on_shape_edited)
        self.dtype_combo.currentIndexChanged.connect(self._recompute)
        self.lengths_edit.textChanged.connect(self._recompute)
        self.bandwidth_spin.valueChanged.connect(self._recompute)
        self.block_spin.valueChanged.connect(self._recompute)
        self.prompt_spin.valueChanged.connect(self._recompute)
        for spin in (self.window_spin, self.sinks_spin, self.residual_spin):
            spin.valueChanged.connect(self._recompute)
        self.mla_combo.currentIndexChanged.connect(self._recompute)
        self.chapter_check.toggled.connect(self.chapter_text.setVisible)
        self.chapter_check.toggled.connect(self._recompute)
        self.set_preset("qwen3-0.6b")

    # -- driving it ----------------------------------------------------------------------------
    def add_models(self, configs: Mapping[str, ModelConfig], descriptions: Mapping[str, str] | None = None) -> None:
        """Offer more models (the app's presets, a loaded checkpoint): listed before 'custom'."""
        for name, cfg in configs.items():
            self._add(name, cfg, (descriptions or {}).get(name, ""))

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
            self.description_label.setText(self._descriptions.get(name, ""))
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
        self._recompute()

    def _on_shape_edited(self) -> None:
        custom = self.model_combo.findData(CUSTOM)
        if self.model_combo.currentIndex() != custom:
            self.model_combo.blockSignals(True)
            self.model_combo.setCurrentIndex(custom)
            self.model_combo.blockSignals(False)
            self.description_label.setText(self.tr("Your own shape, starting from {0}").format(self._custom_base.name))
        self._recompute()

    def _recompute(self) -> None:
        try:
            lengths = parse_lengths(self.lengths_edit.text())
            cfg = self.config()
            report = memory.compute(cfg, lengths, dtype=self.dtype_combo.currentData(),
                                    bandwidth_gbps=self.bandwidth_spin.value(), block_size=self.block_spin.value(),
                                    prompt_tokens=self.prompt_spin.value())
            if self.sinks_spin.value() >= self.window_spin.value():
                raise ValueError(self.tr("Sinks ({0}) must be fewer than the window ({1}): the window counts "
                                         "them.").format(self.sinks_spin.value(), self.window_spin.value()))
        except ValueError as exc:
            # Nothing of the last good input stays: its notes ("beyond the model's context window")
            # and chapter table had stayed beside the error, as if they held for the text now typed.
            self._report = None
            self.error_label.setText(str(exc))
            self.error_label.show()
            self.table.setRowCount(0)
            self.strategy_table.setRowCount(0)
            self.strategy_label.clear()
            self.per_layer_label.clear()
            self.per_token_label.clear()
            self.crossover_label.clear()
            self.notes_label.clear()
            self.notes_label.hide()
            self.chapter_text.clear()
            return
        self._report = report
        self.error_label.hide()
        self._show(report)

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
            fmt_bytes(r.decode_weights_bytes), c.name, fmt_count(r.crossover_tokens)))
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
        self.notes_label.setText("\n".join(r.notes))
        self.notes_label.setVisible(bool(r.notes))
        if self.chapter_check.isChecked():
            self.chapter_text.setPlainText("\n".join(memory.chapter_comparison(
                c, [f.tokens for f in r.lengths], dtype=r.dtype, bandwidth_gbps=r.bandwidth_gbps)))


    def strategy_rows(self) -> list[list[str]]:
        """The strategies table's text, row by row (for tests and copy)."""
        t = self.strategy_table
        return [[t.item(r, c).text() for c in range(t.columnCount()) if not t.isColumnHidden(c)]
                for r in range(t.rowCount())]

    def _show_strategies(self, r: memory.MemoryReport) -> None:
        W, S, R = self.window_spin.value(), self.sinks_spin.value(), self.residual_spin.value() or None
        mla = self.mla_combo.currentData()
        self.strategy_table.setColumnHidden(5, not mla)
        self.strategy_table.setRowCount(len(r.lengths))
        for row, f in enumerate(r.lengths):
            figs = [strategy_figures(r.config, s, f.tokens, dtype=r.dtype, window=W, sinks=S, residual=R)
                    for s in ("full", "window", "sinks", "int8")]
            if mla:
                figs.append(mla_figures(MLA_PRESETS[mla], f.tokens))
            cells = [fmt_count(f.tokens)] + [fmt_bytes(x.bytes) for x in figs]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if col:
                    item.setToolTip(f"{fmt_count(figs[col - 1].bytes)} B")
                self.strategy_table.setItem(row, col, item)
        q = strategy_figures(r.config, "int8", 1, dtype=r.dtype).bytes_per_token
        text = self.tr("Window and sinks stop growing at {0} tokens ({1}); int8 holds {2} B per token, {3}% of "
                       "{4} B.").format(fmt_count(W), fmt_bytes(W * r.bytes_per_token), fmt_count(q),
                                        f"{100 * q / r.bytes_per_token:.1f}", fmt_count(r.bytes_per_token))
        if mla:
            shape = MLA_PRESETS[mla]
            text += " " + self.tr("MLA {0}: ({1} + {2}) values x {3} layers = {4} B per token, {5}% of its {6} "
                                  "heads uncompressed.").format(
                mla, shape.kv_lora_rank, shape.qk_rope_head_dim, shape.n_layer, fmt_count(shape.bytes_per_token()),
                f"{100 * shape.bytes_per_token() / shape.mha_bytes_per_token():.1f}", shape.n_head)
        self.strategy_label.setText(text)


def parse_lengths(text: str) -> list[int]:
    """"100 500, 1000" -> [100, 500, 1000]; ValueError for anything that is not a positive whole number."""
    items = [s for s in re.split(r"[\s,;]+", text.strip()) if s]
    if not items:
        raise ValueError("give at least one length in tokens")
    lengths = []
    for s in items:
        if not re.fullmatch(r"[0-9]+", s) or int(s) < 1:
            raise ValueError(f"{s!r} is not a length in tokens (a whole number, at least 1)")
        lengths.append(int(s))
    return lengths


def _spin(low: int, high: int, value: int | None = None) -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(low, high)
    spin.setGroupSeparatorShown(True)
    if value is not None:
        spin.setValue(value)
    return spin

