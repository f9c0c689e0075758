"""The English every CPython carries, as training text: `pydoc_data.topics` and the standard library's docstrings.

Docstrings are read with `ast` from the source files (nothing is imported); modules are held out for validation
by a hash of their top-level name, so the split is the same on every machine with the same Python. Also the
outside text: docstrings of packages installed beside CPython (pip, setuptools), never trained on. No torch here.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import sysconfig
from dataclasses import dataclass
from pathlib import Path

# Folders of the standard library that hold tests, demos, vendored or generated code rather than its docs.
SKIP_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__",
                       "lib2to3", "turtledemo", "ensurepip", "_vendor"})
OUTSIDE_PACKAGES = ("pip", "setuptools")
VAL_BUCKETS = 20  # a top-level module is held out when the hash of its name falls in bucket 0: about 5%
SEPARATOR = "\n\n"
CORPUS_NAME = "pydoc_data.topics + the standard library's docstrings"


@dataclass(frozen=True)
class Corpus:
    """Training and validation text (UTF-8 bytes), and which modules went where."""

    train: bytes
    val: bytes
    train_modules: tuple[str, ...]
    val_modules: tuple[str, ...]
    topics_bytes: int

    @property
    def val_tops(self) -> tuple[str, ...]:
        """The top-level names of the held-out modules."""
        return tuple(sorted({m.split(".")[0] for m in self.val_modules}))

    def sha256(self) -> str:
        return hashlib.sha256(self.train + b"\0" + self.val).hexdigest()


def topics_text() -> str:
    """The text of `pydoc_data.topics`: its values in sorted key order, one newline apart."""
    from pydoc_data.topics import topics

    return "\n".join(topics[k] for k in sorted(topics))


def file_docstrings(path: Path) -> list[str]:
    """The module's, classes' and functions' docstrings of one source file, in source order (cleaned of
    indentation); [] for a file that does not parse on this Python."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError, UnicodeDecodeError, OSError):
        return []
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    nodes = [tree] + sorted((n for n in ast.walk(tree) if isinstance(n, kinds[1:])),
                            key=lambda n: (n.lineno, n.col_offset))
    out = []
    for node in nodes:
        doc = ast.get_docstring(node, clean=True)
        if doc and len(doc) >= 40 and _is_text(doc):
            out.append(doc)
    return out


def _is_text(doc: str) -> bool:
    """Prose, not a table of escapes or data: mostly letters and spaces."""
    letters = sum(c.isalpha() or c.isspace() for c in doc)
    return letters >= 0.7 * len(doc)


def module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def source_files(root: Path) -> list[tuple[str, Path]]:
    """(dotted module name, path) of every .py under `root`, skipping SKIP_DIRS, sorted by name."""
    found = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).parts
        if any(part in SKIP_DIRS or part.startswith(("test_", "site-packages")) for part in rel):
            continue
        found.append((module_name(root, path), path))
    return sorted(found)


def held_out(top: str) -> bool:
    """True for a top-level module name that validation keeps: a stable hash, not Python's salted one."""
    return int(hashlib.sha256(top.encode("utf-8")).hexdigest(), 16) % VAL_BUCKETS == 0


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def build_corpus(root: Path | None = None) -> Corpus:
    """Train: pydoc topics, then the docstrings of the modules not held out. Validation: the held-out ones."""
    root = Path(root) if root is not None else stdlib_root()
    if not root.is_dir():
        raise ValueError(f"{root}: the standard library's folder was not found")
    train_parts, val_parts = [topics_text()], []
    train_mods, val_mods = [], []
    for name, path in source_files(root):
        docs = file_docstrings(path)
        if not docs:
            continue
        top = name.split(".")[0]
        (val_parts if held_out(top) else train_parts).append(SEPARATOR.join(docs))
        (val_mods if held_out(top) else train_mods).append(name)
    if not val_parts:
        raise ValueError(f"{root}: no module was held out for validation")
    return Corpus(train=SEPARATOR.join(train_parts).encode("utf-8"), val=SEPARATOR.join(val_parts).encode("utf-8"),
                  train_modules=tuple(train_mods), val_modules=tuple(val_mods),
                  topics_bytes=len(train_parts[0].encode("utf-8")))


def package_root(name: str) -> Path | None:
    """The folder of an installed package, found without importing it (setuptools patches distutils on import)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def outside_text(packages: tuple[str, ...] = OUTSIDE_PACKAGES, limit_bytes: int = 200_000) -> tuple[bytes, str]:
    """English from outside CPython: the docstrings of `packages` (their own code, not what they vendor),
    in sorted module order, cut at `limit_bytes`; and a description naming the packages and versions found."""
    from importlib.metadata import PackageNotFoundError, version

    parts, names = [], []
    for pkg in packages:
        root = package_root(pkg)
        if root is None:
            continue
        try:
            names.append(f"{pkg} {version(pkg)}")
        except PackageNotFoundError:
            names.append(pkg)
        for _, path in source_files(root):
            if "_vendor" in path.parts or "_distutils" in path.parts:
                continue
            parts.extend(file_docstrings(path))
    if not parts:
        raise ValueError(f"none of {', '.join(packages)} is installed: no outside text to score")
    data = SEPARATOR.join(parts).encode("utf-8")[:limit_bytes]
    return data.decode("utf-8", errors="ignore").encode("utf-8"), ", ".join(names)
