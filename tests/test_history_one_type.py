"""One history type (kvviz.records.history.History) under every view: the compare window's RunHistory, the Serve
view's ServeHistory and the Watch view's WatchHistory are it; each drops a late record of an earlier run and
keeps the one of its own; a lane reads the record that stands for each step (stretches, gaps, past its end) as a
naive walk over its records does; a cached value follows its lane."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
from PySide6.QtCore import QSettings

from kvviz.records.history import History


@dataclass(frozen=True)
class Rec:
    lane: str
    step: int
    span: int = 1
    run_id: str = "r"


class Held(History[Rec]):
    HOLD_LAST = True


def standing(records: list[Rec], step: int) -> Rec | None:
    """The record that stands for `step`: the last one starting at or before it (the first for a step before
    any), by a walk over the records."""
    before = [r for r in records if r.step <= step]
    return before[-1] if before else (records[0] if records else None)


def settings(tmp_path, name: str) -> QSettings:
    return QSettings(str(tmp_path / f"{name}.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def recording(tmp_path):
    """A watch session of one server: two metric samples."""
    from kvviz.peers.watch.recording import Header, RecordingWriter, Sample
    from tests.test_watch_zh import URL, _metrics

    writer = RecordingWriter(tmp_path / "w.kvwatch", Header(1000.0, (URL,), (1,)))
    writer.write(Sample(1000.5, 0, _metrics(1)))
    writer.write(Sample(1001.5, 0, _metrics(2)))
    return writer.close()


def test_every_views_history_is_the_one_history_type(qtbot, tmp_path, recording):
    from kvviz.serving.history import ServeHistory
    from kvviz.ui.serve.window import ServeWindow
    from kvviz.ui.watch.window import WatchWindow
    from kvviz.ui.window import MainWindow
    from tests.test_serve_view_records import course_batch_static
    from tests.test_shell import IdleWorker

    compare = MainWindow(IdleWorker(), settings(tmp_path, "compare"))
    qtbot.addWidget(compare)
    serve = ServeWindow(None, settings(tmp_path, "serve"))
    qtbot.addWidget(serve)
    serve.replay(ServeHistory.from_runs((course_batch_static(),)))
    watch = WatchWindow(settings(tmp_path, "watch"))
    qtbot.addWidget(watch)
    assert watch.replay(recording, paused=True)
    histories = {"compare": compare.history, "serve": serve.run, "watch": watch.source.history}
    assert {k: isinstance(h, History) for k, h in histories.items()} == dict.fromkeys(histories, True)
    # The one interface reads each: the lanes, their steps, the record at a step.
    assert histories["compare"].lanes == () and histories["compare"].n_steps() == 0
    n = len(course_batch_static().steps)
    assert histories["serve"].lanes == ("static",) and histories["serve"].n_steps("static") == n
    assert histories["serve"].at("static", n + 5).step == n - 1  # lockstep: a lane past its end shows its last
    assert histories["watch"].lanes == (0,) and histories["watch"].n_steps(0) == 1
    assert histories["watch"].at(0, 0).usage == pytest.approx(0.1)
    watch.end_source()


def _compare():
    from kvviz.records.trace import RunInfo, StepTrace
    from kvviz.ui.history import RunHistory

    def trace(run_id: str, step: int) -> StepTrace:
        return StepTrace(run_id=run_id, engine="static", step=step, phase="decode" if step else "prefill",
                         token_id=65, token_text="A", pos_start=step, pos_stop=step + 1, cache_len=step + 1,
                         cache_capacity=8, cache_bytes=64, bytes_copied=0, bytes_written=64, bytes_gathered=0,
                         kv_projections=2, latency_ms=1.0)

    history = RunHistory()
    history.reset(RunInfo(run_id="old", engines=("static",)))
    history.add(trace("old", 0))
    history.reset(RunInfo(run_id="new", engines=("static",)))
    return history, lambda: history.add(trace("old", 1)), lambda: history.add(trace("new", 0)), "static"


def _serve():
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.record import LaneRecord
    from tests.test_serve_view_records import course_batch_static

    run = course_batch_static()
    history = ServeHistory(run_id="new", workload=run.workload, model=run.model, settings={"static": run.settings},
                           steps={"static": []})
    batch = (LaneRecord("static", run.steps[0], {}),)
    return history, lambda: history.add(batch, run_id="old"), lambda: history.add(batch, run_id="new"), "static"


def _watch():
    from kvviz.peers.watch.history import WatchHistory, session_id
    from kvviz.peers.watch.recording import Header, Sample
    from tests.test_watch_zh import URL, _metrics

    old, new = Header(1000.0, (URL,), (1,)), Header(2000.0, (URL,), (1,))
    history = WatchHistory(new)
    return (history, lambda: history.add(Sample(1000.5, 0, _metrics(1)), run_id=session_id(old)),
            lambda: history.add(Sample(2000.5, 0, _metrics(1))), 0)


@pytest.mark.parametrize("make", [_compare, _serve, _watch], ids=["compare", "serve", "watch"])
def test_a_late_record_of_an_earlier_run_is_dropped_by_each_history(make):
    history, late, own, lane = make()
    assert isinstance(history, History)
    version = history.version
    assert late() is False
    assert history.version == version and history.n_steps(lane) == 0 and history.at(lane, 0) is None
    assert own() is True
    assert history.version > version and history.n_steps(lane) == 1 and history.at(lane, 0) is not None


LANES = {
    "steps": [Rec("a", k) for k in range(5)],
    "stretch": [Rec("b", 0), Rec("b", 1, span=4), Rec("b", 5), Rec("b", 6, span=2)],
    "gaps": [Rec("c", 2), Rec("c", 3), Rec("c", 7)],
}


@pytest.mark.parametrize("kind", [History, Held], ids=["none past the end", "the last past the end"])
@pytest.mark.parametrize("name", list(LANES))
def test_a_lane_reads_the_record_that_stands_for_each_step(kind, name):
    records = LANES[name]
    history = kind({name: list(records)})
    n = records[-1].step + records[-1].span
    assert history.n_steps(name) == n and history.n_steps() == n and history.lanes == (name,)
    for step in range(-2, n + 3):
        inside = 0 <= step < n
        expected = standing(records, step) if inside or kind is Held else None
        assert history.at(name, step) is expected, step
        assert history.clamp(name, step) == min(max(step, 0), n - 1)
        if inside or kind is Held:
            upto = records[: records.index(standing(records, min(max(step, 0), n - 1))) + 1]
        else:
            upto = records if step >= n else []
        assert history.upto(name, step) == upto, step
    assert history.at("elsewhere", 0) is None and history.upto("elsewhere", 3) == [] and history.n_steps("else") == 0


def test_records_go_in_step_order_and_the_version_follows_each():
    history = History()
    history.reset("r", ("a",))
    version = history.version
    assert history.add(Rec("a", 0, span=3)) and history.version == version + 1
    with pytest.raises(ValueError, match=r"^a: step 2 arrived after 3 steps$"):
        history.add(Rec("a", 2))
    assert history.version == version + 1 and history.n_steps("a") == 3
    assert history.add(Rec("a", 3)) and history.n_steps("a") == 4 and history.upto("a", 2) == [Rec("a", 0, span=3)]
    history.reset("s", ("a", "b"))
    assert history.lanes == ("a", "b") and history.n_steps() == 0 and history.run_id == "s"


def test_a_cached_value_follows_its_lane():
    history = History()
    history.reset("r", ("a", "b"))
    made = []

    def make():
        made.append(len(history.lane("a")))
        return len(made)

    assert history.cached("x", "a", make) == history.cached("x", "a", make) == 1
    history.add(Rec("a", 0))
    assert history.cached("x", "a", make) == 2  # the lane grew
    history.add(Rec("b", 0))
    assert history.cached("x", "a", make, "b") == 3  # it reads "b" too, which grew
    history.reset("s", ("a",))
    history.add(Rec("a", 0, run_id="s"))
    assert history.cached("x", "a", make) == 4 and made == [0, 1, 1, 1]  # another list of the same length
