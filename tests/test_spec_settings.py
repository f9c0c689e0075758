"""The speculative engines' k and rollback rule, set where a run is configured: the commands' --spec-k and
--rollback (bounds refused in one line, exit 2), RunConfig, the engine session that passes them to the engines
and records them in RunInfo (saved and loaded with the trace), and the app's form, whose fields show only while
a speculative engine is ticked."""
from __future__ import annotations

import json

import pytest

from kvviz.cli import main
from kvviz.config import RunConfig

REPEATING = "the cat sat on the mat. the cat sat on the mat. the cat sat on the mat."  # n-grams to look up


def spec_run(engines, spec_k: int, rollback: str, tokens: int = 20):
    """Run `engines` through the engine session on tiny-random, greedy: the run's info and each engine's steps."""
    from kvviz.runtime.messages import RunRequest
    from kvviz.runtime.session import EngineSession

    session = EngineSession()
    try:
        run = RunConfig(prompt=REPEATING, max_new_tokens=tokens, engines=engines, spec_k=spec_k, rollback=rollback)
        info = session.start(RunRequest(run_id="spec", model="tiny-random", device="cpu", threads=1, run=run)).info
        rounds = [session.round() for _ in range(tokens)]
    finally:
        session.close()
    return info, {key: [r[i] for r in rounds] for i, key in enumerate(engines)}


def test_the_sessions_k_and_crop_reach_the_engine_and_the_saved_trace(torch_cpu, tmp_path):
    from kvviz.records import traceio

    info, traces = spec_run(("naive", "spec-lookup"), spec_k=2, rollback="crop")
    spec = traces["spec-lookup"]
    assert [t.token_id for t in spec] == [t.token_id for t in traces["naive"]]  # exact: naive's tokens
    rounds = [t for t in spec if t.spec_k is not None]
    assert rounds and {t.spec_k for t in rounds} == {2}  # k = 2, not the default 4
    assert max(t.spec_proposed for t in rounds) == 2
    rejected = [t for t in rounds if t.spec_rolled_back]
    assert rejected, "no round rejected a draft: the run shows no rollback"
    assert all(t.bytes_undone > 0 for t in rejected)  # crop cuts the rejected K/V from the cache
    assert not any(t.bytes_overwritten for t in rounds)  # and the next round never writes over them
    assert (info.spec_k, info.rollback) == (2, "crop")
    saved = traceio.load_run(traceio.save_run(tmp_path / "spec.json", info, traces))
    assert (saved.info.spec_k, saved.info.rollback) == (2, "crop")
    assert [t.spec_k for t in saved.traces["spec-lookup"]] == [t.spec_k for t in spec]


def test_overwrite_leaves_rejected_kv_for_the_next_round_to_write_over(torch_cpu):
    _info, traces = spec_run(("spec-lookup",), spec_k=3, rollback="overwrite")
    rounds = [t for t in traces["spec-lookup"] if t.spec_k is not None]
    assert {t.spec_k for t in rounds} == {3}
    assert any(t.spec_rolled_back for t in rounds) and not any(t.bytes_undone for t in rounds)


@pytest.mark.parametrize("args, needle", [
    (["--spec-k", "0"], "--spec-k: must be at least 1 and at most 64"),
    (["--spec-k", "65"], "--spec-k: must be at least 1 and at most 64"),
    (["--spec-k", "two"], "whole number expected, got 'two'"),
    (["--rollback", "drop"], "--rollback: invalid choice: 'drop' (choose from 'overwrite', 'crop')"),
])
def test_a_bad_spec_k_or_rollback_is_one_line_exit_2(args, needle, capsys):
    rc = main(["bench", "--model", "tiny-random", "--engines", "naive,spec-lookup", "--tokens", "3", *args])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert needle in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_run_config_refuses_bad_settings_of_a_ticked_speculative_engine_only():
    with pytest.raises(ValueError, match=r"^draft tokens k must be at least 1 and at most 64 .*got 65$"):
        RunConfig(prompt="x", engines=("spec-lookup",), spec_k=65)
    with pytest.raises(ValueError, match="^rollback must be overwrite or crop, got 'drop'$"):
        RunConfig(prompt="x", engines=("spec-draft",), rollback="drop")
    assert RunConfig(prompt="x", engines=("concat",), spec_k=65, rollback="drop").spec_k == 65  # not read


def test_a_saved_run_with_an_unknown_rollback_is_refused_in_one_line(torch_cpu):
    from kvviz.records import traceio

    doc = json.loads(traceio.dumps_run(*spec_run(("spec-lookup",), spec_k=2, rollback="crop", tokens=3)))
    assert traceio.loads_run(json.dumps(doc)).info.rollback == "crop"
    doc["info"]["rollback"] = "drop"
    with pytest.raises(ValueError, match="info.rollback must be overwrite or crop") as exc:
        traceio.loads_run(json.dumps(doc))
    assert "\n" not in str(exc.value)
    assert traceio.loads_run(json.dumps({**doc, "info": {k: v for k, v in doc["info"].items()
                                                         if k not in ("spec_k", "rollback")}})).info.spec_k == 0


def test_the_forms_k_and_rollback_show_with_a_spec_engine_and_reach_the_saved_trace(open_window, qtbot, tmp_path):
    from kvviz.records import traceio
    from tests.test_ui_window import type_prompt

    window = open_window()
    form = window.form
    type_prompt(qtbot, window, REPEATING)
    form.set_engines(("naive", "concat"))
    assert not form.spec_k_spin.isVisibleTo(window) and not form.rollback_combo.isVisibleTo(window)
    form.set_engines(("naive", "spec-lookup"))
    assert form.spec_k_spin.isVisibleTo(window) and form.rollback_combo.isVisibleTo(window)
    assert form.spec_k_label.isVisibleTo(window) and form.rollback_label.isVisibleTo(window)
    assert "crop" in form.rollback_combo.toolTip() and "vLLM" in form.rollback_combo.toolTip()
    form.tokens_spin.setValue(12)
    form.spec_k_spin.setValue(3)
    form.rollback_combo.setCurrentIndex(form.rollback_combo.findData("crop"))
    window.toolbar.speed_spin.setValue(0)
    window.refresh()
    assert form.validation_text() == ""
    with qtbot.waitSignal(window.run_finished, timeout=120_000):
        assert window.start_run()
    assert window.error_text() == ""
    saved = traceio.load_run(traceio.save_run(tmp_path / "form.json", window.history.info, window.history.traces))
    assert (saved.info.spec_k, saved.info.rollback) == (3, "crop")
    rounds = [t for t in saved.traces["spec-lookup"] if t.spec_k is not None]
    assert rounds and {t.spec_k for t in rounds} == {3}
    assert not any(t.bytes_overwritten for t in rounds)  # crop: nothing left for a later round to write over

    form.spec_k_spin.setValue(5)  # a replay shows the run's own settings
    form.rollback_combo.setCurrentIndex(form.rollback_combo.findData("overwrite"))
    form.show_run(saved.info)
    assert (form.spec_k_spin.value(), form.rollback_combo.currentData()) == (3, "crop")


def test_the_commands_hand_k_and_the_rule_to_the_engines(tmp_path, monkeypatch, capsys):
    """`kvviz bench --spec-k 2 --rollback crop` builds its speculative engine with k = 2 and crop (and says so in
    --json), and export's offscreen window takes the same two settings into its form."""
    import json

    import kvviz.engines
    from kvviz.cli import main
    from kvviz.commands.export import build_job, configure

    built = []
    real = kvviz.engines.make_engine

    def spy(key, model, **kw):
        built.append((key, kw.get("spec_k"), kw.get("rollback")))
        return real(key, model, **kw)

    monkeypatch.setattr(kvviz.engines, "make_engine", spy)
    out = tmp_path / "bench.json"
    assert main(["bench", "--model", "tiny-random", "--engines", "naive,spec-lookup", "--tokens", "12",
                 "--spec-k", "2", "--rollback", "crop", "--repeat", "1", "--json", str(out)]) == 0
    assert ("spec-lookup", 2, "crop") in built
    assert json.loads(out.read_text())["cache_settings"]["spec_k"] == 2
    import argparse

    parser = argparse.ArgumentParser()
    configure(parser)
    job = build_job(parser.parse_args(["--out", str(tmp_path / "x"), "--png", "--spec-k", "3", "--rollback",
                                       "crop"]))
    assert (job.spec_k, job.rollback) == (3, "crop")
