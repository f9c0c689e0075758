"""docs/notebook.ipynb, executed as a reader would run it (nbclient, a fresh kernel): every cell runs, the run
draws itself as the page (an iframe srcdoc holding the records) and kvviz.show draws it in Chinese at step 5.
Skips, saying why, where nbclient or ipykernel is missing."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "docs" / "notebook.ipynb"
nbclient = pytest.importorskip("nbclient", reason="nbclient is missing (pip install -e '.[test]')")
nbformat = pytest.importorskip("nbformat", reason="nbformat is missing (pip install -e '.[test]')")
pytest.importorskip("ipykernel", reason="ipykernel is missing (pip install -e '.[test]')")


def page_start(frame: str) -> dict:
    page = html.unescape(re.search(r'srcdoc="(.*?)"', frame, re.S).group(1))
    data = json.loads(re.search(r'<script id="kvviz-data" type="application/json">(.*?)</script>', page, re.S).group(1))
    steps = len(data["engines"][0]["steps"]["pos_stop"])
    return data["start"] | {"engines": [e["name"] for e in data["engines"]], "steps": steps}


def shown_html(cell) -> str:
    """The HTML a cell displayed (its execute_result or display_data)."""
    return next(o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {}))


def test_the_example_notebook_runs(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not any(o.get("output_type") == "error" for o in c.outputs) for c in code)
    shown = shown_html(code[0])
    assert page_start(shown) == {"step": 19, "lang": "en", "embedded": True,
                                 "engines": ["naive", "concat", "static", "paged"], "steps": 20}
    printed = code[1].outputs[0]["text"].splitlines()
    assert [line.split(":")[0].strip() for line in printed] == ["naive", "concat", "static", "paged"]
    assert all(line.endswith("same tokens as naive: True") for line in printed)
    assert page_start(shown_html(code[2]))["step"] == 5
    assert page_start(shown_html(code[2]))["lang"] == "zh_CN"
    assert code[3].outputs[0]["text"].strip() == "True True"
