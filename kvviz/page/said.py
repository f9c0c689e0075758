"""The compare window's panel texts as sentences: a `Said` names the window's string (its Qt context and English
source) and its fields' values, so one function makes the window's text (`text`, any translator) and the page's
(`Spoken`: each language's template once, the fields formatted by Python per step). Stdlib and numpy only: no Qt.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from string import Formatter

from kvviz.page.strings import LANGUAGES, page_strings

Translate = Callable[[str, str], str]  # (context, English source) -> the reader's words
_FORMATTER = Formatter()
_CONVERT = {"r": repr, "s": str, "a": ascii}
ENGINE_MARK = 0xE000  # an engine is written chr(ENGINE_MARK + order): page.js writes its name there


@dataclass(frozen=True)
class Engine:
    """An engine named in a sentence: the window writes `name(engine)`, the page the engine's label."""

    name: str
    order: int


@dataclass(frozen=True)
class Said:
    """One of the window's strings, `tr(context, source).format(**fields)` when said."""

    context: str
    source: str
    fields: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class Joined:
    """Sentences said one after another, `separator` between them (a Said, or text said as it is)."""

    separator: object
    parts: tuple


def said(context: str, source: str, *args, **kwargs) -> Said:
    """The window's `tr(source).format(*args, **kwargs)` in `context`, as a sentence."""
    return Said(context, source, tuple((str(i), v) for i, v in enumerate(args)) + tuple(kwargs.items()))


def joined(separator, parts) -> Joined:
    return Joined(separator, tuple(parts))


def english(context: str, source: str) -> str:
    return source


def text(value, tr: Translate = english, name: Callable[[Engine], str] = lambda e: e.name,
         escape: Callable[[str], str] | None = None) -> str:
    """A sentence (or a plain text, an engine) as the window says it: `tr` translates, `name` names an engine,
    `escape` (html.escape for a rich-text label) is applied to plain texts and engine names, not to templates."""
    if isinstance(value, str):
        return escape(value) if escape else value
    if isinstance(value, Engine):
        return escape(name(value)) if escape else name(value)
    if isinstance(value, Joined):
        return text(value.separator, tr, name, escape).join(text(p, tr, name, escape) for p in value.parts)
    fields = dict(value.fields)
    out = []
    for literal, field, spec, conversion in _FORMATTER.parse(tr(value.context, value.source)):
        out.append(literal)
        if field is None:
            continue
        shown = fields[field]
        if isinstance(shown, (str, Engine, Joined, Said)):
            shown = text(shown, tr, name, escape)
        if conversion:
            shown = _CONVERT[conversion](shown)
        out.append(format(shown, spec))
    return "".join(out)


def translate(lang: str, strings: Mapping[str, Mapping[str, str]] | None = None,
              missed: set | None = None) -> Translate:
    """The window's words in `lang` from the .ts (kvviz.page.strings); `missed` collects what it lacks."""
    if lang == "en":
        return english
    table = page_strings() if strings is None else strings

    def tr(context: str, source: str) -> str:
        found = table.get(context, {}).get(source)
        if found is None and missed is not None:
            missed.add((context, source))
        return found or source
    return tr


_PLACE = re.compile(r"\{\d+\}")


class Spoken:
    """Sentences encoded for page.js: each (context, source) once as a template per language whose fields are
    `{i}`, and each sentence as [template, field 0, field 1, ...] with its figures formatted by Python; a Joined
    as {"join": separator, "parts": [...]}; an engine as its mark; plain text as itself. A sentence of SHARED or
    more characters (its repr) is written once in `shared` and as {"s": its place} wherever it is said (a
    summary's prefill times, the same at every step)."""

    SHARED = 48

    def __init__(self) -> None:
        self.shared: list = []
        self._shared: dict[str, int] = {}
        self.templates: dict[str, list[str]] = {lang: [] for lang in LANGUAGES}
        self._ids: dict[tuple[str, str], tuple[int, list[tuple[str, str, str | None]]]] = {}
        self.missed: set[tuple[str, str]] = set()
        self._tr = {lang: translate(lang, missed=self.missed) for lang in LANGUAGES}

    def _template(self, context: str, source: str) -> tuple[int, list[tuple[str, str, str | None]]]:
        key = (context, source)
        if key not in self._ids:
            parsed = {lang: list(_FORMATTER.parse(self._tr[lang](context, source))) for lang in LANGUAGES}
            fields: list[tuple[str, str, str | None]] = []
            for lang in LANGUAGES:
                for _literal, field, spec, conversion in parsed[lang]:
                    if field is not None and (field, spec, conversion) not in fields:
                        fields.append((field, spec, conversion))
            for lang in LANGUAGES:
                parts = []
                for literal, field, spec, conversion in parsed[lang]:
                    if _PLACE.search(literal):
                        raise ValueError(f"{source!r} holds text page.js would read as a field")
                    parts.append(literal)
                    if field is not None:
                        parts.append(f"{{{fields.index((field, spec, conversion))}}}")
                self.templates[lang].append("".join(parts))
            self._ids[key] = (len(self._ids), fields)
        return self._ids[key]

    def node(self, value):
        """`value` (a Said, a Joined, an Engine, plain text) as page.js reads it."""
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, Engine):
            return chr(ENGINE_MARK + value.order)
        node = self._node(value)
        key = repr(node)  # as long as its JSON, give or take the separators' spaces; a tenth of json.dumps's time
        if len(key) < self.SHARED:
            return node
        if key not in self._shared:
            self._shared[key] = len(self.shared)
            self.shared.append(node)
        return {"s": self._shared[key]}

    def _node(self, value):
        if isinstance(value, Joined):
            return {"join": self.node(value.separator), "parts": [self.node(p) for p in value.parts]}
        index, fields = self._template(value.context, value.source)
        given = dict(value.fields)
        out: list = [index]
        for field, spec, conversion in fields:
            shown = given[field]
            if isinstance(shown, (Said, Joined, Engine)):
                if spec or conversion:
                    raise ValueError(f"{value.source!r}: a sentence in a field takes no format")
                out.append(self.node(shown))
                continue
            if conversion:
                shown = _CONVERT[conversion](shown)
            out.append(format(shown, spec))
        return out

    def data(self) -> dict:
        return {"templates": self.templates, "shared": self.shared,
                "untranslated": sorted(list(m) for m in self.missed)}


def changes(values: Sequence, first: int = 0) -> list[list]:
    """[[step, value], ...] where the value differs from the step before's (the steps from `first`): page.js
    reads a step's value as the last entry at or before it."""
    out: list[list] = []
    for k, value in enumerate(values, start=first):
        if not out or out[-1][1] != value:
            out.append([k, value])
    return out


__all__ = ["Engine", "Said", "Joined", "Spoken", "said", "joined", "text", "translate", "changes", "ENGINE_MARK"]
