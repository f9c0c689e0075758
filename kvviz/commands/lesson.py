"""`kvviz lesson FILE`: present a lesson full screen (kvviz.ui.lessons), or hand it out: `--export deck.html` (one
offline HTML deck), `--export DIR --png WxH` (one PNG per scene at slide size), `--pdf handout.pdf` (one page per
scene). Runs the lesson lacks are made first and kept beside it (kvviz.lessons.runs). `--bench` prints how long
moving to the next scene takes and the deck's size and first paint. A bad lesson is one line naming the scene and
the field (exit 2).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

SIZES = ("1920x1080", "1280x720")


def configure(parser) -> None:
    parser.add_argument("lesson", metavar="FILE", help="a lesson file (.toml or .json), or a built-in lesson's name: "
                                                       "07-kv-cache, 08-serving")
    parser.add_argument("--export", default=None, metavar="DECK.html|DIR",
                        help="write the lesson as one offline HTML deck (a .html name), or its scenes as PNGs into a "
                             "folder (with --png)")
    parser.add_argument("--png", default=None, metavar="WxH", help=f"slide size of the PNGs: {' or '.join(SIZES)}")
    parser.add_argument("--pdf", default=None, metavar="FILE", help="write a PDF handout, one page per scene")
    parser.add_argument("--lang", choices=("en", "zh"), default="en", help="the captions' language (default en)")
    parser.add_argument("--runs", default=None, metavar="DIR",
                        help="where the lesson's runs are kept (default: LESSON.runs beside it; a built-in lesson's "
                             "in ~/.cache/kvviz/lessons)")
    parser.add_argument("--check", action="store_true", help="check the lesson and make its runs; show nothing")
    parser.add_argument("--bench", action="store_true",
                        help="print the time from PageDown to the next scene drawn (offscreen), the deck's size and "
                             "its first paint in headless Chromium where one is installed")


def parse_size(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)x(\d+)", text or "")
    if not m or text not in SIZES:
        raise ValueError(f"--png must be {' or '.join(SIZES)}, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def prepare(args):
    """The lesson, checked, with every run made and loaded."""
    from kvviz.lessons import LessonRuns, find_lesson, load_lesson, make_missing, runs_dir

    lesson = load_lesson(find_lesson(args.lesson))
    folder = runs_dir(lesson, args.runs)
    make_missing(lesson, folder)
    runs = LessonRuns(lesson, folder)
    runs.load_all()
    return lesson, runs


def run(args) -> int:
    size = parse_size(args.png) if args.png is not None else None
    export = Path(args.export) if args.export else None
    if size is not None and (export is None or export.suffix.lower() == ".html"):
        raise ValueError("--png writes into a folder: give it with --export DIR")
    from kvviz.fileio import check_writable

    if export is not None and export.suffix.lower() == ".html":
        check_writable(export, "--export")
    if args.pdf:
        check_writable(args.pdf, "--pdf")
    lesson, runs = prepare(args)
    if args.check:
        n, stops = len(lesson.scenes), sum(len(s.stops) for s in lesson.scenes)
        print(f"{lesson.path.name}: {n} scene{'s' if n != 1 else ''}, {stops} stop{'s' if stops != 1 else ''}; "
              f"runs in {runs.folder}")
        return 0
    if args.bench:
        return bench(lesson, runs, args.lang)
    wrote = False
    if export is not None and export.suffix.lower() == ".html":
        from kvviz.page.lesson import write_deck

        path = write_deck(export, lesson, runs, args.lang)
        print(f"wrote {path} ({path.stat().st_size:,} bytes, {len(lesson.scenes)} scenes)")
        wrote = True
    if export is not None and export.suffix.lower() != ".html" or args.pdf:
        from kvviz.ui.lessons.export import write_pdf, write_pngs

        if export is not None and export.suffix.lower() != ".html":
            for path in write_pngs(lesson, runs, export, size or (1920, 1080), args.lang):
                print(f"wrote {path}")
        if args.pdf:
            path = write_pdf(lesson, runs, Path(args.pdf), args.lang)
            print(f"wrote {path} ({len(lesson.scenes)} pages)")
        wrote = True
    if wrote:
        return 0
    from kvviz.ui.lessons.presenter import present

    return present(lesson, runs, args.lang)


def bench(lesson, runs, lang: str) -> int:
    """PageDown to the next stop painted, offscreen, at 1920x1080 (median and longest over every move of a walk
    through the lesson and back, all runs cached; new scenes and new steps apart); then the deck's size and first
    paint."""
    import statistics
    import tempfile

    from kvviz.ui.lessons.export import time_moves

    moves = time_moves(lesson, runs, (1920, 1080), lang)
    for kind, what in (("scene", "to the next scene"), ("step", "to a bookmarked step of the same scene")):
        times = [ms for k, ms in moves if k == kind]
        if times:
            print(f"{lesson.path.name}: PageDown {what}, painted (offscreen, 1920x1080, {len(times)} moves there and "
                  f"back): median {statistics.median(times):.0f} ms, longest {max(times):.0f} ms, "
                  f"{sum(t < 200 for t in times)} under 200 ms")
    from kvviz.page.lesson import write_deck

    with tempfile.TemporaryDirectory(prefix="kvviz-lesson-") as tmp:
        path = write_deck(Path(tmp) / "deck.html", lesson, runs, lang)
        size = path.stat().st_size
        paint = deck_first_paint(path)
    measured = (f"{paint[0]:.0f} ms, first scene's picture drawn {paint[1]:.0f} ms (headless Chromium, medians of "
                f"3 loads)" if paint else "not measured (no headless Chromium driver here)")
    print(f"{lesson.path.name}: deck {size / 2**20:.2f} MiB ({size:,} bytes); first paint {measured}")
    return 0


def deck_first_paint(path: Path) -> tuple[float, float] | None:
    """(first contentful paint, first scene's page drawn) in ms from navigation, median of 3 loads of the deck
    from disk in headless Chromium with every host name unresolvable (the page tests' driver,
    tests/html_page_cdp.py, in a source checkout); None where that driver or Chromium is missing."""
    import statistics
    import time

    tests = Path(__file__).resolve().parents[2] / "tests"
    if not (tests / "html_page_cdp.py").is_file():
        return None
    sys.path.insert(0, str(tests))
    try:
        import html_page_cdp
    finally:
        sys.path.remove(str(tests))
    if html_page_cdp.missing():
        print(f"kvviz lesson: {html_page_cdp.missing()}", file=sys.stderr)
        return None
    browser = html_page_cdp.Browser(1920, 1080)
    paints, drawn = [], []
    try:
        for _ in range(3):
            browser.open(path)
            deadline = time.monotonic() + 30
            while not browser.eval("window.kvvizLesson.ready()") and time.monotonic() < deadline:
                time.sleep(0.01)
            p, d = browser.eval("""(() => {
              const p = performance.getEntriesByName('first-contentful-paint')[0];
              const f = document.querySelector('iframe'), w = f && f.contentWindow;
              const d = w && w.performance.getEntriesByName('kvviz-drawn')[0];
              return [p ? p.startTime : null, d ? d.startTime + w.performance.timeOrigin - performance.timeOrigin
                                                : null]; })()""")
            paints.append(float("nan") if p is None else p)
            drawn.append(float("nan") if d is None else d)
    finally:
        browser.close()
    return statistics.median(paints), statistics.median(drawn)
