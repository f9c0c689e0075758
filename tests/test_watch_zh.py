"""The Watch view, its page and the one-line refusals in Chinese: a recording made here (a trunk of three blocks
with two branches, a reused prefix, an eviction, notes of the watcher) replayed with the UI in zh_CN shows its
status line, its narration and its tree's shape in Chinese; the page of it carries the narration, states, feeds
and shapes in both languages and starts in the one asked; the vLLM and kernel refusals follow the language.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("msgspec")

URL = "http://127.0.0.1:8000"
BLOCK = 4
HAN = re.compile(r"[\u4e00-\u9fff]")
# English words of the narration, the status line and the tree's shape: none of them is left in the Chinese
ENGLISH = re.compile(r"\b(blocks?|stored|evicted|reused|branch(es)?|prefix|chains?|trunk|requests?|running|"
                     r"answering|replay|samples|mirrored|frames|metrics|events|connecting|stalled|retrying)\b")


def _metrics(t: float, hits: float = 0.0, queries: float = 0.0, running: float = 1.0):
    from kvviz.peers.watch.metrics import MetricSample

    return MetricSample(usage=0.1, running=running, waiting=0.0, preemptions=0.0, prefix_queries=queries,
                        prefix_hits=hits, generation_tokens=t, prompt_tokens=queries, ttft_sum=0.05 * t,
                        ttft_count=t, itl_sum=0.01 * t, itl_count=t, block_size=BLOCK, num_blocks=64, engines=1,
                        start_time=1.0, model="tiny")


def _frame(t: float, seq: int, events: list):
    import msgspec

    from kvviz.peers.watch.events import KVEventBatch
    from kvviz.peers.watch.recording import Frame

    payload = msgspec.msgpack.encode(KVEventBatch(ts=t, events=events))
    return Frame(t, 0, 0, "live", (b"kv", seq.to_bytes(8, "big", signed=True), payload))


def _stored(hashes: list[int], parent: int | None):
    from kvviz.peers.watch.events import BlockStored

    return BlockStored(block_hashes=hashes, parent_block_hash=parent, token_ids=list(range(BLOCK * len(hashes))),
                       block_size=BLOCK, lora_id=None, medium=None, lora_name=None)


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    """A session of one server: up, caught up, a trunk of 3 blocks and two branches off it (6 prompt tokens
    served from the cache), then one block evicted and a stall."""
    from kvviz.peers.watch.events import BlockRemoved
    from kvviz.peers.watch.recording import Header, Note, RecordingWriter, Sample

    t0 = 1000.0
    path = tmp_path_factory.mktemp("watchzh") / "zh.kvwatch"
    writer = RecordingWriter(path, Header(t0, (URL,), (1,)))
    for record in (
            Note(t0 + 0.1, 0, "up", f"{URL} answering (tiny, 64 blocks of {BLOCK} tokens)"),
            Note(t0 + 0.2, 0, "events", "rank 0: caught up from the replay socket (no batches yet); following live "
                                        "events"),
            Sample(t0 + 0.5, 0, _metrics(1)),
            _frame(t0 + 1.0, 0, [_stored([1, 2, 3], None), _stored([4, 5], 3), _stored([6], 3)]),
            Sample(t0 + 1.5, 0, _metrics(2, hits=3 * BLOCK, queries=6 * BLOCK)),
            _frame(t0 + 2.0, 1, [BlockRemoved(block_hashes=[6], medium=None)]),
            Sample(t0 + 2.5, 0, _metrics(3, hits=3 * BLOCK, queries=6 * BLOCK)),
            Note(t0 + 3.0, 0, "stalled", "1 requests running and no token generated for 12 s"),
            Sample(t0 + 3.5, 0, _metrics(3, hits=3 * BLOCK, queries=6 * BLOCK))):
        writer.write(record)
    return writer.close()


def _history(path: Path):
    from kvviz.peers.watch.history import WatchHistory
    from kvviz.peers.watch.recording import RecordingReader, read_header

    history = WatchHistory(read_header(path))
    for record in RecordingReader(path):
        history.apply(record)
    return history


def test_the_narration_is_kept_as_templates_and_said_in_english(recording):
    server = _history(recording).servers[0]
    said = [str(s) for _t, s in server.narration]
    assert said == [f"{URL} answering (tiny, 64 blocks of {BLOCK} tokens)",
                    "rank 0: caught up from the replay socket (no batches yet); following live events",
                    "3 blocks of a cached prefix reused (12 prompt tokens not computed again); 1 new branch off "
                    "cached prefixes (3 blocks shared); 6 blocks stored",
                    "1 block evicted, least recently used first",
                    "1 requests running and no token generated for 12 s"]
    assert [template for template, _fields in server.narration[2][1].parts] == [
        "{blocks:g} blocks of a cached prefix reused ({tokens:.0f} prompt tokens not computed again)",
        "1 new branch off cached prefixes ({shared} blocks shared)", "{n} blocks stored"]
    assert server.mirrors[0].state().shape_text() == "5 blocks in 1 chain"


def test_the_narration_and_the_tree_in_the_pages_chinese(recording):
    from kvviz.page.strings import translator

    server = _history(recording).servers[0]
    zh = translator("Narration", "zh_CN")
    for _t, said in server.narration:
        text = said.text(zh)
        assert HAN.search(text) and not ENGLISH.search(text), text
    shape = server.mirrors[0].state().shape_text(zh)
    assert HAN.search(shape) and not ENGLISH.search(shape), shape


@pytest.mark.parametrize("note", [
    "rank 1: following live events from sequence number 7 (the server's /metrics has not answered, so no catch-up "
    "was asked)",
    "rank 0: following live events only (the replay socket tcp://h:5557 did not answer)",
    "rank 0: caught up from the replay socket (12 batches, sequence numbers 3..14; batches before 3 are no longer in "
    "its buffer); following live events",
    "sequence numbers 5..9 of rank 0 missed: catching up from the replay socket",
    "4 batches of rank 0 lost (not in the server's replay buffer): the mirror may hold blocks the server evicted",
    "the server restarted (the event stream of rank 0 began again at sequence number 0): the mirror starts empty",
    "/metrics answered HTTP 401 (an Authorization header? --header); trying again with backoff",
    "/metrics did not answer within 2 s; trying again with backoff",
    f"{URL} answering again after 3.5 s (tiny, 64 blocks of 4 tokens)",
    "generating again",
])
def test_the_watchers_notes_are_read_into_templates(note):
    from kvviz.page.strings import translator
    from kvviz.peers.watch.history import note_said

    said = note_said(note)
    assert str(said) == note and said.parts[0][0] != "{text}"
    text = said.text(translator("Narration", "zh_CN"))
    assert HAN.search(text) and not ENGLISH.search(text.replace("/metrics", "")), text  # the path stays a path


def test_a_note_no_template_reads_is_said_as_it_is():
    from kvviz.page.strings import translator
    from kvviz.peers.watch.history import note_said

    said = note_said("a sentence {with braces} no template reads")
    assert said.text(translator("Narration", "zh_CN")) == "a sentence {with braces} no template reads"


def test_the_watch_page_says_the_narration_states_and_shapes_in_both_languages(recording, tmp_path):
    import json

    from kvviz.page.watch import build_watch_page

    page = build_watch_page(recording, lang="zh_CN")
    assert '<html lang="zh-CN">' in page
    data = json.loads(re.search(r'<script id="kvviz-data" type="application/json">(.*?)</script>', page,
                                re.DOTALL).group(1))
    assert data["lang"] == "zh_CN"
    said = data["servers"][0]["narration"]
    assert len(said) == 5 and [s["en"] for _t, s in said][3] == "1 block evicted, least recently used first"
    last = data["frames"][-1]["servers"][0]
    for text in [s["zh_CN"] for _t, s in said] + [last["state"]["zh_CN"], last["events"]["zh_CN"],
                                                   last["trees"][0]["shape"]["zh_CN"]]:
        assert HAN.search(text) and not ENGLISH.search(text), text
    assert last["state"] == {"en": "up", "zh_CN": "在线"} and last["trees"][0]["shape"]["en"] == "5 blocks in 1 chain"
    with pytest.raises(ValueError, match="language must be one of en, zh_CN, got 'fr'"):
        build_watch_page(recording, lang="fr")


def test_the_watch_page_draws_its_chinese_in_a_browser(recording, tmp_path):
    """Chromium, headless: the page's narration and blocks text in Chinese, and no script error."""
    import shutil
    import subprocess

    from kvviz.page.watch import write_watch_page

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium")
    page = write_watch_page(tmp_path / "w.html", recording, lang="zh_CN")
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path}/u",
                          "--virtual-time-budget=3000", "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    narration = re.search(r'<div id="narration"[^>]*>(.*?)</div>\s*</', dom, re.DOTALL)
    titles = re.findall(r'<section class="panel" id="panel-\w+"[^>]*><h2>(.*?)</h2>', dom)
    assert len(titles) == 5 and all(HAN.search(t) for t in titles), titles
    assert 'data-errors="0"' in dom and 'data-lang="zh_CN"' in dom, dom[-2000:]
    assert narration and HAN.search(narration.group(1)), dom[-2000:]
    text = re.sub(r"<[^>]+>", " ", narration.group(1))
    assert not ENGLISH.search(text), text


@pytest.fixture
def chinese(qapp):
    """The UI in Chinese for the test, English again after it."""
    from kvviz.ui import i18n

    i18n.set_language("zh_CN")
    yield
    i18n.set_language("en")


def test_the_watch_window_replayed_in_chinese_shows_chinese_status_and_narration(qtbot, tmp_path, recording,
                                                                                  chinese):
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QLabel

    from kvviz.ui.watch.window import WatchWindow

    w = WatchWindow(QSettings(str(tmp_path / "watch.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(1280, 720)
    w.show()
    qtbot.waitExposed(w)
    assert w.replay(recording, paused=True), w.error_text()
    while not w.source.done:
        w.step_once()
    status = w.findChild(QLabel, "watch_status")
    narration = w.findChild(QLabel, "watch_narration")
    qtbot.waitUntil(lambda: bool(narration.toolTip()))
    plain = re.sub(r"<[^>]+>|&#\d+;", " ", status.text())
    assert HAN.search(plain) and not ENGLISH.search(plain), plain
    for text in (narration.text(), narration.toolTip()):
        assert HAN.search(text) and not ENGLISH.search(text), text
    tree = w.grid.panels["tree"]
    qtbot.waitUntil(lambda: bool(tree.bands))
    for heading, _colour, _laid in tree.bands:  # the prefix tree's shape in words: "...: 3 个块，1 条链..."
        shape = heading.split(": ", 1)[1]
        assert HAN.search(shape) and not re.search(r"\b(blocks?|chains?|trunk|branch(es)?)\b", shape), heading
    w.close()


def test_the_refusals_follow_the_windows_language(chinese):
    from PySide6.QtCore import QCoreApplication

    from kvviz.kernels import check_engines, engines_refusal
    from kvviz.serving.spec import vllm_refusal

    def serve_form(text: str) -> str:
        return QCoreApplication.translate("ServeForm", text)

    def kernels(text: str) -> str:
        return QCoreApplication.translate("kernels", text)

    english = vllm_refusal("", 17, "")
    assert english == "vLLM's CPU attention needs blocks of a multiple of 32 tokens, not 17"
    chinese_line = vllm_refusal("", 17, "", serve_form)
    assert HAN.search(chinese_line) and "32" in chinese_line and "17" in chinese_line, chinese_line
    assert engines_refusal("native", ["static"], kernels) == ""
    with pytest.raises(ValueError, match=r"^naive cannot decode with the C step kernel \(--kernel native\); naive "
                                         r"decodes with torch, openblas$"):
        check_engines("native", ["static", "naive"])
    said = engines_refusal("native", ["static", "naive"], kernels, kernels)
    assert HAN.search(said) and "naive" in said and "--kernel native" in said and "C step" not in said, said
