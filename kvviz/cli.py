"""The `kvviz` command: the GUI by default (`kvviz TRACE.json` opens it on a saved run), or a subcommand
(bench, train, score, models, memory, export, shot).

Each subcommand lives in its own module exposing `configure(parser)` and `run(args) -> int`; this
file only dispatches, and imports a module (and so torch or Qt) only when its command is chosen.
Bad input is a one-line error and exit code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys

# name -> (module, one-line help). A new command is a module plus one line here.
COMMANDS: dict[str, tuple[str, str]] = {
    "gui": ("kvviz.ui.app", "open the desktop app (the default)"),
    "bench": ("kvviz.commands.bench", "time the engines and compare their tokens (the chapter's table)"),
    "models": ("kvviz.commands.models", "list the presets and the cached checkpoints (Hugging Face, ModelScope)"),
    "download": ("kvviz.commands.download", "fetch what kvviz reads of a Hub checkpoint (ORG/NAME) into the HF cache"),
    "hfbench": ("kvviz.commands.hfbench", "decode speed of kvviz beside transformers' generate on the same checkpoint"),
    "memory": ("kvviz.commands.memory", "what a model's KV cache costs: bytes per token, cat copies, paged blocks"),
    "shot": ("kvviz.ui.shot", "run the app offscreen and save a screenshot of the window (PNG)"),
    "export": ("kvviz.commands.export", "run offscreen; write screenshots, animations and data for slides and notes"),
    "train": ("kvviz.commands.train", "train the default model on Python's docs (pydoc_data.topics)"),
    "score": ("kvviz.commands.score", "bits per byte of a model on a UTF-8 text file"),
    "serve": ("kvviz.commands.serve", "many requests, one model: batching, a paged pool, preemption, prefix caching"),
    "convert": ("kvviz.commands.convert", "write a model as a Hugging Face checkpoint that transformers and vLLM load"),
    "watch": ("kvviz.commands.watch", "attach to running vLLM servers: prefix cache, metrics and KV events, live"),
    "lesson": ("kvviz.commands.lesson", "present a lesson full screen; hand it out as a deck, PNGs, a PDF"),
}


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    commands: dict[str, argparse.ArgumentParser] = {}  # the top parser's: each command's parser by name

    def error(self, message: str) -> None:  # argparse's own errors: one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only the chosen command's module is imported to add its options."""
    parser = _Parser(prog="kvviz", description="Watch a transformer's KV cache at work.")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            importlib.import_module(module).configure(p)
        p.set_defaults(_module=module)
    parser.commands = sub.choices
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """The arguments of `kvviz COMMAND ...`; words the command does not know are refused by that command's parser
    (`kvviz memory: error: unrecognized arguments: ...`), as its other errors are."""
    parser = build_parser(argv[0])
    args, extra = parser.parse_known_args(argv)
    if extra:
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _is_trace_path(word: str) -> bool:
    """`kvviz WORD`: WORD is a trace to open, not a command, when it names a .json file or any path."""
    return word not in COMMANDS and (word.lower().endswith(".json") or os.sep in word or os.path.lexists(word))


def main(argv: list[str] | None = None) -> int:
    """Run one command and return its exit status. Whatever ends it early says so in at most one line, never
    a traceback: bad input (2), out of memory (1), Ctrl+C (130), stdout's reader gone (`| head -1`: 141,
    silent), stdout on a full disk (2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")) or _is_trace_path(argv[0]):
        argv = ["gui", *argv]  # `kvviz TRACE.json` opens the window on a saved run
    name = f"kvviz {argv[0]}" if argv[0] in COMMANDS else "kvviz"
    try:
        code = _dispatch(argv)
        sys.stdout.flush()  # the output's last bytes: a closed pipe or a full disk shows here, not at exit
        return code
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 141  # as a shell reports a process that SIGPIPE ended (128 + 13)
    except OSError as exc:
        # The commands turn a failure of their own files into one line (kvviz.fileio's output rule), so a
        # full disk that reaches here is the one under stdout (`> /dev/full`, `> FILE` on a full disk).
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        _silence_stdout()
        print("kvviz: cannot write the output: the disk is full", file=sys.stderr)
        return 2


def _dispatch(argv: list[str]) -> int:
    """Parse, import the command's module and run it; its refusals and out-of-memory as one line."""
    try:
        args = parse(argv)
    except SystemExit as exc:  # argparse's one-line refusal (2) or --help (0), as a return code
        return exc.code if isinstance(exc.code, int) else 2
    module = importlib.import_module(args._module)
    try:
        return int(module.run(args) or 0)
    except (UsageError, ValueError) as exc:
        from kvviz.errors import one_line

        print(f"kvviz {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as exc:
        from kvviz.errors import friendly_error, is_out_of_memory, one_line

        if not is_out_of_memory(exc):
            raise
        print(f"kvviz {args.command}: error: {one_line(friendly_error(exc))}", file=sys.stderr)
        return 1


def _silence_stdout() -> None:
    """Point stdout at the null device, so the interpreter's last flush at exit has nowhere to fail."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):  # stdout closed or not a file: nothing left to flush into it
        pass
