"""The records that cross the sessions' APIs are frozen dataclasses: a run's start (RunStarted, ServeStarted), a
serve batch (ServeBatch of LaneRecord); a dict or a tuple in their place is refused with one line. A repeated
comparison is a RunInfo with repeat and earlier_ms, and a file saved with those fields on a subclass of RunInfo
(saved_repeated_run_v1.json: tiny-random, concat and static, 3 tokens, repeat 2) loads and saves byte for byte.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

OLD_REPEATED = Path(__file__).with_name("saved_repeated_run_v1.json")


def test_a_repeated_run_saved_on_the_subclass_loads_as_a_runinfo_and_saves_the_same_bytes():
    from kvviz.records import traceio
    from kvviz.records.trace import RunInfo

    text = OLD_REPEATED.read_text()
    saved = traceio.loads_run(text)
    assert type(saved.info) is RunInfo and saved.info.repeat == 2
    assert set(saved.info.earlier_ms) == {"concat", "static"}
    assert all(len(runs) == 1 and len(runs[0]) == 3 for runs in saved.info.earlier_ms.values())
    assert traceio.dumps_run(saved.info, saved.traces) == text


def test_a_run_made_once_is_saved_without_repeat_fields_and_loads_with_one_run():
    from kvviz.records import traceio

    doc = json.loads(OLD_REPEATED.read_text())
    del doc["info"]["repeat"], doc["info"]["earlier_ms"]  # the shape of a saved run made once
    text = json.dumps(doc, indent=1) + "\n"
    saved = traceio.loads_run(text)
    assert saved.info.repeat == 1 and saved.info.earlier_ms == {}
    assert traceio.dumps_run(saved.info, saved.traces) == text
    stray = dict(doc, info=dict(doc["info"], earlier_ms={"concat": [[1.0, 1.0, 1.0]]}))
    assert traceio.loads_run(json.dumps(stray)).info.earlier_ms == {}  # read only with a repeat
    bad = dict(doc, info=dict(doc["info"], repeat=2, earlier_ms={}))
    with pytest.raises(ValueError, match="earlier_ms must hold the step times of every engine"):
        traceio.loads_run(json.dumps(bad))


def test_the_engine_session_answers_a_run_request_with_a_runstarted_and_refuses_a_dict(torch_cpu):
    from kvviz.config import RunConfig
    from kvviz.runtime.messages import RunRequest, RunStarted
    from kvviz.runtime.session import EngineSession

    session = EngineSession()
    try:
        request = RunRequest(run_id="t", model="tiny-random", threads=1,
                             run=RunConfig(prompt="Hello", max_new_tokens=2, engines=("concat",)))
        started = session.start(request)
        assert isinstance(started, RunStarted)
        with pytest.raises(dataclasses.FrozenInstanceError):
            started.notes = ()
        assert started.info.run_id == "t" and started.info.repeat == 1 and started.notes == ()
        assert started.loaded is not None and started.loaded.name == "tiny-random"
        assert session.start(request).loaded is None  # the model kept: nothing loaded again
        with pytest.raises(ValueError, match="^a run starts from a RunRequest, not a dict$"):
            session.start(dataclasses.asdict(request))
    finally:
        session.close()


def test_the_run_worker_refuses_a_dict_in_one_line(qtbot):
    from kvviz.ui.worker import RunWorker

    worker = RunWorker(isolate=False)
    failed = []
    worker.run_failed.connect(lambda run_id, message: failed.append((run_id, message)))
    with qtbot.waitSignal(worker.run_finished, timeout=5_000):
        worker.start_run({"run_id": "d", "model": "tiny-random"})
    assert failed == [("", "a run starts from a RunRequest, not a dict")]
    worker.shut_down()
    worker.deleteLater()


def _serve_spec(**kw):
    from kvviz.serving.spec import ServeSpec, preset_requests

    return ServeSpec(**{**dict(model="tiny-random", requests=tuple(preset_requests("shared-prefix"))[:2],
                               schedulers=("paged", "prefix"), blocks=64, block_size=16, run_id="s1"), **kw})


def test_the_serve_session_answers_with_records_the_history_takes_and_refuses_dicts_and_tuples(torch_cpu):
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.record import LaneRecord, ServeBatch, ServeStarted, ServeStep
    from kvviz.serving.session import ServeSession

    session = ServeSession()
    try:
        started = session.start(_serve_spec(), threads=1)
        assert isinstance(started, ServeStarted) and started.run_id == "s1" and started.vllm == ""
        assert tuple(started.settings) == ("paged", "prefix") and len(started.prompt_lens) == 2
        history = ServeHistory.from_started(started)
        assert history.schedulers == ("paged", "prefix") and history.vllm is None
        batch = session.steps(0.0)
        assert isinstance(batch, ServeBatch) and batch.results is None
        assert [(type(r), r.lane, type(r.record)) for r in batch.records] == [
            (LaneRecord, "paged", ServeStep), (LaneRecord, "prefix", ServeStep)]
        history.add(batch.records)
        assert history.n_steps("paged") == 1 and history.n_steps("prefix") == 1
        with pytest.raises(ValueError, match="^a serve batch holds LaneRecords, not a tuple$"):
            history.add([(r.lane, r.record, r.texts) for r in session.steps(0.0).records])
        assert history.n_steps("paged") == 1  # nothing of a refused batch is kept
        with pytest.raises(ValueError, match="^a live serve run starts from a ServeStarted, not a dict$"):
            ServeHistory.from_started(dict(started.__dict__))
        with pytest.raises(ValueError, match="^a serve run starts from a ServeSpec, not a dict$"):
            session.start(dataclasses.asdict(_serve_spec()))
        while (batch := session.steps(60.0)).results is None:
            pass
        assert set(batch.results) == {"paged", "prefix"} and all(len(v) == 2 for v in batch.results.values())
    finally:
        session.close()


def test_the_serve_worker_emits_a_servestarted_and_lane_records_and_refuses_a_dict(qtbot):
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.record import LaneRecord, ServeStarted
    from kvviz.ui.serve.worker import ServeWorker

    worker = ServeWorker(isolate=False, threads=1)
    got: dict = {"batches": [], "failed": []}
    worker.run_started.connect(lambda run_id, started: got.setdefault("started", started))
    worker.steps_traced.connect(lambda run_id, records: got["batches"].append(records))
    worker.results_ready.connect(lambda run_id, results: got.setdefault("results", results))
    worker.run_failed.connect(lambda run_id, message: got["failed"].append((run_id, message)))
    try:
        with qtbot.waitSignal(worker.run_finished, timeout=5_000):
            worker.start_run({"run_id": "d"})
        assert got["failed"] == [("", "a serve run starts from a ServeSpec, not a dict")] and "started" not in got
        with qtbot.waitSignal(worker.run_finished, timeout=120_000):
            worker.start_run(_serve_spec())
        assert isinstance(got["started"], ServeStarted) and got["started"].run_id == "s1"
        assert got["batches"] and all(isinstance(b, tuple) and all(isinstance(r, LaneRecord) for r in b)
                                      for b in got["batches"])
        history = ServeHistory.from_started(got["started"])
        for records in got["batches"]:
            history.add(records)
        history.set_results(got["results"])
        assert all(r.solo_token_ids == r.token_ids for r in history.results["paged"])
        assert len(got["failed"]) == 1
    finally:
        worker.shut_down()
        worker.deleteLater()
