"""`python -m kvviz.ui.watch.bench`: the Watch window's figures. With --recording FILE (kvviz watch --record over
a burst of requests): the recording tiled to an hour of traffic at its own pace (block hashes renumbered per tile,
as kvviz.peers.watch.bench does) and replayed in the window as fast as it reads; the frames drawn meanwhile, then
the frame time at the hour's end (a fresh snapshot and every panel drawn), the process's memory, and what the
history keeps. With --url (a vLLM server with KV events): the delay from a request's completion (its HTTP answer)
to the first frame drawn that holds its last full block. Prints figures; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    import os

    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def tiled_hour(recording: Path, seconds: float, out: Path) -> dict:
    """The recording's records tiled over `seconds` at their own pace into the recording `out`."""
    from kvviz.peers.watch.bench import read_records, tiled
    from kvviz.peers.watch.recording import RecordingWriter

    header, records = read_records(recording)
    writer = RecordingWriter(out, header)
    tiles, hour = tiled(header, records, seconds)
    n = 0
    for r in hour:
        writer.write(r)
        n += 1
    writer.close()
    return {"records": n, "tiles": tiles, "bytes": out.stat().st_size}


def frames_at_hour(recording: Path, seconds: float, size: tuple[int, int], repeats: int) -> dict:
    from kvviz.ui.qtapp import ensure_app

    app = ensure_app()
    from PySide6.QtCore import QSettings

    from kvviz.ui.watch.window import WatchWindow

    with tempfile.TemporaryDirectory() as tmp:
        hour = Path(tmp) / "hour.kvwatch"
        made = tiled_hour(recording, seconds, hour)
        window = WatchWindow(QSettings(str(Path(tmp) / "s.ini"), QSettings.Format.IniFormat))
        window.resize(*size)
        window.show()
        app.processEvents()
        rss0 = _rss_mib()
        window.speed_spin.setValue(0)
        started = time.perf_counter()
        window.replay(hour)
        while not window.source.done:
            app.processEvents()
        replay_s = time.perf_counter() - started
        during = list(window.frame_ms)
        at_end = []
        for _ in range(repeats):
            window._drawn = None
            t = time.perf_counter()
            window.redraw(snapshot=True)
            app.processEvents()  # the paint
            at_end.append((time.perf_counter() - t) * 1000)
        s = window.source.history.servers[0]
        out = {"window": f"{size[0]}x{size[1]}", "seconds_of_traffic": seconds, **made, "replay_s": replay_s,
               "frames_while_replaying": len(during),
               "frame_ms_while_replaying_median": statistics.median(during) if during else None,
               "frame_ms_at_hour_median": statistics.median(at_end), "frame_ms_at_hour_max": max(at_end),
               "rss_mib_before": rss0, "rss_mib_after": _rss_mib(), "points": len(s.points), "minutes": len(s.minutes),
               "mirror_blocks": s.blocks(), "narration_lines": len(s.narration)}
        window.close()
        return out


def completion_delay(url: str, events_port: int, replay_port: int, model: str, n: int, size: tuple[int, int]) -> dict:
    """Per request: when the first frame holding its last full block was drawn, less when its answer came."""
    from kvviz.ui.qtapp import ensure_app

    app = ensure_app()
    from PySide6.QtCore import QSettings

    from kvviz.peers.watch.bench import complete_once, delay_summary
    from kvviz.ui.watch.dialog import make_request
    from kvviz.ui.watch.window import WatchWindow

    tmp = tempfile.mkdtemp()
    window = WatchWindow(QSettings(str(Path(tmp) / "s.ini"), QSettings.Format.IniFormat))
    window.resize(*size)
    window.show()
    window.watch(make_request(url, events_port=events_port, replay_port=replay_port, interval_s=0.5))
    waiting: dict[tuple[int, ...], float] = {}  # last block -> when its request's answer came
    delays: list[float] = []
    lock = threading.Lock()

    def drawn() -> None:
        now = time.time()
        held = {tok for v in window.frame.servers for tree in v.trees for tok in tree.tokens}
        with lock:
            for block in [b for b in waiting if b in held]:
                delays.append((now - waiting.pop(block)) * 1e3)

    window.frame_drawn.connect(drawn)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (window.frame and window.frame.servers[0].has_events):
        app.processEvents()
        time.sleep(0.01)

    def send(i: int) -> None:
        last, done = complete_once(url, model, i)
        with lock:
            waiting[last] = done

    for i in range(n):
        worker = threading.Thread(target=send, args=(i,))
        worker.start()
        while worker.is_alive():
            app.processEvents()
            time.sleep(0.002)
        settle = time.monotonic() + 5
        while waiting and time.monotonic() < settle:
            app.processEvents()
            time.sleep(0.002)
    window.close()
    return delay_summary(n, delays)


def main(argv: list[str] | None = None) -> int:
    from kvviz.peers.watch.bench import server_options

    p = argparse.ArgumentParser(prog="python -m kvviz.ui.watch.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--recording", type=Path, help="a recording of a burst of requests (kvviz watch --record)")
    p.add_argument("--hour", type=float, default=3600.0, help="seconds of traffic to tile the recording to")
    p.add_argument("--size", default="1920x1080", help="the window's size, WxH")
    p.add_argument("--repeats", type=int, default=20, help="frames drawn at the hour's end")
    server_options(p, "completion-to-screen")
    args = p.parse_args(argv)
    w, _, h = args.size.partition("x")
    size = (int(w), int(h))
    out = {}
    if args.recording:
        out["hour"] = frames_at_hour(args.recording, args.hour, size, args.repeats)
    if args.url:
        out["delay"] = completion_delay(args.url, args.events_port, args.replay_port, args.model, args.requests, size)
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
