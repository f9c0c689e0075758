"""The live side of kvviz watch: per server a thread that polls /metrics (GET only, http or https, with headers) and
follows each rank's KV events (zmq SUB, caught up from the replay socket at start, after a gap, after a restart),
handing frozen records to a bounded queue; down, stalled or restarted servers are notes and backoff, never errors.
Writes nothing to a server but replay requests. No Qt, no vLLM import.
"""
from __future__ import annotations

import http.client
import json
import math
import queue
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from kvviz.peers.watch.events import END_SEQ, MalformedFrame, frame_seq
from kvviz.peers.watch.metrics import MAX_METRICS_BYTES, MetricSample, parse_metrics
from kvviz.peers.watch.recording import Frame, Note, Record, Sample

EVENTS_PORT = 5557  # vLLM's default KV events endpoint tcp://*:5557
REPLAY_PORT = 5558  # the port the vLLM docs' examples give the replay endpoint
QUEUE_RECORDS = 100_000  # past this the thread waits; the SUB socket's high-water mark then drops, a gap follows
DRAIN = 1000  # frames taken from one socket before the thread looks at the clock again


@dataclass(frozen=True)
class ServerAddress:
    """Where a server's metrics and events are: the base URL, per rank a SUB endpoint and a replay endpoint
    (None: no replay socket), the topic, the request headers."""

    url: str
    events: tuple[str, ...]
    replays: tuple[str | None, ...]
    topic: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def metrics_url(self) -> str:
        base = self.url.rstrip("/")
        return base if base.endswith("/metrics") else base + "/metrics"

    @property
    def ranks(self) -> int:
        return len(self.events)


def address_of(url: str, *, events: str | None = None, replay: str | None = None, events_port: int = EVENTS_PORT,
               replay_port: int | None = REPLAY_PORT, ranks: int = 1, topic: str = "",
               headers: tuple[tuple[str, str], ...] = ()) -> ServerAddress:
    """A server's address from its URL: the events on its host at `events_port` (or `events`, a zmq endpoint),
    the replay socket at `replay_port` (or `replay`; None: none), rank r's ports offset by r as vLLM offsets
    them. ValueError (one line) for a URL that is not http(s)://HOST[:PORT]."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// URL of a server")
    try:
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError:
        raise ValueError(f"{url!r}: the port is not a number") from None
    if not 1 <= ranks <= 64:
        raise ValueError(f"--ranks {ranks}: from 1 to 64")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"

    def endpoint(given: str | None, port: int | None, rank: int) -> str | None:
        if given is None and port is None:
            return None
        base = given or f"tcp://{host}:{port}"
        if not base.startswith("tcp://") or base.rfind(":") <= len("tcp://"):
            raise ValueError(f"{base!r} is not a zmq endpoint tcp://HOST:PORT")
        head, _, tail = base.rpartition(":")
        if not tail.isdigit() or not 0 < int(tail) + rank < 65536:
            raise ValueError(f"{base!r}: the port is not a number from 1 to 65535")
        return f"{head}:{int(tail) + rank}"

    return ServerAddress(url=url, events=tuple(endpoint(events, events_port, r) for r in range(ranks)),
                         replays=tuple(endpoint(replay, replay_port, r) for r in range(ranks)), topic=topic,
                         headers=headers)


WILDCARDS = ("*", "0.0.0.0", "::", "[::]")
MAX_SOURCES_BYTES = 1 << 20


def discover(address: ServerAddress, options: WatchOptions | None = None) -> tuple[ServerAddress, str]:
    """Where the server says its KV events are (vLLM's `GET /kv_event_sources`: per data-parallel rank its
    publisher's endpoint, replay endpoint and topic), a wildcard host replaced by the URL's; and a sentence
    saying so. The address unchanged, and why, when the server does not say (down, an older vLLM, no events)."""
    o = options or WatchOptions()
    url = address.url.rstrip("/")
    if url.endswith("/metrics"):
        url = url[: -len("/metrics")]
    req = urllib.request.Request(url + "/kv_event_sources", headers=dict(address.headers), method="GET")
    try:
        with urllib.request.urlopen(req, timeout=o.timeout_s, context=_tls(url, o)) as resp:
            doc = json.loads(resp.read(MAX_SOURCES_BYTES).decode("utf-8", errors="replace"))
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        return address, f"the server did not say where its KV events are ({_why(getattr(exc, 'reason', exc))})"
    if not isinstance(doc, dict) or not doc:
        return address, "the server publishes no KV events (its /kv_event_sources is empty)"
    host = urllib.parse.urlsplit(url).hostname or "127.0.0.1"
    host = host if ":" not in host else f"[{host}]"
    events, replays, topics = [], [], set()
    try:
        for _rank, cfg in sorted(doc.items(), key=lambda kv: int(kv[0])):
            if not cfg.get("enable_kv_cache_events") or cfg.get("publisher") != "zmq":
                return address, "the server publishes no KV events over zmq (--kv-events-config)"
            endpoint = str(cfg.get("endpoint") or "")
            here = _reachable(endpoint, host, publisher=True)
            if here is None:
                return address, (f"the server's event socket {endpoint} connects out rather than binds (vLLM binds "
                                 f"only tcp://*:PORT), so kvviz cannot subscribe to it")
            events.append(here)
            replays.append(_reachable(str(cfg["replay_endpoint"]), host) if cfg.get("replay_endpoint") else None)
            topics.add(str(cfg.get("topic") or ""))
    except (AttributeError, KeyError, TypeError, ValueError):
        return address, "the server's /kv_event_sources is not what vLLM writes"
    topic = topics.pop() if len(topics) == 1 else ""
    found = ServerAddress(url=address.url, events=tuple(events), replays=tuple(replays), topic=topic,
                          headers=address.headers)
    ranks = f"{len(events)} rank{'s' if len(events) != 1 else ''}"
    return found, (f"KV events of {ranks} at {', '.join(events)}, replay {', '.join(r or 'none' for r in replays)}, "
                   f"topic {topic!r} (the server's /kv_event_sources)")


def _reachable(endpoint: str, host: str, *, publisher: bool = False) -> str | None:
    """A tcp endpoint the server binds, as a subscriber connects to it (None: it is not one the server binds;
    vLLM's publisher binds only an endpoint with `*` or `::` in it and connects to any other)."""
    if not endpoint.startswith("tcp://") or (publisher and "*" not in endpoint and "::" not in endpoint):
        return None
    where, _, port = endpoint[len("tcp://"):].rpartition(":")
    if not port.isdigit():
        return None
    if where in WILDCARDS:
        return f"tcp://{host}:{port}"
    return endpoint


def _tls(url: str, o: WatchOptions) -> ssl.SSLContext | None:
    if not url.startswith("https://"):
        return None
    context = ssl.create_default_context(cafile=o.cafile)
    if o.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def parse_header(text: str) -> tuple[str, str]:
    """`Name: value` from --header; ValueError (one line) otherwise."""
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or any(c in name for c in " \t\r\n") or any(c in value for c in "\r\n"):
        raise ValueError(f"--header {text[:60]!r}: give it as 'Name: value'")
    return name.strip(), value.strip()


@dataclass
class _Stream:
    rank: int
    sub: object
    replay: str | None
    next: int | None = None  # the sequence number expected next (None: take the first that comes)
    synced: bool = False  # caught up from replay, or following live only after the replay socket was tried


@dataclass
class WatchOptions:
    interval_s: float = 1.0  # between /metrics polls
    timeout_s: float = 3.0  # an HTTP request or a replay answer taking longer: the server is stalled
    stall_s: float = 10.0  # requests running and no token generated for this long: stalled
    backoff_max_s: float = 10.0
    replay_timeout_s: float = 3.0
    insecure: bool = False  # https without checking the certificate
    cafile: str | None = None  # https: trust the certificates in this file (a self-signed server's)
    clock: object = field(default=time.time)


class ServerWatcher(threading.Thread):
    """One server followed on its own thread; records go to `out`. `stop()` ends it (within ~0.2 s)."""

    def __init__(self, index: int, address: ServerAddress, out: queue.Queue, options: WatchOptions | None = None):
        super().__init__(name=f"kvviz-watch-{index}", daemon=True)
        self.index, self.address, self.out = index, address, out
        self.o = options or WatchOptions()
        self._stopping = threading.Event()
        self.state = "connecting"
        self._start_time = math.nan
        self._backoff = self.o.interval_s
        self._down_since = math.nan
        self._tokens = math.nan
        self._tokens_since = math.nan

    def stop(self) -> None:
        self._stopping.set()

    # -- the thread -----------------------------------------------------------------------------------
    def run(self) -> None:
        import zmq

        ctx = zmq.Context()
        self._ctx = ctx
        streams = []
        poller = zmq.Poller()
        try:
            for rank, (endpoint, replay) in enumerate(zip(self.address.events, self.address.replays)):
                sub = ctx.socket(zmq.SUB)
                for opt, value in ((zmq.LINGER, 0), (zmq.RCVHWM, 100_000), (zmq.RECONNECT_IVL, 100),
                                   (zmq.RECONNECT_IVL_MAX, int(self.o.backoff_max_s * 1000))):
                    sub.setsockopt(opt, value)
                sub.setsockopt(zmq.SUBSCRIBE, self.address.topic.encode("utf-8"))
                sub.connect(endpoint)
                poller.register(sub, zmq.POLLIN)
                streams.append(_Stream(rank, sub, replay))
            self._streams = streams
            next_scrape = 0.0
            while not self._stopping.is_set():
                try:
                    next_scrape = self._turn(poller, streams, next_scrape)
                except Exception as exc:  # noqa: BLE001 - a watcher says what went wrong and goes on, never dies
                    self._note("down", f"the watcher met {type(exc).__name__}: {str(exc)[:160]}; trying again")
                    self._stopping.wait(self._backoff)
        finally:
            for s in streams:
                s.sub.close(linger=0)
            ctx.term()

    def _turn(self, poller, streams: list[_Stream], next_scrape: float) -> float:
        """One turn of the thread: /metrics when due (and a catch-up a stream still needs), then up to 200 ms of
        frames. Returns when /metrics is next due."""
        import zmq

        if time.monotonic() >= next_scrape:
            self._scrape()
            next_scrape = time.monotonic() + (self.o.interval_s if self.state == "up" else self._backoff)
            if self.state == "up":
                for s in streams:
                    if not s.synced:
                        self._catch_up(s, 0 if s.next is None else s.next, first=s.next is None)
        wait_ms = max(0, min(200, int((next_scrape - time.monotonic()) * 1000)))
        for sock, _ev in poller.poll(wait_ms):
            s = next(x for x in streams if x.sub is sock)
            for _ in range(DRAIN):
                try:
                    parts = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self._live(s, parts)
        return next_scrape

    def _emit(self, record: Record) -> None:
        while not self._stopping.is_set():
            try:
                self.out.put(record, timeout=0.2)
                return
            except queue.Full:
                continue

    def _note(self, kind: str, text: str, rank: int = 0) -> None:
        self._emit(Note(self.o.clock(), self.index, kind, text, rank))

    # -- events ----------------------------------------------------------------------------------------
    def _frame(self, s: _Stream, parts: list[bytes], via: str) -> None:
        self._emit(Frame(self.o.clock(), self.index, s.rank, via, tuple(bytes(p) for p in parts)))

    def _live(self, s: _Stream, parts: list[bytes]) -> None:
        try:
            seq = frame_seq(parts)
        except MalformedFrame:
            self._frame(s, parts, "live")  # recorded as received: the history counts it
            return
        if s.next is None or seq == s.next:
            if s.next is None and not s.synced:
                s.synced = True
                self._note("events", f"rank {s.rank}: following live events from sequence number {seq} (the "
                                     f"server's /metrics has not answered, so no catch-up was asked)", s.rank)
            s.next = seq + 1
            self._frame(s, parts, "live")
        elif seq == 0 and s.next > 1:  # a publisher counts from 0: the server started again
            self._restarted(f"the event stream of rank {s.rank} began again at sequence number 0", [s])
            s.next = 1
            self._frame(s, parts, "live")
        elif seq < s.next:
            pass  # already delivered by a replay
        else:
            self._note("gap", f"sequence numbers {s.next}..{seq - 1} of rank {s.rank} missed: catching up from "
                              f"the replay socket", s.rank)
            if not self._catch_up(s, s.next, first=False) or (s.next is not None and s.next < seq):
                missing = seq - (s.next or seq)
                if missing > 0:
                    self._note("lost", f"{missing} batches of rank {s.rank} lost (not in the server's replay "
                                       f"buffer): the mirror may hold blocks the server evicted", s.rank)
                s.next = seq
            if seq >= s.next:
                s.next = seq + 1
                self._frame(s, parts, "live")

    def _catch_up(self, s: _Stream, start: int, *, first: bool) -> bool:
        """Ask the replay socket for every batch from `start`; deliver those not yet delivered, in order."""
        import zmq

        if s.replay is None:
            if first and not s.synced:
                s.synced = True
                self._note("events", f"rank {s.rank}: following live events only (no replay socket given)", s.rank)
            return False
        dealer = self._ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        got, lo, hi = 0, None, None
        try:
            dealer.connect(s.replay)
            dealer.send_multipart([b"", start.to_bytes(8, "big")])
            deadline = time.monotonic() + self.o.replay_timeout_s
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not dealer.poll(int(left * 1000)):
                    if first:
                        s.synced = True
                        self._note("events", f"rank {s.rank}: following live events only (the replay socket "
                                              f"{s.replay} did not answer)", s.rank)
                    return False
                parts = dealer.recv_multipart()
                if parts and parts[0] == b"":
                    parts = parts[1:]
                try:
                    seq = frame_seq(parts)
                except MalformedFrame:
                    self._frame(s, parts, "replay")
                    continue
                if seq == END_SEQ:
                    break
                if s.next is not None and seq < s.next:
                    continue
                if s.next is not None and seq > s.next:
                    self._note("lost", f"{seq - s.next} batches of rank {s.rank} lost (not in the server's replay "
                                       f"buffer)", s.rank)
                lo = seq if lo is None else lo
                hi = seq
                s.next = seq + 1
                got += 1
                self._frame(s, parts, "replay")
        finally:
            dealer.close(linger=0)
        if first:
            s.synced = True
            if got == 0:
                self._note("events", f"rank {s.rank}: caught up from the replay socket (no batches yet); "
                                     f"following live events", s.rank)
            else:
                older = f"; batches before {lo} are no longer in its buffer" if lo else ""
                self._note("events", f"rank {s.rank}: caught up from the replay socket ({got} batches, sequence "
                                     f"numbers {lo}..{hi}{older}); following live events", s.rank)
        return True

    def _restarted(self, why: str, streams: list[_Stream]) -> None:
        self._note("restarted", f"the server restarted ({why}): the mirror starts empty")
        for s in streams:
            s.next, s.synced = None, False

    # -- metrics ---------------------------------------------------------------------------------------
    def _scrape(self) -> None:
        req = urllib.request.Request(self.address.metrics_url, headers=dict(self.address.headers), method="GET")
        try:
            with urllib.request.urlopen(req, timeout=self.o.timeout_s, context=_tls(self.address.metrics_url,
                                                                                    self.o)) as resp:
                body = resp.read(MAX_METRICS_BYTES + 1)
        except urllib.error.HTTPError as exc:
            hint = " (an Authorization header? --header)" if exc.code in (401, 403) else ""
            return self._failed("down", f"/metrics answered HTTP {exc.code}{hint}")
        except TimeoutError:
            return self._failed("stalled", f"/metrics did not answer within {self.o.timeout_s:g} s")
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                return self._failed("stalled", f"/metrics did not answer within {self.o.timeout_s:g} s")
            return self._failed("down", f"cannot reach {self.address.metrics_url}: {_why(reason)}")
        try:
            if len(body) > MAX_METRICS_BYTES:
                raise ValueError(f"more than {MAX_METRICS_BYTES:,} bytes")
            sample = parse_metrics(body.decode("utf-8", errors="replace"))
        except ValueError as exc:
            return self._failed("metrics-malformed", f"/metrics is not a vLLM page: {exc}")
        self._answered(sample)

    def _failed(self, kind: str, text: str) -> None:
        if self.state != kind:
            if self.state == "up":
                self._down_since = time.monotonic()
            self._note(kind, f"{text}; trying again with backoff")
            self.state = kind
        self._backoff = min(self.o.backoff_max_s, max(self.o.interval_s, self._backoff * 2))

    def _answered(self, m: MetricSample) -> None:
        was = self.state
        self._backoff = self.o.interval_s
        if not math.isnan(self._start_time) and not math.isnan(m.start_time) and m.start_time != self._start_time:
            self._restarted("its process start time changed", self._streams)
        self._start_time = m.start_time
        if was != "up":
            self.state = "up"
            back = (f" again after {time.monotonic() - self._down_since:.1f} s" if not math.isnan(self._down_since)
                    else "")
            self._note("up", f"{self.address.url} answering{back} ({m.model or 'model not named'}, "
                             f"{m.num_blocks or '?'} blocks of {m.block_size or '?'} tokens)")
        self._emit(Sample(self.o.clock(), self.index, m))
        # Requests running and no token generated for stall_s: the engine is stalled though /metrics answers.
        now = time.monotonic()
        if m.generation_tokens != self._tokens or m.running == 0:
            self._tokens, self._tokens_since = m.generation_tokens, now
            if self.state == "stalled":
                self.state = "up"
                self._note("up", "generating again")
        elif now - self._tokens_since >= self.o.stall_s and self.state == "up":
            self.state = "stalled"
            self._note("stalled", f"{m.running:.0f} requests running and no token generated for "
                                  f"{now - self._tokens_since:.0f} s")


def _why(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, socket.gaierror):
        return "unknown host"
    if isinstance(reason, ssl.SSLError):
        return f"TLS: {getattr(reason, 'reason', None) or reason}"
    return str(getattr(reason, "strerror", None) or reason)[:160]


class LiveWatch:
    """Every server's thread, and one queue of their records in arrival order."""

    def __init__(self, addresses: list[ServerAddress], options: WatchOptions | None = None) -> None:
        self.queue: queue.Queue = queue.Queue(maxsize=QUEUE_RECORDS)
        self.watchers = [ServerWatcher(i, a, self.queue, options) for i, a in enumerate(addresses)]

    def start(self) -> None:
        for w in self.watchers:
            w.start()

    def get(self, timeout: float) -> Record | None:
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def stop(self) -> None:
        for w in self.watchers:
            w.stop()
        for w in self.watchers:
            w.join(timeout=5)
