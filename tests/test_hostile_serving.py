"""Legal but hostile serving input: a request arriving a million steps late costs one record for the idle
stretch (engine, record file, history, page), not one per step; a record naming one scheduler twice, an
empty --workload and a stdout closed early each end in one line, never a traceback."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import html_page_cdp
import numpy as np
import pytest
from test_html_page_serve import check_step

from kvviz.serving.record import SCHEDULERS, SchedulerSettings
from kvviz.serving.workload import MAX_ARRIVAL, Request, Workload

LATE = 9_000  # steps: long enough that one record per step shows, short enough for any engine to walk
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tiny(torch_cpu):
    from kvviz.models.presets import load_model, load_tokenizer

    return load_model("tiny", torch_cpu.device("cpu")), load_tokenizer("tiny")


def gappy() -> Workload:
    """Idle from step 0 to 2,999, busy, idle again until 8,999, busy."""
    return Workload("gappy", (Request(prompt="abcd", new_tokens=4, arrival=3_000),
                              Request(prompt="efgh", new_tokens=3, arrival=LATE)))


SETTINGS = SchedulerSettings(max_batch=4, blocks=4, block_size=4)


@pytest.fixture(scope="module")
def runs(tiny):
    from kvviz.serving.engine import serve

    return tuple(serve(*tiny, gappy(), k, SETTINGS) for k in SCHEDULERS)


def expanded(steps):
    """Each stretch as the steps it stands for, one record each (the first keeps the stretch's latency)."""
    return [replace(s, step=s.step + i, span=1, latency_ms=s.latency_ms if i == 0 else 0.0)
            for s in steps for i in range(s.span)]


def test_idle_steps_are_one_record_per_stretch(runs):
    for run in runs:
        assert run.n_steps == run.summary().steps > LATE
        assert len(run.steps) < 20, run.scheduler  # the two stretches and the few busy steps
        stretches = [s for s in run.steps if s.span > 1]
        assert [s.step for s in stretches][0] == 0 and stretches[-1].last_step == LATE - 1
        for s in stretches:
            assert not s.work and not s.admitted and all(r.state == "finished" for r in s.requests)
            assert s.pool.used_blocks == 0
        assert [s.step for s in run.steps] == list(np.cumsum([0] + [s.span for s in run.steps[:-1]]))
        by_request = {r.request: r for r in run.results}
        assert by_request[1].admitted_step == LATE and by_request[0].admitted_step == 3_000
        # every figure of the summary is what the same steps, one record each, give
        flat = replace(run, steps=tuple(expanded(run.steps))).summary()
        assert replace(run.summary(), wall_ms=0.0) == replace(flat, wall_ms=0.0)


def test_a_stretch_saves_loads_and_refuses_work(runs, tmp_path):
    from kvviz.serving.record import dumps_runs, load_runs, runs_to_dict

    path = tmp_path / "serve.json"
    path.write_text(dumps_runs(runs))
    assert path.stat().st_size < 200_000
    again = load_runs(path)
    assert [r.steps for r in again] == [r.steps for r in runs]
    doc = runs_to_dict(runs[:1])
    steps = doc["runs"][0]["steps"]
    assert steps[0]["span"] == 3_000 and "span" not in steps[-1]  # a step of its own is written as before
    busy = next(i for i, s in enumerate(steps) if s["work"])
    for at, patch, match in ((0, {"span": 0}, "span must be"), (busy, {"span": 2}, "a stretch of 2 steps with work"),
                             (0, {"span": 2_999}, "where step 2999 follows")):
        broken = json.loads(json.dumps(doc))
        broken["runs"][0]["steps"][at].update(patch)
        path.write_text(json.dumps(broken))
        with pytest.raises(ValueError, match=match) as err:
            load_runs(path)
        assert "\n" not in str(err.value)


def test_a_record_naming_one_scheduler_twice_is_refused(runs, tmp_path):
    from kvviz.serving.record import dumps_runs, load_runs

    path = tmp_path / "twice.json"
    path.write_text(dumps_runs((runs[0], runs[1], runs[0])))
    with pytest.raises(ValueError, match=rf"scheduler {runs[0].scheduler} is named by runs\[0\] and runs\[2\]"):
        load_runs(path)


def test_the_history_reads_a_stretch_as_its_steps(runs):
    """Every step of a stretch reads as that step (record, counters, latency, text), against the same steps
    held one record each; the timeline gives the stretch one column."""
    from kvviz.serving.history import ServeHistory

    history = ServeHistory.from_runs(runs)
    flat = ServeHistory.from_runs(tuple(replace(r, steps=tuple(expanded(r.steps))) for r in runs))
    for k in history.schedulers:
        n = history.n_steps(k)
        assert n == flat.n_steps(k) and len(history.steps[k]) < 20
        for step in (0, 1, 1_500, 2_999, 3_000, 3_001, 5_000, LATE - 1, LATE, n - 1, n + 5):
            mine, theirs = history.at(k, step), flat.at(k, step)
            assert mine.step == theirs.step
            assert replace(mine, span=1, latency_ms=0) == replace(theirs, latency_ms=0)
            assert history.counters(k, step) == flat.counters(k, step)
            for a, b in zip(history.latency(k, step), flat.latency(k, step)):
                np.testing.assert_allclose(a, b, equal_nan=True)
            assert [history.text_of(k, r, step) for r in range(2)] == [flat.text_of(k, r, step) for r in range(2)]
        timeline = history.timeline(k)
        assert timeline.cells.shape[1] < 40 and len(timeline.x0) == n + 1
        x0 = timeline.x0
        assert x0[0] == 0 and x0[3_000] == 1 and 0 < x0[1_500] < 1 and x0[n] == timeline.cells.shape[1]
        assert timeline.step_at(0) == 0 and timeline.step_at(1) == 3_000
        assert timeline.multiples(1_000) == [0, 3_000, 4_000, LATE]  # the second stretch's: 4,000
        assert timeline.multiples(1) == timeline.starts[:-1].tolist()
        series = history.series(k)
        assert series["step"][0] == 0 and series["step"][1] == 2_999 and series["step"][-1] == n - 1
    assert 0 in history.event_steps() and LATE in history.event_steps()
    assert len(history.event_steps()) < 20 * len(history.schedulers)


def test_the_latest_arrival_serves_in_bounded_memory_and_time(tmp_path):
    """`kvviz serve` with one 4-token request at the latest legal arrival, in a child process under a timeout:
    its peak memory stays within 100 MB of the same request arriving at step 0, and its record holds a
    handful of steps. The read ceiling is measured once before (its probe's buffer would count)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    warm = ("import torch; torch.set_num_threads(1); "
            "from kvviz.measure.bandwidth import read_ceiling; read_ceiling('cpu')")
    subprocess.run([sys.executable, "-c", warm], check=True, timeout=120, cwd=ROOT, env=env)

    def serve(arrival: int) -> tuple[float, dict]:
        workload = tmp_path / f"at-{arrival}.json"
        workload.write_text(json.dumps({"requests": [{"prompt": "abcd", "new_tokens": 4, "arrival": arrival}]}))
        out = tmp_path / f"serve-{arrival}.json"
        script = textwrap.dedent(f"""
            import resource, sys
            from kvviz.cli import main
            code = main(["serve", "--workload", {str(workload)!r}, "--schedulers", "static,paged", "--threads",
                         "1", "--json", {str(out)!r}])
            print("maxrss_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
            sys.exit(code)
        """)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT,
                              env=env)
        assert done.returncode == 0, done.stderr
        assert out.stat().st_size < 100_000
        return int(done.stderr.split("maxrss_kb")[1].split()[0]) / 1024, json.loads(out.read_text())

    early_mb, _doc = serve(0)
    late_mb, doc = serve(MAX_ARRIVAL)
    assert late_mb < early_mb + 100, (early_mb, late_mb)
    assert [r["summary"]["steps"] for r in doc["runs"]] == [MAX_ARRIVAL + 4] * 2
    assert all(len(r["steps"]) < 10 for r in doc["runs"])


@pytest.mark.skipif(bool(html_page_cdp.missing()), reason=html_page_cdp.missing() or "runs")
def test_the_serve_page_draws_a_stretch_as_its_steps(runs, tmp_path, qapp):
    """The page of a record with stretches: small, and at a step inside a stretch its narration and counters
    are the Serve view's (kvviz.ui.serve.narration.narrate, ServeHistory.counters), with no script error."""
    from kvviz.page.serve import write_serve_page
    from kvviz.serving.history import ServeHistory

    history = ServeHistory.from_runs(runs)
    browser = html_page_cdp.Browser(1600, 1000)
    try:
        for step in (1_500, LATE - 1, LATE + 1):
            page = write_serve_page(tmp_path / f"serve-{step}.html", runs, step=step)
            assert page.stat().st_size < 400_000
            browser.open(page)
            check_step(browser, history, step)
        browser.pump()
        assert not browser.problems, browser.problems
        assert browser.eval("window.kvviz.errors") == []
    finally:
        browser.close()


def test_an_empty_workload_is_one_line_exit_2(torch_cpu, capsys):
    from kvviz.cli import main

    for spec in ("", "   "):
        assert main(["serve", "--workload", spec]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "the workload is empty" in err


def test_stdout_closed_early_ends_quietly(tmp_path):
    """`kvviz serve ... | head -1`: the reader goes after one line (the header, which states the read ceiling
    at the run's threads); the command stops with SIGPIPE's status and no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "kvviz", "serve", "--workload", "course-batch", "--schedulers",
                             "static,continuous", "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT)
    first = proc.stdout.readline()
    proc.stdout.close()
    _out, err = proc.communicate(timeout=300)
    assert first.startswith(b"model tiny")
    assert b"; read ceiling " in first and first.rstrip().endswith(b"GB/s at 1 thread"), first  # not the copy figure
    assert b"Traceback" not in err and b"BrokenPipe" not in err and b"Exception ignored" not in err, err
    assert proc.returncode == 141


def test_the_serve_views_panels_draw_a_stretch_as_one_column_and_plot_against_steps(runs, qtbot, monkeypatch):
    """The timeline's step numbers are the records' (Timeline.multiples: a stretch gives at most one), the usage
    plot's points sit at their records' first steps, and an animation has a frame per step where anything can
    change, not one per idle step."""
    from kvviz.serving.history import ServeHistory
    from kvviz.ui.serve.panels.timeline import TimelinePanel
    from kvviz.ui.serve.panels.usage import UsagePanel

    history = ServeHistory.from_runs(runs)
    steps = history.n_steps()
    assert len(history.event_steps()) < 60 < steps  # the frames an animation of the run would have
    timeline = TimelinePanel()
    qtbot.addWidget(timeline)
    timeline.resize(900, 400)
    timeline.show()
    qtbot.waitExposed(timeline)
    from kvviz.serving.history import Timeline

    asked = []
    real = Timeline.multiples
    monkeypatch.setattr(Timeline, "multiples", lambda self, interval: asked.append(interval) or real(self, interval))
    timeline.show_step(history, steps - 1, None)
    timeline.grab()
    assert asked  # the axis takes its labels' candidates from the records, at most one a stretch
    usage = UsagePanel()
    qtbot.addWidget(usage)
    usage.show_step(history, steps - 1, None)
    k = history.schedulers[0]
    x, _ = usage._items(k)[0].getData()
    assert x.tolist() == [float(s) for s in history.series(k)["step"]] and x[-1] > LATE - 1
