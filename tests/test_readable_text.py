"""Text as people read it: tokens that split a character are drawn as that character,
with every token still there (its bytes, its boundaries), in the labels, the steps CSV and the token stream."""
from __future__ import annotations

import csv
import dataclasses
import html
import io
import re

import pytest

from kvviz.textshow import display_labels, escape_bytes, group_labels, label_bytes, readable
from kvviz.tokenizer import ByteTokenizer

SAMPLES = {
    "chinese": "键值缓存让解码更快",
    "emoji": "ok 👍 🎉",
    "zwj family": "👨\u200d👩\u200d👧\u200d👦",
    "skin tone": "👍🏽",
    "flags": "🇫🇷🇩🇪🇯🇵",
    "combining accents": "cafe\u0301 n\u0303",
    "curly quotes": "“it’s” ‘fine’",
    "mixed": "The key “键” — é 🇨🇳!",
}


@pytest.mark.parametrize("text", SAMPLES.values(), ids=SAMPLES.keys())
def test_byte_tokens_group_into_the_characters_they_make(text):
    tok = ByteTokenizer()
    ids = tok.encode(text)
    labels = [tok.token_text(i) for i in ids]
    groups = group_labels(labels)
    assert readable(labels) == text  # nothing escaped, nothing replaced: the text decodes
    assert "\ufffd" not in readable(labels) and "<" not in readable(labels).replace("<", "")
    assert [g.start for g in groups] == [0] + [g.stop for g in groups[:-1]] and groups[-1].stop == len(ids)
    assert b"".join(p for g in groups for p in g.pieces) == text.encode("utf-8")  # every token kept
    for group in groups:  # a group ends where a character does: its own bytes decode alone
        assert bytes(ids[group.start:group.stop]).decode("utf-8") == group.text
        assert group.size == len(group.pieces)


def test_a_reader_sees_whole_clusters():
    tok = ByteTokenizer()
    texts = [g.text for g in group_labels([tok.token_text(i) for i in tok.encode(" ".join(SAMPLES.values()))])]
    for cluster in ("👨\u200d👩\u200d👧\u200d👦", "👍🏽", "🇫🇷", "🇩🇪", "🇯🇵", "e\u0301", "n\u0303", "“", "’", "键"):
        assert cluster in texts, cluster
    assert "🇷🇩" not in texts  # flags pair from the start of the run, not across two flags


def test_labels_keep_each_token():
    tok = ByteTokenizer()
    labels = [tok.token_text(i) for i in tok.encode("é!")]
    assert labels == ["<c3>", "<a9>", "!"]  # the trace's per-token labels stay lossless
    assert display_labels(labels) == ["é", "", "!"]
    assert group_labels(labels)[0].describe([195, 169]) == "2 tokens: 195: c3; 169: a9"


def test_bytes_that_do_not_decode_stay_escaped():
    assert readable(["<ff>", "a", "<80>"]) == "<ff>a<80>"
    assert readable(["a", "<e4>", "<bd>"]) == "a<e4><bd>"  # an unfinished character at the end
    # a lead byte the next token does not continue stays escaped alone; the next character still reads
    assert [(g.text, g.size) for g in group_labels(["<e4>", "<c6>", "<81>", "a"])] == [("<e4>", 1), ("Ɓ", 2), ("a", 1)]
    assert readable(["<00>", "<09>"]) == "<00>\t"  # a control character decodes but draws nothing
    assert escape_bytes(b"\xe4\xbd\xa0\xe4") == "你<e4>"
    assert label_bytes("a<e4>\\n") == b"a\xe4\n"


def test_bpe_pieces_that_split_a_character(tmp_path):
    """A byte-level BPE (as GPT-2 and Qwen use) whose pieces split CJK characters and emoji."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from kvviz.tokenizer import HFTokenizer

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    corpus = ["键值缓存 解码", "hello world", "👍 ok"] * 20
    trainer = trainers.BpeTrainer(vocab_size=270, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(corpus, trainer)
    path = tmp_path / "tokenizer.json"
    bpe.save(str(path))
    tok = HFTokenizer(path)
    text = "缓存让解码更快 🎉 “ok”"
    ids = tok.encode(text)
    labels = [tok.token_text(i) for i in ids]
    assert any("<" in label for label in labels)  # some pieces do split characters
    assert not any("\ufffd" in label for label in labels)
    assert readable(labels) == text
    assert len(ids) == sum(g.size for g in group_labels(labels))


def test_steps_csv_reads_as_text():
    from kvviz.config import ModelConfig, SamplingConfig
    from kvviz.engines import make_engine
    from kvviz.models.transformer import Transformer
    from kvviz.records import traceio

    tok = ByteTokenizer()
    model = Transformer(ModelConfig(name="tiny", max_seq_len=64)).eval()
    prompt = tok.encode("键")
    traces = list(make_engine("static", model).generate(prompt, 11, SamplingConfig(), token_text=tok.token_text))
    forced = "值“é”"  # label the steps as if the model had written these bytes (the CSV reads labels only)
    traces = [dataclasses.replace(t, token_id=b, token_text=tok.token_text(b))
              for t, b in zip(traces, forced.encode("utf-8"))]
    assert len(traces) == len(forced.encode("utf-8"))
    rows = list(csv.DictReader(io.StringIO(traceio.steps_csv({"static": traces}))))
    assert "".join(r["token_text"] for r in rows) == forced
    assert [r["token_text"] for r in rows[:4]] == ["值", "", "", "“"]
    assert [r["token_bytes"] for r in rows[:3]] == ["e5", "80", "bc"]
    assert not any("<" in r["token_text"] or "\ufffd" in r["token_text"] for r in rows)


def _forced_history(text: str, prompt: str):
    """A RunHistory whose steps are labelled as if the model had written `text`'s bytes (the panels read labels)."""
    from kvviz.config import ModelConfig, SamplingConfig
    from kvviz.engines import make_engine
    from kvviz.models.transformer import Transformer
    from kvviz.records.trace import RunInfo
    from kvviz.ui.history import RunHistory

    tok = ByteTokenizer()
    ids = tok.encode(prompt)
    forced = text.encode("utf-8")
    model = Transformer(ModelConfig(name="tiny", max_seq_len=256)).eval()
    cfg = model.cfg
    info = RunInfo(run_id="r", model_name="tiny", prompt=prompt, prompt_ids=tuple(ids),
                   prompt_labels=tuple(tok.token_text(i) for i in ids), engines=("static",),
                   max_new_tokens=len(forced), n_layer=cfg.n_layer, n_head=cfg.n_head, n_kv_head=cfg.n_kv_head,
                   head_dim=cfg.head_dim, kv_bytes_per_token=cfg.kv_bytes_per_token())
    history = RunHistory()
    history.reset(info)
    steps = make_engine("static", model).generate(ids, len(forced), SamplingConfig(), run_id="r",
                                                  token_text=tok.token_text)
    for trace, b in zip(steps, forced):
        history.add(dataclasses.replace(trace, token_id=b, token_text=tok.token_text(b)))
    return history


def test_token_stream_draws_characters_not_escapes(qtbot):
    """The window's token stream: the document reads as the text; split characters are shaded (pixels of
    both shades drawn); the tooltip over one names its tokens' ids and bytes; the last step highlights it."""
    import numpy as np
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QColor, QImage

    from kvviz.ui.panels import token_stream
    from kvviz.ui.panels.token_stream import TokenStreamPanel

    prompt = "键值 “KV” é "
    text = "缓存👍🏽👨\u200d👩\u200d👧🇨🇳cafe\u0301‘ok’"  # no blank: a generated blank is drawn as a mark
    history = _forced_history(text, prompt)
    panel = TokenStreamPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 400)
    panel.show()
    last = len(history.traces["static"]) - 1
    panel.show_step(history, last - 3)  # at the k of ‘ok’: the closing quote's three bytes are still to come
    qtbot.wait(50)
    document = panel._view.document().toPlainText().replace("\u200b", "")  # the breaks between tokens
    assert prompt + text in document  # later steps are drawn too (faded)
    assert "<" not in document and "\ufffd" not in document
    assert panel.plain_text("static") == prompt + text[:-1] and panel.highlighted("static") == "k"

    panel.show_step(history, last)  # the closing quote is three steps: the last highlights all of it
    qtbot.wait(50)
    assert panel.highlighted("static") == "’" and text in panel._view.document().toPlainText().replace("\u200b", "")
    image = panel._view.viewport().grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), dtype=np.uint32).reshape(image.height(), -1)[:, :image.width()]
    for shade in token_stream._SPLIT:
        assert (pixels == (QColor(shade).rgb() & 0xFFFFFFFF)).sum() > 20, shade  # split characters are shaded

    view = panel._view
    at = view.document().toPlainText().index("缓")
    cursor = view.textCursor()
    cursor.setPosition(at)
    rect = view.cursorRect(cursor)
    tip = panel.tooltip_at(QPointF(rect.center().x() + 4, rect.center().y()))
    assert tip.startswith("static, steps 0-2: \"缓\" (3 tokens: 231: e7; 188: bc; 147: 93)"), tip


def test_axis_labels_name_each_token_of_a_character():
    """Attention and work-matrix axes: one label per position, a split character on each of its tokens."""
    from kvviz.ui.panels._plots import sequence_labels

    history = _forced_history("缓x👍", "键 ")
    labels = sequence_labels(history, "static", 13)
    assert labels == ["键₁", "键₂", "键₃", " ", "缓₁", "缓₂", "缓₃", "x", "👍₁", "👍₂", "👍₃", "👍₄", ""]


def test_kvviz_export_draws_the_prompt_as_text(tmp_path):
    """`kvviz export`: the token stream's SVG holds the characters (not <e9> escapes), and its PNG's prompt
    row is as wide as the text, not as its escapes (36 bytes as <xx> would take some 1,000 px)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import numpy as np
    from PySide6.QtGui import QImage

    root = Path(__file__).resolve().parent.parent
    prompt = "键值缓存 “KV” café"
    out = tmp_path / "slides"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(root))
    proc = subprocess.run([sys.executable, "-m", "kvviz", "export", "--out", str(out), "--model", "tiny-random",
                           "--prompt", prompt, "--tokens", "2", "--engines", "static", "--panels", "token_stream",
                           "--size", "900x300", "--threads", "1", "--svg", "--png"],
                          capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    svg = (out / "token_stream.svg").read_text(encoding="utf-8")
    drawn = "".join(html.unescape(t) for t in re.findall(r">([^<>]*)</text>", svg))  # the text runs, in order
    assert prompt in drawn and "\ufffd" not in drawn, drawn  # (the random model's own bytes may not decode)
    shot = QImage(str(out / "token_stream.png")).convertToFormat(QImage.Format.Format_Grayscale8)
    ink = np.frombuffer(shot.constBits(), dtype=np.uint8).reshape(shot.height(), -1)[:, :shot.width()] < 140
    rows = np.flatnonzero(ink[:, 20:].any(axis=1))
    assert len(rows)
    prompt_row = ink[40:80]  # under the engine's name
    columns = np.flatnonzero(prompt_row.any(axis=0))
    assert 60 < columns.max() - columns.min() < 400, (columns.min(), columns.max())
