"""scripts/count_lines.py on a small tree of known sizes: its lines per language, largest module, literal lists of
the exact engines and import cycles, and its one-line refusal of a folder with no kvviz/ in it."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def count_lines():
    spec = importlib.util.spec_from_file_location("count_lines", ROOT / "scripts" / "count_lines.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_counts_of_a_tree_of_known_sizes(tmp_path, capsys):
    pkg = tmp_path / "kvviz"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from kvviz import b\n\nENGINES = ('naive', 'concat', 'static', 'paged')\n")
    (pkg / "b.py").write_text("def f():\n    from kvviz import a\n    return a, 'naive,concat,static,paged'\n")
    (pkg / "sub" / "__init__.py").write_text("X = ['naive', 'concat']\n")
    (pkg / "page.js").write_text('const E = ["paged", "static", "concat", "naive"];\n\n')
    (pkg / "step.c").write_text("int x;\n")
    assert count_lines().main(["--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == ["Python: 7 lines in 4 files", "JavaScript: 2 lines in 1 files", "C: 1 lines in 1 files",
                       "largest module: kvviz/a.py (3 lines)"]
    assert out[4] == ("literal lists of the exact engines (concat, naive, paged, static) outside kvviz/catalog.py: 3 "
                      "(kvviz/a.py:3, kvviz/b.py:3, kvviz/page.js:1)")
    assert out[5:] == ["import cycles (groups of modules that import each other): 1", "  kvviz.a, kvviz.b"]


def test_a_folder_without_kvviz_is_refused_in_one_line(tmp_path, capsys):
    assert count_lines().main(["--root", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"count_lines: {tmp_path}: no kvviz/ folder to count\n"
