"""`kvviz watch URL [URL ...]`: attach to running vLLM servers read-only (their /metrics polled, their KV events
followed), keep a mirror of each prefix cache, print a line per interval (or --json), record the session
(--record FILE), reopen a recording without a server (--replay FILE) and write it as one HTML page (--page).
The library is kvviz.peers.watch; this module only reads options and prints.
"""
from __future__ import annotations

import dataclasses
import json
import math
import sys
import time

from kvviz.format import fmt_ms


def configure(parser) -> None:
    parser.add_argument("urls", nargs="*", metavar="URL",
                        help="a vLLM server's base URL (http:// or https://HOST:PORT); several side by side")
    parser.add_argument("--replay", metavar="FILE", help="reopen a recording (--record) instead of watching servers")
    parser.add_argument("--record", metavar="FILE", help="record the session (events and metric samples) to FILE")
    parser.add_argument("--page", metavar="FILE.html", help="at the end, write the session as one offline HTML page")
    parser.add_argument("--events", action="append", default=[], metavar="ENDPOINT",
                        help="the KV events endpoint of each URL in order (tcp://HOST:PORT). Without it, nor the "
                             "ports or ranks below, the server's own /kv_event_sources says where they are, and "
                             "where it does not, tcp://HOST:5557 and 5558")
    parser.add_argument("--events-port", type=int, default=None, metavar="PORT",
                        help="the events' port on each URL's host (vLLM's default is 5557)")
    parser.add_argument("--replay-port", type=int, default=None, metavar="PORT",
                        help="the replay socket's port on each URL's host (0: none)")
    parser.add_argument("--ranks", type=int, default=None, metavar="N",
                        help="data-parallel ranks per server: rank r's event ports are offset by r, as vLLM does")
    parser.add_argument("--topic", default=None,
                        help="the event topic to subscribe to (default: the one the server names, else every topic)")
    parser.add_argument("--header", action="append", default=[], metavar="'Name: value'",
                        help="a request header for /metrics, e.g. 'Authorization: Bearer TOKEN' (repeatable)")
    parser.add_argument("--cacert", metavar="FILE", help="https: trust the certificate(s) in FILE (PEM)")
    parser.add_argument("--insecure", action="store_true", help="https without checking the server's certificate")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S",
                        help="seconds between /metrics polls and between printed lines (default 1)")
    parser.add_argument("--timeout", type=float, default=3.0, metavar="S",
                        help="a /metrics answer or a replay taking longer: the server is stalled (default 3)")
    parser.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    parser.add_argument("--window", type=float, default=10.0, metavar="MIN",
                        help="minutes kept sample by sample; older ones are kept per minute (default 10)")
    parser.add_argument("--model", default=None,
                        help="the server's tokenizer (a preset, a model folder): blocks' tokens shown as text")
    parser.add_argument("--speed", type=float, default=0.0, metavar="X",
                        help="--replay at X times the recorded pace (default 0: as fast as it reads)")
    parser.add_argument("--json", action="store_true", help="a JSON object per server per interval")
    parser.add_argument("--quiet", action="store_true", help="no line per interval (the record and page only)")
    parser.add_argument("--gui", action="store_true",
                        help="draw the servers (or the --replay) in the Watch window instead of printing lines")
    parser.add_argument("--settings", metavar="FILE", help="--gui: keep the window's settings in this INI file")


def _check(args) -> None:
    if args.replay and args.urls:
        raise ValueError("give server URLs or --replay FILE, not both")
    if not args.replay and not args.urls:
        raise ValueError("give a vLLM server's URL (http://HOST:PORT) or --replay FILE")
    if args.page and not (args.replay or args.record):
        raise ValueError("--page is written from a recording: give --record FILE too (or --replay FILE)")
    if args.replay and args.record:
        raise ValueError("--record records a live session; a replay is already a recording")
    if args.gui and args.page:
        raise ValueError("--page is written without the window: drop --gui (the window exports a page: File > Export)")
    for name, lo in (("interval", 0.05), ("window", 0.1), ("timeout", 0.1)):
        v = getattr(args, name)
        if not (math.isfinite(v) and v >= lo):
            raise ValueError(f"--{name} {v}: at least {lo}")
    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        raise ValueError(f"--duration {args.duration}: more than 0")
    if not (math.isfinite(args.speed) and args.speed >= 0):
        raise ValueError(f"--speed {args.speed}: 0 (as fast as it reads) or more")
    if len(args.events) > len(args.urls):
        raise ValueError(f"{len(args.events)} --events endpoints for {len(args.urls)} URLs")
    if args.ranks is not None and not 1 <= args.ranks <= 64:
        raise ValueError(f"--ranks {args.ranks}: from 1 to 64")
    for port, name in ((args.events_port, "--events-port"), (args.replay_port, "--replay-port")):
        if port is not None and (not 0 <= port < 65536 or (name == "--events-port" and port == 0)):
            raise ValueError(f"{name} {port}: a port from 1 to 65535" + (" (0: none)" if "replay" in name else ""))


def _cacert(path: str | None) -> str | None:
    """--cacert as a PEM file ssl can read; ValueError (one line) otherwise."""
    if path is None:
        return None
    import ssl

    from kvviz.fileio import check_regular

    check_regular(path, "certificate file")
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"--cacert {path}: not a PEM certificate file ({exc})") from None
    return path


def _need(*modules: str) -> None:
    """A one-line refusal naming the watch extra when one of its packages is missing."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        names = {"zmq": "pyzmq", "prometheus_client": "prometheus_client", "msgspec": "msgspec"}
        raise ValueError(f"kvviz watch needs {', '.join(names[m] for m in missing)}: pip install 'kvviz[watch]' "
                         f"(or pip install pyzmq msgspec prometheus_client)")


def run(args) -> int:
    _check(args)
    _need("msgspec") if args.replay else _need("zmq", "msgspec", "prometheus_client")
    from kvviz.fileio import check_writable
    from kvviz.peers.watch.recording import Header, RecordingReader, RecordingWriter, read_header

    if args.page:
        check_writable(args.page, "the page")
    from kvviz.peers.watch.tokens import text_of_tokens

    text_of = text_of_tokens(args.model) if args.model else None
    if args.gui:
        return _gui(args, text_of)
    if args.replay:
        header = read_header(args.replay)
        code = _session(args, header, _replayed(RecordingReader(_path(args.replay)), args.speed), None, text_of)
        _page(args, args.replay, text_of)
        return code
    from kvviz.peers.watch.client import LiveWatch

    options = _options(args)
    addresses = _addresses(args, options)
    header = Header(time.time(), tuple(a.url for a in addresses), tuple(a.ranks for a in addresses),
                    args.model or "")
    writer = RecordingWriter(args.record, header) if args.record else None
    _stop_on_sigterm()
    live = LiveWatch(addresses, options)
    live.start()
    try:
        code = _session(args, header, _live_records(live, args.interval), writer, text_of)
    finally:
        live.stop()
        if writer is not None:  # Ctrl+C keeps what was recorded: the file is closed and renamed
            path = writer.close()
            print(f"kvviz watch: recorded {writer.records:,} records to {path}", file=sys.stderr)
    _page(args, args.record, text_of)
    return code


def _gui(args, text_of) -> int:
    """The Watch window on the servers (or the recording), until it is closed."""
    from kvviz.ui.qtapp import display_problem

    problem = display_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    from kvviz.ui.watch.window import run_window

    if args.replay:
        return run_window(args.settings, replay=_path(args.replay), text_of=text_of)
    from kvviz.ui.watch.dialog import WatchRequest

    options = _options(args)
    addresses = tuple(_addresses(args, options))
    return run_window(args.settings, request=WatchRequest(addresses, options, args.record, args.model or ""),
                      text_of=text_of)


def _options(args):
    from kvviz.peers.watch.client import WatchOptions

    return WatchOptions(interval_s=args.interval, timeout_s=args.timeout, replay_timeout_s=args.timeout,
                        insecure=args.insecure, cafile=_cacert(args.cacert))


def _addresses(args, options) -> list:
    """Each URL's address: as the options give it, else as the server's /kv_event_sources says (said on stderr),
    else vLLM's default ports on the URL's host."""
    from kvviz.peers.watch.client import EVENTS_PORT, REPLAY_PORT, address_of, discover, parse_header

    headers = tuple(parse_header(h) for h in args.header)
    addresses = []
    for i, url in enumerate(args.urls):
        given = i < len(args.events) or args.events_port is not None or args.replay_port is not None or args.ranks
        address = address_of(url, events=args.events[i] if i < len(args.events) else None,
                             events_port=args.events_port or EVENTS_PORT,
                             replay_port=REPLAY_PORT if args.replay_port is None else args.replay_port or None,
                             ranks=args.ranks or 1, topic=args.topic or "", headers=headers)
        if not given:
            address, said = discover(address, options)
            if args.topic is not None:
                address = dataclasses.replace(address, topic=args.topic)
            print(f"kvviz watch: {url}: {said}", file=sys.stderr)
        addresses.append(address)
    return addresses


def _stop_on_sigterm() -> None:
    """SIGTERM ends a live session as Ctrl+C does (the recording closed and renamed, the page written)."""
    import signal
    import threading

    def stop(_signum, _frame):
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)


def _page(args, recording, text_of) -> None:
    if args.page:
        from kvviz.page.watch import write_watch_page

        write_watch_page(args.page, recording, text_of=text_of)
        print(f"kvviz watch: wrote {args.page}", file=sys.stderr)


def _path(p: str):
    from pathlib import Path

    return Path(p).expanduser()


def _live_records(live, interval: float):
    """The live records, and None when none came for a while (so a line is printed on time)."""
    while True:
        yield live.get(min(0.2, interval))


def _replayed(reader, speed: float):
    first_t = started = None
    for record in reader:
        t = getattr(record, "t", None)
        if speed > 0 and t is not None:
            if first_t is None:
                first_t, started = t, time.monotonic()
            wait = (t - first_t) / speed - (time.monotonic() - started)
            if wait > 0:
                time.sleep(wait)
        yield record
    if reader.truncated:
        print(f"kvviz watch: {reader.path} ends inside a record (a session cut short): read up to there",
              file=sys.stderr)


def _session(args, header, records, writer, text_of) -> int:
    from kvviz.peers.watch.history import WatchHistory

    history = WatchHistory(header, window_s=args.window * 60.0, text_of=text_of)
    live = writer is not None or not args.replay
    start = time.time() if live else header.started
    end = start + args.duration if args.duration else math.inf
    try:
        _follow(args, history, records, writer, live, start, end)
    except KeyboardInterrupt:  # Ctrl+C or SIGTERM ends a live session as --duration does: recording, page
        if not live:
            raise
        print("kvviz watch: stopped", file=sys.stderr)
    return 0


def _follow(args, history, records, writer, live: bool, start: float, end: float) -> None:
    from kvviz.peers.watch.history import interval
    from kvviz.peers.watch.recording import Header

    last_line = now = start
    for record in records:
        if record is not None:
            if writer is not None:
                writer.write(record)
            history.apply(record)
            if not isinstance(record, Header):
                now = record.t
        elif writer is not None:
            writer.flush()
        if live:
            now = time.time()
        if now - last_line >= args.interval:
            _print_lines(args, [interval(s, last_line, now) for s in history.servers])
            last_line = now
        if now >= end:
            break
    _print_lines(args, [interval(s, last_line, now) for s in history.servers])


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{x * 100:.0f}%"


def _ms(x: float) -> str:
    return "-" if math.isnan(x) else fmt_ms(x)


def _print_lines(args, rows) -> None:
    if args.quiet:
        return
    for r in rows:
        if args.json:
            print(json.dumps(r.as_dict(), allow_nan=False), flush=True)
            continue
        clock = time.strftime("%H:%M:%S", time.localtime(r.t))
        head = f"{clock} {r.url} {r.state}"
        figures = (f"cache {_pct(r.usage)}, {_n(r.running)} running, {_n(r.waiting)} waiting | {r.blocks} blocks "
                   f"(+{r.stored} -{r.removed}) | prefix hits {_pct(r.hit_rate)} | TTFT {_ms(r.ttft_ms)}, ITL "
                   f"{_ms(r.itl_ms)}")
        if r.preempted:
            figures += f" | {r.preempted:.0f} preempted"
        if r.malformed or r.gaps or r.lost:
            figures += f" | {r.malformed} malformed frames, {r.gaps} gaps, {r.lost} batches lost"
        said = f" | {'; '.join(r.narration)}" if r.narration else ""
        print(f"{head} | {figures}{said}", flush=True)


def _n(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.0f}"
