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

from kvviz.page.serve import SCHEDULER_COLORS

SCHEDULERS = "static,paged,prefix"


def _serve(path: Path, workload: str, *options: str) -> Path:
    done = subprocess.run([sys.executable, "-m", "kvviz", "serve", "--workload", workload, *options,
                           "--threads", "1", "--json", str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> Path:
    return _serve(tmp_path_factory.mktemp("serve") / "serve.json", "course-batch", "--schedulers", SCHEDULERS)


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
            check_step(browser, history, step)
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


def check_step(browser, history, step: int) -> None:
    """The page shows `step`, with the Serve view's narration (kvviz.ui.serve.narration.narrate) and counters
    (ServeHistory.counters, as the counters panel words them)."""
    from kvviz.ui.serve.narration import narrate
    from kvviz.ui.serve.panels.counters import cell_text, rows

    assert browser.eval("document.body.dataset.step") == str(step)
    assert browser.eval("document.getElementById('narration').textContent") == narrate(history, step)
    cells = browser.eval("""(() => { const out = {};
      for (const tr of document.querySelectorAll('#panel-counters tr[data-key]'))
        out[tr.dataset.key] = [...tr.querySelectorAll('td')].map(td => td.textContent);
      return out; })()""")
    for name, _label in rows():
        assert cells[name] == [cell_text(name, history.counters(k, step)) for k in history.schedulers], name


def _near(image, x, y, rgb, tol=60, r=1) -> bool:
    """A pixel within r of (x, y) within tol (summed over channels) of the colour."""
    patch = image[int(y) - r: int(y) + r + 1, int(x) - r: int(x) + r + 1].astype(int)
    return bool((np.abs(patch - np.array(rgb)).sum(axis=-1) <= tol).any())


def _rgb(color: str) -> tuple[int, int, int]:
    return tuple(int(color[i: i + 2], 16) for i in (1, 3, 5))


@pytest.fixture(scope="module")
def tight(tmp_path_factory) -> Path:
    """random:6 (arrivals at steps 0 to 9) in a pool of 6 blocks: paged preempts twice (two crosses)."""
    return _serve(tmp_path_factory.mktemp("serve") / "tight.json", "random:6", "--schedulers", "paged,reserve",
                  "--blocks", "6")


@pytest.mark.skipif(bool(html_page_cdp.missing()), reason=html_page_cdp.missing() or "runs")
def test_the_serve_pages_usage_latency_and_text(record, tight, tmp_path, qapp):
    """The three panels the Serve view has beside the timeline, pool and counters: pool use and batch size
    (pixels of each step's point and of each preemption's cross), latency per request (the bars' heights in
    pixels against ServeHistory.latency) and the selected request's text (ServeHistory.text_of), in English
    and in Chinese, after a click on the timeline chooses a request."""
    from kvviz.cli import main
    from kvviz.page.serve import PROMPT_CHARS
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.record import load_runs
    from kvviz.ui.serve.panels import text as text_panel

    assert PROMPT_CHARS == text_panel.PROMPT_CHARS
    browser = html_page_cdp.Browser(1600, 1000)
    try:
        for path, step in ((tight, 60), (record, 9)):
            out = tmp_path / path.stem
            assert main(["export", "--from", str(path), "--out", str(out), "--html", "--step", str(step)]) == 0
            runs = load_runs(path)
            history = ServeHistory.from_runs(runs)
            browser.open(out / "run.html")
            assert browser.eval("document.body.dataset.step") == str(step)
            image, png = browser.screenshot()
            shots = Path(__file__).resolve().parent.parent / "build" / "html-page-shots"
            shots.mkdir(parents=True, exist_ok=True)
            (shots / f"serve-{path.stem}.png").write_bytes(png)
            # Pool use: each scheduler's line passes through its point at every step (the last one drawn is on
            # top; the others where they differ from it); a cross (four arms) exactly at the preemptions.
            cx, cy, _w, _h = browser.rect("#panel-usage canvas")
            (left, top, pw, ph), (bl, bt, bpw, bph) = browser.eval("JSON.parse(document.querySelector("
                                                                   "'#panel-usage canvas').dataset.plots)")
            x_max = max(1, history.n_steps() - 1)
            y_top = max(history.settings[k].blocks for k in history.schedulers) * 1.05
            last = history.schedulers[-1]
            batch_top = max(max(history.series(k)["batch"]) for k in history.schedulers) * 1.05
            crosses = {}
            lasts = history.series(last)
            for k in history.schedulers:
                used, batch, at = history.series(k)["used"], history.series(k)["batch"], history.series(k)["step"]
                rgb = _rgb(SCHEDULER_COLORS[k])
                for j in range(len(used)):
                    x = cx + left + at[j] / x_max * pw
                    y = cy + top + ph - used[j] / y_top * ph
                    theirs = {key: lasts[key][np.searchsorted(lasts["step"], at[j], side="right") - 1]
                              for key in ("used", "batch")}  # the last scheduler's point at this step
                    if at[j] != step and (k == last or used[j] != theirs["used"]):
                        assert _near(image, x, y, rgb, r=2), (k, j)
                    if at[j] != step and (k == last or batch[j] != theirs["batch"]):
                        assert _near(image, cx + bl + at[j] / x_max * bpw, cy + bt + bph - batch[j] / batch_top * bph,
                                     rgb, r=2), (k, j, "batch")
                    arms = [_near(image, x + dx, y + dy, rgb, r=1) for dx in (-3, 3) for dy in (-3, 3)]
                    crosses.setdefault(k, []).append(all(arms))
                hit = history.series(k)["preemptions"] > 0
                assert crosses[k] == list(hit), k
            assert sum(sum(v) for v in crosses.values()) == sum(len(s.preemptions) for r in runs for s in r.steps)
            assert path != tight or (sum(crosses["paged"]) >= 1 and any(r.arrival for r in history.workload.requests))
            # The step shown is a vertical line through both plots.
            x = int(round(cx + left + step / x_max * pw))
            column = image[cy + top + 2: cy + top + ph - 2, x - 1: x + 2].astype(int)
            dark = (np.abs(column - 0x55).sum(axis=-1) <= 30).any(axis=1)
            assert dark.mean() > 0.8
            # Latency: each bar's top at its value of ServeHistory.latency as of this step.
            lx, ly, _w, _h = browser.rect("#panel-latency canvas")
            boxes = browser.eval("JSON.parse(document.querySelector('#panel-latency canvas').dataset.plots)")
            n, width = history.n_requests(), 0.8 / len(history.schedulers)
            bars = 0
            for i, k in enumerate(history.schedulers):
                values = history.latency(k, step)
                for j, (pleft, ptop, ppw, pph, y_max) in enumerate(boxes):
                    for q in range(n):
                        xq = lx + pleft + (q - 0.4 + width * (i + 0.5) + 0.6) / (n - 1 + 1.2) * ppw
                        col = image[round(ly + ptop): round(ly + ptop + pph), round(xq)].astype(int)
                        mine = np.nonzero(np.abs(col - np.array(_rgb(SCHEDULER_COLORS[k]))).sum(axis=-1) <= 30)[0]
                        if np.isnan(values[j][q]):
                            assert mine.size == 0, (k, j, q)
                            continue
                        bars += 1
                        assert mine.size == pytest.approx(values[j][q] / y_max * pph, abs=2.5), (k, j, q)
            assert bars > n
            # The text of request 0, then of the request a click on the timeline's first band picks.
            tx, ty, tw, th = browser.rect("#panel-timeline canvas")
            band = th / len(history.schedulers)
            for request in (0, n - 1):
                if request:
                    browser.click(tx + tw / 2, ty + 16 + (request + 0.5) * (band - 22) / n)
                said = browser.eval("""(() => { const out = {};
                  for (const p of document.querySelectorAll('#panel-text p.said'))
                    out[p.dataset.scheduler] = p.querySelector('span').textContent;
                  return [document.querySelector('#panel-text h2').textContent,
                          document.querySelector('#panel-text .prompt-text').textContent, out]; })()""")
                assert said[0] == f"Request {request}: its text"
                marked = browser.screenshot()[0][ty: ty + th, tx: tx + 30]  # the label margin, each band
                rows = np.nonzero((np.abs(marked.astype(int) - (0xff, 0xd5, 0x4f)).sum(axis=-1) <= 30).any(axis=1))[0]
                bands = {int(y // band) for y in rows}
                assert bands == set(range(len(history.schedulers))), bands  # a mark in every scheduler's band
                for b in bands:  # the mark's middle on the request's row, one row tall
                    mine = rows[rows // band == b]
                    assert int((np.median(mine) % band - 16) / (band - 22) * n) == request, (request, b)
                    assert len(mine) == pytest.approx((band - 22) / n, abs=2)
                prompt = history.workload.requests[request].prompt
                assert said[1] == (prompt if len(prompt) <= PROMPT_CHARS else "…" + prompt[-PROMPT_CHARS:])
                assert said[2] == {k: history.text_of(k, request, step)[1] for k in history.schedulers}
                assert any(said[2].values()) or request  # request 0 has words by the step tested
            browser.eval("document.querySelector('#langs button[data-lang=zh_CN]').click()")
            assert browser.eval("document.querySelector('#panel-usage h2').textContent") == "块池占用与批次大小"
            assert browser.eval("document.querySelector('#panel-text h2').textContent") == f"请求 {n - 1} 的文本"
            assert browser.eval("window.kvviz.untranslated") == []
            browser.eval("document.querySelector('#langs button[data-lang=en]').click()")
        browser.pump()
        assert not browser.problems, browser.problems
        assert browser.eval("window.kvviz.errors") == []
    finally:
        browser.close()
