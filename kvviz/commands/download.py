"""`kvviz download ORG/NAME`: fetch what kvviz reads of a Hub checkpoint into the Hugging Face cache.

The work is kvviz.download's; this module draws the terminal's progress line and turns every
failure into one line (exit code 2), an interruption into a note on how to resume (exit code 130).
"""
from __future__ import annotations

import errno
import logging
import sys

from kvviz.download import STALL_BYTES, STALL_S
from kvviz.format import fmt_bytes
from kvviz.options import bounded, model_name

REPORT_EVERY_S = 0.1  # how often the progress line is redrawn


def configure(parser) -> None:
    parser.add_argument("model", metavar="ORG/NAME[@REVISION]", type=model_name,
                        help="a Hugging Face Hub model id, e.g. Qwen/Qwen3-0.6B (HF_ENDPOINT for a mirror, "
                             "HF_TOKEN for a private repo)")
    parser.add_argument("--stall-timeout", dest="stall_s", type=bounded("stall_s"), default=STALL_S, metavar="S",
                        help=f"give up when less than {STALL_BYTES >> 10} KiB came in S seconds, keeping what came "
                             f"for the next try (default {STALL_S:g})")


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds + 0.5)
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def progress_line(p) -> str:
    """`[3/4] model.safetensors  512.0 MiB / 1.1 GiB  45%  85.3 MiB/s  0:07 left`"""
    share = 100.0 * p.done_bytes / p.total_bytes if p.total_bytes else 100.0
    return (f"[{p.file_index}/{p.n_files}] {p.file}  {fmt_bytes(p.done_bytes)} / {fmt_bytes(p.total_bytes)}  "
            f"{share:.0f}%  {fmt_bytes(p.rate_bytes_per_s)}/s  {_clock(p.eta_s)} left")


class _Printer:
    """One line redrawn in place on a terminal; a line per file elsewhere (logs, CI)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.width = 0
        self.file = None

    def __call__(self, p) -> None:
        line = progress_line(p)
        if self.tty:
            self.stream.write("\r" + line.ljust(self.width))
            self.width = len(line)
        elif p.file != self.file:
            self.stream.write(line + "\n")
        self.file = p.file
        self.stream.flush()

    def note(self, text: str) -> None:
        """A line of its own (a retry huggingface_hub reports), the progress line redrawn after it."""
        self.stream.write(("\r" + text.ljust(self.width) if self.tty else text) + "\n")
        self.width = 0
        self.stream.flush()

    def end(self) -> None:
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()


class _NoteHandler(logging.Handler):
    """huggingface_hub's warnings (a dropped connection it resumes, a retried request), one line each."""

    def __init__(self, printer: _Printer) -> None:
        super().__init__(logging.WARNING)
        self.printer = printer

    def emit(self, record: logging.LogRecord) -> None:
        lines = record.getMessage().strip().splitlines()
        self.printer.note("huggingface_hub: " + (" ".join(lines[:1] + lines[-1:]) if len(lines) > 1 else lines[0]))


def run(args) -> int:
    from kvviz.download import DownloadCancelled, check_disk_space, download, needed_bytes, plan_download

    plan = plan_download(args.model)
    need = needed_bytes(plan)
    print(f"{plan.hub_id} at {plan.commit[:12]} from {plan.endpoint}: {len(plan.files)} files, "
          f"{fmt_bytes(plan.total_bytes)} ({fmt_bytes(need)} to fetch) into {plan.cache_dir}", file=sys.stderr)
    check_disk_space(plan)
    printer = _Printer(sys.stderr)
    hub_logger = logging.getLogger("huggingface_hub")
    saved = hub_logger.handlers[:], hub_logger.propagate
    hub_logger.handlers, hub_logger.propagate = [_NoteHandler(printer)], False
    try:
        folder = download(plan, progress=printer, report_every_s=REPORT_EVERY_S, stall_s=args.stall_s)
    except (KeyboardInterrupt, DownloadCancelled):
        printer.end()
        print(f"kvviz download: interrupted; run `kvviz download {args.model}` again to resume "
              f"({fmt_bytes(plan.total_bytes - needed_bytes(plan))} of {fmt_bytes(plan.total_bytes)} kept)",
              file=sys.stderr)
        return 130
    except OSError as exc:
        printer.end()
        if exc.errno == errno.ENOSPC:
            raise ValueError(f"the disk filled up while writing {exc.filename or plan.cache_dir}; free some space "
                             f"and run again to resume (the partial file is kept)") from None
        raise ValueError(f"{exc.filename or plan.cache_dir}: {exc.strerror or exc}") from None
    except ValueError:
        printer.end()
        raise
    finally:
        hub_logger.handlers, hub_logger.propagate = saved
    printer.end()
    print(folder)
    return 0
