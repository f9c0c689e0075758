"""vLLM beside the Serve view's schedulers (ServeSpec.vllm_beside): the serving session runs the workload through a
real vLLM as one more lane, in lockstep with the schedulers; the serve record carries vLLM's run through its file;
the Serve view's timeline and counters draw it (pixels of the panels, offscreen) and narrate where it differs; the
page export carries it (headless Chromium). vLLM starts once for the whole file (35-50 s). Skips, saying why,
where no interpreter with vLLM is found ($KVVIZ_VLLM_PYTHON, or this environment); the checks that need no vLLM
(the form's greyed option, a lane vLLM cannot run, an older record) run everywhere.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kvviz.serving.spec import ServeSpec, preset_requests

SCHEDULERS = ("paged", "prefix")
VLLM_RGB = (0xe3, 0x77, 0xc2)  # kvviz.ui.serve.colors.VLLM_COLOR


def spec(**kw) -> ServeSpec:
    base = dict(model="tiny", requests=tuple(preset_requests("shared-prefix")), schedulers=SCHEDULERS, blocks=64,
                block_size=32, vllm_beside=True)
    return ServeSpec(**{**base, **kw})


def drive(session, s: ServeSpec):
    """The worker's loop without Qt: start, then steps() until the results come; (history, the batches)."""
    from kvviz.serving.history import ServeHistory

    history = ServeHistory.from_started(session.start(s, threads=1))
    batches = []
    while True:
        batch = session.steps(0.0)
        history.add(batch.records)
        batches.append(batch.records)
        if batch.results is not None:
            history.set_results(batch.results)
            history.finished = True
            return history, batches


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """shared-prefix on tiny: paged and prefix beside vLLM (prefix caching on, as prefix), one thread."""
    from kvviz.peers.vllm import find_vllm_python
    from kvviz.serving.session import ServeSession

    try:
        find_vllm_python()
    except ValueError as exc:
        pytest.skip(f"no vLLM to run beside the Serve view: {exc}")
    mp = pytest.MonkeyPatch()
    mp.setenv("KVVIZ_CHECKPOINT_CACHE", str(tmp_path_factory.mktemp("checkpoints")))
    session = ServeSession()
    try:
        history, batches = drive(session, spec())
    finally:
        session.close()
        mp.undo()
    return history, batches


def test_vllm_runs_beside_the_schedulers_in_lockstep(served):
    """The lane said how long vLLM was waited for, then came in lockstep (no vLLM step before a scheduler's
    record of the same step), with vLLM's tokens and cached prompt tokens equal to the prefix scheduler's
    per request (docs/vllm.md: shared-prefix agrees request by request)."""
    from kvviz.peers.vllm import VllmStep
    from kvviz.serving.record import PeerProgress

    history, batches = served
    lane = history.vllm
    assert lane.state == "done" and lane.counterpart == "prefix" and lane.run.settings.prefix_caching
    waits = [r.record for b in batches for r in b if isinstance(r.record, PeerProgress)]
    assert waits and all(w.state == "starting" for w in waits)
    assert [w.waited_s for w in waits] == sorted(w.waited_s for w in waits) and waits[-1].waited_s > 1.0
    shown = -1
    for batch in batches:
        top = max((r.record.last_step for r in batch if r.lane in SCHEDULERS), default=None)
        for item in (r.record for r in batch):
            if isinstance(item, VllmStep):
                assert top is None or item.step <= top
                shown = item.step
    assert shown == lane.run.steps[-1].step and len(lane.steps) == len(lane.run.steps)
    prefix = {r.request: r for r in history.results["prefix"]}
    for v in lane.run.requests:
        assert v.token_ids == prefix[v.request].token_ids
        assert v.cached_tokens == prefix[v.request].cached_tokens
    assert sum(v.cached_tokens for v in lane.run.requests) > 0
    texts = history.token_texts["vllm"]
    assert ["".join(texts[r]) for r in sorted(texts)] == ["".join(history.token_texts["prefix"][r])
                                                          for r in sorted(texts)]


def test_the_vllm_lane_round_trips_through_the_record_file(served, tmp_path):
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.record import load_runs, save_runs

    history, _ = served
    runs = history.runs()
    path = save_runs(tmp_path / "serve.json", runs)
    doc = json.loads(path.read_text())
    assert len(doc["vllm_run"]["steps"]) == len(history.vllm.steps)
    back = load_runs(path)
    assert all(r.vllm == runs[0].vllm for r in back) and back[0].vllm is not None
    again = ServeHistory.from_runs(back)
    assert again.vllm.steps == history.vllm.steps and again.vllm.counterpart == "prefix"
    assert again.vllm_counters(10**6) == history.vllm_counters(10**6)
    assert np.array_equal(again.vllm_timeline().cells, history.vllm_timeline().cells)
    doc["vllm_run"]["steps"][1]["emitted"] = [99]  # a request outside the workload: one line, nothing loaded
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"vllm_run: steps\[1\]: emitted must be a list of requests below 10"):
        load_runs(tmp_path / "bad.json")
    del doc["vllm_run"]  # a record saved without vLLM beside
    (tmp_path / "plain.json").write_text(json.dumps(doc))
    plain = load_runs(tmp_path / "plain.json")
    assert all(r.vllm is None for r in plain) and ServeHistory.from_runs(plain).vllm is None


def _near(image: np.ndarray, rgb, tol: int = 40) -> np.ndarray:
    return np.abs(image[..., :3].astype(int) - np.array(rgb)).sum(axis=-1) <= tol


def _pixels(widget) -> np.ndarray:
    from PySide6.QtGui import QImage

    image = widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = image.width(), image.height(), image.bytesPerLine()
    return np.frombuffer(image.constBits(), np.uint8, h * stride).reshape(h, stride)[:, : 3 * w].reshape(h, w, 3).copy()


def test_the_serve_panels_draw_the_vllm_column_and_rows(served, qapp):
    """The timeline draws a vLLM block under the schedulers' (its heading in vLLM's colour, its cells a prefill
    cell per request and decode cells after), and the counters a vLLM column (its heading in vLLM's colour);
    without the lane neither is drawn. The narration says vLLM's counts."""
    from dataclasses import replace

    from kvviz.serving.history import CELL_KINDS
    from kvviz.ui.serve import colors
    from kvviz.ui.serve.narration import narrate
    from kvviz.ui.serve.panels.counters import CountersPanel
    from kvviz.ui.serve.panels.timeline import TimelinePanel

    history, _ = served
    assert colors.VLLM_COLOR == "#{:02x}{:02x}{:02x}".format(*VLLM_RGB)
    without = replace(history, vllm=None, _cache={})
    step = history.vllm.steps[-1].step  # every request's cells drawn, none faded as the lockstep's future
    prefill = tuple(int(colors.CELL_COLORS["prefill"][i: i + 2], 16) for i in (1, 3, 5))
    drawn = {}
    for name, h in (("with", history), ("without", without)):
        timeline = TimelinePanel()
        timeline.resize(900, 700)
        timeline.show_step(h, step, None)
        image = _pixels(timeline)
        drawn[name] = image
        if name == "with":
            k, rect, _cell = timeline.blocks[-1]
            assert k == "vllm" and len(timeline.blocks) == 3
            heading = image[rect.top() - 16: rect.top() - 2, :]
            assert _near(heading, VLLM_RGB).sum() > 50
            row_px = timeline.cell_px[1]
            lines = [image[rect.top() + q * row_px + row_px // 2, rect.left(): rect.right()]
                     for q in range(history.n_requests())]
            found = [int(_near(line[None], prefill, 10).sum()) for line in lines]
            assert all(v > 0 for v in found), found  # every request's first token: a prefill cell
            codes = history.vllm_timeline(timeline.cap).cells
            assert {CELL_KINDS[c] for c in np.unique(codes)} >= {"prefill", "decode", "waiting", "finished"}
        else:
            assert len(timeline.blocks) == 2
        timeline.deleteLater()
    assert _near(drawn["with"], VLLM_RGB).sum() > _near(drawn["without"], VLLM_RGB).sum() + 50
    for name, h in (("with", history), ("without", without)):
        counters = CountersPanel()
        counters.resize(500, 330)
        counters.show_step(h, step, None)
        header = _pixels(counters)[: counters.table.horizontalHeader().height() + 2]
        assert (_near(header, VLLM_RGB, 60).sum() > 5) == (name == "with"), name
        counters.deleteLater()
    said = narrate(history, step)
    c = history.vllm.record_at(step)
    assert f"vLLM, step {step}: {c.running} running; {c.waiting} waiting; {c.blocks_in_use} blocks in use" in said


def test_the_narration_says_where_vllm_differs(served):
    """At a step where the counterpart's counts differ from vLLM's, the sentence gives the counterpart's."""
    from dataclasses import replace

    from kvviz.ui.serve.narration import narrate_vllm

    history, _ = served
    step = history.vllm.steps[3].step
    ours, theirs = history.vllm_counts(step)
    assert theirs is not None
    changed = replace(history.vllm.steps[3], running=ours["running"] + 2)
    lane = replace(history.vllm, steps=history.vllm.steps[:3] + [changed] + history.vllm.steps[4:])
    said = narrate_vllm(replace(history, vllm=lane, _cache={}), step)
    assert f"{ours['running'] + 2} running" in said and f"prefix: {theirs['running']} running" in said


def test_the_serve_page_carries_vllm(served, tmp_path, qapp):
    """The page's narration equals the Serve view's (vLLM's sentence included), its counters hold vLLM's column
    as the counters panel words it, its text panel vLLM's text of request 0 as the text panel has it, and its
    timeline draws vLLM's heading in vLLM's colour."""
    import html_page_cdp

    from kvviz.page.serve import VLLM_COLOR, write_serve_page
    from kvviz.ui.serve import colors
    from kvviz.ui.serve.narration import narrate
    from kvviz.ui.serve.panels.counters import cell_text, rows

    if html_page_cdp.missing():
        pytest.skip(html_page_cdp.missing())
    assert VLLM_COLOR == colors.VLLM_COLOR
    history, _ = served
    from kvviz.serving.history import ServeHistory

    replayed = ServeHistory.from_runs(history.runs())
    steps = [0, replayed.vllm.steps[5].step, replayed.n_steps() - 1]
    browser = html_page_cdp.Browser(1600, 1000)
    try:
        for step in steps:
            write_serve_page(tmp_path / f"p{step}.html", history.runs(), step=step)
            browser.open(tmp_path / f"p{step}.html")
            assert browser.eval("document.body.dataset.step") == str(step)
            said = browser.eval("document.getElementById('narration').textContent")
            assert said == narrate(replayed, step) and "vLLM, step" in said
            cells = browser.eval("""(() => { const out = {};
              for (const tr of document.querySelectorAll('#panel-counters tr[data-key]'))
                out[tr.dataset.key] = [...tr.querySelectorAll('td')].map(td => td.textContent);
              return out; })()""")
            for key, _label in rows():
                assert cells[key][-1] == cell_text(key, replayed.vllm_counters(step)), key
            texts = browser.eval("[...document.querySelectorAll('#panel-text p.said')].map(p => "
                                 "[p.dataset.scheduler, p.querySelector('span').textContent])")
            assert texts[-1] == ["vLLM", replayed.text_of("vllm", 0, step)[1]]
            image, png = browser.screenshot()
            x, y, w, h = browser.rect("#panel-timeline canvas")
            band = image[y + 2 * h // 3: y + 2 * h // 3 + 16, x: x + w]  # vLLM's heading: the third band's top
            assert _near(band, VLLM_RGB, 60).sum() > 50
            assert browser.eval("window.kvviz.errors") == []
        shots = Path(__file__).resolve().parent.parent / "build" / "html-page-shots"
        shots.mkdir(parents=True, exist_ok=True)
        (shots / "serve-vllm.png").write_bytes(png)
    finally:
        browser.close()


def test_a_lane_vllm_cannot_run_fails_in_one_line_and_the_schedulers_go_on(tmp_path, monkeypatch):
    """A request longer than the form's pool holds, with static batching only (its own pool is ample): vLLM is
    never started; its lane says why once, the scheduler runs."""
    from kvviz.serving.record import PeerProgress
    from kvviz.serving.session import ServeSession

    monkeypatch.setenv("KVVIZ_CHECKPOINT_CACHE", str(tmp_path))
    session = ServeSession()
    try:
        history, batches = drive(session, spec(blocks=4, schedulers=("static",)))
    finally:
        session.close()
    failed = [r.record for b in batches for r in b if isinstance(r.record, PeerProgress)]
    assert [f.state for f in failed] == ["failed"] and "more than the pool's 4" in failed[0].message
    assert history.vllm.state == "failed" and history.n_steps("static") > 0 and history.results["static"]


def test_the_form_greys_vllm_beside_with_the_reason(qapp, monkeypatch, tmp_path):
    from kvviz.peers.vllm import ENV_PYTHON
    from kvviz.ui.serve.form import ServeForm

    monkeypatch.delenv(ENV_PYTHON, raising=False)
    form = ServeForm()
    if not form.vllm_found():  # vLLM importable here: its absence cannot be shown
        pytest.skip("vLLM is importable in this environment")
    assert not form.vllm_check.isEnabled() and ENV_PYTHON in form.vllm_check.toolTip()
    form._vllm_found = ""  # found: a block size vLLM's CPU attention refuses, then one it takes
    form.block_size.setValue(48)
    assert not form.vllm_check.isEnabled() and "multiple of 32" in form.vllm_check.toolTip()
    form.block_size.setValue(32)
    assert form.vllm_check.isEnabled()
    form.vllm_check.setChecked(True)
    assert form.spec().vllm_beside
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 4}))
    form.model_combo.setCurrentText(str(folder))
    form.show_problem()
    assert not form.vllm_check.isEnabled() and "the model's is 16" in form.vllm_check.toolTip()
    assert not form.spec().vllm_beside


def test_ending_a_run_while_vllm_starts_leaves_no_vllm_process(tmp_path, monkeypatch):
    """Stop (ServeSession.end) while vLLM starts: its child (the process run_vllm hands back) is ended."""
    import os

    from kvviz.peers.vllm import find_vllm_python
    from kvviz.serving.record import ServeBatch
    from kvviz.serving.session import ServeSession

    try:
        find_vllm_python()
    except ValueError as exc:
        pytest.skip(f"no vLLM to start: {exc}")
    monkeypatch.setenv("KVVIZ_CHECKPOINT_CACHE", str(tmp_path))
    session = ServeSession()
    try:
        session.start(spec(requests=tuple(preset_requests("course-batch")), schedulers=("prefix",)), threads=1)
        pid = None
        for _ in range(200):  # steps() waits up to PROGRESS_S each: the child shows within a few seconds
            session.steps(0.25)
            pid = session.vllm_pid()
            if pid:
                break
        assert pid and os.path.exists(f"/proc/{pid}")
        session.end()
        assert session.vllm_pid() is None
        assert not os.path.exists(f"/proc/{pid}"), "vLLM's child outlived Stop (end() joins the thread that reaps it)"
        assert session.steps(0.0) == ServeBatch((), {})  # nothing left running: no lane, no scheduler
    finally:
        session.close()


def test_the_forms_vllm_beside_is_kept_between_launches(qapp, tmp_path):
    from PySide6.QtCore import QSettings

    from kvviz.ui.serve.form import ServeForm

    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    form = ServeForm()
    form._vllm_found = ""
    form.block_size.setValue(32)
    form.vllm_check.setChecked(True)
    form.save(settings)
    settings.sync()
    again = ServeForm()
    again._vllm_found = ""
    again.restore(settings)
    assert again.vllm_check.isChecked() and again.block_size.value() == 32 and again.spec().vllm_beside
