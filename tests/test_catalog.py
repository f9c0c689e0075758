"""kvviz.catalog is the one list of engines and schedulers: a cache added as one class plus one catalog entry
appears everywhere an engine must (the registry, the form, the records, the panels, the page), and no module
types an engine list of its own."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kvviz import catalog
from kvviz.caches import ConcatCache, WindowCache

ROOT = Path(__file__).resolve().parents[1]
PROMPT = [72, 101, 108, 108, 111]
N_NEW = 5


class ExactThrowawayCache(ConcatCache):
    """concat's rule under another name: exact."""


class ApproximateThrowawayCache(WindowCache):
    """window's rule under another name: approximate, reads the window."""


@pytest.fixture(params=[ExactThrowawayCache, ApproximateThrowawayCache], ids=["exact", "approximate"])
def throwaway(request, monkeypatch, torch_cpu):
    """A cache class of this module plus one catalog entry naming it: nothing else is registered."""
    cls = request.param
    exact = cls is ExactThrowawayCache
    entry = catalog.EngineEntry("throwaway", "a test's cache", exact, f"{__name__}:{cls.__name__}",
                                () if exact else ("window",), color="#123456")
    monkeypatch.setitem(catalog.ENGINES, "throwaway", entry)
    # the window's and the page's colour tables are read from the catalog when their modules load: the entry goes
    # into them for this test and out after, whichever test loaded them first
    import kvviz.page
    from kvviz.ui import style

    for module in (style, kvviz.page):
        monkeypatch.setitem(module.ENGINE_COLORS, "throwaway", entry.color)
        monkeypatch.setitem(module.ENGINE_DASH, "throwaway", catalog.engine_dash("throwaway"))
    return entry, cls


@pytest.fixture
def throwaway_run(throwaway, tiny_random):
    """A run of concat and the throwaway cache, as the engines record it."""
    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine
    from kvviz.measure.quality import annotate, measure
    from kvviz.records.trace import RunInfo

    entry, cls = throwaway
    reference = make_engine("concat", tiny_random)
    engine = make_engine("throwaway", tiny_random, window=4)
    assert engine.cache_cls is cls
    exact = list(reference.generate(PROMPT, N_NEW, trace=TraceOptions(logits=True), run_id="t"))
    own = list(engine.generate(PROMPT, N_NEW, run_id="t"))
    if not entry.exact:
        own = annotate(own, measure(engine, PROMPT, exact, own))
    cfg = tiny_random.cfg
    info = RunInfo(run_id="t", model_name=cfg.name, device="cpu", dtype="float32", prompt="Hello",
                   prompt_ids=tuple(PROMPT), prompt_labels=tuple("Hello"), engines=("concat", "throwaway"),
                   max_new_tokens=N_NEW, n_layer=cfg.n_layer, n_head=cfg.n_head, n_kv_head=cfg.n_kv_head,
                   head_dim=cfg.head_dim, param_count=cfg.param_count(),
                   kv_bytes_per_token=cfg.kv_bytes_per_token(), block_size=16)
    return entry, info, {"concat": exact, "throwaway": own}


def test_the_registry_builds_a_cache_named_by_one_catalog_entry(throwaway, throwaway_run):
    from kvviz import engines
    from kvviz.caches import CACHES
    from kvviz.measure import quality

    entry, cls = throwaway
    _, _, traces = throwaway_run
    assert CACHES["throwaway"] is cls
    assert "throwaway" in engines.ENGINE_KEYS and engines.ENGINE_HELP["throwaway"] == "a test's cache"
    assert ("throwaway" in engines.EXACT_KEYS) is entry.exact
    assert ("throwaway" in engines.APPROXIMATE_KEYS) is not entry.exact
    assert engines.parse_engines("naive,throwaway") == ("naive", "throwaway")
    assert ("throwaway" in quality.EXACT_ENGINES) is entry.exact
    assert quality.reference_key(("concat", "throwaway")) == (None if entry.exact else "concat")
    tokens = [t.token_id for t in traces["throwaway"]]
    if entry.exact:  # concat's rule: the same greedy tokens as concat
        assert tokens == [t.token_id for t in traces["concat"]]
    else:  # window's rule with W = 4: it dropped keys, as a window does
        assert traces["throwaway"][-1].window == 4 and traces["throwaway"][-1].cache_len == 4


def test_the_form_lists_the_throwaway_cache_and_shows_its_settings(qtbot, tmp_path, throwaway):
    from kvviz.runtime.session import EngineSession
    from kvviz.ui.form import RunForm
    from tests.conftest import settings_at

    entry, _ = throwaway
    env = EngineSession().environment()  # the engine process's listing, as the window receives it
    assert ("throwaway", "a test's cache") in env.engines
    form = RunForm(settings_at(tmp_path / "form.ini"))
    qtbot.addWidget(form)
    form.show()
    form.set_environment(env)
    box = form.findChild(type(form.greedy_check), "engine_throwaway")
    # listed, and not ticked by default: a fresh form ticks the chapter's comparison (catalog.DEFAULT_ENGINES)
    assert box is not None and not box.isChecked()
    assert form.checked_engines() == catalog.DEFAULT_ENGINES
    form.set_engines(("concat",))
    assert not form.window_spin.isVisible()
    form.set_engines(("concat", "throwaway"))
    assert form.checked_engines() == ("concat", "throwaway")
    assert form.window_spin.isVisible() is (not entry.exact)  # the settings its entry names


def test_a_trace_naming_the_throwaway_cache_saves_and_loads(tmp_path, throwaway_run):
    from kvviz.records import traceio

    _, info, traces = throwaway_run
    assert "throwaway" in traceio.ENGINES
    loaded = traceio.load_run(traceio.save_run(tmp_path / "run.kvviz.json", info, traces))
    assert list(loaded.traces) == ["concat", "throwaway"]
    assert [t.token_id for t in loaded.traces["throwaway"]] == [t.token_id for t in traces["throwaway"]]


def test_the_panels_and_the_grid_classify_the_throwaway_cache(qtbot, throwaway_run):
    from kvviz.ui.grid import has_quality
    from kvviz.ui.history import RunHistory
    from kvviz.ui.panels.quality import QualityPanel
    from kvviz.ui.panels.summary import SummaryPanel

    entry, info, traces = throwaway_run
    history = RunHistory()
    history.reset(info)
    for k in range(N_NEW):
        for e in info.engines:
            history.add(traces[e][k])
    assert has_quality(history) is not entry.exact
    summary = SummaryPanel()
    qtbot.addWidget(summary)
    summary.show_step(history, N_NEW - 1)
    values = summary.table_values()["throwaway"]
    quality = QualityPanel()
    qtbot.addWidget(quality)
    quality.show_step(history, N_NEW - 1)
    kl = quality.columns.values(history, "throwaway", "kl")
    if entry.exact:  # the reference's own quality: KL 0, top-1 always
        assert (values["mean_kl"], values["top1_agreement"]) == (0.0, 1.0)
        assert np.array_equal(kl, np.zeros(N_NEW))
    else:  # its measured figures
        measured = [t.kl_to_exact for t in traces["throwaway"]]
        assert values["mean_kl"] == pytest.approx(np.mean(measured))
        np.testing.assert_allclose(kl, measured)
    assert summary._table.isRowHidden(summary_row("mean_kl")) is entry.exact  # quality rows with an approximate


def summary_row(key: str) -> int:
    from kvviz.ui.panels.summary import COLUMNS

    return [k for k, _ in COLUMNS].index(key)


def test_the_page_data_carries_the_throwaway_cache(throwaway_run):
    from kvviz.page import page_data

    entry, info, traces = throwaway_run
    data = page_data(info, traces)
    drawn = {e["name"]: e for e in data["engines"]}
    assert drawn["throwaway"]["color"] == "#123456"
    assert ("throwaway" in data["exact"]) is entry.exact
    assert data["exact"] == list(catalog.exact_keys())


def test_the_page_script_reads_the_exact_engines_from_its_data():
    script = (ROOT / "kvviz" / "page" / "page.js").read_text(encoding="utf-8")
    assert "const EXACT = DATA.exact;" in script


# -- no second list -------------------------------------------------------------------------------------
def _engine_sets() -> dict[frozenset[str], str]:
    """The lists a module could retype: every engine, the exact, the approximate, the cached ones, the engines
    that read one setting, every scheduler."""
    sets = {frozenset(catalog.engine_keys()): "every engine", frozenset(catalog.exact_keys()): "the exact engines",
            frozenset(catalog.approximate_keys()): "the approximate engines",
            frozenset(catalog.cache_keys()): "the cached engines",
            frozenset(catalog.scheduler_keys()): "every scheduler",
            frozenset(catalog.DEFAULT_ENGINES): "the default engines"}
    for name in catalog.SETTING_DEFAULTS:
        readers = frozenset(k for k in catalog.engine_keys() if name in catalog.settings_of(k))
        if len(readers) > 1:
            sets.setdefault(readers, f"the engines that read {name}")
    return sets


def _names_in(node: ast.AST) -> list[str] | None:
    """The strings of a tuple, list or set literal of strings, or of a comma-joined string; None otherwise."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        if node.elts and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            return [e.value for e in node.elts]
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "," in node.value:
        return node.value.split(",")
    return None


def retyped_lists() -> dict[str, set[str]]:
    """Path -> the catalog lists its literals retype (kvviz's Python and JavaScript, the catalog apart)."""
    sets, found = _engine_sets(), {}
    for path in sorted((ROOT / "kvviz").rglob("*.py")):
        if path.name == "catalog.py" and path.parent.name == "kvviz":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = _names_in(node)
            if names and len(names) > 1 and frozenset(names) in sets:
                found.setdefault(str(path.relative_to(ROOT)), set()).add(sets[frozenset(names)])
    for path in sorted((ROOT / "kvviz").rglob("*.js")):
        for literal in re.findall(r"\[([^\[\]]*)\]", path.read_text(encoding="utf-8")):
            names = re.findall(r'"([^"]*)"', literal)
            if len(names) > 1 and re.fullmatch(r'\s*("[^"]*"\s*,\s*)*"[^"]*"\s*', literal) and \
                    frozenset(names) in sets:
                found.setdefault(str(path.relative_to(ROOT)), set()).add(sets[frozenset(names)])
    return found


# Literals that still name a catalog list outside the catalog, each with what it is; the list only shrinks.
KNOWN = {
    "kvviz/measure/reference.py": {"the default engines"},  # the bare reference loop's rules, one function each
}


def test_no_module_retypes_a_catalog_list():
    assert retyped_lists() == KNOWN


def test_the_scan_finds_a_retyped_list(tmp_path, monkeypatch):
    """The scan itself: a module typing the exact engines is found."""
    fake = tmp_path / "kvviz"
    fake.mkdir()
    exact, approximate = catalog.exact_keys(), catalog.approximate_keys()
    (fake / "panel.py").write_text(f"EXACT = {tuple(reversed(exact))!r}\nOK = ('naive', 'concat')\n")
    (fake / "page.js").write_text(f"const A = {list(approximate)!r}; const B = ['naive'];\n".replace("'", '"'))
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert retyped_lists() == {"kvviz/panel.py": {"the exact engines"}, "kvviz/page.js": {"the approximate engines"}}


# -- the catalog and the registries agree --------------------------------------------------------------
def test_the_catalog_imports_no_torch_numpy_or_qt():
    code = ("import sys, kvviz.catalog; heavy = {'torch', 'numpy', 'PySide6', 'pyqtgraph'} & set(sys.modules); "
            "print(sorted(heavy)); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_cache_class_is_as_exact_as_its_entry(torch_cpu):
    from kvviz.caches import CACHES

    assert tuple(CACHES) == catalog.cache_keys()
    for key, cls in CACHES.items():
        assert getattr(cls, "exact", catalog.ENGINES[key].exact) is catalog.ENGINES[key].exact, key


def test_the_schedulers_are_the_catalogs():
    from kvviz.page import serve as serve_page
    from kvviz.serving import record, spec
    from kvviz.serving.scheduler import SCHEDULER_CLASSES

    assert tuple(SCHEDULER_CLASSES) == record.SCHEDULERS == spec.SCHEDULERS == catalog.scheduler_keys()
    colors = {k: s.color for k, s in catalog.SCHEDULERS.items()}
    assert serve_page.SCHEDULER_COLORS == colors


def test_the_serve_views_scheduler_words_and_colours_are_the_catalogs(qapp):
    from kvviz.ui.serve import colors
    from kvviz.ui.serve.form import scheduler_help

    assert colors.SCHEDULER_COLORS == {k: s.color for k, s in catalog.SCHEDULERS.items()}
    assert {k: scheduler_help(k) for k in catalog.SCHEDULERS} == {k: s.help for k, s in catalog.SCHEDULERS.items()}
