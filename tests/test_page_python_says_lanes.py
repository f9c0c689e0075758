"""A kernel comparison's lanes are named in the compare view's narration as the panels and the status bar name them
(kvviz.ui.style.engine_label: "concat · PyTorch", the kernel in the reader's language), and the page names them with
the same words (its data's per-engine label, which page.js writes where Python's narration marks an engine), in
English and in Chinese."""
from __future__ import annotations

import re

import pytest


@pytest.fixture(scope="module")
def run():
    pytest.importorskip("torch")
    import kvviz

    return kvviz.compare("The cache keeps the keys and the values", engines=("concat", "static"), tokens=4,
                         model="tiny", threads=1, kernels=("torch", "native"))


def test_the_narration_names_each_lane_as_the_panels_do_in_the_window_and_the_page(run, qapp):
    from kvviz.page import ENGINE_MARK, page_data
    from kvviz.ui import i18n
    from kvviz.ui.history import RunHistory
    from kvviz.ui.narration import describe
    from kvviz.ui.style import engine_label

    data = page_data(run.info, run.traces)
    history = RunHistory(info=run.info, traces=run.traces)
    labels = {e["order"]: e["label"] for e in data["engines"]}
    assert "concat@torch" in run.traces
    try:
        for lang in ("en", "zh_CN"):
            i18n.set_language(lang)
            for e in data["engines"]:
                assert e["label"][lang] == engine_label(e["name"]), (lang, e["name"])
            for step in range(run.n_steps):
                window = describe(history, step, lambda engine, order: "#000")
                names = re.findall(r'<b style="color:#000">([^<]*)</b>', window)
                assert names and "@" not in "".join(names), (lang, step, names)
                shown = {chr(ENGINE_MARK + order): f'<b style="color:#000">{said[lang]}</b>'
                         for order, said in labels.items()}
                page = re.sub("[\ue000-\uf8ff]", lambda m, shown=shown: shown[m.group()], data["narration"][lang][step])
                assert page == window, (lang, step)
        i18n.set_language("en")
        window = describe(history, run.n_steps - 1, lambda engine, order: "#000")
        assert "concat · PyTorch" in window and "static · C step" in window
    finally:
        i18n.set_language("en")
