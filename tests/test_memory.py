"""The memory calculator against figures worked out by hand, the chapter's table, and the command."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvviz.cli import main
from kvviz.commands import memory as memory_command
from kvviz.config import ModelConfig
from kvviz.costs import memory

# Worked by hand, per token per layer = 2 (K and V) x KV heads x head_dim x bytes per element:
#   chapter-tiny: 2 x 4 x  32 x 4 (fp32) = 1,024 B;  x  2 layers =   2,048 B per token
#   qwen3-0.6b:   2 x 8 x 128 x 2 (bf16) = 4,096 B;  x 28 layers = 114,688 B per token (112 KiB)
#   70b-class:    2 x 8 x 128 x 2 (bf16) = 4,096 B;  x 80 layers = 327,680 B per token (320 KiB)
#   gpt2-small:   2 x 12 x 64 x 4 (fp32) = 6,144 B;  x 12 layers =  73,728 B per token (72 KiB)
# At length n the step that appends the n-th token copies the n-1 already held; from an empty cache
# the generation copies 0 + 1 + ... + (n-1) = n(n-1)/2 tokens: 4,950 at 100, 124,750 at 500,
# 499,500 at 1000. Time at 2000 GB/s = bytes / 2e12 s.
#   qwen3 n=100:  step 99 x 114,688 = 11,354,112 B; total 4,950 x 114,688 = 567,705,600 B -> 0.2838528 ms
#   qwen3 n=1000: step 999 x 114,688 = 114,573,312 B; total 499,500 x 114,688 = 57,286,656,000 B -> 28.643328 ms
#   gpt2 n=500:   step 499 x 73,728 = 36,790,272 B; total 124,750 x 73,728 = 9,197,568,000 B -> 4.598784 ms
# Paged, blocks of 16: 100 -> 7 blocks (112 slots, 12 empty); 500 -> 32 (512, 12 empty); 1000 -> 63 (1008, 8 empty).
HAND = {
    "chapter-tiny": (1024, 2048, {
        100: (204_800, 202_752, 10_137_600, 0.0050688),
        500: (1_024_000, 1_021_952, 255_488_000, 0.127744),
        1000: (2_048_000, 2_045_952, 1_022_976_000, 0.511488)}),
    "qwen3-0.6b": (4096, 114_688, {
        100: (11_468_800, 11_354_112, 567_705_600, 0.2838528),
        500: (57_344_000, 57_229_312, 14_307_328_000, 7.153664),
        1000: (114_688_000, 114_573_312, 57_286_656_000, 28.643328)}),
    "70b-class": (4096, 327_680, {
        100: (32_768_000, 32_440_320, 1_622_016_000, 0.811008),
        500: (163_840_000, 163_512_320, 40_878_080_000, 20.43904),
        1000: (327_680_000, 327_352_320, 163_676_160_000, 81.83808)}),
    "gpt2-small": (6144, 73_728, {
        100: (7_372_800, 7_299_072, 364_953_600, 0.1824768),
        500: (36_864_000, 36_790_272, 9_197_568_000, 4.598784),
        1000: (73_728_000, 73_654_272, 36_827_136_000, 18.413568)}),
}
BLOCKS = {100: (7, 12), 500: (32, 12), 1000: (63, 8)}


@pytest.mark.parametrize("name", list(HAND))
def test_presets_against_hand_worked_figures(name):
    per_layer, per_token, rows = HAND[name]
    report = memory.compute(memory.MEMORY_PRESETS[name].config, (100, 500, 1000))
    assert report.bytes_per_token_per_layer == per_layer
    assert report.bytes_per_token == per_token
    for f in report.lengths:
        cache, step, total, ms = rows[f.tokens]
        assert (f.cache_bytes, f.step_copy_bytes, f.total_copy_bytes) == (cache, step, total)
        assert f.copy_ms == pytest.approx(ms, rel=1e-12)
        assert f.step_copy_ms == pytest.approx(step / 2e9, rel=1e-12)
        assert (f.blocks, f.wasted_slots) == BLOCKS[f.tokens]
        assert f.wasted_bytes == f.wasted_slots * per_token
        assert f.paged_bytes == f.blocks * 16 * per_token


def test_chapter_side_figures():
    # The chapter: tiny model 1 KB per token per layer, 200 KB for 100 tokens in 2 layers;
    # 70B about 320 KB per token and about 1.3 GB at 4096 tokens (4096 x 327,680 = 1,342,177,280 B).
    tiny = memory.compute(memory.MEMORY_PRESETS["chapter-tiny"].config, [100])
    assert tiny.bytes_per_token_per_layer == 1024 and tiny.lengths[0].cache_bytes == 200 * 1024
    big = memory.compute(memory.MEMORY_PRESETS["70b-class"].config, [4096])
    assert big.lengths[0].cache_bytes == 1_342_177_280


def test_dtype_override_and_prompt():
    cfg = memory.MEMORY_PRESETS["qwen3-0.6b"].config
    assert memory.compute(cfg, [10], dtype="fp32").bytes_per_token == 229_376  # 2 x 114,688
    # A prompt of 40 tokens prefilled at once: decode steps reach 41..100, copying 40 + ... + 99
    # = (100*99 - 40*39)/2 = 4,170 tokens.
    assert memory.total_copy_tokens(100, 40) == 4170 == sum(range(40, 100))
    assert memory.step_copy_tokens(40, 40) == 0  # the prefill itself copies nothing
    assert memory.step_copy_tokens(1) == 0 and memory.total_copy_tokens(1) == 0


def test_chapter_table_reproduced_then_corrected():
    chapter = memory.MEMORY_PRESETS["qwen3-0.6b-chapter"].config
    bpt = chapter.kv_bytes_per_token()
    assert bpt == 57_344 and memory.chapter_kb(bpt) == 56  # "28层合计 56KB"
    printed = {100: ("5.6 MB", "280 MB"), 500: ("28.0 MB", "7,000 MB (7GB)"),
               1000: ("56.0 MB", "28,000 MB (28GB)")}
    for n, (step, total) in printed.items():
        assert memory.fmt_chapter_step(memory.chapter_step_bytes(bpt, n)) == step
        assert memory.fmt_chapter_total(memory.chapter_total_bytes(bpt, n)) == total
    assert memory.chapter_copy_ms(memory.chapter_total_bytes(bpt, 1000), 2000) == pytest.approx(14.0)  # "14ms"
    real = memory.MEMORY_PRESETS["qwen3-0.6b"].config.kv_bytes_per_token()
    assert real == 2 * bpt
    assert memory.fmt_chapter_total(memory.chapter_total_bytes(real, 1000)) == "56,000 MB (56GB)"
    lines = "\n".join(memory.chapter_comparison(memory.MEMORY_PRESETS["qwen3-0.6b"].config, [100, 500, 1000]))
    for text in ("5.6 MB", "280 MB", "7,000 MB (7GB)", "28,000 MB (28GB)", "11.2 MB", "560 MB", "56,000 MB (56GB)"):
        assert text in lines


def test_qwen3_note_follows_the_shape_not_the_name():
    published = memory.MEMORY_PRESETS["qwen3-0.6b"].config
    assert memory.QWEN3_NOTE in memory.compute(published, [10]).notes
    assert memory.QWEN3_NOTE in memory.compute(published.replace(name="anything"), [10]).notes
    assert memory.QWEN3_NOTE not in memory.compute(memory.MEMORY_PRESETS["70b-class"].config, [10]).notes
    assert memory.CHAPTER_NOTE in memory.compute(memory.MEMORY_PRESETS["qwen3-0.6b-chapter"].config, [10]).notes


def test_concat_engine_copies_what_the_calculator_says(tiny_random, torch_cpu):
    # Independent count: the concat engine's own bytes_copied over a real run. A prompt of 5 and 8 new
    # tokens: the prefill holds 5, then 7 decode steps bring the cache to 12.
    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine

    traces = list(make_engine("concat", tiny_random).generate([1, 2, 3, 4, 5], 8, trace=TraceOptions(masks=False)))
    cfg = tiny_random.cfg
    report = memory.compute(cfg, [12], prompt_tokens=5)
    assert sum(t.bytes_copied for t in traces) == report.lengths[0].total_copy_bytes
    assert traces[-1].bytes_copied == report.lengths[0].step_copy_bytes
    paged = list(make_engine("paged", tiny_random, block_size=4).generate([1, 2, 3, 4, 5], 8,
                                                                          trace=TraceOptions(masks=False)))
    blocks, _ = memory.paged_blocks(paged[-1].cache_len, 4)
    assert len(paged[-1].block_table) == blocks


@pytest.mark.parametrize("bad", [
    dict(tokens=[0]), dict(tokens=[-3]), dict(tokens=[]), dict(bandwidth_gbps=0), dict(bandwidth_gbps=float("inf")),
    dict(bandwidth_gbps=-1), dict(block_size=0), dict(dtype="int8"), dict(prompt_tokens=-1), dict(tokens=[1.5]),
])
def test_compute_refuses_bad_input(bad):
    kwargs = dict(tokens=[100])
    kwargs.update(bad)
    with pytest.raises(ValueError):
        memory.compute(memory.MEMORY_PRESETS["chapter-tiny"].config, **kwargs)


def test_cli_json(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["memory", "--model", "qwen3-0.6b", "--tokens", "100", "500", "1000", "--dtype", "bf16",
                 "--json", str(out), "--compare-chapter"]) == 0
    text = capsys.readouterr().out
    assert "114,688 B" in text and "head_dim 64" in text and "28,000 MB (28GB)" in text
    doc = json.loads(out.read_text())
    assert doc["bytes_per_token"] == 114_688 and doc["bandwidth_gbps"] == 2000
    rows = {r["tokens"]: r for r in doc["lengths"]}
    assert rows[1000]["total_copy_bytes"] == 57_286_656_000
    assert rows[100]["step_copy_bytes"] == 11_354_112
    assert rows[100]["copy_ms"] == pytest.approx(0.2838528)
    assert (rows[500]["blocks"], rows[500]["wasted_slots"]) == (32, 12)
    assert doc["notes"] and doc["chapter_comparison"]
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_cli_options(capsys):
    assert main(["memory", "--model", "70b-class", "--tokens", "100", "--bandwidth-gbps", "1000",
                 "--block-size", "32"]) == 0
    text = capsys.readouterr().out
    assert "327,680 B" in text and "1,000 GB/s" in text and "blocks of 32" in text


def test_cli_model_folder(tmp_path, capsys):
    ModelConfig(name="mine", n_layer=3, n_kv_head=2, head_dim=16).save_json(tmp_path / "config.json")
    assert main(["memory", "--model", str(tmp_path), "--tokens", "10"]) == 0
    assert "768 B" in capsys.readouterr().out  # 3 layers x (2 x 2 x 16 x 4 B = 256 B)


def test_hugging_face_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
        "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 3072, "vocab_size": 151936, "max_position_embeddings": 40960,
        "rope_theta": 1000000, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}))
    cfg = memory.resolve_config(str(tmp_path))
    assert cfg.kv_bytes_per_token("bf16") == 114_688


def test_gpt2_folder_is_read_as_hugging_face(tmp_path, capsys):
    """GPT-2's config.json names n_layer as kvviz's own does; it must still be read as GPT-2's."""
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
        "n_layer": 12, "n_positions": 1024, "vocab_size": 50257, "activation_function": "gelu_new"}))
    cfg = memory.resolve_config(str(tmp_path))
    assert (cfg.arch, cfg.n_kv_head, cfg.head_dim, cfg.dtype) == ("gpt2", 12, 64, "float32")
    assert main(["memory", "--model", str(tmp_path), "--tokens", "10"]) == 0
    assert "73,728 B" in capsys.readouterr().out  # 12 layers x (K, V) x 12 heads x 64 x 4 B


@pytest.mark.parametrize("argv", [
    ["--model", "no-such-model"], ["--tokens", "-5"], ["--tokens", "0"], ["--dtype", "int8"],
    ["--bandwidth-gbps", "0"], ["--bandwidth-gbps", "-2"], ["--bandwidth-gbps", "nan"], ["--block-size", "0"],
    ["--prompt-tokens", "-1"], ["--model", "/no/such/folder"], ["--json", "/no/such/dir/out.json"],
])
def test_cli_bad_input_is_one_line_and_exit_2(argv, capsys):
    assert main(["memory", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvviz memory: error: ") and err.count("\n") == 1


def test_cli_unparseable_number_is_exit_2(capsys):
    assert main(["memory", "--bandwidth-gbps", "fast"]) == 2  # argparse's refusal, returned by main
    assert capsys.readouterr().err.count("\n") == 1


def test_python_m_kvviz_memory_without_torch():
    code = ("import sys; from kvviz.cli import main; rc = main(['memory', '--model', 'chapter-tiny', "
            "'--tokens', '100']); assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "2,048 B" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "kvviz", "memory", "--tokens", "-1"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_memory_dialog_shows_the_figures(qtbot):
    from kvviz.ui.dialogs.memory import MemoryDialog, parse_lengths

    dialog = MemoryDialog()
    qtbot.addWidget(dialog)
    dialog.set_preset("70b-class")
    dialog.set_lengths([100, 500, 1000])
    assert "327,680 B" in dialog.per_token_label.text()
    assert "4,096 B" in dialog.per_layer_label.text()
    table = dialog.table
    cell = {(r, c): table.item(r, c).text() for r in range(table.rowCount()) for c in range(table.columnCount())}
    assert [cell[(r, 0)] for r in range(3)] == ["100", "500", "1,000"]  # counts with separators, as everywhere
    assert table.item(0, 2).toolTip() == "32,440,320 B"  # step copy at 100: 99 x 327,680
    assert table.item(2, 4).toolTip() == "163,676,160,000 B"  # total at 1000: 499,500 x 327,680
    assert cell[(2, 5)] == "81.8 ms" and (cell[(2, 6)], cell[(2, 7)]) == ("63", "8")
    assert dialog.report().bytes_per_token == 327_680

    dialog.set_preset("qwen3-0.6b")
    assert "114,688 B" in dialog.per_token_label.text()
    assert dialog.notes_label.text() == memory.QWEN3_NOTE
    dialog.chapter_check.setChecked(True)
    assert "28,000 MB (28GB)" in dialog.chapter_text.toPlainText()

    # Editing the shape makes a custom model from the current one: back to the chapter's head_dim 64.
    dialog.head_dim_spin.setValue(64)
    assert dialog.model_combo.currentData() == "custom"
    assert "57,344 B" in dialog.per_token_label.text()
    dialog.dtype_combo.setCurrentIndex(dialog.dtype_combo.findData("float32"))
    assert dialog.report().bytes_per_token == 114_688

    dialog.lengths_edit.setText("100, -5")
    assert dialog.report() is None and dialog.table.rowCount() == 0 and "'-5'" in dialog.error_label.text()
    dialog.lengths_edit.setText("16")
    assert dialog.report().lengths[0].blocks == 1 and dialog.error_label.isHidden()
    assert parse_lengths("1 2,3") == [1, 2, 3]

    dialog.add_models({"mine": ModelConfig(name="mine", n_layer=3, n_kv_head=2, head_dim=16)})
    dialog.set_preset("mine")
    assert "768 B" in dialog.per_token_label.text()
    assert dialog.model_combo.itemData(dialog.model_combo.count() - 1) == "custom"


def test_memory_dialog_drops_a_stale_note_and_rescales_large_figures(qtbot):
    """Lengths past the context window give a note; typing an invalid length then leaves no note (it
    had stayed beside the error). Long runs of a large model read in PiB and hours, not
    '2621420.0 GiB' and '1,407,364.1 ms'."""
    import re

    from kvviz.ui.dialogs.memory import MemoryDialog

    dialog = MemoryDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.set_preset("70b-class")
    dialog.chapter_check.setChecked(True)
    dialog.set_lengths([1_000_000])
    assert "beyond the model's context window" in dialog.notes_label.text() and dialog.notes_label.isVisible()
    table = dialog.table
    cells = [table.item(0, c).text() for c in range(table.columnCount())]
    # total copy at 1,000,000 tokens: 999,999 x 1,000,000 / 2 x 327,680 B = 1.64e17 B = 145.5 PiB
    assert cells[4] == "145.5 PiB", cells
    for text in cells[1:6:1]:
        number, unit = text.split(" ")
        assert unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "ns", "µs", "ms", "s", "min", "h"), text
        if unit != "PiB":  # the last unit takes any size
            assert float(number.replace(",", "")) < 1024, text
    assert re.fullmatch(r"[\d.]+ (s|min|h)", cells[5]), cells[5]  # the copies' time: not thousands of ms
    dialog.lengths_edit.setText("1000000, x")
    assert dialog.report() is None and "'x'" in dialog.error_label.text()
    assert dialog.notes_label.isHidden() and dialog.notes_label.text() == ""
    assert dialog.chapter_text.toPlainText() == "" and dialog.per_token_label.text() == ""
    dialog.lengths_edit.setText("100")
    assert dialog.notes_label.isHidden() and "327,680 B" in dialog.per_token_label.text()


def test_memory_dialog_imports_no_torch():
    code = ("import sys, kvviz.ui.dialogs.memory; print([m for m in ('torch', 'kvviz.engines', 'kvviz.models') "
            "if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_the_crossover_length_in_the_report_and_the_dialog(qtbot):
    """Qwen3-0.6B in bf16: 1,192,101,888 B of weights per decode step over 114,688 B of K/V per token
    is 10,394.3: from 10,395 tokens the K/V read is the larger (worked by hand in tests/test_wall.py)."""
    from kvviz.ui.dialogs.memory import MemoryDialog

    report = memory.compute(memory.MEMORY_PRESETS["qwen3-0.6b"].config, [100])
    assert (report.decode_weights_bytes, report.crossover_tokens) == (1_192_101_888, 10_395)
    assert report.to_dict()["crossover_tokens"] == 10_395
    assert memory_command.format_report(report)[-2] == ("a decode step reads 1.1 GiB of weights; from 10,395 tokens on "
                                                "it reads more K/V than weights")
    # fp32 doubles both sides: the crossover stays
    assert memory.compute(memory.MEMORY_PRESETS["qwen3-0.6b"].config, [100], dtype="fp32").crossover_tokens == 10_395
    dialog = MemoryDialog()
    qtbot.addWidget(dialog)
    dialog.set_preset("qwen3-0.6b")
    assert "10,395 tokens" in dialog.crossover_label.text() and "1.1 GiB" in dialog.crossover_label.text()
    # 4 KV heads, so 8 query heads: q, o, k and v shrink by 3 x 1024 x 1024 a layer -> 507,969,536
    # elements read whole, 1,015,941,120 B with the token's row, over 57,344 B a token = 17,716.3
    dialog.kv_heads_spin.setValue(4)
    assert "17,717 tokens" in dialog.crossover_label.text() and "968.9 MiB" in dialog.crossover_label.text()
    dialog.lengths_edit.setText("x")
    assert dialog.crossover_label.text() == ""
