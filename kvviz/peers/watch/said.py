"""Said: a sentence of the watch narration kept as templates and their fields, so that a view says it in its reader's
language when it shows it (the window passes Qt's translate in the context "Narration", the page
kvviz.page.strings.translator's; `str()` is English). scripts/update_translations.py reads the templates from the
`_tr("...")` marks of the modules that make them. No Qt.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Translate = Callable[[str], str]


def _tr(template: str) -> str:
    """Marks a template for the translations (scripts/update_translations.py reads `_tr("...")` calls); the
    template is translated where the sentence is shown (Said.text)."""
    return template


@dataclass(frozen=True)
class Said:
    """A narration sentence: one or more parts, each a template and its fields, joined by "; "."""

    parts: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]

    @classmethod
    def of(cls, template: str, **fields: Any) -> Said:
        return cls(((template, tuple(fields.items())),))

    @classmethod
    def joined(cls, said: list[Said]) -> Said:
        return cls(tuple(part for s in said for part in s.parts))

    def text(self, _tr: Translate = str) -> str:
        """The sentence in the reader's language (`_tr` translates a template, and a field that is itself a Said;
        str keeps English)."""
        def said(fields: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
            return {k: v.text(_tr) if isinstance(v, Said) else v for k, v in fields}

        return _tr("; ").join(_tr(template).format(**said(fields)) for template, fields in self.parts)

    def __str__(self) -> str:
        return self.text()
