"""Comma lists of names (engines, kernels, schedulers) as a command line or a form gives them: one parser with
one-line refusals. Imports nothing of kvviz, so the catalogs below the options can use it."""
from __future__ import annotations


def parse_names(text: str | list[str], known, what: str, plural: str) -> tuple[str, ...]:
    """`"a,b"` -> ("a", "b"): a comma list of names from `known`, refusing none, an unknown one or one
    named twice, each in one line (engines, schedulers)."""
    items = [s.strip() for s in (text.split(",") if isinstance(text, str) else text) if s.strip()]
    if not items:
        raise ValueError(f"no {plural} given")
    for key in items:
        if key not in known:
            raise ValueError(f"unknown {what} {key!r}; choose from {', '.join(known)}")
    if len(set(items)) != len(items):
        article = "an" if what[0] in "aeiou" else "a"
        raise ValueError(f"{article} {what} is named twice in {','.join(items)}")
    return tuple(items)
