"""A lesson's runs: made once (a compare run through kvviz.notebook.compare, a serve run through
kvviz.serving.engine.serve with every request's solo check), saved beside the lesson as a trace or a serve
record, then loaded into memory so moving between scenes draws without running anything. Saved traces and
records a scene names are read as they are; a memory scene is arithmetic on its model's config. No Qt: the
making imports torch (only when a run is missing); the loading does not.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvviz.lessons.lesson import Lesson, LessonError, Scene, Source

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
RUNS_FORMAT = 1  # bumped when what a cached run holds changes: older files are made again


@dataclass(frozen=True)
class MemoryFigures:
    """A memory scene's figures: its model's report, the chapter's shape of it (head_dim = d_model / heads),
    and the roofline of a decode step (its first row at one position, the weights and one token's K/V; then the
    source's lengths)."""

    report: Any  # kvviz.costs.memory.MemoryReport
    chapter: Any  # MemoryReport of the chapter's shape
    roofline: Any  # kvviz.costs.memory.Roofline


@dataclass
class SceneRun:
    """What one source drew from: `saved` (a compare run: RunInfo and traces), `serve` (ServeRun per
    scheduler) or `memory` (MemoryFigures); `n_steps` for the step slider (1 for memory)."""

    kind: str
    saved: Any = None
    serve: tuple = ()
    memory: MemoryFigures | None = None
    file: Path | None = None
    histories: dict = dataclasses.field(default_factory=dict)  # built by a view, kept for the next visit

    @property
    def n_steps(self) -> int:
        if self.saved is not None:
            return max((len(v) for v in self.saved.traces.values()), default=0)
        if self.serve:
            return max(r.n_steps for r in self.serve)
        return 1

    def facts(self) -> dict:
        from kvviz.lessons import facts

        if self.saved is not None:
            return facts.compare_facts(self.saved.info, self.saved.traces)
        if self.serve:
            return facts.serve_facts(self.serve)
        return facts.memory_facts(self.memory)


def runs_dir(lesson: Lesson, override: str | Path | None = None) -> Path:
    """Where a lesson's runs are kept: `override`, else beside the lesson (LESSON.runs/), else for a built-in
    lesson (the package's folder stays as installed) the user's cache folder."""
    if override is not None:
        return Path(override)
    if lesson.path.resolve().parent == BUILTIN_DIR:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        return base / "kvviz" / "lessons" / lesson.name
    return lesson.path.parent / f"{lesson.name}.runs"


def run_file(folder: Path, source: Source) -> Path | None:
    """The file a made source is saved in (None: a saved file or a memory scene, which are not made)."""
    if source.kind not in ("compare", "serve"):
        return None
    digest = hashlib.sha1(f"{RUNS_FORMAT}:{source.key()}".encode()).hexdigest()[:16]
    return folder / f"{source.kind}-{digest}.json"


def missing_runs(lesson: Lesson, folder: Path) -> list[Source]:
    """The sources whose run is not made yet (each once)."""
    seen, out = set(), []
    for scene in lesson.scenes:
        path = run_file(folder, scene.source)
        if path is not None and not path.is_file() and path not in seen:
            seen.add(path)
            out.append(scene.source)
    return out


class Models:
    """Models loaded for serve runs, by (name, device, dtype, threads), as every command loads them."""

    def __init__(self) -> None:
        self._loaded: dict[tuple, tuple] = {}

    def get(self, s: dict) -> tuple:
        from kvviz.runtime.loading import load_for_run

        key = (s["model"], s["device"], s["dtype"], s["threads"])
        if key not in self._loaded:
            model, tokenizer, _device = load_for_run(s["model"], s["device"], s["dtype"], s["threads"])
            self._loaded[key] = (model, tokenizer)
        return self._loaded[key]


def make_run(source: Source, path: Path, models: Models | None = None) -> Path:
    """Run `source` (compare or serve) and save it at `path` (a temporary name, renamed)."""
    s = source.settings
    path.parent.mkdir(parents=True, exist_ok=True)
    if source.kind == "compare":
        from kvviz.notebook import compare

        run = compare(s["prompt"], s["engines"], s["tokens"], model=s["model"], device=s["device"], dtype=s["dtype"],
                      block_size=s["block_size"], window=s["window"], sinks=s["sinks"], residual=s["residual"],
                      layer=None if s["layer"] == -1 else s["layer"], head=s["head"], temperature=s["temperature"],
                      seed=s["seed"], threads=s["threads"], kernel=s["kernel"])
        return run.save(path)
    from kvviz.serving.engine import ample_blocks, check_workload, serve, tokenize
    from kvviz.serving.record import SchedulerSettings, save_runs
    from kvviz.serving.solo import run_with_solo, solo_runs
    from kvviz.serving.workload import preset, workload_from_dict

    model, tokenizer = (models or Models()).get(s)
    w = s["workload"]
    workload = preset(w) if isinstance(w, str) else workload_from_dict(w, "workload")
    prompts = tokenize(workload, tokenizer)
    settings = SchedulerSettings(max_batch=s["max_batch"], blocks=s["blocks"] or 1, block_size=s["block_size"],
                                 token_budget=s["token_budget"], temperature=s["temperature"], top_k=s["top_k"],
                                 top_p=s["top_p"], seed=s["seed"])
    if s["blocks"] is None:
        settings = dataclasses.replace(settings, blocks=ample_blocks(prompts, workload, settings))
    check_workload(model.cfg, prompts, workload, settings, tuple(s["schedulers"]))
    runs = [serve(model, tokenizer, workload, k, settings) for k in s["schedulers"]]
    solo = solo_runs(model, prompts, workload, settings)
    return save_runs(path, [run_with_solo(r, solo) for r in runs])


def make_missing(lesson: Lesson, folder: Path, say: Callable[[str], None] | None = None) -> int:
    """Make every run the lesson lacks; returns how many were made."""
    say = say or (lambda text: print(f"kvviz lesson: {text}", file=sys.stderr, flush=True))
    todo = missing_runs(lesson, folder)
    models = Models()
    for i, source in enumerate(todo, 1):
        path = run_file(folder, source)
        what = ", ".join(source.settings.get("engines") or source.settings.get("schedulers") or ())
        say(f"making run {i}/{len(todo)}: {source.kind} ({what}) -> {path}")
        try:
            make_run(source, path, models)
        except OSError as exc:
            raise LessonError(f"{lesson.path.name}: cannot keep its runs in {folder}: "
                              f"{exc.strerror or exc} (give another folder with --runs)") from None
        except ValueError as exc:
            scene = next(sc for sc in lesson.scenes if sc.source == source)
            raise LessonError(f"{lesson.path.name}: scene {scene.index} ({scene.title['en']!r}): field 'source': "
                              f"{exc}") from None
    return len(todo)


def load_run(source: Source, folder: Path) -> SceneRun:
    """The run of `source`, read from its file (made or named) or computed (memory)."""
    if source.kind in ("compare", "trace"):
        from kvviz.records import traceio

        path = source.path if source.kind == "trace" else run_file(folder, source)
        return SceneRun(kind="compare", saved=traceio.load_run(path), file=path)
    if source.kind in ("serve", "record"):
        from kvviz.serving.record import load_runs

        path = source.path if source.kind == "record" else run_file(folder, source)
        return SceneRun(kind="serve", serve=tuple(load_runs(path)), file=path)
    return SceneRun(kind="memory", memory=memory_figures(source.settings))


def memory_figures(s: dict) -> MemoryFigures:
    from kvviz.costs.memory import compute, resolve_config, roofline

    cfg = resolve_config(s["model"])
    kwargs = dict(dtype=s["dtype"], bandwidth_gbps=s["bandwidth_gbps"], block_size=s["block_size"],
                  prompt_tokens=s["prompt_tokens"])
    report = compute(cfg, s["tokens"], **kwargs)
    chapter_cfg = cfg.replace(name=f"{cfg.name} (head_dim {cfg.d_model // cfg.n_head})",
                              head_dim=cfg.d_model // cfg.n_head)
    chapter = compute(chapter_cfg, s["tokens"], **kwargs)
    # a row at one position first: the weights and one token's K/V, what "a step reads all the weights" allows
    lengths = (1, *(n for n in s["tokens"] if n != 1))
    roof = roofline(cfg, lengths, ceiling_gbps=s["bandwidth_gbps"], batch=s["batch"], dtype=s["dtype"])
    return MemoryFigures(report=report, chapter=chapter, roofline=roof)


class LessonRuns:
    """Every scene's run, loaded once (keyed by source) and kept: what the presenter and the exports draw."""

    def __init__(self, lesson: Lesson, folder: str | Path) -> None:
        self.lesson, self.folder = lesson, Path(folder)
        self._runs: dict[str, SceneRun] = {}

    def of(self, scene: Scene) -> SceneRun:
        key = scene.source.key()
        if key not in self._runs:
            try:
                self._runs[key] = load_run(scene.source, self.folder)
            except ValueError as exc:
                raise LessonError(f"{self.lesson.path.name}: scene {scene.index} ({scene.title['en']!r}): "
                                  f"field 'source': {exc}") from None
        return self._runs[key]

    def load_all(self) -> None:
        """Every scene's run, and each scene's steps and highlights checked against it."""
        for scene in self.lesson.scenes:
            check_scene(scene, self.of(scene), self.lesson.path.name)

    def step(self, scene: Scene, stop: int) -> int:
        """Stop `stop` of the scene (its step, then its bookmarks) as a step of its run."""
        return resolve_step(scene.stops[stop], self.of(scene).n_steps)


def resolve_step(step: int, n_steps: int) -> int:
    return step + n_steps if step < 0 else step


def check_scene(scene: Scene, run: SceneRun, name: str) -> None:
    """The scene's steps within its run, its highlights within the run's positions, requests and pool."""
    where = f"{name}: scene {scene.index} ({scene.title['en']!r})"
    n = run.n_steps
    for field_name, values in (("step", (scene.step,)), ("bookmarks", scene.bookmarks)):
        for v in values:
            if run.kind != "memory" and not 0 <= resolve_step(v, n) < n:
                raise LessonError(f"{where}: field '{field_name}': step {v} is outside the run's steps 0..{n - 1}")
    h = scene.highlight
    if h.queries is not None and run.saved is not None:
        positions = max(v[-1].pos_stop for v in run.saved.traces.values() if v)
        if max(h.queries[1], h.keys[1]) >= positions:
            raise LessonError(f"{where}: field 'highlight.queries': the run has positions 0..{positions - 1}")
    if run.serve:
        requests = len(run.serve[0].results)
        if h.request is not None and h.request >= requests:
            raise LessonError(f"{where}: field 'highlight.request': the run has requests 0..{requests - 1}")
        names = [r.scheduler for r in run.serve]
        if h.scheduler is not None and h.scheduler not in names:
            raise LessonError(f"{where}: field 'highlight.scheduler': the run has {', '.join(names)}")
        if h.block is not None:
            pool = next(r for r in run.serve if h.scheduler in (None, r.scheduler)).settings.blocks
            if h.block >= pool:
                raise LessonError(f"{where}: field 'highlight.block': the pool has blocks 0..{pool - 1}")
    from kvviz.lessons import facts

    table = run.facts()
    for lang, text in scene.caption.items():
        try:
            facts.fill(text, table)
        except (AttributeError, KeyError) as exc:
            raise LessonError(f"{where}: field 'caption.{lang}': the run has no figure {exc}") from None
