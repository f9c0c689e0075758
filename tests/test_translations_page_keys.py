"""scripts/update_translations.py reads the sentences the page's Python declares for the window (said() calls, the
strings a function translates with the translator the window passes it) with the AST, so a panel that says them
through the page's Python needs no copy of its own for the .ts to keep them."""
from __future__ import annotations

from pathlib import Path

import pytest
import test_i18n

tool = test_i18n.tool  # scripts/update_translations.py as a module, as a fixture


def _write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


PAGE = '''
ROWS = ("time", None, "read")

def legend(kind):
    words = "copy {0}" if kind == "copy" else "read {0}"
    head = "Panel"
    return [said("Panel", words, 1), said(head, "{name} ({unit})", name=1, unit=2),
            [said(head, n if n is not None else "of copy") for n in ROWS], said("kernels", kind)]

def titles(tr_of):
    pool, usage = tr_of("PoolPanel"), tr_of("UsagePanel")
    return pool("Block pool"), usage("batch")

def heading(k, tr_panel=str):
    sep = tr_panel("; ")
    return tr_panel("{0}: wasted").format(k) + sep

def apply(values, key):
    return key(values)
'''

UI = '''
from kvviz.fake.page import heading
from kvviz.fake import page

_tr = translator("CountersPanel")

class TimelinePanel:
    def show(self):
        return heading("a", self.tr), page.heading("b", tr_panel=_tr), page.apply([1], len)
'''


def test_said_calls_and_the_translators_passed_give_their_contexts(tool, tmp_path, monkeypatch):
    page = _write(tmp_path, "kvviz/fake/page.py", PAGE)
    ui = _write(tmp_path, "kvviz/ui/fake.py", UI)
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    monkeypatch.setattr(tool, "PAGE_SOURCES", (page,))
    keys = {(k.context, k.source) for k in tool.page_keys([ui])}
    assert keys == {("Panel", "copy {0}"), ("Panel", "read {0}"), ("Panel", "{name} ({unit})"), ("Panel", "time"),
                    ("Panel", "read"), ("Panel", "of copy"), ("PoolPanel", "Block pool"), ("UsagePanel", "batch"),
                    ("TimelinePanel", "; "), ("TimelinePanel", "{0}: wasted"),
                    ("CountersPanel", "; "), ("CountersPanel", "{0}: wasted")}


@pytest.mark.parametrize("page, ui, says", [
    ("def f(x):\n    return said('Panel', x.label)\n", "", "said('Panel', x.label)"),
    ("def f(tr_panel):\n    return tr_panel('a')\n",
     "from kvviz.fake.page import f\n\ndef g(t):\n    return f(t)\n", "t passed as f's tr_panel"),
])
def test_a_sentence_whose_context_or_source_is_not_written_is_an_error(tool, tmp_path, monkeypatch, page, ui, says):
    page_path = _write(tmp_path, "kvviz/fake/page.py", page)
    ui_path = _write(tmp_path, "kvviz/ui/fake.py", ui)
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    monkeypatch.setattr(tool, "PAGE_SOURCES", (page_path,))
    with pytest.raises(tool.Unreadable, match="cannot tell") as caught:
        tool.page_keys([ui_path])
    assert says in str(caught.value)


def test_the_page_sentences_are_in_the_shipped_translations(tool):
    """Every sentence said_compare, serving/words and serving/narration declare for the window is in the .ts,
    translated (the window translates it with QCoreApplication.translate in its context)."""
    keys = tool.page_keys(tool.ui_sources())
    shipped = tool.parse_ts(tool.ts_path("zh_CN"))
    assert {("SummaryPanel", "Totals over steps 0\u2013{step} ({n} new tokens)"), ("UsagePanel", "blocks used"),
            ("AttentionPanel", "layer {layer}, head {head}, step {step}")} <= {(k.context, k.source) for k in keys}
    missing = [k for k in keys if k not in shipped or not shipped[k].finished]
    assert not missing, missing


def test_the_panels_say_the_pages_sentences_through_the_pages_python(tool):
    """The compare and Serve panels write none of the sentences the page's Python declares (legends, the work
    matrix's lines, the attention panel's title and caption, the paged pool's legend, the token note, the Serve
    counters, headings, kinds, solo lines and titles): they say them through kvviz.page.said_compare,
    kvviz.serving.words and kvviz.serving.narration."""
    files = sorted((tool.UI / "panels").glob("*.py")) + sorted((tool.UI / "serve" / "panels").glob("*.py"))
    written = {e.key for e in tool._lupdate(files, []) if e.key.context} | {e.key for e in tool.helper_entries(files)}
    page = tool.page_keys(tool.ui_sources())
    assert written and page  # the panels' own strings and the page's sentences are both read
    assert {(k.context, k.source) for k in written & set(page)} == set()
