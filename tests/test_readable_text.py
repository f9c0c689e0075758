"""Text as people read it (issue 17 item 3): tokens that split a character are drawn as that character,
with every token still there (its bytes, its boundaries), in the labels, the steps CSV and the token stream."""
from __future__ import annotations

import csv
import dataclasses
import io

import pytest

from kvviz.tokenizer import ByteTokenizer, display_labels, escape_bytes, group_labels, label_bytes, readable

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
    from kvviz import traceio
    from kvviz.config import ModelConfig, SamplingConfig
    from kvviz.engines import make_engine
    from kvviz.models.transformer import Transformer

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
