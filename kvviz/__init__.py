"""kvviz: watch a transformer's KV cache at work.

The notebook front door, imported on first use so `import kvviz` stays light (no torch, no Qt):
`kvviz.compare(prompt, engines=..., tokens=...)` runs the engines in this process and returns the run;
`kvviz.show(run)` draws it in the cell (the run draws itself too: its `_repr_html_`).
"""
__version__ = "0.1.0"

_NOTEBOOK = ("compare", "show", "Run", "as_run", "summary_table")


def __getattr__(name: str):
    if name in _NOTEBOOK:
        from kvviz import notebook

        return getattr(notebook, name)
    raise AttributeError(f"module 'kvviz' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_NOTEBOOK])
