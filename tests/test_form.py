"""The run form alone, without the window (each part builds and tests on its own): its
ranges are the commands' bounds (kvviz.options.BOUNDS), and its first problem is the commands' refusal."""
from __future__ import annotations

from kvviz.config import ModelConfig
from kvviz.options import BOUNDS
from kvviz.runtime.messages import Environment, ModelChoice
from tests.conftest import settings_at


def test_the_forms_ranges_are_the_commands_bounds(qtbot, tmp_path):
    from kvviz.ui.form import RunForm

    form = RunForm(settings_at(tmp_path / "form.ini"))
    qtbot.addWidget(form)
    for spin, key in ((form.tokens_spin, "tokens"), (form.block_spin, "block_size"),
                      (form.temperature_spin, "temperature"), (form.seed_spin, "seed"), (form.top_p_spin, "top_p")):
        assert (spin.minimum(), spin.maximum()) == (BOUNDS[key].low, BOUNDS[key].high), key
    assert form.top_k_spin.maximum() == BOUNDS["top_k"].high and form.top_k_spin.minimum() == 0  # 0: off
    assert "Starting" in form.problem()  # no environment yet

    env = Environment(models=(ModelChoice(name="tiny-random", config=ModelConfig(name="tiny-random")),),
                      default_model="tiny-random", devices=("auto", "cpu"), auto_device="cpu",
                      engines=(("naive", ""), ("concat", "")))
    form.set_environment(env)
    form.prompt_edit.setPlainText("A cache is a promise")
    assert form.problem() == "" and form.checked_engines() == ("naive", "concat")
    run = form.build_run()
    assert run.max_new_tokens == form.tokens_spin.value() and run.engines == ("naive", "concat")
    form.prompt_edit.setPlainText("   ")
    assert form.problem() == "Type a prompt."
