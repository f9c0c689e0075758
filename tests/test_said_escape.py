"""kvviz.page.said.text's `escape`: a rich-text label escapes the plain texts and engine names a sentence holds, not
its template; the summary's notes said that way (kvviz.page.said_compare's note functions)."""
from __future__ import annotations

import html

from kvviz.page.said import Engine, joined, said, text
from kvviz.page.said_compare import work_note


def test_escape_applies_to_plain_fields_and_engine_names_not_the_template():
    sentence = said("Ctx", "<b>{0}</b> by {engine}: {parts}", "a<b", engine=Engine("x&y", 0),
                    parts=joined(said("Ctx", "; "), ["<i>", Engine("q", 1)]))
    assert text(sentence, escape=html.escape) == "<b>a&lt;b</b> by x&amp;y: &lt;i&gt;; q"
    assert text(sentence) == "<b>a<b</b> by x&y: <i>; q"
    assert text(Engine("p<q", 0), name=lambda e: e.name.upper(), escape=html.escape) == "P&lt;Q"


def test_the_work_note_compares_naive_with_the_cache_that_computed_fewest():
    note = text(work_note({"naive": 1200, "concat": 300, "static": 0, "paged": 400}), escape=html.escape)
    assert note.startswith("Work saved: naive computed <b>1,200</b> K/V projections so far, a cache <b>300</b> "
                           "(4.0\u00d7 fewer).")
    assert work_note({"concat": 300}) is None
