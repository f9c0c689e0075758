"""The catalog: every engine and serving scheduler kvviz runs, by name, with its one-line help, whether it is
exact, which cache settings it reads and its colour. Stdlib only (no torch, no numpy, no Qt), so the registries,
the window, the records and the page read the same entries: a new cache is a file in kvviz/caches plus one entry
in ENGINES. The decode kernels keep their own catalog beside their checks (kvviz.kernels)."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class EngineEntry:
    key: str
    help: str
    exact: bool  # True: attention sees what it would without a cache (greedy tokens equal naive's)
    cache: str | None  # "module:Class" of its cache strategy, imported when first built; None: no cache
    settings: tuple[str, ...] = ()  # the cache settings it reads, of SETTING_DEFAULTS
    color: str | None = None  # its colour in every panel and on the page; None: a spare one by its order
    dash: tuple[float, ...] | None = None  # its line's dashes (on, off pixels), where cached curves overlap
    engine: str | None = None  # "module:Class" of an engine of its own (speculative: two caches, rounds of tokens)


# The approximate caches' settings and their defaults: W tokens kept (sinks included), S sink tokens, R newest
# tokens int8 keeps in full precision (None: none unless asked for).
SETTING_DEFAULTS: dict[str, int | str | None] = {"window": 32, "sinks": 4, "residual": None}
# The speculative engines' settings: k drafts per round, and how rejected K/V are undone ("overwrite": the
# position moves back and the next round writes over them, gpt-fast and vLLM; "crop": cut from the cache,
# transformers and SGLang).
SETTING_DEFAULTS.update({"spec_k": 4, "rollback": "overwrite"})

# Naive is red: it is the waste the chapter removes.
ENGINES: dict[str, EngineEntry] = {e.key: e for e in (
    EngineEntry("naive", "no cache: every step re-runs the whole sequence", True, None, color="#d62728"),
    EngineEntry("concat", "the chapter's cache: torch.cat copies the whole history every step", True,
                "kvviz.caches.concat:ConcatCache", color="#ff7f0e"),
    EngineEntry("static", "preallocated to the run's length; new K/V written in place", True,
                "kvviz.caches.static:StaticCache", color="#2ca02c", dash=(6, 3)),
    EngineEntry("paged", "fixed-size blocks from a pool, a block table per sequence", True,
                "kvviz.caches.paged:PagedCache", color="#1f77b4", dash=(2, 2)),
    EngineEntry("window", "only the last W tokens kept (Mistral): memory stops at W, older tokens are dropped",
                False, "kvviz.caches.window:WindowCache", ("window",)),
    EngineEntry("sinks", "the first S tokens kept for ever plus the last W - S (StreamingLLM)", False,
                "kvviz.caches.sinks:SinksCache", ("window", "sinks")),
    EngineEntry("int8", "K/V stored as int8 with a scale per token and head, dequantised for attention", False,
                "kvviz.caches.int8:Int8Cache", ("residual",)),
    EngineEntry("tova", "W tokens kept; when full, the one the last query attended to least goes (TOVA)", False,
                "kvviz.caches.tova:TovaCache", ("window",)),
    EngineEntry("h2o", "W tokens kept: the newest W/2, and the heavy hitters, most attention received so far (H2O)",
                False, "kvviz.caches.h2o:H2OCache", ("window",)),
    EngineEntry("knorm", "W tokens kept; when full, the key with the largest norm goes (no attention needed)", False,
                "kvviz.caches.knorm:KnormCache", ("window",)),
    EngineEntry("snapkv", "a prompt longer than W cut once to W by its last queries' attention (SnapKV); every new "
                "token kept", False, "kvviz.caches.snapkv:SnapKVCache", ("window",)),
    EngineEntry("spec-lookup", "speculative: prompt lookup drafts k tokens from n-grams of the text so far, the "
                "target verifies them in one forward, rejected K/V rolled back", True, None, ("spec_k", "rollback"),
                color="#7b4173", engine="kvviz.engines.spec:SpecEngine"),
    EngineEntry("spec-draft", "speculative: a small draft model proposes k tokens, the target verifies them in one "
                "forward, rejected K/V rolled back in both caches", True, None, ("spec_k", "rollback"),
                color="#637939", engine="kvviz.engines.spec:SpecEngine"),
)}
# The chapter's comparison: what a run compares when it names no engines (every one of them exact).
DEFAULT_ENGINES: tuple[str, ...] = ("naive", "concat", "static", "paged")
EXTRA_COLORS = ("#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")  # for engines without a colour


def entry(key: object) -> EngineEntry | None:
    """The engine's entry (a kernel comparison's lane's, kvviz.kernels.lane: its engine's); None for a name the
    catalog does not hold (or no name at all: a file's list)."""
    from kvviz.kernels import lane_engine

    return ENGINES.get(lane_engine(key)) if isinstance(key, str) else None


def engine_keys() -> tuple[str, ...]:
    return tuple(ENGINES)


def exact_keys() -> tuple[str, ...]:
    return tuple(k for k, e in ENGINES.items() if e.exact)


def approximate_keys() -> tuple[str, ...]:
    return tuple(k for k, e in ENGINES.items() if not e.exact)


def is_exact(key: str) -> bool:
    """Whether `key` is an exact engine; a name the catalog does not hold is not."""
    found = entry(key)
    return found is not None and found.exact


def any_approximate(engines: Iterable[str]) -> bool:
    """Whether a run of `engines` has an approximate one (its quality figures tell something)."""
    return any(not is_exact(e) for e in engines)


def engine_help() -> dict[str, str]:
    return {k: e.help for k, e in ENGINES.items()}


def cache_keys() -> tuple[str, ...]:
    """The engines with a cache strategy (kvviz.caches.CACHES): every engine but naive."""
    return tuple(k for k, e in ENGINES.items() if e.cache is not None)


def settings_of(key: str) -> tuple[str, ...]:
    found = entry(key)
    return found.settings if found is not None else ()


def used_settings(engines: Iterable[str]) -> set[str]:
    """The cache settings a run of `engines` reads: the form shows a field only while one is ticked."""
    return {name for key in engines for name in settings_of(key)}


def engine_color(key: str, order: int = 0) -> str:
    """The engine's colour; an engine without one gets a spare colour, stable by its order in the run. A lane
    takes its engine's colour in its kernel's shade (kvviz.kernels), an engine without one a spare colour by its
    order among those in the catalog, so an engine's lanes are one colour family."""
    from kvviz.kernels import lane_kernel, shade

    found = entry(key)
    kernel = lane_kernel(key)
    if kernel is not None and (found is None or found.color is None):
        spare = [k for k, e in ENGINES.items() if e.color is None]
        order = spare.index(found.key) if found is not None else order
    color = found.color if found is not None and found.color is not None else EXTRA_COLORS[order % len(EXTRA_COLORS)]
    return color if kernel is None else shade(color, kernel)


def engine_dash(key: str) -> list[float] | None:
    """The engine's dash pattern as a list (pyqtgraph's and the page's canvas's form); None: a solid line."""
    found = entry(key)
    return list(found.dash) if found is not None and found.dash is not None else None


def engine_colors() -> dict[str, str]:
    return {k: e.color for k, e in ENGINES.items() if e.color is not None}


def engine_dashes() -> dict[str, list[float] | None]:
    return {k: engine_dash(k) for k, e in ENGINES.items() if e.color is not None}


@dataclass(frozen=True)
class SchedulerEntry:
    key: str
    help: str
    color: str


SCHEDULERS: dict[str, SchedulerEntry] = {s.key: s for s in (
    SchedulerEntry("static", "one batch padded to its longest prompt, run until its longest request ends", "#d62728"),
    SchedulerEntry("continuous", "a finished request leaves, a waiting one joins at the next step", "#ff7f0e"),
    SchedulerEntry("chunked", "continuous, with a token budget per step shared by decodes and prefill chunks",
                   "#9467bd"),
    SchedulerEntry("paged", "continuous over one block pool; the newest request is preempted when it runs out",
                   "#1f77b4"),
    SchedulerEntry("prefix", "paged, with full blocks shared by a chained hash (prefix caching)", "#2ca02c"),
    SchedulerEntry("reserve", "each request reserves its maximum length up front: the chapter's fragmentation",
                   "#8c564b"),
)}


def scheduler_keys() -> tuple[str, ...]:
    return tuple(SCHEDULERS)


def live_names(module: str, **names: Callable[[], object]) -> Callable[[str], object]:
    """A module's `__getattr__` that reads each of `names` from the catalog at every use, so an entry added to
    the catalog while running (a test's throwaway cache) is seen through the module's names too."""
    def __getattr__(name: str) -> object:
        if name in names:
            return names[name]()
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return __getattr__
