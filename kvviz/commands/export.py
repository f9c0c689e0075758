"""`kvviz export --out DIR`: run a compare run in the real window, offscreen, and write the asked-for
files: PNG / SVG of the window or of panels, a GIF / MP4 with one frame per step, the traces as CSV
(one row per engine and step) and JSON, the summary as CSV and Markdown, the run as one interactive
HTML page (kvviz.page). `--from TRACE.json` writes the same files from a saved run, without a model.

Checks its arguments before anything heavy starts (bad input: one line, exit 2); a refused command
writes nothing and makes no folder. Qt and the window live in kvviz.ui.headless (only images and
animations need them: a saved run's data and page are written without Qt); this module parses, checks
and writes what needs no window.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

from kvviz import catalog
from kvviz.options import add_run_options, add_tokens, parse_size

DEFAULT_ENGINES = ",".join(catalog.DEFAULT_ENGINES)


def configure(parser) -> None:
    add_run_options(parser)  # shared with export and shot: kvviz.options, one set of bounds
    parser.set_defaults(model=None)  # the app's default: tiny when its weights are trained, else tiny-random
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="folder for the files (made if missing, in a folder that exists)")
    add_tokens(parser, 20)
    parser.add_argument("--engines", default=DEFAULT_ENGINES, help=f"comma list (default: {DEFAULT_ENGINES})")
    parser.add_argument("--panels", default="window",
                        help="comma list of what to draw: `window` and/or panel keys (token_stream, work_matrix, "
                             "recompute, attention, latency, bytes, cache_memory, summary); default: window. "
                             "Images: one file each; the animation: the chosen ones side by side")
    what = parser.add_argument_group("files (at least one)")
    what.add_argument("--png", action="store_true", help="<panel>.png for each of --panels")
    what.add_argument("--svg", action="store_true", help="<panel>.svg for each of --panels")
    what.add_argument("--gif", action="store_true", help="decode.gif: one frame per step")
    what.add_argument("--mp4", action="store_true", help="decode.mp4: one frame per step (H.264)")
    what.add_argument("--csv", action="store_true", help="steps.csv (one row per engine and step) and summary.csv")
    what.add_argument("--json", action="store_true", help="trace.json: everything, for File > Open trace")
    what.add_argument("--md", action="store_true", help="summary.md: the summary table in Markdown")
    what.add_argument("--html", action="store_true",
                      help="run.html: the run as one self-contained interactive page (step slider, every panel, "
                           "English/Chinese; opens from disk with no network)")
    parser.add_argument("--from", dest="from_trace", default=None, metavar="TRACE.json",
                        help="re-export a saved run (a trace JSON) instead of running a model: no model needed; "
                             "a `kvviz serve --json` record exports as its page (--html)")
    parser.add_argument("--lang", default="en", help="interface language: en (default) or zh_CN")
    parser.add_argument("--size", default="1600x1000", metavar="WxH", help="window size (default: 1600x1000)")
    parser.add_argument("--scale", type=float, default=1.0, help="image and animation scale, e.g. 2 for slides")
    parser.add_argument("--fps", type=float, default=4.0, help="animation frames (steps) per second (default: 4)")
    parser.add_argument("--step", type=int, default=None, help="the step the images show (default: the last)")
    parser.add_argument("--steps", default=None, metavar="FROM:TO",
                        help="the animation's and the page's steps, inclusive (default: all)")


def parse_steps(text: str | None) -> tuple[int | None, int | None]:
    if not text:
        return None, None
    first, sep, last = text.partition(":")
    try:
        a = int(first) if first.strip() else 0
        b = int(last) if last.strip() else None
    except ValueError:
        raise ValueError(f"--steps must look like 0:19, got {text!r}") from None
    if not sep or a < 0 or (b is not None and b < a):
        raise ValueError(f"--steps must look like FROM:TO with 0 <= FROM <= TO, got {text!r}")
    return a, b


def prepare_out(folder: str) -> Path:
    """Make --out if needed (in a folder that exists, as every command's output) and prove a file of one block can
    be written there (a full disk shows)."""
    from kvviz.fileio import check_writable

    out = Path(folder).expanduser()
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder")
    if not out.exists():
        check_writable(out, "--out")  # its parent: missing, not a folder or refused, in one line
    try:
        out.mkdir(exist_ok=True)
    except OSError as exc:
        raise ValueError(f"cannot write in --out {out}: {exc.strerror or exc}") from None
    check_writable(out / "decode", "--out")
    return out


def build_job(args):
    """An ExportJob from the arguments; ValueError (exit 2) for anything wrong, before Qt or torch load."""
    from kvviz.ui.export_actions import WINDOW
    from kvviz.ui.job import ExportJob
    from kvviz.ui.panels import PANELS

    images = tuple(f for f in ("png", "svg") if getattr(args, f))
    animations = tuple(f for f in ("gif", "mp4") if getattr(args, f))
    data = tuple(k for flag, keys in (("json", ("json",)), ("csv", ("csv", "summary_csv")), ("md", ("md",)))
                 if getattr(args, flag) for k in keys)
    if not (images or animations or data or args.html):
        raise ValueError("choose at least one file to write: --png, --svg, --gif, --mp4, --csv, --json, --md or --html")
    known = [WINDOW, *(k for k, _ in PANELS)]
    panels = tuple(dict.fromkeys(p.strip() for p in args.panels.split(",") if p.strip()))
    if not panels:
        raise ValueError(f"--panels is empty; choose from {', '.join(known)}")
    for p in panels:
        if p not in known:
            raise ValueError(f"unknown panel {p!r}; choose from {', '.join(known)}")
    from kvviz.ui.i18n import normalize  # Qt's module, but importing it starts no application

    lang = normalize(args.lang)
    if not (math.isfinite(args.scale) and 0.25 <= args.scale <= 8):
        raise ValueError(f"--scale must be between 0.25 and 8, got {args.scale}")
    top_fps = 50 if "gif" in animations else 120
    if not (math.isfinite(args.fps) and 0.1 <= args.fps <= top_fps):
        raise ValueError(f"--fps must be between 0.1 and {top_fps}, got {args.fps}")
    if args.step is not None and args.step < 0:
        raise ValueError(f"--step must be 0 or more, got {args.step}")
    if args.step is not None and args.step >= args.tokens:  # a step makes one token or more: at most --tokens
        raise ValueError(f"--step {args.step} is outside the run's steps 0..{args.tokens - 1} "
                         f"(a run of --tokens {args.tokens} has at most {args.tokens} steps)")
    if "mp4" in animations:
        from kvviz.ui.exporters import ffmpeg_exe

        ffmpeg_exe()
    first, last = parse_steps(args.steps)
    size = parse_size(args.size)
    engines = tuple(dict.fromkeys(e.strip() for e in args.engines.split(",") if e.strip()))
    if not engines:
        raise ValueError("--engines is empty")
    from kvviz.kernels import check_engines

    check_engines(args.kernel, engines)  # a kernel one of the engines cannot decode with: before any window
    out = prepare_out(args.out)  # last: a refused command makes no folder
    return ExportJob(out=out, prompt=args.prompt, tokens=args.tokens, engines=engines,
                     model=args.model, panels=panels, images=images, animations=animations, data=data,
                     device=args.device, dtype=args.dtype, temperature=args.temperature, top_k=args.top_k,
                     top_p=args.top_p, seed=args.seed, threads=args.threads, block_size=args.block_size,
                     window=args.window, sinks=args.sinks, residual=args.residual, kernel=args.kernel, lang=lang,
                     spec_k=args.spec_k, rollback=args.rollback,
                     size=size, scale=args.scale, fps=args.fps, step=args.step, first=first,
                     last=last)


PAGE_NAME = "run.html"
# traceio's writers of a saved run's data, by ExportJob data key: (file name, writer(path, info, traces))
SAVED_DATA = {
    "json": ("trace.json", lambda path, info, traces: _traceio().save_run(path, info, traces)),
    "csv": ("steps.csv", lambda path, info, traces: _traceio().save_steps_csv(path, traces)),
    "summary_csv": ("summary.csv", lambda path, info, traces: _traceio().save_summary_csv(path, traces, info)),
    "md": ("summary.md", lambda path, info, traces: _traceio().save_summary_markdown(path, traces, info)),
}


def _traceio():
    from kvviz.records import traceio

    return traceio


def write_html(job, saved, progress, interrupts) -> None:
    """run.html of the saved run in --out (the steps --steps names, the image's --step shown first)."""
    from kvviz.page import write_page

    path = job.out / PAGE_NAME
    write_page(path, saved.info, saved.traces, first=job.first, last=job.last, step=job.step, lang=job.lang)
    job.written.append((interrupts.keep(path), ""))
    progress.say(f"wrote {path} ({path.stat().st_size:,} bytes)")


def check_step(step: int | None, n_steps: int) -> None:
    """--step within the run's steps 0..n_steps-1 (ValueError, one line, outside them)."""
    if step is not None and not 0 <= step < n_steps:
        raise ValueError(f"--step {step} is outside the run's steps 0..{n_steps - 1}")


def check_page_step(step: int | None, first: int, last: int | None) -> None:
    """--step within the page's steps FROM..TO (--steps; TO None: to the run's end)."""
    if step is not None and (step < first or (last is not None and step > last)):
        steps = f"{first} on" if last is None else f"{first}..{last}"
        raise ValueError(f"--step {step} is outside the page's steps {steps} (--steps)")


def check_page(saved, first: int | None, last: int | None, step: int | None = None) -> None:
    """The refusals a page makes (a range outside the run, a --step outside that range, a run too large for one
    page) before any file is written: exit 2 with nothing left behind."""
    from kvviz.page import MAX_PAGE_BYTES, check_steps_range, estimate_bytes, too_large

    n_steps = max((len(v) for v in saved.traces.values()), default=0)
    check_step(step, n_steps)
    first, last = check_steps_range(n_steps, first, last)
    check_page_step(step, first, last)
    size = estimate_bytes(saved.info, saved.traces, last)
    if size > MAX_PAGE_BYTES:
        raise too_large(size)


def check_page_run(args) -> None:
    """Before a model run: a page of --tokens steps of every engine would fit (the prompt counted as one
    token a byte, which no tokenizer exceeds), else exit 2 before the run."""
    from kvviz.page import MAX_PAGE_BYTES, attention_bytes, too_large

    first, last = parse_steps(args.steps)
    check_page_step(args.step, first or 0, last)
    tokens = args.tokens if last is None else min(args.tokens, last + 1)
    n = len(args.prompt.encode("utf-8")) + tokens
    engines = [e for e in args.engines.split(",") if e.strip()]
    size = len(engines) * (attention_bytes(n) + 200 * tokens)
    if size > MAX_PAGE_BYTES:
        raise too_large(size, f"a page of {tokens:,} steps of {len(engines)} engines")


def export_saved(args, interrupts) -> int:
    """`--from TRACE.json`: the asked-for files of a saved run. Data and the page need no Qt; images and
    animations replay the run in the offscreen window (kvviz.ui.headless)."""
    from kvviz.kernels import DEFAULT_KERNEL
    from kvviz.records import traceio

    if args.kernel != DEFAULT_KERNEL:
        raise ValueError(f"--kernel {args.kernel} is for a model run; a saved run shows the kernel it ran with")
    if is_serve_record(args.from_trace):
        return export_serve(args, interrupts)
    saved = traceio.load_run(args.from_trace)  # ValueError naming the file: exit 2
    args.prompt, args.tokens = saved.info.prompt or "?", max(1, saved.info.max_new_tokens)
    args.engines = ",".join(saved.traces) or args.engines
    check_step(args.step, max((len(v) for v in saved.traces.values()), default=0))  # before any window
    if args.html:
        check_page(saved, *parse_steps(args.steps), args.step)
    job = build_job(args)  # makes --out last, once everything is checked
    interrupts.check()
    from kvviz.ui.headless import ProgressLine

    progress = ProgressLine(sys.stderr)
    if not (job.images or job.animations):
        for key in job.data:
            name, writer = SAVED_DATA[key]
            path = interrupts.keep(writer(job.out / name, saved.info, saved.traces))
            progress.say(f"wrote {path} ({path.stat().st_size:,} bytes)")
    else:
        replay_outputs(job, saved, progress, interrupts)
    if args.html:
        write_html(job, saved, progress, interrupts)
    return 0


def is_serve_record(path: str) -> bool:
    """Whether the file opens as a `kvviz serve --json` record (its schema named in its first bytes)."""
    from kvviz.fileio import open_regular

    with open_regular(path, "trace file") as f:  # a FIFO or a device is refused here, in one line
        head = f.read(256)
    return b'"schema":"kvviz-serve"' in head.replace(b" ", b"")


def export_serve(args, interrupts) -> int:
    """A serve record's page (kvviz.page.serve): the timeline, pool, counters and narration of every scheduler."""
    from kvviz.page.serve import build_serve_page, write_text
    from kvviz.serving.record import load_runs

    other = [f"--{f}" for f in ("png", "svg", "gif", "mp4", "csv", "json", "md") if getattr(args, f)]
    if other or not args.html:
        raise ValueError(f"a serve record exports as --html here ({', '.join(other) or 'no --html'} asked for); "
                         "the Serve view (python -m kvviz.ui.serve --replay FILE) exports its images and data")
    if args.steps:
        raise ValueError("--steps is for a compare run's page; a serve record's page shows every step")
    from kvviz.serving.history import ServeHistory
    from kvviz.ui.i18n import normalize

    runs = load_runs(args.from_trace)
    check_step(args.step, ServeHistory.from_runs(runs).n_steps())
    text = build_serve_page(runs, step=args.step, lang=normalize(args.lang))
    out = prepare_out(args.out)  # last: a refused command makes no folder
    path = interrupts.keep(write_text(out / PAGE_NAME, text))
    print(f"kvviz export: wrote {path} ({path.stat().st_size:,} bytes)", file=sys.stderr)
    return 0


def replay_outputs(job, saved, progress, interrupts) -> None:
    """The saved run replayed in the offscreen window, then its files written as after a run."""
    import tempfile

    from kvviz.ui.export_actions import replay_run
    from kvviz.ui.headless import dispose, make_window, write_outputs

    with tempfile.TemporaryDirectory(prefix="kvviz-export-") as settings_dir:
        window = make_window(job, settings_dir)
        try:
            replay_run(window, saved, str(job.out))
            write_outputs(window, job, progress, interrupts)
        finally:
            dispose(window)


def run(args) -> int:
    from kvviz.ui.headless import Interrupts

    out = Path(args.out).expanduser()
    made = not out.exists()
    try:
        with Interrupts() as interrupts:  # before Qt's import: Ctrl+C is acted on between pieces of work
            return export(args, interrupts)
    finally:  # a failed or interrupted export leaves no empty folder of its own making
        if made and out.is_dir() and not any(out.iterdir()):
            out.rmdir()


def export(args, interrupts) -> int:
    if args.from_trace is not None:
        return export_saved(args, interrupts)
    if args.html:
        check_page_run(args)
    job = build_job(args)
    interrupts.check()
    from kvviz.ui.headless import ProgressLine, RunError, run_export

    kept = "json" in job.data
    if args.html and not kept:  # the page is built from the run's trace, as --from builds it
        job.data = (*job.data, "json")
    ran = False
    try:
        code = run_export(job, interrupts)
        ran = True
    except RunError as exc:
        print(f"kvviz export: the run failed: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.html and not kept and not ran:  # the page's source, of an export that failed or was interrupted
            (job.out / "trace.json").unlink(missing_ok=True)
    if args.html:
        from kvviz.records import traceio

        trace = job.out / "trace.json"
        try:
            saved = traceio.load_run(trace)
        finally:
            if not kept:
                trace.unlink(missing_ok=True)
                print(f"kvviz export: removed {trace} (the page's source; --json keeps it)", file=sys.stderr)
        check_page(saved, job.first, job.last, job.step)
        write_html(job, saved, ProgressLine(sys.stderr), interrupts)
    return code
