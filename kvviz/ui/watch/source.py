"""What the Watch view reads: a source (a live WatchSession, or a recording replayed sample by sample on the
GUI thread) and WatchFrame, the frozen snapshot of its history taken under the source's lock that the panels
draw (copies and numpy only, so the pump's thread goes on while a frame is painted). No Qt, no sockets here.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from kvviz.peers.watch.history import WINDOW_S, ServerHistory, WatchHistory
from kvviz.peers.watch.mirror import MirrorState
from kvviz.peers.watch.recording import Header, RecordingReader, Sample, read_header
from kvviz.peers.watch.said import Said, _tr

NARRATION_KEPT = 40  # narration lines a frame carries per server (the newest)
TEXT_CACHE = 1 << 16  # block texts kept (a tokenizer's decode of 32 tokens is the costly part of a frame)
SERVER_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def server_label(url: str, index: int, urls: tuple[str, ...]) -> str:
    """A server's short name: HOST:PORT of its URL, with its position where two servers share it."""
    parts = urlsplit(url)
    label = parts.netloc or url
    return label if [urlsplit(u).netloc or u for u in urls].count(label) == 1 else f"{label} #{index + 1}"


def sources_text(metrics: bool, events: bool) -> str:
    """Which of the two feeds a server has given, in words (English; the status line translates them in the
    context "WatchTransport")."""
    if metrics and events:
        return _tr("metrics + events")
    if metrics:
        return _tr("metrics only (no KV event received)")
    if events:
        return _tr("events only (/metrics not answering)")
    return _tr("nothing received yet")


@dataclass(frozen=True)
class ServerView:
    """One server at the moment of the frame."""

    index: int
    label: str
    url: str
    color: str
    state: str  # connecting, up, down, stalled
    events: str  # how the event stream is followed, in words
    metrics: bool  # /metrics has answered with a vLLM page
    has_events: bool  # KV event frames have come
    counters: dict[str, int]
    series: dict[str, np.ndarray]  # ServerHistory.series(), times relative to the session's start
    trees: tuple[MirrorState, ...]  # per data-parallel rank
    narration: tuple[tuple[float, Said], ...]  # (seconds since the start, sentence), the newest last
    num_blocks: int  # the pool's blocks (0: not reported yet)
    block_size: int

    @property
    def sources(self) -> str:
        return sources_text(self.metrics, self.has_events)

    @property
    def blocks(self) -> int:
        return sum(t.n_blocks for t in self.trees)


@dataclass(frozen=True)
class WatchFrame:
    """Every server at one moment: `t` the last record's time less the session's start; `version` the
    records applied so far (two frames of one version are the same picture)."""

    started: float
    t: float
    version: int
    samples: int
    servers: tuple[ServerView, ...]


def _server_view(s: ServerHistory, started: float, label: str, color: str) -> ServerView:
    """Copies of what a panel reads of one server (called under the source's lock)."""
    series = s.series()
    series["t"] = series["t"] - started
    last = s.last
    return ServerView(
        index=s.index, label=label, url=s.url, color=color, state=s.state, events=s.events,
        metrics=s.counters.samples > 0, has_events=s.counters.frames > 0,
        counters=dataclasses.asdict(s.counters), series=series,
        trees=tuple(m.state(None) for m in s.mirrors),
        narration=tuple((t - started, text) for t, text in list(s.narration)[-NARRATION_KEPT:]),
        num_blocks=last.num_blocks if last is not None else 0, block_size=last.block_size if last is not None else 0)


def snapshot(history: WatchHistory, lock: threading.Lock, t: float, samples: int,
             text_of: Callable[[tuple[int, ...]], str] | None = None) -> WatchFrame:
    """The history as a frame: copied under `lock`, the blocks' texts (the tokenizer) filled in after it."""
    header = history.header
    with lock:
        version = history.version
        servers = [_server_view(s, header.started, server_label(s.url, s.index, header.servers),
                                SERVER_COLORS[s.index % len(SERVER_COLORS)]) for s in history.servers]
    if text_of is not None:
        servers = [dataclasses.replace(v, trees=tuple(dataclasses.replace(tree, texts=tuple(map(text_of, tree.tokens)))
                                                      for tree in v.trees)) for v in servers]
    return WatchFrame(header.started, t, version, samples, tuple(servers))


def cached_text(text_of: Callable[[tuple[int, ...]], str] | None):
    """`text_of` remembering the last TEXT_CACHE blocks' texts (a block's tokens never change)."""
    return functools.lru_cache(maxsize=TEXT_CACHE)(text_of) if text_of is not None else None


class ReplaySource:
    """A recording applied to a WatchHistory a sample at a time (`advance`), on the caller's thread: the same
    records in the same order give the same frames. `lock` is the session's lock's stand-in (uncontended)."""

    live = False

    def __init__(self, path: str | Path, *, window_s: float = WINDOW_S,
                 text_of: Callable[[tuple[int, ...]], str] | None = None) -> None:
        self.path = Path(path).expanduser()
        self.header: Header = read_header(self.path)  # ValueError (one line) for anything but a recording
        self.total = sum(1 for r in RecordingReader(self.path) if isinstance(r, Sample))
        self.history = WatchHistory(self.header, window_s=window_s)
        self.lock = threading.Lock()
        self.text_of = cached_text(text_of)
        self.samples = 0  # samples applied
        self.t = 0.0  # the last record applied, seconds since the start
        self.truncated = False
        self._reader = RecordingReader(self.path)
        self._records = iter(self._reader)
        self.done = False

    def advance(self, samples: int = 1, budget_s: float = math.inf) -> int:
        """Apply records up to and including the next `samples` samples (or the end, or until `budget_s` of
        wall time has gone); returns the samples applied."""
        took, started = 0, time.perf_counter()
        while took < samples and not self.done:
            try:
                record = next(self._records)
            except StopIteration:
                self.done, self.truncated = True, self._reader.truncated
                break
            self.history.apply(record)
            if not isinstance(record, Header):
                self.t = max(self.t, record.t - self.header.started)
            if isinstance(record, Sample):
                took += 1
                self.samples += 1
                if time.perf_counter() - started > budget_s:
                    break
        return took

    def frame(self) -> WatchFrame:
        return snapshot(self.history, self.lock, self.t, self.samples, self.text_of)

    def recording(self) -> Path:
        return self.path

    def stop(self) -> Path:
        self.done = True
        return self.path


class LiveSource:
    """A WatchSession (its threads and pump) as the view reads it; `stop` ends the threads and closes the
    recording, whose path `recording()` then gives (None: not recorded)."""

    live = True

    def __init__(self, session, text_of: Callable[[tuple[int, ...]], str] | None = None) -> None:
        self.session = session
        self.header: Header = session.header
        self.history: WatchHistory = session.history
        self.lock: threading.Lock = session.lock
        self.text_of = cached_text(text_of)
        self.done = False
        self._recorded: Path | None = None

    def start(self) -> LiveSource:
        self.session.start()
        return self

    @property
    def samples(self) -> int:
        return sum(s.counters.samples for s in self.history.servers)

    def frame(self) -> WatchFrame:
        return snapshot(self.history, self.lock, time.time() - self.header.started, self.samples, self.text_of)

    def recording(self) -> Path | None:
        return self._recorded

    def stop(self) -> Path | None:
        if not self.done:
            self.done = True
            self._recorded = self.session.stop()
        return self._recorded
