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
- strings translated at run time from data: the engines' one-line help (context "engines").
The --fill JSON is {"Context": {"source": "translation"}} or {"source": "translation"} for any context.
"""
from __future__ import annotations

import argparse
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


class ContextLost(Exception):
    """lupdate put strings in no context: at run time they would never be translated."""


def extract() -> list[Entry]:
    """Every translatable string of the UI, untranslated, in a stable order (context, then first
    appearance); `numerus` marks the plural ones. ContextLost if lupdate could not tell the class of a
    `self.tr` call (its Python parser loses track after a `def` nested in a function)."""
    files = ui_sources()
    found = _lupdate(files, [])
    lost = [e for e in found if not e.key.context]
    if lost:
        raise ContextLost("lupdate found these strings outside any class, so no translation would match "
                          "them at run time (a `def` nested inside a function before them confuses its "
                          "parser; use a lambda or a method):\n" + "\n".join(
                              f"  {e.where}: {e.key.source!r}" for e in lost[:20]))
    for path in files:
        match = HELPER.search(path.read_text(encoding="utf-8"))
        if match:  # `_tr("...")` calls: only the helper's spelling, so self.tr is not counted twice
            found += [Entry(Key(match.group(1), e.key.source, e.key.comment), numerus=e.numerus)
                      for e in _lupdate([path], ["-tr-function-alias", "tr=_tr"]) if not e.key.context]
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
    except ContextLost as exc:
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
