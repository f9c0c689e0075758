"""`python -m kvviz.peers.watch.bench`: kvviz watch's figures, printed as JSON. --recording FILE: events/s the history
and the live zmq path take, and memory after an hour of that traffic replayed at speed (tiled, hashes renumbered);
--url: the delay from a request's completion to its last block at the watcher. Asserts nothing; no Qt.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import tracemalloc
import urllib.request
from pathlib import Path

import msgspec

from kvviz.peers.watch.events import BlockRemoved, BlockStored, KVEventBatch, decode_frame
from kvviz.peers.watch.history import WatchHistory
from kvviz.peers.watch.recording import Frame, Header, RecordingReader, Sample, read_header


def read_records(path: Path) -> tuple[Header, list]:
    return read_header(path), [r for r in RecordingReader(path) if not isinstance(r, Header)]


def _events_in(frames: list[Frame]) -> int:
    return sum(len(decode_frame(f.parts).batch.events) for f in frames)


def history_rate(header: Header, records: list, repeats: int) -> dict:
    frames = [r for r in records if isinstance(r, Frame)]
    events = _events_in(frames) * repeats
    times = []
    for _ in range(3):
        h = WatchHistory(header)
        started = time.perf_counter()
        for _ in range(repeats):
            for r in records:
                h.apply(r)
        times.append(time.perf_counter() - started)
    best = statistics.median(times)
    return {"frames": len(frames) * repeats, "events": events, "seconds": best, "events_per_s": events / best,
            "batches_per_s": len(frames) * repeats / best}


def live_rate(header: Header, records: list, repeats: int) -> dict:
    """The frames renumbered 0.. and published as fast as a PUB socket sends them, to a ServerWatcher whose
    /metrics is a closed port (so it only follows events) and no replay socket."""
    import socket

    import zmq

    from kvviz.peers.watch.client import WatchOptions, address_of
    from kvviz.peers.watch.session import WatchSession

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.SNDHWM, 100_000)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    address = address_of(f"http://127.0.0.1:{dead_port}", events=f"tcp://127.0.0.1:{port}", replay_port=None)
    session = WatchSession([address], WatchOptions(interval_s=0.5, timeout_s=0.5))
    session.start()
    time.sleep(1.0)  # the SUB connects and subscribes
    payloads = [f.parts for f in records if isinstance(f, Frame)]
    n = len(payloads) * repeats
    events = _events_in([f for f in records if isinstance(f, Frame)]) * repeats
    started = time.perf_counter()
    seq = 0
    for _ in range(repeats):
        for parts in payloads:
            pub.send_multipart((parts[0], seq.to_bytes(8, "big"), parts[2]))
            seq += 1
    sent = time.perf_counter() - started
    done = session.wait_for(lambda h: h.servers[0].counters.frames >= n or h.servers[0].counters.gaps > 0, 120)
    took = time.perf_counter() - started
    session.stop()
    pub.close(linger=0)
    ctx.term()
    c = session.history.servers[0].counters
    return {"frames_sent": n, "frames_applied": c.frames, "gaps": c.gaps, "lost": c.lost, "events": events,
            "send_s": sent, "seconds": took, "events_per_s": events / took if done else float("nan"),
            "kept_up": bool(done and c.gaps == 0 and c.frames == n)}


def _renumbered(frame: Frame, tile: int, t: float) -> Frame:
    """A frame of tile `tile`: every block hash moved by the tile (so each tile's blocks are new ones)."""
    batch = decode_frame(frame.parts).batch
    shift = tile << 40

    def moved(h):
        return ((h if isinstance(h, int) else int.from_bytes(h[-8:], "big")) ^ shift) & ((1 << 64) - 1)

    events = []
    for e in batch.events:
        if isinstance(e, BlockStored):
            e = msgspec.structs.replace(e, block_hashes=[moved(h) for h in e.block_hashes],
                                        parent_block_hash=None if e.parent_block_hash is None
                                        else moved(e.parent_block_hash))
        elif isinstance(e, BlockRemoved):
            e = msgspec.structs.replace(e, block_hashes=[moved(h) for h in e.block_hashes])
        events.append(e)
    payload = msgspec.msgpack.encode(KVEventBatch(ts=t, events=events, data_parallel_rank=batch.data_parallel_rank))
    return Frame(t, frame.server, frame.rank, frame.via, (frame.parts[0], frame.parts[1], payload))


def tiled(header: Header, records: list, seconds: float):
    """The records again and again at their own pace until `seconds` of traffic, each tile's block hashes moved
    (so its blocks are new ones): (tiles, the records)."""
    t0 = records[0].t
    span = max(1.0, records[-1].t - t0)
    tiles = int(seconds // span) + 1

    def gen():
        for tile in range(tiles):
            for r in records:
                t = r.t - t0 + tile * span + header.started
                if t - header.started > seconds:
                    break
                if isinstance(r, Frame):
                    yield _renumbered(r, tile, t)
                elif isinstance(r, Sample):
                    yield Sample(t, r.server, r.metrics)
                else:
                    yield msgspec.structs.replace(r, t=t)

    return tiles, gen()


def hour_memory(header: Header, records: list, seconds: float, window_s: float) -> dict:
    """The recording tiled to `seconds` of traffic at its own pace, through one history with a `window_s` window:
    the history's memory at the end (tracemalloc) and what it keeps."""
    gc.collect()
    tracemalloc.start()
    h = WatchHistory(header, window_s=window_s)
    fed = 0
    started = time.perf_counter()
    tiles, records_of_the_hour = tiled(header, records, seconds)
    for r in records_of_the_hour:
        h.apply(r)
        fed += 1
    took = time.perf_counter() - started
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    s = h.servers[0]
    return {"seconds_of_traffic": seconds, "tiles": tiles, "records": fed, "replay_s": took,
            "history_bytes": current, "peak_bytes": peak, "points": len(s.points), "minutes": len(s.minutes),
            "mirror_blocks": s.blocks(), "narration": len(s.narration), "stored": s.counters.stored}


def completion_delay(url: str, events_port: int, replay_port: int, model: str, n: int) -> dict:
    """Per request: the watcher's clock when the batch storing the request's last full block arrived, less the
    moment its completion returned (negative: the events came before the HTTP answer)."""
    from kvviz.peers.watch.client import WatchOptions, address_of
    from kvviz.peers.watch.session import WatchSession

    arrived: dict[tuple[int, ...], float] = {}

    def listener(record) -> None:
        if isinstance(record, Frame):
            for e in decode_frame(record.parts).batch.events:
                if isinstance(e, BlockStored):
                    for i in range(len(e.block_hashes)):
                        arrived.setdefault(tuple(e.token_ids[i * e.block_size:(i + 1) * e.block_size]), record.t)

    session = WatchSession([address_of(url, events_port=events_port, replay_port=replay_port or None)],
                           WatchOptions(interval_s=0.5), listener=listener).start()
    session.wait_for(lambda h: h.servers[0].state == "up" and h.servers[0].events != "waiting for events", 30)
    delays = []
    for i in range(n):
        last, done = complete_once(url, model, i)
        if session.wait_for(lambda h, last=last: last in arrived, 10):
            delays.append((arrived[last] - done) * 1e3)
    session.stop()
    return delay_summary(n, delays)


def complete_once(url: str, model: str, i: int) -> tuple[tuple[int, ...], float]:
    """Request `i`'s completion from the server (8 tokens, greedy): its last full 32-token block's token ids, and
    the wall clock when the answer came."""
    body = json.dumps({"model": model, "prompt": f"{i:04d} {time.time()} a request whose blocks are timed " * 3,
                       "max_tokens": 8, "temperature": 0, "ignore_eos": True, "return_token_ids": True}).encode()
    req = urllib.request.Request(url.rstrip("/") + "/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        choice = json.load(r)["choices"][0]
    done = time.time()
    tokens = choice["prompt_token_ids"] + choice["token_ids"][:-1]
    k = len(tokens) // 32
    return tuple(tokens[(k - 1) * 32:k * 32]), done


def delay_summary(n: int, delays: list[float]) -> dict:
    """n requests sent, the delays (ms) of those seen: their count, median, min and max."""
    return {"requests": n, "seen": len(delays), "median_ms": statistics.median(delays) if delays else None,
            "min_ms": min(delays) if delays else None, "max_ms": max(delays) if delays else None}


def server_options(p: argparse.ArgumentParser, delay: str) -> None:
    """The options that name a vLLM server to time `delay` on (--url) and what to send it."""
    p.add_argument("--url", help=f"a vLLM server to time the {delay} delay on")
    p.add_argument("--events-port", type=int, default=5557)
    p.add_argument("--replay-port", type=int, default=5558)
    p.add_argument("--model", default="", help="the server's model name (as its /v1/models says)")
    p.add_argument("--requests", type=int, default=20)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kvviz.peers.watch.bench", description=__doc__)
    p.add_argument("--recording", type=Path, help="a recording of a burst of requests (kvviz watch --record)")
    p.add_argument("--repeats", type=int, default=20, help="the recording's frames sent this many times")
    p.add_argument("--hour", type=float, default=3600.0, help="seconds of traffic for the memory figure")
    p.add_argument("--window", type=float, default=600.0, help="the history's window in seconds")
    server_options(p, "completion-to-mirror")
    args = p.parse_args(argv)
    out = {}
    if args.recording:
        header, records = read_records(args.recording)
        out["history"] = history_rate(header, records, args.repeats)
        out["live"] = live_rate(header, records, args.repeats)
        out["hour"] = hour_memory(header, records, args.hour, args.window)
    if args.url:
        out["delay"] = completion_delay(args.url, args.events_port, args.replay_port, args.model, args.requests)
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
