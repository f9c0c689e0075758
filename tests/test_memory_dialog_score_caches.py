"""The memory dialog's strategies table lists every strategy kvviz.costs.cache_math computes, the score caches
(tova, h2o, knorm, snapkv) included, with their figures."""
from __future__ import annotations

from kvviz.costs.cache_math import TABLE_STRATEGIES


def test_strategies_table_lists_the_score_caches(qtbot):
    from kvviz.ui.dialogs.memory import MLA_COLUMN, MemoryDialog

    dialog = MemoryDialog()
    qtbot.addWidget(dialog)
    dialog.set_preset("qwen3-0.6b")
    dialog.set_lengths([100, 1000])
    dialog.window_spin.setValue(256)
    dialog.prompt_spin.setValue(900)
    headers = [dialog.strategy_table.horizontalHeaderItem(c).text() for c in range(MLA_COLUMN)]
    assert headers == ["tokens", *TABLE_STRATEGIES]
    assert dialog.strategy_table.isColumnHidden(MLA_COLUMN)
    rows = dict(zip(headers, zip(*dialog.strategy_rows())))
    # hand-worked (tests/test_cache_math.py): 114,688 B per token bf16; W = 256 slots = 28.0 MiB
    assert rows["tova"] == rows["knorm"] == rows["window"] == ("10.9 MiB", "28.0 MiB")
    assert rows["h2o"] == ("10.9 MiB", "28.0 MiB")  # 2,048 B of scores: in the exact figure below
    # snapkv: at 100 tokens the whole run is prompt within W; at 1000 a 900-token prompt cut to 256 + 100 new
    assert rows["snapkv"] == ("10.9 MiB", "38.9 MiB")  # 356 x 114,688 B = 40,828,928 B
    h2o = dialog.strategy_table.item(1, headers.index("h2o"))
    assert h2o.toolTip() == "29,362,176 B"  # 256 x 114,688 + 256 x 8
    text = dialog.strategy_label.text()
    assert "h2o keeps 8 B of score per token held besides (2.0 KiB at 256)" in text
    assert "snapkv cuts the 900-token prompt to 256 once" in text
    dialog.prompt_spin.setValue(0)
    assert dialog.strategy_rows()[1][headers.index("snapkv")] == "109.4 MiB"  # no prompt to cut: all 1,000 held
    assert "nothing to cut" in dialog.strategy_label.text()
