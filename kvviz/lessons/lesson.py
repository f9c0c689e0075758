"""A lesson: a file of scenes (TOML or JSON) a teacher presents, its one-line refusals, and the edits that reorder,
retitle and remove scenes in the file. A scene names its source (compare or serve settings, a saved trace or serve
record, a memory calculator's model), steps, panels (one large), zoom, highlights and an English/Chinese caption.
Stdlib only: it knows the bounds (kvviz.options) and the catalog, not torch or Qt."""
from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from kvviz import catalog
from kvviz.names import parse_names
from kvviz.options import BOUNDS, check_value

MAX_LESSON_BYTES = 4 << 20
LANGS = ("en", "zh")
KINDS = ("compare", "serve", "trace", "record", "memory")
MEMORY_PANELS = ("kv_per_token", "copies", "roofline")  # the memory calculator's figures, drawn as tables


def compare_panels() -> tuple[str, ...]:
    from kvviz.ui.panels import PANELS  # a plain list: no Qt comes with it

    return tuple(k for k, _ in PANELS)


def serve_panels() -> tuple[str, ...]:
    from kvviz.ui.serve.panels import SERVE_PANELS  # a plain list: no Qt comes with it

    return tuple(k for k, _ in SERVE_PANELS)


def panels_of(kind: str) -> tuple[str, ...]:
    """The panels a scene of this source kind may show."""
    if kind in ("compare", "trace"):
        return compare_panels()
    if kind in ("serve", "record"):
        return serve_panels()
    return MEMORY_PANELS


# Each source kind's keys: (the bound in kvviz.options, or a checker's name), and the default.
COMPARE_KEYS: dict[str, tuple[str, Any]] = {
    "prompt": ("text", None), "engines": ("engines", None), "tokens": ("tokens", 40), "model": ("text", "tiny"),
    "device": ("text", "cpu"), "dtype": ("text", "auto"), "temperature": ("temperature", 0.0),
    "top_k": ("top_k", None), "top_p": ("top_p", None), "seed": ("seed", 0), "threads": ("threads", 1),
    "block_size": ("block_size", 16), "window": ("window", 32), "sinks": ("sinks", 4), "residual": ("residual", None),
    "kernel": ("kernel", "torch"), "layer": ("layer", 0), "head": ("head", 0),
}
SERVE_KEYS: dict[str, tuple[str, Any]] = {
    "workload": ("workload", None), "schedulers": ("schedulers", None), "model": ("text", "tiny"),
    "device": ("text", "cpu"), "dtype": ("text", "auto"), "max_batch": ("batch_size", 8), "blocks": ("blocks", None),
    "block_size": ("block_size", 16), "token_budget": ("token_budget", None), "seed": ("seed", 0),
    "temperature": ("temperature", 0.0), "top_k": ("top_k", None), "top_p": ("top_p", None), "threads": ("threads", 1),
}
FILE_KEYS: dict[str, tuple[str, Any]] = {"path": ("text", None)}
MEMORY_KEYS: dict[str, tuple[str, Any]] = {
    "model": ("text", "qwen3-0.6b"), "tokens": ("lengths", [100, 500, 1000]), "dtype": ("text", None),
    "bandwidth_gbps": ("bandwidth_gbps", 2000.0), "block_size": ("block_size", 16),
    "prompt_tokens": ("prompt_tokens", 0),
    "batch": ("batch_size", 8),
}
SOURCE_KEYS = {"compare": COMPARE_KEYS, "serve": SERVE_KEYS, "trace": FILE_KEYS, "record": FILE_KEYS,
               "memory": MEMORY_KEYS}
SCENE_KEYS = ("title", "caption", "source", "step", "bookmarks", "panels", "large", "zoom", "highlight")
HIGHLIGHT_KEYS = ("queries", "keys", "request", "block", "scheduler")
MARK_COLOR = "#d81b60"  # a highlight, in the presenter and the deck: a magenta no cell or engine colour uses


class LessonError(ValueError):
    """A lesson that cannot be presented, said in one line naming the file, the scene and the field."""


@dataclass(frozen=True)
class Source:
    """Where a scene's picture comes from: `kind` and its settings (every key present, defaults filled)."""

    kind: str
    settings: dict[str, Any]
    path: Path | None = None  # trace and record: the file, resolved against the lesson's folder

    def key(self) -> str:
        """The settings as canonical JSON: equal sources share one run."""
        doc = {"kind": self.kind, **self.settings}
        if self.path is not None:
            doc["path"] = str(self.path)
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Highlight:
    """What a scene marks: a region of the work matrix (query rows and key columns, inclusive), a request's
    row (serve), a block of a scheduler's pool."""

    queries: tuple[int, int] | None = None
    keys: tuple[int, int] | None = None
    request: int | None = None
    block: int | None = None
    scheduler: str | None = None  # the pool whose block is marked (default: the first)

    @property
    def empty(self) -> bool:
        return self.queries is None and self.request is None and self.block is None


@dataclass(frozen=True)
class Scene:
    index: int  # from 1, as the refusals and the presenter count
    title: dict[str, str]
    caption: dict[str, str]
    source: Source
    step: int = -1  # the step the scene opens at; negative counts from the end
    bookmarks: tuple[int, ...] = ()  # the steps PageDown visits after it, in order
    panels: tuple[str, ...] = ()
    large: str | None = None
    zoom: int = 100
    highlight: Highlight = field(default_factory=Highlight)

    def text(self, what: str, lang: str) -> str:
        """The title or caption in `lang` ("en", "zh"), English where the file has no Chinese."""
        table = self.title if what == "title" else self.caption
        return table.get(lang) or table["en"]

    @property
    def stops(self) -> tuple[int, ...]:
        """The steps the scene shows in turn: its step, then its bookmarks."""
        return (self.step, *self.bookmarks)


@dataclass(frozen=True)
class Lesson:
    path: Path
    title: dict[str, str]
    scenes: tuple[Scene, ...]

    @property
    def name(self) -> str:
        return self.path.stem

    def text(self, lang: str) -> str:
        return self.title.get(lang) or self.title["en"]


# -- reading --------------------------------------------------------------------------------------------
def load_lesson(path: str | Path) -> Lesson:
    """The lesson in a .toml or .json file; LessonError (one line naming the file, the scene and the field)."""
    from kvviz.fileio import read_bytes

    path = Path(path)
    name = path.name
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise LessonError(f"{name}: a lesson is a .toml or .json file")
    try:
        raw = bytes(read_bytes(path, MAX_LESSON_BYTES, "lesson file"))
    except ValueError as exc:
        raise LessonError(str(exc)) from None
    try:
        text = raw.decode("utf-8")
        doc = tomllib.loads(text) if suffix == ".toml" else json.loads(text)
    except UnicodeDecodeError:
        raise LessonError(f"{name}: not UTF-8 text") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise LessonError(f"{name}: not valid {suffix[1:].upper()}: {exc}") from None
    return lesson_from_dict(doc, path)


def lesson_from_dict(doc: Any, path: Path) -> Lesson:
    name = path.name
    if not isinstance(doc, dict):
        raise LessonError(f"{name}: a lesson is a table of 'title', 'sources' and 'scene'")
    unknown = set(doc) - {"title", "sources", "scene"}
    if unknown:
        raise LessonError(f"{name}: unknown field {sorted(unknown)[0]!r} (a lesson has title, sources, scene)")
    title = _texts(doc.get("title"), f"{name}: field 'title'")
    sources = doc.get("sources", {})
    if not isinstance(sources, dict):
        raise LessonError(f"{name}: field 'sources' must be a table of named sources")
    scenes_doc = doc.get("scene")
    if not isinstance(scenes_doc, list) or not scenes_doc:
        raise LessonError(f"{name}: no scenes (each is a [[scene]] table)")
    named: dict[str, Source] = {}
    for key, value in sources.items():
        named[key] = _source(value, path, f"{name}: sources.{key}")
    scenes = tuple(_scene(i + 1, s, named, path) for i, s in enumerate(scenes_doc))
    return Lesson(path=path, title=title, scenes=scenes)


def _texts(value: Any, where: str) -> dict[str, str]:
    """{"en": ..., "zh": ...}: English required, Chinese optional; a plain string is English."""
    if isinstance(value, str):
        value = {"en": value}
    if not isinstance(value, dict) or not isinstance(value.get("en"), str) or not value["en"].strip():
        raise LessonError(f"{where} needs English text (en = \"...\")")
    for key, text in value.items():
        if key not in LANGS:
            raise LessonError(f"{where}: unknown language {key!r}; use en and zh")
        if not isinstance(text, str):
            raise LessonError(f"{where}.{key} must be text")
    return {k: v for k, v in value.items()}


def _scene(index: int, doc: Any, named: dict[str, Source], path: Path) -> Scene:
    label = f"scene {index}"
    if isinstance(doc, dict) and isinstance(doc.get("title"), (str, dict)):
        title = doc["title"] if isinstance(doc["title"], str) else doc["title"].get("en", "")
        label += f" ({title!r})" if title else ""
    return _scene_at(index, doc, named, path, f"{path.name}: {label}")


def view_from_dict(doc: Any, path: Path, where: str) -> Scene:
    """A view kept outside a lesson (a window's session): a scene's table, with no named sources, its refusals
    (LessonError, one line) opening with `where`."""
    return _scene_at(1, doc, {}, path, where)


def _scene_at(index: int, doc: Any, named: dict[str, Source], path: Path, where: str) -> Scene:
    if not isinstance(doc, dict):
        raise LessonError(f"{where}: a scene is a table")
    unknown = set(doc) - set(SCENE_KEYS)
    if unknown:
        raise LessonError(f"{where}: unknown field {sorted(unknown)[0]!r}; a scene has {', '.join(SCENE_KEYS)}")
    title = _texts(doc.get("title"), f"{where}: field 'title'")
    caption = _texts(doc.get("caption"), f"{where}: field 'caption'")
    value = doc.get("source")
    if isinstance(value, str):
        if value not in named:
            raise LessonError(f"{where}: field 'source': no source named {value!r} in [sources]")
        source = named[value]
    elif value is None:
        raise LessonError(f"{where}: field 'source' is missing")
    else:
        source = _source(value, path, f"{where}: field 'source")
    step = _int(doc.get("step", -1), "step", f"{where}: field 'step'")
    bookmarks = doc.get("bookmarks", [])
    if not isinstance(bookmarks, list):
        raise LessonError(f"{where}: field 'bookmarks' must be a list of steps")
    marks = tuple(_int(b, "step", f"{where}: field 'bookmarks'") for b in bookmarks)
    if len(set((step, *marks))) != len(marks) + 1:
        raise LessonError(f"{where}: field 'bookmarks' names a step twice (the scene's step included)")
    if source.kind == "memory" and (marks or step != -1):
        raise LessonError(f"{where}: field 'step': a memory scene has no steps")
    allowed = panels_of(source.kind)
    panels = doc.get("panels", list(allowed[:1]))
    if isinstance(panels, str):
        panels = [panels]
    if not isinstance(panels, list) or not panels or not all(isinstance(p, str) for p in panels):
        raise LessonError(f"{where}: field 'panels' must be a list of panel names")
    for p in panels:
        if p not in allowed:
            raise LessonError(f"{where}: field 'panels': no panel {p!r} for a {source.kind} source; "
                              f"choose from {', '.join(allowed)}")
    if len(set(panels)) != len(panels):
        raise LessonError(f"{where}: field 'panels' names a panel twice")
    large = doc.get("large", panels[0])
    if large not in panels:
        raise LessonError(f"{where}: field 'large': {large!r} is not one of the scene's panels")
    zoom = _int(doc.get("zoom", 100), "zoom", f"{where}: field 'zoom'")
    highlight = _highlight(doc.get("highlight", {}), source, f"{where}: field 'highlight")
    scene = Scene(index=index, title=title, caption=caption, source=source, step=step, bookmarks=marks,
                  panels=tuple(panels), large=large, zoom=zoom, highlight=highlight)
    check_caption(scene, where)
    return scene


def _int(value: Any, bound: str, where: str) -> int:
    """`value` within BOUNDS[bound]; else LessonError "<where> must be <bounds>, got <value>"."""
    if not BOUNDS[bound].holds(value):
        raise LessonError(f"{where} must be a whole number {BOUNDS[bound].describe()}, got {value!r}")
    return value


def _source(doc: Any, path: Path, where: str) -> Source:
    """A source table; `where` ends with the field's name opened ("...: field 'source"), closed here."""
    if not isinstance(doc, dict) or doc.get("kind") not in KINDS:
        raise LessonError(f"{where}.kind' must be one of {', '.join(KINDS)}")
    kind = doc["kind"]
    keys = SOURCE_KEYS[kind]
    unknown = set(doc) - set(keys) - {"kind"}
    if unknown:
        raise LessonError(f"{where}.{sorted(unknown)[0]}': unknown for a {kind} source; it takes "
                          f"{', '.join(keys)}")
    settings: dict[str, Any] = {}
    for key, (check, default) in keys.items():
        value = doc.get(key, default)
        field_where = f"{where}.{key}'"
        if value is None:
            if key in ("prompt", "engines", "workload", "schedulers", "path"):
                raise LessonError(f"{field_where} is missing")
            settings[key] = None
            continue
        settings[key] = _setting(check, value, field_where)
    file = None
    if kind in ("trace", "record"):
        file = (path.parent / settings.pop("path")).resolve()
        if not file.is_file():
            raise LessonError(f"{where}.path': no file {file}")
    if kind == "compare":
        from kvviz.options import check_cache_settings

        try:
            check_cache_settings(settings["engines"], 1, settings["tokens"], settings["window"], settings["sinks"],
                                 settings["residual"])
        except ValueError as exc:
            if "larger than the run" not in str(exc):  # the run's length is known once the prompt is tokenized
                raise LessonError(f"{where}': {exc}") from None
    return Source(kind=kind, settings=settings, path=file)


def _setting(check: str, value: Any, where: str) -> Any:
    try:
        if check == "text":
            if not isinstance(value, str) or not value.strip():
                raise ValueError("must be text")
            return value
        if check == "engines":
            return list(parse_names(value, catalog.engine_keys(), "engine", "engines"))
        if check == "schedulers":
            return list(parse_names(value, catalog.scheduler_keys(), "scheduler", "schedulers"))
        if check == "kernel":
            from kvviz.kernels import check_kernel

            return check_kernel(value)
        if check == "workload":
            return _workload(value)
        if check == "lengths":
            if not isinstance(value, list) or not value:
                raise ValueError("must be a list of cache lengths")
            return [check_value("tokens", v, "a length") for v in value]
        if BOUNDS[check].integer is False and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        return check_value(check, value, "it")
    except ValueError as exc:
        raise LessonError(f"{where}: {exc}") from None


def _workload(value: Any) -> Any:
    """A preset's name, or {"requests": [...]} as `kvviz serve --workload FILE` reads it."""
    from kvviz.serving.workload import preset, workload_from_dict

    if isinstance(value, str):
        if preset(value) is None:
            raise ValueError(f"no workload preset {value!r}")
        return value
    workload_from_dict(value, "workload")  # ValueError, one line, for a bad request
    return value


def _highlight(doc: Any, source: Source, where: str) -> Highlight:
    if not isinstance(doc, dict):
        raise LessonError(f"{where}' must be a table")
    unknown = set(doc) - set(HIGHLIGHT_KEYS)
    if unknown:
        raise LessonError(f"{where}.{sorted(unknown)[0]}': unknown; a highlight has {', '.join(HIGHLIGHT_KEYS)}")
    pairs = {}
    for key in ("queries", "keys"):
        value = doc.get(key)
        if value is None:
            continue
        if (not isinstance(value, list) or len(value) != 2 or not all(isinstance(v, int) and not isinstance(v, bool)
                                                                     and v >= 0 for v in value) or value[0] > value[1]):
            raise LessonError(f"{where}.{key}': a range [first, last] of positions, first <= last")
        pairs[key] = (value[0], value[1])
    if ("queries" in pairs) != ("keys" in pairs):
        raise LessonError(f"{where}.{'keys' if 'queries' in pairs else 'queries'}': a region needs queries and keys")
    if pairs and source.kind not in ("compare", "trace"):
        raise LessonError(f"{where}.queries': a work-matrix region needs a compare or trace source")
    counts = {}
    for key in ("request", "block"):
        value = doc.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise LessonError(f"{where}.{key}': a {key} number, from 0")
        if source.kind not in ("serve", "record"):
            raise LessonError(f"{where}.{key}': a {key} needs a serve or record source")
        counts[key] = value
    scheduler = doc.get("scheduler")
    if scheduler is not None:
        if scheduler not in catalog.scheduler_keys():
            raise LessonError(f"{where}.scheduler': unknown scheduler {scheduler!r}")
        if source.kind == "serve" and scheduler not in source.settings["schedulers"]:
            raise LessonError(f"{where}.scheduler': {scheduler!r} is not one of the source's schedulers")
    return Highlight(queries=pairs.get("queries"), keys=pairs.get("keys"), request=counts.get("request"),
                     block=counts.get("block"), scheduler=scheduler)


# -- captions: figures from the scene's run ---------------------------------------------------------------
def caption_fields(text: str) -> list[str]:
    """The {group.name} fields a caption asks for."""
    try:
        return [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError as exc:
        raise ValueError(f"a brace that opens no field ({exc}); write {{{{ for a brace") from None


def check_caption(scene: Scene, where: str) -> None:
    """Every {group.name} in the caption is a figure the scene's source gives (kvviz.lessons.facts)."""
    from kvviz.lessons.facts import known_fields

    known = known_fields(scene.source)
    for lang, text in scene.caption.items():
        try:
            fields = caption_fields(text)
        except ValueError as exc:
            raise LessonError(f"{where}: field 'caption.{lang}': {exc}") from None
        for f in fields:
            if f not in known:
                group = f.split(".")[0]
                names = sorted(k for k in known if k.split(".")[0] == group) or sorted(known)
                raise LessonError(f"{where}: field 'caption.{lang}': no figure {{{f}}} for this source; it gives "
                                  + ", ".join("{" + n + "}" for n in names[:12]) + (" ..." if len(names) > 12 else ""))


# -- editing: scenes reordered, retitled and removed in the file ------------------------------------------
SCENE_HEADER = re.compile(r"^\s*\[\[\s*scene\s*\]\]\s*(#.*)?$")
TITLE_LINE = re.compile(r"^\s*(title|\"title\"|'title')\s*(=|\.)")
BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_value(value: Any) -> str:
    """One value in TOML: text (JSON's escapes are TOML's), numbers, true/false, lists, inline tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise ValueError(f"a lesson holds no {type(value).__name__} value")


def toml_key(key: str) -> str:
    return key if BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def lesson_toml(doc: dict[str, Any]) -> str:
    """A lesson's table as TOML: its title, a [sources.NAME] table per named source, a [[scene]] per scene."""
    lines = [f"title = {toml_value(doc['title'])}"]
    for name, source in doc.get("sources", {}).items():
        lines += ["", f"[sources.{toml_key(name)}]", *(f"{toml_key(k)} = {toml_value(v)}" for k, v in source.items())]
    for scene in doc["scene"]:
        lines += ["", "[[scene]]", *(f"{toml_key(k)} = {toml_value(v)}" for k, v in scene.items())]
    return "\n".join(lines) + "\n"


def _read_doc(path: Path) -> tuple[str, dict[str, Any]]:
    """A lesson file's text and table, the lesson checked as load_lesson checks it."""
    load_lesson(path)  # LessonError, one line, for a file that is no lesson
    text = Path(path).read_text(encoding="utf-8")
    return text, (tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text))


def _scene_chunks(text: str) -> tuple[list[str], list[list[str]]]:
    """The file's lines before its first [[scene]], and each scene's lines (the comment lines right above a
    scene's header go with it)."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if SCENE_HEADER.match(line)]
    for k, i in enumerate(starts):
        while i > (starts[k - 1] + 1 if k else 0) and lines[i - 1].lstrip().startswith("#"):
            i -= 1
        starts[k] = i
    if not starts:
        return lines, []
    bounds = [*starts, len(lines)]
    return lines[: starts[0]], [lines[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def _retitled(chunk: list[str], title: dict[str, str]) -> list[str]:
    """A scene's lines with its title lines (title = ..., title.en = ...) replaced by one title = {...} where the
    first stood (or under the header); a sub-table of the scene ends the search."""
    new = f"title = {toml_value(title)}"
    out: list[str] = []
    placed = False
    for k, line in enumerate(chunk):
        if line.strip().startswith("[") and not SCENE_HEADER.match(line):
            out += chunk[k:]
            break
        if TITLE_LINE.match(line):
            if not placed:
                out.append(new)
                placed = True
            continue
        out.append(line)
    if not placed:
        header = next(i for i, line in enumerate(out) if SCENE_HEADER.match(line))
        out.insert(header + 1, new)
    return out


def _edited_text(text: str, plan: list[tuple[int, dict[str, str] | None]]) -> str | None:
    """The TOML text with its scenes in the plan's order, retitled where it says: the rest of the file (its
    comments, its layout) kept; None where the file's scenes are not plain [[scene]] blocks."""
    head, chunks = _scene_chunks(text)
    if not chunks:
        return None
    lines = list(head)
    for number, title in plan:
        chunk = chunks[number - 1]
        chunk = _retitled(chunk, title) if title is not None else chunk
        while lines and not lines[-1].strip():
            lines.pop()
        lines += ["", *chunk] if lines else chunk
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n"


def edit_scenes(path: str | Path, plan: list[tuple[int, dict[str, str] | str | None]]) -> Lesson:
    """Write the lesson with the scenes `plan` lists, in its order: (scene number from 1, a new title or None to
    keep it); a scene not listed is removed. A TOML file keeps its comments and layout (rewritten whole only where
    its scenes are not plain [[scene]] blocks). The lesson is checked before it is written and written to a
    temporary name then renamed (kvviz.fileio); LessonError (one line) for a plan it would refuse."""
    from kvviz.fileio import atomic_write_text

    path = Path(path)
    text, doc = _read_doc(path)
    scenes = doc["scene"]
    numbers = [number for number, _ in plan]
    for number in numbers:
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= len(scenes):
            raise LessonError(f"{path.name}: no scene {number!r} (it has {len(scenes)}, counted from 1)")
    if len(set(numbers)) != len(numbers):
        raise LessonError(f"{path.name}: the plan names a scene twice")
    if not plan:
        raise LessonError(f"{path.name}: a lesson keeps at least one scene")
    titles = [None if title is None else _texts(title, f"{path.name}: scene {number}: the title")
              for number, title in plan]
    titles = [None if t is None else {k: v for k, v in t.items() if v.strip()} for t in titles]
    edited = {**doc, "scene": [scenes[number - 1] if title is None else {**scenes[number - 1], "title": title}
                               for (number, _), title in zip(plan, titles, strict=True)]}
    lesson = lesson_from_dict(edited, path)  # refused here, the file untouched
    if path.suffix.lower() == ".json":
        out = json.dumps(edited, ensure_ascii=False, indent=2) + "\n"
    else:
        out = _edited_text(text, list(zip(numbers, titles, strict=True)))
        if out is None or _parsed(out) != edited:
            out = lesson_toml(edited)
    atomic_write_text(path, out)
    return lesson


def _parsed(text: str) -> Any:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None


def move_scene(path: str | Path, number: int, to: int) -> Lesson:
    """Scene `number` (from 1) moved to place `to` (from 1), the others keeping their order; the file written."""
    count = len(load_lesson(path).scenes)
    if not isinstance(to, int) or isinstance(to, bool) or not 1 <= to <= count:
        raise LessonError(f"{Path(path).name}: no place {to!r} to move a scene to (it has {count}, counted from 1)")
    order = [n for n in range(1, count + 1) if n != number]
    if len(order) == count:
        raise LessonError(f"{Path(path).name}: no scene {number!r} (it has {count}, counted from 1)")
    order.insert(to - 1, number)
    return edit_scenes(path, [(n, None) for n in order])


def retitle_scene(path: str | Path, number: int, title: dict[str, str] | str) -> Lesson:
    """Scene `number` (from 1) given `title` ({"en": ..., "zh": ...}, or English text); the file written."""
    count = len(load_lesson(path).scenes)
    return edit_scenes(path, [(n, title if n == number else None) for n in range(1, count + 1)]
                       if 1 <= number <= count else [(number, title)])


def remove_scene(path: str | Path, number: int) -> Lesson:
    """Scene `number` (from 1) taken out of the lesson; the file written."""
    count = len(load_lesson(path).scenes)
    if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= count:
        raise LessonError(f"{Path(path).name}: no scene {number!r} (it has {count}, counted from 1)")
    return edit_scenes(path, [(n, None) for n in range(1, count + 1) if n != number])
