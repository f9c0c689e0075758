"""Refresh the UI translations: extract every string of kvviz/ui/**/*.py with pyside6-lupdate, merge the
translations already in assets/i18n/kvviz_<lang>.ts, write the .ts files and compile them with
pyside6-lrelease.

    python scripts/update_translations.py             # refresh the .ts and .qm files
    python scripts/update_translations.py --check     # exit 1, listing them, if any string is untranslated
    python scripts/update_translations.py --fill zh.json   # take translations from a JSON file first

English is the source language: kvviz_en.ts holds only plural forms (Qt's convention), so it is empty
until a string uses %n. Beyond what lupdate finds, two kinds of string are added here:
- calls of a module-level `_tr(text)` helper that wraps QCoreApplication.translate("Context", text) (or is
  `_tr = translator("Context")`, kvviz.ui.qtutil): lupdate reads them (as an alias of tr) with an empty context,
  which is renamed to the helper's;
- strings translated at run time from data: the engines' one-line help (context "engines");
- the sentences the page's Python declares for the window's panels (PAGE_SOURCES, read with the AST): each
  `said("Context", "source", ...)` call, and each string a function of theirs passes to a translator parameter
  (`tr_panel("...")`, or `tr_of("Context")("...")`), in the context of the translator the window's code passes
  there (`self.tr` in class Context, or a module's `_tr = translator("Context")`).
The --fill JSON is {"Context": {"source": "translation"}} or {"source": "translation"} for any context.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
I18N = ROOT / "assets" / "i18n"
UI = ROOT / "kvviz" / "ui"
# Modules outside kvviz/ui whose `_tr` messages the app translates through a hook (no Qt there): the context
# the Qt side translates them in.
NO_QT_SOURCES = {ROOT / "kvviz" / "runtime" / "session.py": "RunWorker",
                 ROOT / "kvviz" / "runtime" / "process.py": "RunWorker",
                 ROOT / "kvviz" / "serving" / "narration.py": "ServeNarration",
                 ROOT / "kvviz" / "records" / "narration.py": "Narration",
                 ROOT / "kvviz" / "peers" / "watch" / "said.py": "Narration",
                 ROOT / "kvviz" / "peers" / "watch" / "history.py": "Narration",
                 ROOT / "kvviz" / "peers" / "watch" / "mirror.py": "Narration",
                 ROOT / "kvviz" / "ui" / "watch" / "source.py": "WatchTransport",
                 ROOT / "kvviz" / "page" / "watch.py": "Narration",
                 ROOT / "kvviz" / "serving" / "spec.py": "ServeForm",
                 ROOT / "kvviz" / "kernels" / "__init__.py": "kernels"}
# The page's Python whose sentences the window's panels say (see page_keys).
PAGE_SOURCES = (ROOT / "kvviz" / "page" / "said_compare.py", ROOT / "kvviz" / "serving" / "words.py",
                ROOT / "kvviz" / "serving" / "narration.py")
DYNAMIC_CONTEXTS = ("engines", "kernels")  # said() there with a source from data: dynamic_keys lists them
LANGUAGES = ("zh_CN",)  # the translations; English is the source
SOURCE_LANGUAGE = "en"
HELPER = re.compile(r"(?:def _tr\([^)]*\)[^:]*:\s*(?:\"\"\"[\s\S]*?\"\"\"\s*)?return\s+QCoreApplication\.translate\(\s*"
                    r"|^_tr = translator\(\s*)[\"'](\w+)[\"']", re.MULTILINE)


@dataclass(frozen=True)
class Key:
    context: str
    source: str
    comment: str = ""


@dataclass
class Entry:
    key: Key
    translation: str = ""
    finished: bool = False
    numerus: bool = False
    forms: list[str] = field(default_factory=list)
    where: str = ""  # "file:line" of the first use, from lupdate (not written to the shipped .ts)


def tool(name: str) -> str:
    """pyside6-lupdate / pyside6-lrelease beside this Python (a venv's bin), else on PATH."""
    for candidate in (Path(sys.executable).parent / name, shutil.which(name)):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    raise SystemExit(f"update_translations: {name} not found (pip install PySide6-Essentials)")


def ui_sources() -> list[Path]:
    return sorted(UI.rglob("*.py"))


def _lupdate(files: list[Path], extra: list[str]) -> list[Entry]:
    with tempfile.TemporaryDirectory() as tmp:
        ts = Path(tmp) / "out.ts"
        proc = subprocess.run([tool("pyside6-lupdate"), *map(str, files), "-no-obsolete", "-locations", "absolute",
                               "-source-language", SOURCE_LANGUAGE, "-target-language", "zh_CN", *extra,
                               "-ts", str(ts)], capture_output=True, text=True)
        if proc.returncode != 0 or not ts.exists():
            raise SystemExit(f"update_translations: lupdate failed:\n{proc.stdout}{proc.stderr}")
        return list(parse_ts(ts).values())


def dynamic_keys() -> list[Key]:
    """Strings the UI translates at run time from data, not from literals lupdate can see."""
    sys.path.insert(0, str(ROOT))
    from kvviz.engines import ENGINE_HELP
    from kvviz.kernels import KERNELS

    return ([Key("engines", text) for text in ENGINE_HELP.values()]
            + [Key("kernels", text) for k in KERNELS.values() for text in (k.label, k.help)])


class Unreadable(Exception):
    """A sentence of the page's Python whose context or source the AST cannot tell."""


def _strings(node: ast.AST | None, names: dict[str, list[ast.AST]]) -> set[str] | None:
    """The strings `node` may hold: a literal, either branch of `a if c else b`, a name assigned such values (in
    `names`: its function's assignments and loop targets, then the module's); None where it is anything else.
    A None literal (a tuple's gap) holds no string."""
    if isinstance(node, ast.Constant):
        return {node.value} if isinstance(node.value, str) else set() if node.value is None else None
    if isinstance(node, ast.IfExp):
        body, orelse = _strings(node.body, names), _strings(node.orelse, names)
        return None if body is None or orelse is None else body | orelse
    if isinstance(node, (ast.Tuple, ast.List)):  # a loop over a tuple of literals: its elements
        parts = [_strings(e, names) for e in node.elts]
        return None if any(p is None for p in parts) else set().union(*parts)
    if isinstance(node, ast.Name) and node.id in names:
        parts = [_strings(v, {k: w for k, w in names.items() if k != node.id}) for v in names[node.id]]
        return None if not parts or any(p is None for p in parts) else set().union(*parts)
    return None


def _ordered(node: ast.AST, strings: set[str]) -> list[str]:
    """`strings` in the order their literals are written under `node` (the names it reads last, sorted)."""
    written = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in strings]
    return list(dict.fromkeys(written)) + sorted(strings - set(written))


def _bindings(body: ast.AST) -> dict[str, list[ast.AST]]:
    """Each name `body` assigns (`x = value`, `x, y = value, value`) or loops over (`for x in value`,
    comprehensions), not looking into nested functions or classes beyond `body` itself."""
    out: dict[str, list[ast.AST]] = {}
    todo = list(ast.iter_child_nodes(body))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append(node.value)
                elif (isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                      and len(target.elts) == len(node.value.elts)):  # a, b = x, y
                    for name, value in zip(target.elts, node.value.elts):
                        if isinstance(name, ast.Name):
                            out.setdefault(name.id, []).append(value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
            out.setdefault(node.target.id, []).append(node.iter)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _calls(body: ast.AST):
    """The calls inside `body` in the order they are written, not those of a nested function (a lambda's are its
    function's)."""
    for node in ast.iter_child_nodes(body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Call):
            yield node
        yield from _calls(node)


@dataclass
class PageFunction:
    """A function of the page's Python: per translator parameter (name, position) the strings it translates."""

    params: list[str]
    translated: dict[str, list[str]] = field(default_factory=dict)


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"


def _page_module(path: Path) -> tuple[list[Key], dict[str, PageFunction]]:
    """A page module's said() sentences (Keys) and its functions that take a translator."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    module = _bindings(tree)
    keys: list[Key] = []
    functions: dict[str, PageFunction] = {}
    lost: list[str] = []
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        params = [a.arg for a in args]
        names = {**module, **_bindings(fn)}
        called = {c.func.id for c in _calls(fn) if isinstance(c.func, ast.Name)}
        factories = {}  # a local `x = tr_of("Context")` called later: a translator of that context
        makers = set()  # the parameters that make them (tr_of), not translators
        for name, values in _bindings(fn).items():
            for v in values:
                if (name in called and isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
                        and v.func.id in params and len(v.args) == 1 and isinstance(v.args[0], ast.Constant)):
                    factories[name] = v.args[0].value
                    makers.add(v.func.id)
        page = PageFunction(params)
        for call in _calls(fn):
            func = call.func
            if isinstance(func, ast.Name) and func.id == "said" and len(call.args) >= 2:
                contexts, sources = _strings(call.args[0], names), _strings(call.args[1], names)
                if contexts is not None and contexts <= set(DYNAMIC_CONTEXTS):
                    continue
                if not contexts or sources is None:
                    lost.append(f"  {_where(path, call)}: {ast.unparse(call)[:100]}")
                    continue
                keys += [Key(c, s) for c in sorted(contexts) for s in _ordered(call.args[1], sources)]
            elif isinstance(func, ast.Name) and len(call.args) == 1 and not call.keywords and (
                    func.id in factories or func.id in params):
                sources = _strings(call.args[0], names)
                if sources is None:
                    if func.id in factories:
                        lost.append(f"  {_where(path, call)}: {ast.unparse(call)[:100]}")
                    continue  # a parameter called with data: a function passed in, not a translator
                if func.id in factories:
                    keys += [Key(factories[func.id], s) for s in _ordered(call.args[0], sources)]
                elif func.id not in makers:
                    page.translated.setdefault(func.id, []).extend(_ordered(call.args[0], sources))
        if page.translated:
            functions[fn.name] = page
    if lost:
        raise Unreadable(f"{path.relative_to(ROOT)}: cannot tell the context or the source of:\n" + "\n".join(lost))
    return keys, functions


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _context_of(arg: ast.AST, cls: str | None, translators: dict[str, str]) -> str | None:
    """The context of a translator the window passes: `self.tr` in class `cls`, a module's
    `_tr = translator("Context")`, `translator("Context")` or `lambda text: QCoreApplication.translate("Context",
    text)`."""
    if isinstance(arg, ast.Attribute) and arg.attr == "tr" and isinstance(arg.value, ast.Name) \
            and arg.value.id == "self":
        return cls
    if isinstance(arg, ast.Name):
        return translators.get(arg.id)
    if isinstance(arg, ast.Lambda):  # lambda text: QCoreApplication.translate("Context", text)
        arg = arg.body
    if (isinstance(arg, ast.Call) and isinstance(arg.func, (ast.Name, ast.Attribute)) and arg.args
            and (arg.func.id if isinstance(arg.func, ast.Name) else arg.func.attr) in ("translate", "translator")
            and isinstance(arg.args[0], ast.Constant) and isinstance(arg.args[0].value, str)):
        return arg.args[0].value
    return None


def _with_class(node: ast.AST, cls: str | None):
    """(each node under `node`, the name of the class it is in, or None)."""
    for child in ast.iter_child_nodes(node):
        inner = child.name if isinstance(child, ast.ClassDef) else cls
        yield child, inner
        yield from _with_class(child, inner)


def page_keys(ui_files: list[Path]) -> list[Key]:
    """The (context, source) pairs the page's Python declares for the window: its said() sentences, and the strings
    its functions translate with the translator the window's code passes them (found at the calls in `ui_files`).
    Unreadable where a sentence's context or source, or the context of a translator passed, is not a literal."""
    keys: list[Key] = []
    functions: dict[tuple[str, str], PageFunction] = {}
    for path in PAGE_SOURCES:
        found, fns = _page_module(path)
        keys += found
        functions.update({(_module_name(path), name): f for name, f in fns.items()})
    lost = []
    for path in ui_files:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        imported: dict[str, tuple[str, str]] = {}  # local name -> (module, function) or (module, "") for a module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    imported[alias.asname or alias.name] = (node.module, alias.name)
        translators = {}
        for node in tree.body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                    and node.value.func.id == "translator" and node.value.args
                    and isinstance(node.value.args[0], ast.Constant)):
                translators[node.targets[0].id] = node.value.args[0].value

        for node, cls in _with_class(tree, None):
            func = node.func if isinstance(node, ast.Call) else None
            target = None
            if isinstance(func, ast.Name) and func.id in imported:
                target = imported[func.id]
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in imported:
                module, name = imported[func.value.id]
                target = (f"{module}.{name}", func.attr)
            page = functions.get(target) if target else None
            if page is None:
                continue
            for param, sources in page.translated.items():
                index = page.params.index(param)
                given = [k.value for k in node.keywords if k.arg == param]
                given += [node.args[index]] if index < len(node.args) else []
                for arg in given:
                    context = _context_of(arg, cls, translators)
                    if context is None:
                        lost.append(f"  {_where(path, node)}: {ast.unparse(arg)} passed as {target[1]}'s {param}")
                        continue
                    keys.extend(Key(context, s) for s in sources)
    if lost:
        raise Unreadable("cannot tell the context of these translators (pass self.tr or a module's "
                         "_tr = translator(\"Context\")):\n" + "\n".join(lost))
    return keys


class ContextLost(Exception):
    """lupdate put strings in no context: at run time they would never be translated."""


def helper_entries(files: list[Path]) -> list[Entry]:
    """The `_tr("...")` calls of the files with a module-level helper, in the helper's context (only the helper's
    spelling, so self.tr is not counted twice)."""
    found = []
    for path in files:
        match = HELPER.search(path.read_text(encoding="utf-8"))
        if match:
            found += [Entry(Key(match.group(1), e.key.source, e.key.comment), numerus=e.numerus)
                      for e in _lupdate([path], ["-tr-function-alias", "tr=_tr"]) if not e.key.context]
    return found


def extract() -> list[Entry]:
    """Every translatable string of the UI, untranslated, in a stable order (context, then first
    appearance); `numerus` marks the plural ones. ContextLost if lupdate could not tell the class of a
    `self.tr` call (its Python parser loses track after a `def` nested in a function)."""
    files = ui_sources()
    found = _lupdate(files, [])
    lost = [e for e in found if not e.key.context]
    found = [Entry(k) for k in page_keys(files)] + found  # a string the UI also writes keeps the UI's place
    if lost:
        raise ContextLost("lupdate found these strings outside any class, so no translation would match "
                          "them at run time (a `def` nested inside a function before them confuses its "
                          "parser; use a lambda or a method):\n" + "\n".join(
                              f"  {e.where}: {e.key.source!r}" for e in lost[:20]))
    found += helper_entries(files)
    for path, context in NO_QT_SOURCES.items():
        found += [Entry(Key(context, e.key.source, e.key.comment), numerus=e.numerus)
                  for e in _lupdate([path], ["-tr-function-alias", "tr=_tr"]) if not e.key.context]
    found += [Entry(k) for k in dynamic_keys()]
    unique = list({e.key: e for e in reversed(found)}.values())[::-1]
    contexts = sorted({e.key.context for e in unique})
    return sorted(unique, key=lambda e: contexts.index(e.key.context))


def parse_ts(path: Path) -> dict[Key, Entry]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ValueError(f"{path}: cannot read it as a .ts file ({exc})") from None
    out: dict[Key, Entry] = {}
    for ctx in root.iter("context"):
        name = ctx.findtext("name") or ""
        for msg in ctx.iter("message"):
            key = Key(name, msg.findtext("source") or "", msg.findtext("comment") or "")
            tr = msg.find("translation")
            kind = tr.get("type", "") if tr is not None else "unfinished"
            numerus = msg.get("numerus") == "yes"
            forms = [f.text or "" for f in tr.iter("numerusform")] if (tr is not None and numerus) else []
            text = (tr.text or "") if tr is not None and not numerus else ""
            if kind in ("obsolete", "vanished"):
                continue
            done = kind == "" and (all(forms) and bool(forms) if numerus else bool(text))
            loc = msg.find("location")
            where = ""
            if loc is not None:
                where = f"{(path.parent / loc.get('filename', '')).resolve()}:{loc.get('line', '?')}"
            out[key] = Entry(key, text, done, numerus, forms, where)
    return out


def fill_map(path: Path) -> dict[tuple[str, str], str]:
    """{(context or "", source): translation} from a --fill JSON file."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    out: dict[tuple[str, str], str] = {}
    for k, v in doc.items():
        if isinstance(v, dict):
            out.update({(k, src): tr for src, tr in v.items()})
        else:
            out[("", k)] = v
    return out


def merge(found: list[Entry], old: dict[Key, Entry], fills: dict[tuple[str, str], str]) -> list[Entry]:
    entries = []
    for e in found:
        key = e.key
        filled = fills.get((key.context, key.source), fills.get(("", key.source)))
        prev = old.get(key)
        if filled and not e.numerus:
            entries.append(Entry(key, filled, True))
        elif prev is not None and prev.numerus == e.numerus:
            entries.append(Entry(key, prev.translation, prev.finished, prev.numerus, prev.forms))
        else:
            entries.append(Entry(key, numerus=e.numerus))
    return entries


def write_ts(path: Path, language: str, entries: list[Entry]) -> None:
    """In lupdate's own layout, so Qt Linguist and later runs see no churn."""
    lines = ['<?xml version="1.0" encoding="utf-8"?>', "<!DOCTYPE TS>",
             f'<TS version="2.1" language="{language}" sourcelanguage="{SOURCE_LANGUAGE}">']
    by_context: dict[str, list[Entry]] = {}
    for e in entries:
        by_context.setdefault(e.key.context, []).append(e)
    for context, items in by_context.items():
        lines += ["<context>", f"    <name>{_x(context)}</name>"]
        for e in items:
            lines.append('    <message numerus="yes">' if e.numerus else "    <message>")
            lines.append(f"        <source>{_x(e.key.source)}</source>")
            if e.key.comment:
                lines.append(f"        <comment>{_x(e.key.comment)}</comment>")
            kind = "" if e.finished else ' type="unfinished"'
            if e.numerus:
                lines.append(f"        <translation{kind}>")
                lines += [f"            <numerusform>{_x(f)}</numerusform>" for f in (e.forms or [""])]
                lines.append("        </translation>")
            else:
                lines.append(f"        <translation{kind}>{_x(e.translation)}</translation>")
            lines.append("    </message>")
        lines.append("</context>")
    lines.append("</TS>")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".ts.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)


def _x(text: str) -> str:
    return escape(text, {'"': "&quot;", "'": "&apos;"})


def lrelease(ts: Path) -> Path:
    qm = ts.with_suffix(".qm")
    proc = subprocess.run([tool("pyside6-lrelease"), str(ts), "-qm", str(qm)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"update_translations: lrelease failed for {ts}:\n{proc.stdout}{proc.stderr}")
    return qm


def ts_path(language: str) -> Path:
    return I18N / f"kvviz_{language}.ts"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a string is untranslated")
    parser.add_argument("--fill", type=Path, help="JSON of translations to apply (see the module docstring)")
    args = parser.parse_args(argv)
    try:
        found = extract()
    except (ContextLost, Unreadable) as exc:
        print(f"update_translations: {exc}", file=sys.stderr)
        return 1
    fills = fill_map(args.fill) if args.fill else {}
    missing_total = 0
    for language in LANGUAGES:
        path = ts_path(language)
        old = parse_ts(path) if path.exists() else {}
        entries = merge(found, old, fills)
        missing = [e for e in entries if not e.finished]
        missing_total += len(missing)
        print(f"{path.relative_to(ROOT)}: {len(entries)} strings, {len(missing)} untranslated")
        for e in missing:
            print(f"  [{e.key.context}] {e.key.source}")
        if not args.check:
            write_ts(path, language, entries)
            lrelease(path)
    if not args.check:
        # The source language keeps only the plural forms (Qt's convention; none yet, so it is empty).
        path = ts_path(SOURCE_LANGUAGE)
        old = parse_ts(path) if path.exists() else {}
        write_ts(path, SOURCE_LANGUAGE, merge([e for e in found if e.numerus], old, {}))
        lrelease(path)
    return 1 if args.check and missing_total else 0


if __name__ == "__main__":
    raise SystemExit(main())
