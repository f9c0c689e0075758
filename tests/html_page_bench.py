"""Benchmark of the HTML page (docs/html-page.md): for each saved run given, the page's size and, in headless
Chromium loading it from disk, the time from navigation to first contentful paint and to the first step drawn
(performance.mark "kvviz-drawn"), and the time a key press takes to redraw every panel. Medians of --repeat loads.

    python tests/html_page_bench.py TRACE.json [TRACE.json ...] [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import html_page_cdp  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from kvviz.page import write_page
    from kvviz.records import traceio

    browser = html_page_cdp.Browser(1600, 1000)
    try:
        for name in args.traces:
            saved = traceio.load_run(name)
            n = max(len(v) for v in saved.traces.values())
            t0 = time.perf_counter()
            page = write_page(Path(tempfile.mkdtemp()) / "run.html", saved.info, saved.traces)
            build_s = time.perf_counter() - t0
            paint, drawn, key = [], [], []
            for _ in range(args.repeat):
                browser.open(page)
                browser.eval("new Promise(r => { const t0 = Date.now(); (function wait() {"
                             " if (performance.getEntriesByName('first-contentful-paint').length"
                             " || Date.now() - t0 > 3000) r(); else setTimeout(wait, 20); })(); })")
                times = browser.eval("""(() => {
                  const p = performance.getEntriesByName('first-contentful-paint')[0];
                  const d = performance.getEntriesByName('kvviz-drawn')[0];
                  return [p ? p.startTime : null, d ? d.startTime : null]; })()""")
                paint.append(times[0])
                drawn.append(times[1])
                before = browser.eval("document.body.dataset.frames")
                t0 = time.perf_counter()
                browser.press("ArrowLeft")
                assert browser.eval("document.body.dataset.frames") != before
                key.append((time.perf_counter() - t0) * 1000)
            browser.pump()
            size = page.stat().st_size / 2**20
            print(f"{Path(name).name}: {n} steps of {len(saved.traces)} engines, page {size:.2f} MiB "
                  f"(built in {build_s:.2f} s); first paint {statistics.median(paint):.0f} ms, first step drawn "
                  f"{statistics.median(drawn):.0f} ms, a key's redraw {statistics.median(key):.0f} ms "
                  f"(medians of {args.repeat}); problems: {browser.problems or 'none'}")
    finally:
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
