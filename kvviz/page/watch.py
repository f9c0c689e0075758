"""A watch recording (kvviz.peers.watch.recording) as one self-contained HTML page: per server the prefix
cache's tree of hash chains at each of up to MAX_FRAMES moments, cache usage, running and waiting requests,
prefix hit rate, TTFT and ITL over the session, the counters and the narration; a slider picks the moment.
Python computes every sentence, figure, series, axis label and the tree's layout; watch.js draws them. No Qt, no
torch, no network. Every text is in both of the page's languages ({"en": ..., "zh_CN": ...}, kvviz.page.strings'
translations in the context "Narration"); the page starts in `lang`.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kvviz.page import _asset, _script_json, html, write_text
from kvviz.page.strings import LANGUAGES, translator
from kvviz.peers.watch.said import Said, _tr

MAX_FRAMES = 120  # moments the slider offers (evenly spread over the samples)
MAX_SEGMENTS = 400  # segments of the tree drawn per moment (the longest first); the rest counted
MAX_NARRATION = 2000
TEXT_CHARS = 160  # a segment's text shown up to this many characters (its end)
SERVER_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


# The page's own words: titles, legends, the slider and the status line (Python fills the {fields}: _word).
WORDS = {
    "tree": _tr("Prefix cache: hash chains (a trunk shared by requests, their branches)"),
    "text": _tr("Blocks and counters"), "usage": _tr("Cache usage and requests"), "hits": _tr("Prefix hit rate"),
    "latency": _tr("TTFT and ITL"), "rank": _tr("{url} rank {rank}"),
    "hidden": _tr("{n} shorter segments not drawn"),
    "trunk": _tr("a segment several chains share (trunk)"), "branch": _tr("a segment of one chain (branch)"),
    "width": _tr("width: blocks; a click shows a segment's tokens"),
    "segment": _tr("{n} blocks, {branches} branches from its end"), "segment_one": _tr("{n} blocks, a branch"),
    "block": _tr("1 block, {branches} branches from its end"), "block_one": _tr("1 block, a branch"),
    "no_text": _tr("(tokens as text need --model)"),
    "usage_legend": _tr("{url}: usage % (solid), running and waiting (dashed, dotted; 100 = {max})"),
    "hits_legend": _tr("{url}: prompt tokens found cached, % per sample"),
    "latency_legend": _tr("{url}: TTFT (solid), ITL (dashed), mean per sample"),
    "nothing": _tr("nothing happened yet"), "moment": _tr("Moment"), "at": _tr("{t} s of {last} s"),
    "recorded": _tr("recorded {started}"), "model": _tr(", tokens as text by {model}"),
    "samples": _tr(", {n} metric samples"), "truncated": _tr(", the recording ends inside a record"),
}


def in_languages(said) -> dict[str, str]:
    """A Said (kvviz.peers.watch.said) in each of the page's languages."""
    return {lang: said.text(translator("Narration", lang)) for lang in LANGUAGES}


def _word(name: str, **fields) -> dict[str, str]:
    """One of WORDS in each of the page's languages, its {fields} filled."""
    return {lang: translator("Narration", lang)(WORDS[name]).format(**fields) for lang in LANGUAGES}


class _Phrases:
    """Distinct texts in both languages, each kept once: an entry names one by its index (a tree's segments share
    a few descriptions, its heading changes at few moments)."""

    def __init__(self) -> None:
        self.index: dict[tuple, int] = {}
        self.texts: list[dict[str, str]] = []

    def add(self, texts: dict[str, str]) -> int:
        key = tuple(texts.values())
        if key not in self.index:
            self.index[key] = len(self.texts)
            self.texts.append(texts)
        return self.index[key]

    def of(self, name: str, **fields) -> int:
        """One of WORDS, filled (_word)."""
        key = (name, tuple(fields.items()))
        if key not in self.index:
            self.index[key] = self.add(_word(name, **fields))
        return self.index[key]


def tree_layout(state, limit: int, _tr: Callable[[str], str] = str) -> dict:
    """The tree as rectangles in block units: x from a segment's first block's depth, one row per leaf, an inner
    segment spanning its children's rows. Only the `limit` longest chains' segments are kept. "shape": the tree
    in words (MirrorState.shape_text, `_tr` translating)."""
    segs = list(state.segments())
    kids: dict[int, list[int]] = {}
    for i, s in enumerate(segs):
        kids.setdefault(s.parent, []).append(i)
    x0 = [0] * len(segs)
    for i, s in enumerate(segs):  # parents come before their children
        x0[i] = 0 if s.parent < 0 else x0[s.parent] + segs[s.parent].length
    keep = sorted(range(len(segs)), key=lambda i: -(x0[i] + segs[i].length))[:limit]
    kept = set(keep)
    for i in list(kept):  # a kept segment keeps its ancestors
        p = segs[i].parent
        while p >= 0 and p not in kept:
            kept.add(p)
            p = segs[p].parent
    rows: dict[int, tuple[float, float]] = {}
    next_row = 0

    def place(i: int) -> tuple[float, float]:
        nonlocal next_row
        children = [c for c in kids.get(i, []) if c in kept]
        if not children:
            rows[i] = (next_row, next_row + 1)
            next_row += 1
        else:
            spans = [place(c) for c in children]
            rows[i] = (spans[0][0], spans[-1][1])
        return rows[i]

    stack_roots = [i for i in kids.get(-1, []) if i in kept]
    for r in stack_roots:
        place(r)
    out = []
    index = {i: n for n, i in enumerate(sorted(kept))}
    child = {int(p): row for row, p in enumerate(state.parent.tolist()) if p >= 0}  # within a segment: the one
    for i in sorted(kept):
        s = segs[i]
        text = ""
        if state.texts:
            row, chain = s.first, []
            for _ in range(s.length):
                chain.append(state.texts[row])
                row = child.get(row, row)
            text = "".join(chain)
            text = text if len(text) <= TEXT_CHARS else "…" + text[-TEXT_CHARS:]
        out.append([x0[i], s.length, rows[i][0], rows[i][1], s.branches, index.get(s.parent, -1), text])
    return {"segs": out, "rows": next_row, "depth": max((x0[i] + segs[i].length for i in kept), default=0),
            "hidden": len(segs) - len(kept), "shape": state.shape_text(_tr)}


def _fmt(x: float, unit: str = "", digits: int = 0) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}{unit}"


def _tick(v: float) -> str:
    """An axis value at three significant digits, without an exponent: 25, 12.5, 0.375, 1230."""
    return f"{float(f'{v:.3g}'):g}" if abs(v) < 1e15 else f"{v:.3g}"


def _values(xs, scale: float = 1.0) -> list[float | None]:
    """A series as the page draws it (None where the sample has no value), times `scale`."""
    return [None if math.isnan(v) else round(float(v) * scale, 6) for v in xs]


def _plots(series: list[dict], servers) -> dict:
    """The three plots' lines ([server, dash or None, values] over the server's "t"), their y range and ticks
    ([value, label]) and each server's legend: usage in %, running and waiting scaled so that 100 is the most
    requests any server had, the prefix hit rate in %, TTFT and ITL in ms. A plot none of whose lines holds a value
    has no ticks and "empty": the words the page shows in its place (WORDS["nothing"]); else "empty" is None."""
    def top(key: str) -> float:  # the largest value of `key` on any server (1e-9 when none)
        return max([1e-9] + [float(np.nanmax(s[key])) for s in series if np.isfinite(s[key]).any()])

    req_max = max(1.0, top("running"), top("waiting"))
    plots = {"usage": (100.0, "%", [[(None, s["usage"], 100), ([4, 3], s["running"], 100 / req_max),
                                     ([1, 2], s["waiting"], 100 / req_max)] for s in series],
                       lambda url: _word("usage_legend", url=url, max=f"{req_max:g}")),
             "hits": (100.0, "%", [[(None, s["hit_rate"], 100)] for s in series],
                      lambda url: _word("hits_legend", url=url)),
             "latency": (max(top("ttft_ms"), top("itl_ms")), " ms",
                         [[(None, s["ttft_ms"], 1), ([4, 3], s["itl_ms"], 1)] for s in series],
                         lambda url: _word("latency_legend", url=url))}
    out = {}
    for key, (ymax, unit, per_server, legend) in plots.items():
        lines = [[i, dash, _values(ys, scale)] for i, curves in enumerate(per_server) for dash, ys, scale in curves]
        empty = all(v is None for _server, _dash, values in lines for v in values)
        ticks = [] if empty else [[ymax * i / 4, _tick(ymax * i / 4) + unit] for i in range(5)]
        out[key] = {"ymax": ymax, "ticks": ticks, "lines": lines, "legend": [legend(server.url) for server in servers],
                    "empty": _word("nothing") if empty else None}
    return out


def watch_data(path: str | Path, *, text_of: Callable[[tuple[int, ...]], str] | None = None) -> dict:
    """Replay the recording at `path` and take its moments: what watch.js draws."""
    from kvviz.peers.watch.history import STATE_WORDS, WatchHistory, interval, note_said
    from kvviz.peers.watch.recording import RecordingReader, Sample, read_header

    header = read_header(path)
    n_samples = sum(1 for r in RecordingReader(Path(path)) if isinstance(r, Sample))
    every = max(1, math.ceil(n_samples / MAX_FRAMES))
    history = WatchHistory(header, window_s=math.inf, text_of=text_of)
    frames, narration, phrases = [], [[] for _ in header.servers], _Phrases()
    seen, last_t, said = 0, header.started, [0] * len(header.servers)
    reader = RecordingReader(Path(path))
    for record in reader:
        history.apply(record)
        if not isinstance(record, Sample):
            continue
        seen += 1
        if seen % every and seen != n_samples:
            continue
        frame = {"t": record.t - header.started, "servers": []}
        for i, server in enumerate(history.servers):
            r = interval(server, last_t, record.t)
            states = STATE_WORDS.get(r.state)
            frame["servers"].append({
                "state": in_languages(Said.of(states)) if states else r.state,
                "events": in_languages(note_said(r.events)),
                "blocks": r.blocks,
                "figures": in_languages(Said.of(
                    _tr("cache {usage}, {running} running, {waiting} waiting, {blocks} blocks mirrored, prefix hits "
                        "{hits}, TTFT {ttft}, ITL {itl}"),
                    usage=_fmt(r.usage * 100 if not math.isnan(r.usage) else math.nan, "%"),
                    running=_fmt(r.running), waiting=_fmt(r.waiting), blocks=r.blocks,
                    hits=_fmt(r.hit_rate * 100 if r.queries else math.nan, "%"), ttft=_fmt(r.ttft_ms, " ms", 1),
                    itl=_fmt(r.itl_ms, " ms", 1))),
                "counters": in_languages(Said.of(
                    _tr("{frames:,} frames, {batches:,} batches, {malformed} malformed, {gaps} gaps, {lost} batches "
                        "lost"), frames=r.frames, batches=server.counters.batches, malformed=r.malformed, gaps=r.gaps,
                    lost=r.lost)),
                "trees": [_tree(m.state(text_of), server, rank, phrases) for rank, m in enumerate(server.mirrors)],
                "said": said[i]})
        for i, server in enumerate(history.servers):  # the narration up to this moment
            new = [[f"{t - header.started:.1f} s", in_languages(s)] for t, s in server.narration if t > last_t]
            narration[i].extend(new[:max(0, MAX_NARRATION - len(narration[i]))])
            said[i] = len(narration[i])
            frame["servers"][i]["said"] = said[i]
        last_t = record.t
        frames.append(frame)
    if not frames:
        raise ValueError(f"{path}: the recording holds no metric sample to draw")
    last = frames[-1]["t"]
    for frame in frames:
        frame["label"] = _word("at", t=f"{frame['t']:.1f}", last=f"{last:.1f}")
    series = [server.series() for server in history.servers]
    servers = []
    for i, (server, s) in enumerate(zip(history.servers, series)):
        servers.append({"url": server.url, "color": SERVER_COLORS[i % len(SERVER_COLORS)], "ranks": server.ranks,
                        "series": {"t": [round(float(v) - header.started, 3) for v in s["t"]]},
                        "narration": narration[i]})
    t_max = max([1e-9] + [ts["series"]["t"][-1] for ts in servers if ts["series"]["t"]])
    started = time_text(header.started)
    status = {lang: "".join(part[lang] for part in [_word("recorded", started=started)]
                            + ([_word("model", model=header.model)] if header.model else [])
                            + [_word("samples", n=n_samples)] + ([_word("truncated")] if reader.truncated else []))
              for lang in LANGUAGES}
    return {"kind": "watch", "started": started, "model": header.model, "servers": servers,
            "frames": frames, "truncated": reader.truncated, "samples": n_samples, "status": status,
            "plots": _plots(series, history.servers), "t_axis": [t_max, f"{t_max:.0f} s"],
            "phrases": phrases.texts}


def time_text(t: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _tree(state, server, rank: int, phrases: _Phrases) -> dict:
    """tree_layout with the shape in each of the page's languages, the line above the tree ("head": where, the
    shape, the segments not drawn) and each segment's description as indices into `phrases`."""
    laid = tree_layout(state, MAX_SEGMENTS)
    laid["shape"] = shape = in_languages(state.shape_said())
    where = _word("rank", url=server.url, rank=rank) if server.ranks > 1 else dict.fromkeys(LANGUAGES, server.url)
    hidden = _word("hidden", n=laid["hidden"]) if laid["hidden"] else None
    laid["head"] = phrases.add({lang: f"{where[lang]}: {shape[lang]}" + (f" ({hidden[lang]})" if hidden else "")
                                for lang in LANGUAGES})
    for seg in laid["segs"]:
        n, branches = seg[1], seg[4]
        seg.append(phrases.of(("block" if n == 1 else "segment") + ("" if branches > 1 else "_one"), n=n,
                              branches=branches))
    return laid


def build_watch_page(path: str | Path, *, text_of=None, lang: str = "en") -> str:
    """The page of the recording at `path`, starting in `lang` ("en" or "zh_CN"; its buttons switch)."""
    if lang not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, got {lang!r}")
    data = watch_data(path, text_of=text_of)
    data["lang"] = lang
    data["words"] = {name: _word(name) for name, text in WORDS.items() if "{" not in text}  # shown as they are
    title = f"kvviz watch: {', '.join(s['url'] for s in data['servers'])} · {data['started']}"
    return _asset("page.html").format(title=html.escape(title), lang="zh-CN" if lang == "zh_CN" else "en",
                                      css=_asset("page.css"),
                                      data=_script_json(data), script=_asset("watch.js"))


def write_watch_page(out: str | Path, recording: str | Path, *, text_of=None, lang: str = "en") -> Path:
    return write_text(out, build_watch_page(recording, text_of=text_of, lang=lang))


__all__ = ["build_watch_page", "write_watch_page", "watch_data"]
