"""The size of a kvviz tree, as docs/architecture.md's "Measured" section gives it: lines of Python, JavaScript and
C under kvviz/, the largest module, the literal lists that retype the exact engines, the import cycles and the
suite's test count. Reads files as text (and, for the test count, runs pytest's collection); imports nothing of
the tree it counts but its torch-free catalog, in a child interpreter.

    python scripts/count_lines.py [--root DIR] [--tests]

--root: the tree to count (default: this checkout), for example a `git worktree add /tmp/old COMMIT`. The
import cycles are found by this checkout's tests/test_import_cycles.py over that tree, so two trees are
counted by one rule.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
LANGUAGES = {"Python": (".py",), "JavaScript": (".js",), "C": (".c", ".h")}
# the chapter's exact engines, the list a tree without kvviz/catalog.py types out
CHAPTER_EXACT = ("naive", "concat", "static", "paged")


def line_count(path: Path) -> int:
    """Lines as `wc -l` counts them (newline characters), so the figures can be checked with it."""
    return path.read_bytes().count(b"\n")


def sources(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    return sorted(p for p in (root / "kvviz").rglob("*") if p.suffix in suffixes and p.is_file())


def exact_engines(root: Path) -> frozenset[str]:
    """The tree's exact engines, read from its own catalog in a child interpreter (the chapter's four without one)."""
    if not (root / "kvviz" / "catalog.py").is_file():
        return frozenset(CHAPTER_EXACT)
    code = ("import json, sys; sys.path.insert(0, '.'); from kvviz import catalog; "
            "print(json.dumps(list(catalog.exact_keys())))")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise ValueError(f"{root}: kvviz.catalog did not load: {out.stderr.strip().splitlines()[-1:]}")
    return frozenset(json.loads(out.stdout))


def _python_lists(text: str):
    """Every tuple, list or set literal of two or more strings, and every comma-joined string, with its line."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) > 1 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            yield node.lineno, [e.value for e in node.elts]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "," in node.value:
            yield node.lineno, [s.strip() for s in node.value.split(",")]


def _js_lists(text: str):
    """Every array literal of two or more double- or single-quoted strings, with its line."""
    for m in re.finditer(r"\[([^\[\]]*)\]", text):
        body = m.group(1)
        if re.fullmatch(r"""\s*(["'][^"']*["']\s*,\s*)+["'][^"']*["']\s*,?\s*""", body):
            yield text.count("\n", 0, m.start()) + 1, re.findall(r"""["']([^"']*)["']""", body)


def engine_lists(root: Path, names: frozenset[str]) -> list[str]:
    """`path:line` of every literal outside kvviz/catalog.py whose names are exactly `names`."""
    found = []
    for path in sources(root, (".py", ".js")):
        rel = path.relative_to(root)
        if rel.as_posix() == "kvviz/catalog.py":
            continue
        text = path.read_text(encoding="utf-8")
        try:
            lists = list(_python_lists(text) if path.suffix == ".py" else _js_lists(text))
        except SyntaxError as e:
            raise ValueError(f"{rel}: not Python ({e.msg}, line {e.lineno})") from None
        found += [f"{rel}:{line}" for line, got in lists if frozenset(got) == names and len(got) == len(names)]
    return found


def import_cycles(root: Path) -> list[list[str]] | None:
    """The groups of the tree's kvviz modules that import each other, however far round (strongly connected
    components), by this checkout's tests/test_import_cycles.py; None without it."""
    finder = HERE / "tests" / "test_import_cycles.py"
    if not finder.is_file():
        return None
    spec = importlib.util.spec_from_file_location("_count_lines_cycles", finder)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.ROOT = root
    return module.cycles(module.import_graph(module._modules()))


def test_count(root: Path) -> str:
    """The last line of `python -m pytest --collect-only -q` in the tree ("1,234 tests collected in 9.9s")."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                         cwd=root, capture_output=True, text=True, timeout=1800)
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    return lines[-1] if lines else f"pytest printed nothing (exit {out.returncode})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=HERE, help="the tree to count (default: this checkout)")
    parser.add_argument("--tests", action="store_true", help="also collect the suite and print its count")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        if not (root / "kvviz").is_dir():
            raise ValueError(f"{root}: no kvviz/ folder to count")
        for language, suffixes in LANGUAGES.items():
            files = sources(root, suffixes)
            print(f"{language}: {sum(line_count(p) for p in files):,} lines in {len(files)} files")
        largest = max(sources(root, (".py",)), key=line_count)
        print(f"largest module: {largest.relative_to(root)} ({line_count(largest):,} lines)")
        exact = exact_engines(root)
        for label, names in (("the exact engines", exact), ("the chapter's four", frozenset(CHAPTER_EXACT))):
            if label != "the exact engines" and names == exact:
                continue
            places = engine_lists(root, names)
            print(f"literal lists of {label} ({', '.join(sorted(names))}) outside kvviz/catalog.py: {len(places)}"
                  + (f" ({', '.join(places)})" if places else ""))
        found = import_cycles(root)
        print("import cycles (groups of modules that import each other): " + (
            "not counted (no tests/test_import_cycles.py)" if found is None else
            f"{len(found)}" + "".join(f"\n  {', '.join(group)}" for group in found)))
        if args.tests:
            print(f"tests: {test_count(root)}")
    except ValueError as e:
        print(f"count_lines: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BrokenPipeError:  # the reader went away (`| head`): quiet, as a command killed by SIGPIPE
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the interpreter flushes it at exit
        raise SystemExit(141) from None
