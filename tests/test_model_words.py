"""The window's model presets (kvviz.models.presets) described in the UI's language: every description and warning
goes through the "ModelPresets" translations where the memory calculator and the model picker show it. A marking
translator stands in for the Chinese one, so the check holds for any preset text, shipped translation or not."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QCoreApplication, Qt, QTranslator

from kvviz.runtime.messages import Environment, ModelChoice
from tests.conftest import settings_at


class Marking(QTranslator):
    """Every "ModelPresets" text as "«text»"; nothing else translated."""

    def translate(self, context, source, disambiguation=None, n=-1):  # noqa: ARG002 (Qt's signature)
        return f"\u00ab{source}\u00bb" if context == "ModelPresets" else ""


@pytest.fixture
def marking(qapp):
    translator = Marking()
    QCoreApplication.installTranslator(translator)
    yield translator
    QCoreApplication.removeTranslator(translator)


@pytest.fixture(scope="module")
def presets():
    from kvviz.models.presets import PRESETS, preset_config

    return [ModelChoice(name=p.name, description=p.description, config=preset_config(p.name), warning=p.warning)
            for p in PRESETS.values()]


def test_the_memory_calculator_describes_each_window_preset_in_the_ui_language(qtbot, marking, presets):
    from kvviz.ui.dialogs.memory import MemoryDialog

    dialog = MemoryDialog()
    qtbot.addWidget(dialog)
    dialog.add_models({m.name: m.config for m in presets}, {m.name: m.description for m in presets})
    for choice in presets:
        dialog.set_preset(choice.name)
        assert dialog.description_label.text() == f"\u00ab{choice.description}\u00bb", choice.name
    dialog.set_preset("chapter-tiny")  # kvviz.costs.memory's own presets keep the dialog's context
    assert "\u00ab" not in dialog.description_label.text() and dialog.description_label.text()


def test_the_model_pickers_tooltips_say_each_preset_in_the_ui_language(qtbot, tmp_path, marking, presets):
    from kvviz.ui.form import RunForm

    form = RunForm(settings_at(tmp_path / "form.ini"))
    qtbot.addWidget(form)
    env = Environment(models=tuple(presets), default_model=presets[0].name, devices=("auto", "cpu"),
                      auto_device="cpu", engines=(("naive", ""),))
    form.set_environment(env)
    for choice in presets:
        tip = form.model_combo.itemData(form.model_combo.findData(choice.name), Qt.ItemDataRole.ToolTipRole)
        said = [f"\u00ab{t}\u00bb" for t in (choice.description, choice.warning) if t]
        assert tip == "\n".join(said), choice.name
    QCoreApplication.removeTranslator(marking)
    form.retranslate()  # what a language switch calls: the tips follow it
    first = presets[0]
    assert form.model_combo.itemData(form.model_combo.findData(first.name),
                                     Qt.ItemDataRole.ToolTipRole) == first.description
