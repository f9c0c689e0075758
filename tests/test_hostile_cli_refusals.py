"""Commands that refuse bad input in one line with exit 2 before any work: `kvviz export --html` with a --step
outside the run (a saved run, a serve record, a model run) or outside --steps, `kvviz memory --json` into a missing
folder, `kvviz train --out` and `kvviz export --out` under a missing folder, and words a command does not know
(told by the command's name, as its other errors are)."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_serve_view_records import shared_prefix_pair

from kvviz.cli import main


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    """A saved compare run of 4 steps (tiny, 4 tokens)."""
    import kvviz

    run = kvviz.compare("KV cache demo", tokens=4, model="tiny", block_size=4, threads=1)
    return run.save(tmp_path_factory.mktemp("trace") / "trace.json")


@pytest.fixture(scope="module")
def serve_record(tmp_path_factory) -> Path:
    """A saved serve record of 4 steps (paged beside prefix), made without a model."""
    from kvviz.serving import record

    return record.save_runs(tmp_path_factory.mktemp("serve") / "serve.json",
                            (shared_prefix_pair("paged"), shared_prefix_pair("prefix")))


def refused(capsys, argv: list[str]) -> tuple[str, str]:
    """(stderr's one line, stdout) of a command that must exit 2."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    return err, captured.out


@pytest.mark.parametrize("extra", [["--html"], ["--html", "--csv"]])
def test_a_saved_runs_page_at_a_step_past_its_end(trace, tmp_path, capsys, extra):
    out = tmp_path / "out"
    err, _ = refused(capsys, ["export", "--from", str(trace), "--out", str(out), *extra, "--step", "999"])
    assert err == "kvviz export: error: --step 999 is outside the run's steps 0..3"
    assert not out.exists()


def test_a_saved_runs_page_at_a_step_outside_its_steps(trace, tmp_path, capsys):
    out = tmp_path / "out"
    err, _ = refused(capsys, ["export", "--from", str(trace), "--out", str(out), "--html", "--steps", "1:2",
                              "--step", "3"])
    assert err == "kvviz export: error: --step 3 is outside the page's steps 1..2 (--steps)"
    assert not out.exists()
    assert main(["export", "--from", str(trace), "--out", str(out), "--html", "--steps", "1:2", "--step", "2"]) == 0
    assert (out / "run.html").is_file()  # --out made in a folder that exists


def test_a_serve_records_page_at_a_step_past_its_end(serve_record, tmp_path, capsys):
    out = tmp_path / "out"
    err, _ = refused(capsys, ["export", "--from", str(serve_record), "--out", str(out), "--html", "--step", "999"])
    assert err == "kvviz export: error: --step 999 is outside the run's steps 0..3"
    assert not out.exists()
    assert main(["export", "--from", str(serve_record), "--out", str(out), "--html", "--step", "3"]) == 0
    assert (out / "run.html").is_file()


@pytest.mark.parametrize("extra, said", [
    (["--step", "5"], "--step 5 is outside the run's steps 0..2 (a run of --tokens 3 has at most 3 steps)"),
    (["--steps", "1:2", "--step", "0"], "--step 0 is outside the page's steps 1..2 (--steps)"),
])
def test_a_model_runs_page_at_a_step_it_cannot_reach_runs_nothing(tmp_path, capsys, monkeypatch, extra, said):
    import kvviz.ui.headless as headless

    def no_run(*_args, **_kwargs):
        raise AssertionError("the engines ran")

    monkeypatch.setattr(headless, "run_export", no_run)
    out = tmp_path / "out"
    err, _ = refused(capsys, ["export", "--out", str(out), "--html", "--tokens", "3", "--model", "tiny-random",
                              "--threads", "1", *extra])
    assert err == f"kvviz export: error: {said}"
    assert not out.exists()


def test_memory_refuses_its_json_path_before_the_report(tmp_path, capsys):
    missing = tmp_path / "missing"
    err, printed = refused(capsys, ["memory", "--model", "tiny", "--json", str(missing / "x.json")])
    assert err == f"kvviz memory: error: cannot write --json {missing / 'x.json'}: the folder {missing} does not exist"
    assert printed == ""
    assert not missing.exists()


def test_memory_refuses_sinks_past_the_window_before_the_report(capsys):
    err, printed = refused(capsys, ["memory", "--model", "tiny", "--window", "4", "--sinks", "4"])
    assert err == "kvviz memory: error: --sinks (4) must be fewer than --window (4)"
    assert printed == ""


@pytest.mark.parametrize("argv", [
    ["train", "--steps", "1", "--batch-size", "1", "--context", "8", "--eval-every", "0", "--no-card", "--out"],
    ["export", "--html", "--tokens", "2", "--model", "tiny-random", "--threads", "1", "--out"],
])
def test_an_out_folder_under_a_missing_folder(tmp_path, capsys, argv):
    missing = tmp_path / "missing"
    err, _ = refused(capsys, [*argv, str(missing / "x" / "y")])
    assert err == (f"kvviz {argv[0]}: error: cannot write --out {missing / 'x' / 'y'}: the folder {missing / 'x'} "
                   "does not exist")
    assert not missing.exists()


@pytest.mark.parametrize("argv, said", [
    (["models", "extra"], "kvviz models: error: unrecognized arguments: extra"),
    (["memory", "--lengths", "x"], "kvviz memory: error: unrecognized arguments: --lengths x"),
])
def test_a_word_the_command_does_not_know_is_told_by_its_name(capsys, argv, said):
    err, printed = refused(capsys, argv)
    assert err == said and printed == ""
