"""The page's words in Chinese, read from the window's own translations (assets/i18n/kvviz_zh_CN.ts), so a
string changed or translated for the window is changed in the page too. Stdlib only: no Qt.

The page looks a string up by the window's context and English source; one the .ts lacks stays English
(the page lists those it met in window.kvviz.untranslated; tests/test_html_page.py wants none).
"""
from __future__ import annotations

import functools
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

TS_FILE = Path(__file__).resolve().parent.parent.parent / "assets" / "i18n" / "kvviz_zh_CN.ts"
# The window's contexts whose strings the page shows.
CONTEXTS = ("Narration", "TransportBar", "SummaryPanel", "WorkMatrixPanel", "RecomputePanel", "AttentionPanel",
            "LatencyPanel", "BytesPanel", "CacheMemoryPanel", "TokenStreamPanel", "SeriesPanel", "QualityPanel",
            "ServeNarration", "ServeTransport", "TimelinePanel", "PoolPanel", "CountersPanel", "UsagePanel",
            "TextPanel", "StatusFields", "kernels")


@functools.lru_cache(maxsize=1)
def page_strings() -> dict[str, dict[str, str]]:
    """{context: {English source: Chinese}} for CONTEXTS, finished translations only."""
    if not TS_FILE.is_file():
        return {}
    root = ET.parse(TS_FILE).getroot()
    out: dict[str, dict[str, str]] = {}
    for context in root.iter("context"):
        name = context.findtext("name")
        if name not in CONTEXTS:
            continue
        table = out.setdefault(name, {})
        for message in context.iter("message"):
            source, translation = message.find("source"), message.find("translation")
            if source is None or translation is None or translation.get("type") in ("unfinished", "vanished",
                                                                                     "obsolete"):
                continue
            if translation.text:
                table[source.text or ""] = translation.text
    return out



LANGUAGES = ("en", "zh_CN")  # the page's languages: English, the window's source, and the .ts's


def translator(context: str, lang: str, strings: dict[str, dict[str, str]] | None = None) -> Callable[[str], str]:
    """The window's translation of a string of `context` into `lang` ("en": the string itself; a string the
    .ts lacks stays English), from `strings` (default page_strings()): what the page's Python passes to the
    Qt-free sentence functions."""
    if lang == "en":
        return str
    table = (page_strings() if strings is None else strings).get(context, {})
    return lambda text: table.get(text, text)


def in_languages(say: Callable[..., str], *contexts: str, strings: dict | None = None) -> dict[str, str]:
    """{language: say(tr, ...)} for each of the page's languages, `say` given a translator per context."""
    return {lang: say(*(translator(c, lang, strings) for c in contexts)) for lang in LANGUAGES}
