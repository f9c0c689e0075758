"""A serve record's page (kvviz export --from SERVE.json --html) in headless Chromium: the narration equals the
Serve view's (kvviz.ui.serve.narration.narrate) at three steps, the counters its cells, and the timeline's
pixels hold padding and prefill cells in the proportion the records count. Colours equal the Serve view's."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import html_page_cdp
import numpy as np
import pytest

SCHEDULERS = "static,paged,prefix"


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("serve") / "serve.json"
    done = subprocess.run([sys.executable, "-m", "kvviz", "serve", "--workload", "course-batch", "--schedulers",
                           SCHEDULERS, "--threads", "1", "--json", str(path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return path


def test_the_serve_views_colours():
    import kvviz.page.serve as page
    from kvviz.serving.history import CELL_KINDS
    from kvviz.ui.serve import colors

    assert page.CELL_COLORS == colors.CELL_COLORS and page.CELL_KINDS == CELL_KINDS
    assert page.SCHEDULER_COLORS == colors.SCHEDULER_COLORS and page.REQUEST_PALETTE == colors._REQUEST_PALETTE


def test_a_refused_serve_export(record, tmp_path, capsys):
    from kvviz.cli import main

    assert main(["export", "--from", str(record), "--out", str(tmp_path / "o"), "--csv"]) == 2
    assert "--html" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(bool(html_page_cdp.missing()), reason=html_page_cdp.missing() or "runs")
def test_the_serve_page_in_chromium(record, tmp_path, qapp):
    from kvviz.cli import main
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.record import load_runs
    from kvviz.ui.serve.narration import narrate
    from kvviz.ui.serve.panels.counters import cell_text, rows

    assert main(["export", "--from", str(record), "--out", str(tmp_path / "o"), "--html", "--step", "0"]) == 0
    runs = load_runs(record)
    history = ServeHistory.from_runs(runs)
    browser = html_page_cdp.Browser(1600, 1000)
    try:
        browser.open(tmp_path / "o" / "run.html")
        last = max(history.n_steps(k) for k in history.schedulers) - 1
        for key, step in ((None, 0), ("ArrowRight", 1), ("End", last)):
            if key:
                browser.press(key)
            assert browser.eval("document.body.dataset.step") == str(step)
            assert browser.eval("document.getElementById('narration').textContent") == narrate(history, step)
            cells = browser.eval("""(() => { const out = {};
              for (const tr of document.querySelectorAll('#panel-counters tr[data-key]'))
                out[tr.dataset.key] = [...tr.querySelectorAll('td')].map(td => td.textContent);
              return out; })()""")
            for name, _label in rows():
                assert cells[name] == [cell_text(name, history.counters(k, step)) for k in history.schedulers], name
        image, png = browser.screenshot()
        shots = Path(__file__).resolve().parent.parent / "build" / "html-page-shots"
        shots.mkdir(parents=True, exist_ok=True)
        (shots / "serve.png").write_bytes(png)
        x, y, w, h = browser.rect("#panel-timeline canvas")
        band = image[y: y + h // 3, x: x + w]  # the first scheduler's timeline: static
        count = {kind: int(np.all(band == np.array(rgb, dtype=np.uint8), axis=-1).sum())
                 for kind, rgb in (("padding", (0xe4, 0x57, 0x2e)), ("prefill", (0xff, 0xb0, 0x00)))}
        static = next(r for r in runs if r.scheduler == "static")
        slots = {kind: sum(s.slots_of(kind) for s in static.steps) for kind in ("padding", "prefill")}
        assert slots["padding"] > 0 and count["padding"] > 0
        assert count["padding"] / count["prefill"] == pytest.approx(slots["padding"] / slots["prefill"], rel=0.15)
        browser.pump()
        assert not browser.problems, browser.problems
        assert browser.eval("window.kvviz.errors") == []
    finally:
        browser.close()
