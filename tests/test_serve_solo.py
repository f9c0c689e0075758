"""Every request's tokens checked against its own solo run, where a user sees it: the library's check
(kvviz.serving.solo, SoloCheck) on a real workload and on a planted difference, `kvviz serve`'s line per
scheduler and its exit status, the Serve worker's results carrying the solo runs, and the text panel's line."""
from __future__ import annotations

import dataclasses

import pytest

from kvviz.serving.record import SCHEDULERS, SchedulerSettings, SoloCheck, solo_checks
from kvviz.serving.workload import course_batch


class _Ids:
    """course-batch's prompts as bytes, as the byte models read them."""

    def encode(self, text):
        return list(text.encode("utf-8"))

    def decode(self, ids):
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


def checked_runs(model, settings: SchedulerSettings, schedulers=SCHEDULERS):
    from kvviz.serving.engine import serve, tokenize
    from kvviz.serving.solo import run_with_solo, solo_runs

    wl, tok = course_batch(), _Ids()
    solo = solo_runs(model, tokenize(wl, tok), wl, settings)
    return [run_with_solo(serve(model, tok, wl, k, settings), solo) for k in schedulers], solo


def planted(run, request: int, token: int):
    """The run with request's token `token` changed (a scheduler that got it wrong)."""
    res = run.results[request]
    ids = list(res.token_ids)
    ids[token] = (ids[token] + 1) % 256
    results = list(run.results)
    results[request] = dataclasses.replace(res, token_ids=tuple(ids))
    return dataclasses.replace(run, results=tuple(results))


@pytest.mark.parametrize("sampling", [dict(), dict(temperature=0.9, top_k=40, seed=3)], ids=["greedy", "seeded"])
def test_every_scheduler_equals_the_solo_runs_on_course_batch(tiny_random, sampling):
    runs, solo = checked_runs(tiny_random, SchedulerSettings(max_batch=4, blocks=24, block_size=16, **sampling))
    assert [len(s) for s in solo] == [r.new_tokens for r in course_batch().requests]
    for run in runs:
        assert solo_checks(run) == tuple(SoloCheck(run.scheduler, i, True) for i in range(4)), run.scheduler
    if sampling:  # the seed matters: a solo run with another seed is another text, and the check says so
        from kvviz.serving.engine import tokenize
        from kvviz.serving.solo import run_with_solo, solo_runs

        other = solo_runs(tiny_random, tokenize(course_batch(), _Ids()), course_batch(),
                          SchedulerSettings(max_batch=4, blocks=24, block_size=16, **{**sampling, "seed": 4}))
        assert not all(c.equal for c in solo_checks(run_with_solo(runs[0], other)))


def test_a_planted_difference_names_the_request_token_and_step(tiny_random):
    runs, _ = checked_runs(tiny_random, SchedulerSettings(max_batch=4, blocks=24, block_size=16), ("paged",))
    run = planted(runs[0], 2, 5)
    steps = [s.step for s in run.steps for r, _t in s.emitted if r == 2]
    checks = solo_checks(run)
    assert [c.equal for c in checks] == [True, True, False, True]
    assert checks[2] == SoloCheck("paged", 2, False, token=5, step=steps[5])
    # one token short: it differs where the shorter ends, at no step of its own
    from kvviz.serving.record import compare_solo

    assert compare_solo("paged", 1, (7, 8), (7, 8, 9), (4, 5)) == SoloCheck("paged", 1, False, token=2, step=None)
    assert compare_solo("paged", 1, (7, 8, 9), (7, 8), (4, 5, 6)) == SoloCheck("paged", 1, False, token=2, step=6)
    # a record without solo runs is not checked
    assert solo_checks(dataclasses.replace(run, results=tuple(dataclasses.replace(r, solo_token_ids=None)
                                                              for r in run.results))) is None


def test_the_solo_runs_survive_the_json_record(tiny_random, tmp_path):
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.record import load_runs, runs_to_dict, save_runs

    runs, solo = checked_runs(tiny_random, SchedulerSettings(max_batch=4, blocks=24, block_size=16), ("static",))
    run = planted(runs[0], 3, 0)
    back = load_runs(save_runs(tmp_path / "s.json", [run]))[0]
    assert [r.solo_token_ids for r in back.results] == list(solo)
    assert solo_checks(back) == solo_checks(run) and not solo_checks(back)[3].equal
    assert ServeHistory.from_runs((back,)).solo_checks("static") == solo_checks(run)
    doc = runs_to_dict([run])  # a record saved before the check: loads, unchecked
    for r in doc["runs"][0]["results"]:
        del r["solo_token_ids"]
    from kvviz.serving.record import runs_from_dict

    assert solo_checks(runs_from_dict(doc)[0]) is None


# -- kvviz serve -----------------------------------------------------------------------------------
def _serve(capsys, *argv):
    from kvviz.cli import main

    rc = main(["serve", "--workload", "course-batch", "--threads", "1", "--model", "tiny-random", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("schedulers", ["prefix", "static,paged,chunked"])
def test_serve_prints_a_solo_line_per_scheduler(torch_cpu, capsys, schedulers):
    rc, out, err = _serve(capsys, "--schedulers", schedulers)
    assert rc == 0, err
    for k in schedulers.split(","):
        assert f"{k}: every request's tokens equal its own solo run (4 of 4)" in out.splitlines(), out
    assert "solo runs: 4 requests alone through the static engine in" in out


def test_serve_exits_1_on_a_planted_difference(torch_cpu, capsys, monkeypatch, tmp_path):
    import json

    import kvviz.serving.solo as solo_module

    real = solo_module.solo_runs

    def wrong(*args, **kw):  # request 1 (counted from 0, as the Serve view does) differs from its third token
        solo = [list(s) for s in real(*args, **kw)]
        solo[1][2] = (solo[1][2] + 1) % 256
        return tuple(tuple(s) for s in solo)

    monkeypatch.setattr(solo_module, "solo_runs", wrong)
    path = tmp_path / "s.json"
    rc, out, err = _serve(capsys, "--schedulers", "static,continuous", "--json", str(path))
    assert rc == 1
    assert len(err.strip().splitlines()) == 1 and "differ" in err, err
    lines = [line for line in out.splitlines() if "solo run" in line and "DIFFER" in line]
    assert len(lines) == 2, out
    for k, line in zip(("static", "continuous"), lines):
        assert line.startswith(f"{k}: tokens DIFFER from the solo runs: request 1 from token 3 (step ")
        assert line.endswith("; 3 of 4 requests equal")
    doc = json.loads(path.read_text())
    assert doc["identical"] is False and doc["runs"][0]["results"][1]["solo_token_ids"][2] is not None


def test_messages_number_requests_from_0_and_say_1_block(torch_cpu, capsys):
    rc, out, err = _serve(capsys, "--schedulers", "paged", "--blocks", "2")
    # course-batch's second request (30 + 10 tokens) needs 3 blocks of 16: request 1, counted from 0
    assert rc == 2 and "is smaller than request 1 needs (3 blocks)" in err, err
    from kvviz.serving.engine import blocks_word

    assert (blocks_word(1), blocks_word(2)) == ("1 block", "2 blocks")


# -- the Serve view --------------------------------------------------------------------------------
@pytest.mark.parametrize("isolate", [False, True], ids=["thread", "process"])
def test_the_worker_hands_the_solo_runs_with_the_results(qtbot, tiny_random, isolate):
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.spec import ServeSpec, preset_requests
    from kvviz.ui.serve.worker import ServeWorker

    worker = ServeWorker(isolate=isolate, threads=1)
    spec = ServeSpec(model="tiny-random", requests=tuple(preset_requests("course-batch")),
                     schedulers=("static", "paged"), max_batch=4, blocks=24, block_size=16, token_budget=32,
                     name="course-batch", run_id="r1")
    got = {}
    worker.run_started.connect(lambda run_id, started: got.setdefault("history", ServeHistory.from_started(started)))
    worker.steps_traced.connect(lambda run_id, batch: got["history"].add(batch))
    worker.results_ready.connect(lambda run_id, results: got["history"].set_results(results))
    with qtbot.waitSignal(worker.run_finished, timeout=120_000):
        worker.start_run(spec)
    history = got["history"]
    for k in ("static", "paged"):
        assert all(r.solo_token_ids == r.token_ids for r in history.results[k])
        assert history.solo_checks(k) == tuple(SoloCheck(k, i, True) for i in range(4))
    worker.shut_down()


def test_the_text_panel_shows_the_check(qtbot, tiny_random):
    from kvviz.serving.history import ServeHistory
    from kvviz.ui.serve.panels.text import DIFFER_COLOR, SAME_COLOR, TextPanel

    runs, _ = checked_runs(tiny_random, SchedulerSettings(max_batch=4, blocks=24, block_size=16), ("static", "paged"))
    panel = TextPanel()
    qtbot.addWidget(panel)
    for step in (0, 30):  # the line is the run's, whatever the step shown
        panel.show_step(ServeHistory.from_runs(tuple(runs)), step, None)
        text = panel.browser.toPlainText()
        assert "course-batch: 4 requests" in text
        assert "static tokens = solo runs: 4 of 4" in text and "paged tokens = solo runs: 4 of 4" in text
        assert SAME_COLOR in panel._html and DIFFER_COLOR not in panel._html.split("solo")[-1]
    paged = planted(runs[1], 2, 5)
    step = [s.step for s in paged.steps for r, _t in s.emitted if r == 2][5]
    panel.show_step(ServeHistory.from_runs((runs[0], paged)), 0, None)
    text = panel.browser.toPlainText()
    assert "static tokens = solo runs: 4 of 4" in text
    assert f"paged tokens ≠ solo runs: 3 of 4 equal; request 2 from token 6 (step {step})" in text
    assert DIFFER_COLOR in panel._html
    # a run without solo runs (stopped, or an old record): no line
    bare = tuple(dataclasses.replace(r, results=tuple(dataclasses.replace(x, solo_token_ids=None) for x in r.results))
                 for r in runs)
    panel.show_step(ServeHistory.from_runs(bare), 0, None)
    assert "solo" not in panel.browser.toPlainText()
