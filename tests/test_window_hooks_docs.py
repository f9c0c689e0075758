"""The docs name files and modules that exist: every `kvviz/...` or `tests/...` source path in docs/*.md is a file,
and every dotted `kvviz.x.y` name is a module or package followed by at most one name, or a class and its member."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATH = re.compile(r"`((?:kvviz|tests)/[\w/.\-]+?\.(?:py|js|html|css))")
DOTTED = re.compile(r"`(kvviz(?:\.\w+)+)")


def module_depth(parts: list[str]) -> int:
    """How many of the leading names form a module or package of the tree (0: none)."""
    for depth in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:depth])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return depth
    return 0


def test_every_path_and_module_the_docs_name_exists():
    missing = []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        text = doc.read_text(encoding="utf-8")
        missing += [(doc.name, p) for p in PATH.findall(text) if not (ROOT / p).is_file()]
        for name in DOTTED.findall(text):
            parts = name.split(".")
            rest = parts[module_depth(parts):]  # after the module: a name, or a class and its member
            if len(rest) > 2 or (len(rest) == 2 and not rest[0][:1].isupper()):
                missing.append((doc.name, name))
    assert missing == []
