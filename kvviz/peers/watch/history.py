"""What a watch session knows, built from its records alone (live or replayed alike): per server its state, the
mirror of each rank's prefix cache, a point per metric sample (the last `window_s` seconds kept as they came,
older ones folded into minutes, a bounded number of those), counters of frames, gaps and malformed ones, and
the narration. Frozen records and numpy out; no socket, no clock of its own, no Qt.

A narration sentence is a Said (kvviz.peers.watch.said): templates and their fields, said in English by `str()`
and in the reader's language at display time by `text(_tr)`.
"""
from __future__ import annotations

import math
import operator
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kvviz.peers.watch.events import MalformedFrame, decode_frame
from kvviz.peers.watch.metrics import MetricSample
from kvviz.peers.watch.mirror import BatchEffect, MirrorState, PrefixMirror
from kvviz.peers.watch.recording import Frame, Header, Note, Record, Sample
from kvviz.peers.watch.said import Said, Translate, _tr
from kvviz.records.history import History

WINDOW_S = 600.0  # the last ten minutes point by point
MAX_MINUTES = 7 * 24 * 60  # a week of older minutes; the oldest go first
NARRATION_LINES = 200
POINT_FIELDS = ("t", "usage", "running", "waiting", "preempted", "hits", "queries", "ttft_ms", "itl_ms", "ttft_n",
                "itl_n", "blocks", "stored", "removed", "branched", "seconds")


# A server's state in words (ServerHistory.state): the Watch view's status line and the page say these.
STATE_WORDS = {"up": _tr("up"), "down": _tr("down, retrying with backoff"), "stalled": _tr("stalled, retrying"),
               "connecting": _tr("connecting")}


def state_text(state: str, _tr: Translate = str) -> str:
    """A server's state in the reader's language (an unknown state as it is)."""
    return _tr(STATE_WORDS[state]) if state in STATE_WORDS else state


# The watcher's notes (kvviz.peers.watch.client, kept in recordings as English text) as templates, the more
# particular first: a note a template reads whole (each {field} any text) is said in the reader's language.
_NOTES = (
    _tr("rank {rank}: following live events from sequence number {seq} (the server's /metrics has not answered, so"
        " no catch-up was asked)"),
    _tr("rank {rank}: following live events only (no replay socket given)"),
    _tr("rank {rank}: following live events only (the replay socket {socket} did not answer)"),
    _tr("rank {rank}: caught up from the replay socket (no batches yet); following live events"),
    _tr("rank {rank}: caught up from the replay socket ({n} batches, sequence numbers {lo}..{hi}); following live"
        " events"),
    _tr("rank {rank}: caught up from the replay socket ({n} batches, sequence numbers {lo}..{hi}; batches before"
        " {before} are no longer in its buffer); following live events"),
    _tr("sequence numbers {first}..{last} of rank {rank} missed: catching up from the replay socket"),
    _tr("{n} batches of rank {rank} lost (not in the server's replay buffer): the mirror may hold blocks the server"
        " evicted"),
    _tr("{n} batches of rank {rank} lost (not in the server's replay buffer)"),
    _tr("the server restarted ({why}): the mirror starts empty"),
    _tr("the event stream of rank {rank} began again at sequence number 0"),
    _tr("its process start time changed"),
    _tr("{why}; trying again with backoff"),
    _tr("/metrics answered HTTP {code} (an Authorization header? --header)"),
    _tr("/metrics answered HTTP {code}"),
    _tr("/metrics did not answer within {s} s"),
    _tr("cannot reach {url}: {why}"),
    _tr("/metrics is not a vLLM page: {why}"),
    _tr("{url} answering ({model}, {blocks} blocks of {size} tokens)"),
    _tr("{url} answering again after {s} s ({model}, {blocks} blocks of {size} tokens)"),
    _tr("generating again"),
    _tr("waiting for events"),
    _tr("{n} requests running and no token generated for {s} s"),
    _tr("the watcher met {what}: {why}; trying again"),
)
_NESTED = ("why",)  # fields that are notes themselves ("the server restarted ({why})...")


def _pattern(template: str) -> re.Pattern:
    """The template as a regular expression: its words as they are, each {field} a named group of any text."""
    parts = re.split(r"\{(\w+)\}", template)
    return re.compile("".join(re.escape(part) if k % 2 == 0 else f"(?P<{part}>.+?)" for k, part in enumerate(parts)),
                      re.DOTALL)


_NOTE_PATTERNS = tuple((_pattern(template), template) for template in _NOTES)


def note_said(text: str) -> Said:
    """A watcher's note as a Said: the first template that reads it whole, else the text as it is."""
    for pattern, template in _NOTE_PATTERNS:
        match = pattern.fullmatch(text)
        if match:
            return Said.of(template, **{k: note_said(v) if k in _NESTED else v for k, v in match.groupdict().items()})
    return Said.of("{text}", text=text)


def _plural(n: float, one: str, many: str) -> str:
    """The template for a count: `one` for exactly 1, else `many`."""
    return one if n == 1 else many


@dataclass(frozen=True)
class Point:
    """A metric sample with what changed since the one before: `t` the watcher's clock; counts over the interval
    (`seconds` long); means of TTFT and ITL over the interval's observations (NaN without any)."""

    t: float
    usage: float
    running: float
    waiting: float
    preempted: float
    hits: float  # prompt tokens served from the prefix cache (the server's counter's change)
    queries: float
    ttft_ms: float
    itl_ms: float
    ttft_n: float
    itl_n: float
    blocks: int  # blocks in the mirror (all ranks)
    stored: int  # from the events over the interval
    removed: int
    branched: int  # blocks of cached prefixes new branches grew from (the events' view of reuse)
    seconds: float

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries > 0 else math.nan


def _merge(a: Point, b: Point) -> Point:
    """Two points as one (a minute's): usage averaged by time, peaks of running and waiting, counts summed."""
    s = a.seconds + b.seconds

    def mean(x: float, nx: float, y: float, ny: float) -> float:
        n = (nx if not math.isnan(x) else 0) + (ny if not math.isnan(y) else 0)
        total = (x * nx if not math.isnan(x) else 0) + (y * ny if not math.isnan(y) else 0)
        return total / n if n else math.nan

    usage = (a.usage * a.seconds + b.usage * b.seconds) / s if s > 0 else b.usage
    return Point(a.t, usage, max(a.running, b.running), max(a.waiting, b.waiting), a.preempted + b.preempted,
                 a.hits + b.hits, a.queries + b.queries, mean(a.ttft_ms, a.ttft_n, b.ttft_ms, b.ttft_n),
                 mean(a.itl_ms, a.itl_n, b.itl_ms, b.itl_n), a.ttft_n + b.ttft_n, a.itl_n + b.itl_n, b.blocks,
                 a.stored + b.stored, a.removed + b.removed, a.branched + b.branched, s)


@dataclass
class Counters:
    frames: int = 0
    batches: int = 0
    events: int = 0
    replayed: int = 0  # frames that came from the replay socket
    malformed: int = 0
    gaps: int = 0
    lost: int = 0  # batches a gap lost (not in the server's replay buffer)
    unknown_removed: int = 0
    dropped: int = 0
    samples: int = 0
    metrics_malformed: int = 0
    stored: int = 0  # blocks stored, over the session
    removed: int = 0  # blocks removed, cleared or dropped, over the session (a restart's emptying not counted)


@dataclass
class _Pending:
    stored: int = 0
    removed: int = 0
    branched: int = 0
    reported_reuse: int = 0
    branches: int = 0


@dataclass
class ServerHistory:
    """One server as the session saw it."""

    index: int
    url: str
    ranks: int
    window_s: float = WINDOW_S
    text_of: Callable[[tuple[int, ...]], str] | None = None
    state: str = "connecting"  # connecting, up, down, stalled
    events: str = "waiting for events"  # how the event stream is followed, in words
    counters: Counters = field(default_factory=Counters)
    mirrors: list[PrefixMirror] = field(default_factory=list)
    points: deque = field(default_factory=deque)  # Point, the last window_s seconds
    minutes: deque = field(default_factory=lambda: deque(maxlen=MAX_MINUTES))  # Point per minute, older
    narration: deque = field(default_factory=lambda: deque(maxlen=NARRATION_LINES))  # (t, Said)
    last: MetricSample | None = None
    last_t: float = math.nan
    _pending: _Pending = field(default_factory=_Pending)

    def __post_init__(self) -> None:
        if not self.mirrors:
            self.mirrors = [PrefixMirror() for _ in range(max(1, self.ranks))]

    # -- records -------------------------------------------------------------------------------------
    def on_frame(self, record: Frame) -> BatchEffect | None:
        c = self.counters
        c.frames += 1
        c.replayed += record.via == "replay"
        try:
            decoded = decode_frame(record.parts)
        except MalformedFrame as exc:
            c.malformed += 1
            self.say(record.t, Said.of(_tr("a malformed frame ignored ({why})"), why=str(exc)))
            return None
        if not 0 <= record.rank < len(self.mirrors):
            c.malformed += 1
            self.say(record.t, Said.of(_tr("a frame of rank {rank} ignored (the server has {ranks})"),
                                       rank=record.rank, ranks=len(self.mirrors)))
            return None
        mirror = self.mirrors[record.rank]
        effect = mirror.apply(decoded.batch)
        c.batches += 1
        c.events += len(decoded.batch.events)
        c.unknown_removed += effect.unknown_removed
        c.dropped += effect.dropped
        c.stored += effect.stored
        c.removed += effect.removed + effect.cleared + effect.dropped
        p = self._pending
        p.stored += effect.stored
        p.removed += effect.removed + effect.cleared
        p.branched += sum(effect.branches)
        p.branches += len(effect.branches)
        p.reported_reuse += effect.reported_reuse
        if effect.cleared:
            self.say(record.t, Said.of(_plural(effect.cleared, _tr("the server cleared its prefix cache (1 block)"),
                                               _tr("the server cleared its prefix cache ({n} blocks)")),
                                       n=effect.cleared))
        return effect

    def on_sample(self, record: Sample) -> Point:
        m, prev = record.metrics, self.last
        self.counters.samples += 1
        if self.state != "up":
            self.state = "up"
        for mirror in self.mirrors:  # the pool bounds the mirror: blocks beyond it are removals never received
            if m.num_blocks > 0:
                mirror.max_blocks = m.num_blocks // max(1, len(self.mirrors))

        def delta(name: str) -> float:
            if prev is None:
                return 0.0
            d = getattr(m, name) - getattr(prev, name)
            return d if d >= 0 else getattr(m, name)  # a counter that went back: the server restarted

        ttft_n, itl_n = delta("ttft_count"), delta("itl_count")
        p = self._pending
        point = Point(
            t=record.t, usage=m.usage, running=m.running, waiting=m.waiting, preempted=delta("preemptions"),
            hits=delta("prefix_hits"), queries=delta("prefix_queries"),
            ttft_ms=delta("ttft_sum") / ttft_n * 1e3 if ttft_n > 0 else math.nan,
            itl_ms=delta("itl_sum") / itl_n * 1e3 if itl_n > 0 else math.nan, ttft_n=ttft_n, itl_n=itl_n,
            blocks=self.blocks(), stored=p.stored, removed=p.removed, branched=p.branched,
            seconds=record.t - self.last_t if not math.isnan(self.last_t) else 0.0)
        self._narrate(point, m)
        self._pending = _Pending()
        self.last, self.last_t = m, record.t
        self.points.append(point)
        self._fold(record.t)
        return point

    def on_note(self, record: Note) -> None:
        if record.kind in ("up", "down", "stalled"):
            self.state = record.kind
        elif record.kind == "restarted":
            for mirror in self.mirrors:
                mirror.clear()
            self.last = None
        elif record.kind == "events":
            self.events = record.text
        elif record.kind == "gap":
            self.counters.gaps += 1
        elif record.kind == "lost":
            self.counters.lost += int(record.text.split(" ", 1)[0]) if record.text[:1].isdigit() else 1
        elif record.kind == "metrics-malformed":
            self.counters.metrics_malformed += 1
        self.say(record.t, note_said(record.text))

    # -- what a view reads ------------------------------------------------------------------------------
    def say(self, t: float, sentence: Said) -> None:
        self.narration.append((t, sentence))

    def blocks(self) -> int:
        return sum(len(m) for m in self.mirrors)

    def mirror_state(self, rank: int = 0) -> MirrorState:
        return self.mirrors[rank].state(self.text_of)

    def series(self) -> dict[str, np.ndarray]:
        """Every point kept, the minutes first: one array per POINT_FIELDS name, and the hit rate."""
        rows = list(self.minutes) + list(self.points)
        get = operator.attrgetter(*POINT_FIELDS)  # a row per point in one call: a view takes this every frame
        table = np.array([get(p) for p in rows], dtype=np.float64).reshape(len(rows), len(POINT_FIELDS))
        out = {name: np.ascontiguousarray(table[:, i]) for i, name in enumerate(POINT_FIELDS)}
        with np.errstate(invalid="ignore", divide="ignore"):
            out["hit_rate"] = np.where(out["queries"] > 0, out["hits"] / np.maximum(out["queries"], 1), np.nan)
        return out

    def _fold(self, now: float) -> None:
        """Points older than the window become minutes (merged into the minute they fall in)."""
        while self.points and now - self.points[0].t > self.window_s:
            old = self.points.popleft()
            minute = math.floor(old.t / 60.0) * 60.0
            if self.minutes and self.minutes[-1].t == minute:
                self.minutes[-1] = _merge(self.minutes[-1], old)
            else:
                self.minutes.append(Point(minute, *(getattr(old, f) for f in POINT_FIELDS[1:])))

    def _narrate(self, point: Point, m: MetricSample) -> None:
        said = []
        bs = m.block_size or 0
        if point.hits > 0 and bs:
            blocks = point.hits / bs
            said.append(Said.of(_plural(blocks, _tr("1 block of a cached prefix reused ({tokens:.0f} prompt tokens not "
                                                    "computed again)"),
                                        _tr("{blocks:g} blocks of a cached prefix reused ({tokens:.0f} prompt tokens "
                                            "not computed again)")), blocks=blocks, tokens=point.hits))
        p = self._pending
        if p.branches:
            said.append(Said.of(_plural(p.branches, _tr("1 new branch off cached prefixes ({shared} blocks shared)"),
                                        _tr("{n} new branches off cached prefixes ({shared} blocks shared)")),
                                n=p.branches, shared=p.branched))
        if p.stored:
            said.append(Said.of(_plural(p.stored, _tr("1 block stored"), _tr("{n} blocks stored")), n=p.stored))
        if p.removed:
            said.append(Said.of(_plural(p.removed, _tr("1 block evicted, least recently used first"),
                                        _tr("{n} blocks evicted, least recently used first")), n=p.removed))
        if point.preempted:
            said.append(Said.of(_plural(point.preempted, _tr("1 request preempted"),
                                        _tr("{n:.0f} requests preempted")), n=point.preempted))
        if said:
            self.say(point.t, Said.joined(said))


def session_id(header: Header) -> str:
    """A watch session's run id: its start on the watcher's clock."""
    return f"{header.started:.6f}"


class WatchHistory(History[Point]):
    """Every server of a session (kvviz.records.history.History: a lane per server, keyed by its index, whose
    records are its points, the minutes first); `apply` takes the records in order (live, or from a recording).
    `records` is the version: each record applied bumps it."""

    def __init__(self, header: Header, *, window_s: float = WINDOW_S,
                 text_of: Callable[[tuple[int, ...]], str] | None = None) -> None:
        super().__init__()
        self.window_s, self.text_of = window_s, text_of
        self.reset(header)

    def reset(self, header: Header) -> None:
        """Empty servers for the session `header` starts."""
        self.header, self.run_id = header, session_id(header)
        self.servers = [ServerHistory(i, url, ranks, self.window_s, self.text_of)
                        for i, (url, ranks) in enumerate(zip(header.servers, header.ranks))]
        self.version += 1

    def apply(self, record: Record) -> None:
        """The next record of this session's stream."""
        self.add(record)

    def add(self, record: Record, run_id: str | None = None) -> bool:
        """A record of the session `run_id` (None: this one's); False when it is a late record of an earlier
        session, dropped."""
        if run_id is not None and run_id != self.run_id:
            return False
        self.version += 1
        if isinstance(record, Header):
            return True
        if not 0 <= record.server < len(self.servers):
            raise ValueError(f"a record of server {record.server}; the session watches {len(self.servers)}")
        server = self.servers[record.server]
        if isinstance(record, Frame):
            server.on_frame(record)
        elif isinstance(record, Sample):
            server.on_sample(record)
        else:
            server.on_note(record)
        return True

    @property
    def lanes(self) -> tuple[int, ...]:
        return tuple(range(len(self.servers)))

    def lane(self, key: int) -> list[Point]:
        server = self.servers[key] if 0 <= key < len(self.servers) else None
        return [*server.minutes, *server.points] if server is not None else []


@dataclass(frozen=True)
class Interval:
    """A server over the points after `since` (the live line, the --json object)."""

    t: float
    url: str
    state: str
    events: str
    usage: float
    running: float
    waiting: float
    blocks: int
    tree: str
    stored: int
    removed: int
    preempted: float
    hits: float
    queries: float
    ttft_ms: float
    itl_ms: float
    frames: int
    malformed: int
    gaps: int
    lost: int
    narration: tuple[str, ...]

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries > 0 else math.nan

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["narration"] = list(self.narration)
        out["hit_rate"] = self.hit_rate
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def interval(server: ServerHistory, since: float, now: float) -> Interval:
    pts = [p for p in server.points if p.t > since]
    merged = pts[0] if pts else None
    for p in pts[1:]:
        merged = _merge(merged, p)
    last = server.points[-1] if server.points else None
    c = server.counters
    said = tuple(str(s) for t, s in server.narration if t > since)
    tree = str(Said.joined([m.state().shape_said() for m in server.mirrors]) if server.blocks()
               else Said.of(_tr("no blocks cached")))
    return Interval(
        t=now, url=server.url, state=server.state, events=server.events,
        usage=last.usage if last else math.nan, running=last.running if last else math.nan,
        waiting=last.waiting if last else math.nan, blocks=server.blocks(), tree=tree,
        stored=merged.stored if merged else 0, removed=merged.removed if merged else 0,
        preempted=merged.preempted if merged else 0.0, hits=merged.hits if merged else 0.0,
        queries=merged.queries if merged else 0.0, ttft_ms=merged.ttft_ms if merged else math.nan,
        itl_ms=merged.itl_ms if merged else math.nan, frames=c.frames, malformed=c.malformed, gaps=c.gaps,
        lost=c.lost, narration=said)
