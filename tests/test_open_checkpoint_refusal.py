"""Model > Open checkpoint refuses a folder that is not a model at once: the error strip says the line a run of it
would say (kvviz.models.presets.load_tokenizer's), and neither the picker nor the saved list gains it; a complete
folder (Hugging Face's files, or kvviz's own model folder) is taken, chosen, and clears that refusal. A folder kept
from an earlier Open checkpoint that holds no model is offered unavailable, with that line as the form's problem."""
from __future__ import annotations

from pathlib import Path

import pytest

from kvviz.checkpoint_files import check_model_folder


def run_refusal(folder: Path) -> str:
    """The line a run of `folder` fails with: the engine reads the tokenizer first."""
    from kvviz.models.presets import load_tokenizer

    with pytest.raises(ValueError) as info:
        load_tokenizer(str(folder))
    return str(info.value)


def test_open_checkpoint_refuses_an_empty_folder_at_once_and_takes_a_complete_one(open_window, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    window = open_window()
    picked: list[str] = []
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: picked.pop(0)))
    empty = tmp_path / "notamodel"
    empty.mkdir()
    before = [window.form.model_combo.itemData(i) for i in range(window.form.model_combo.count())]
    picked.append(str(empty))
    window.act_open.trigger()
    assert window.error_text() == run_refusal(empty)
    assert "missing config.json; model.safetensors; tokenizer.json" in window.error_text()
    assert [window.form.model_combo.itemData(i) for i in range(window.form.model_combo.count())] == before
    assert window.form.current_model() == "tiny-random" and str(empty) not in window.form.models
    assert str(empty) not in str(window.settings.value("models/checkpoints", ""))

    complete = tmp_path / "hf"
    complete.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (complete / name).write_text("{}")
    picked.append(str(complete))
    window.act_open.trigger()
    assert window.form.current_model() == str(complete)
    assert window.error_text() == ""  # the refusal above is not this folder's


def test_the_check_takes_kvvizs_own_folder_and_names_what_a_hugging_face_one_lacks(tmp_path):
    from kvviz.models.presets import TINY_DIR

    if (TINY_DIR / "model.safetensors").is_file():
        check_model_folder(TINY_DIR)  # config.json in kvviz's schema + model.safetensors, no tokenizer.json
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    (partial / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(ValueError) as info:
        check_model_folder(partial)
    assert str(info.value) == run_refusal(partial)
    assert "model.safetensors (found pytorch_model.bin" in str(info.value)


def test_a_kept_folder_that_holds_no_model_is_offered_unavailable_with_the_runs_line(qtbot, tmp_path):
    from kvviz.config import ModelConfig
    from kvviz.runtime.messages import Environment, ModelChoice
    from kvviz.ui.form import RunForm
    from tests.conftest import settings_at

    empty, complete, gone = tmp_path / "emptied", tmp_path / "hf", tmp_path / "gone"
    empty.mkdir()
    complete.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (complete / name).write_text("{}")
    settings = settings_at(tmp_path / "form.ini")
    settings.setValue("models/checkpoints", "\n".join(map(str, (empty, complete, gone))))
    form = RunForm(settings)
    qtbot.addWidget(form)
    form.set_environment(Environment(models=(ModelChoice(name="tiny-random", config=ModelConfig(name="tiny-random")),),
                                     default_model="tiny-random", devices=("auto", "cpu"), auto_device="cpu",
                                     engines=(("naive", ""),)))
    assert form.models[str(complete)].available and form.models[str(gone)].available  # gone: a run says why
    assert not form.models[str(empty)].available
    form.prompt_edit.setPlainText("A cache is a promise")
    form.set_model(str(empty))
    assert form.problem() == run_refusal(empty)
    form.set_model(str(complete))
    assert form.problem() == ""
