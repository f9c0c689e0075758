"""kvviz.compare and kvviz.show refuse what they cannot run or draw with a one-line ValueError naming the
argument, before any model loads."""
from __future__ import annotations

import pytest

import kvviz


@pytest.mark.parametrize("kwargs, says", [
    (dict(prompt=None), "prompt must be text (str), not NoneType"),
    (dict(prompt=b"hi"), "prompt must be text (str), not bytes"),
    (dict(threads=0), "threads must be at least 1"),
    (dict(tokens=0), "tokens must be at least 1"),
    (dict(tokens=True), "tokens must be"),
    (dict(engines=[1, 2]), "engines must be engine names"),
    (dict(engines=None), "engines must be engine names"),
    (dict(temperature=float("nan")), "temperature must be"),
    (dict(kernel="mkl"), "unknown kernel 'mkl'; choose from torch, native"),
    (dict(kernel=3), "kernel must be a kernel's name, not int"),
    (dict(kernel="native", engines=("naive", "static")), "naive cannot decode with the C step kernel"),
])
def test_compare_refuses_a_bad_argument_in_one_line_naming_it(kwargs, says, monkeypatch):
    import kvviz.runtime.session

    def no_model(*args, **kw):
        raise AssertionError("a model was loaded for a call that should have been refused")

    monkeypatch.setattr(kvviz.runtime.session.EngineSession, "_load", no_model)
    args = dict(prompt="Hello", tokens=3, model="tiny-random")
    args.update(kwargs)
    with pytest.raises(ValueError) as err:
        kvviz.compare(args.pop("prompt"), **args)
    assert says in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("saved, says", [(None, "NoneType"), (42, "int"), ({"a": 1}, "dict"), ((1, 2), "tuple")])
def test_show_refuses_what_is_not_a_run_in_one_line(saved, says):
    with pytest.raises(ValueError, match=f"^saved must be a Run, a saved run, an \\(info, traces\\) pair or a trace "
                                         f"file's path, not {says}$"):
        kvviz.show(saved)
