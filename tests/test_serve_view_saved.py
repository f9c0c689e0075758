"""The Serve window's form kept between launches (QSettings, as the compare window's form): the workload
rows as edited, the schedulers ticked, the sizes and the preset's N, written when the window closes and
read back by the next window on the same settings file; unreadable saved rows leave the preset's."""
from __future__ import annotations

from PySide6.QtCore import QSettings, Qt

from kvviz.serving.spec import WorkRequest
from kvviz.serving.workload import preset
from kvviz.ui.serve.window import ServeWindow


def _window(qtbot, path):
    w = ServeWindow(None, QSettings(str(path), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.show()
    return w


def test_the_form_comes_back_in_the_next_window(qtbot, tmp_path):
    path = tmp_path / "serve.ini"
    first = _window(qtbot, path)
    form = first.form
    form.set_models(["tiny"], "tiny")
    form.preset_combo.setCurrentIndex(form.preset_combo.findData("random"))
    form.random_spin.setValue(5)
    qtbot.mouseClick(form.preset_button, Qt.MouseButton.LeftButton)
    form.table.item(2, 0).setText("Edited, with a comma and \"quotes\"\nand a second line")
    form.table.item(3, 1).setData(Qt.ItemDataRole.EditRole, 21)
    form.table.item(4, 2).setData(Qt.ItemDataRole.EditRole, 9)
    qtbot.mouseClick(form.add_button, Qt.MouseButton.LeftButton)
    form.table.item(5, 0).setText("one more")
    for key, ticked in (("static", False), ("chunked", True), ("reserve", True)):
        form.scheduler_checks[key].setChecked(ticked)
    form.max_batch.setValue(3)
    form.blocks.setValue(77)
    form.token_budget.setValue(40)
    form.block_size.setValue(8)
    wanted = form.spec()
    assert len(wanted.requests) == 6 and wanted.requests[5] == WorkRequest("one more", 8, 0)
    first.close()

    second = _window(qtbot, path)
    got = second.form.spec()
    assert got.requests == wanted.requests
    assert got.requests[2].prompt == "Edited, with a comma and \"quotes\"\nand a second line"
    assert (got.requests[3].new_tokens, got.requests[4].arrival) == (21, 9)
    assert got.schedulers == ("continuous", "chunked", "paged", "prefix", "reserve")
    assert (got.max_batch, got.blocks, got.token_budget, got.block_size) == (3, 77, 40, 8)
    assert got.model == "tiny"
    assert second.form.preset_combo.currentData() == "random" and second.form.random_spin.value() == 5
    assert second.form.random_spin.isEnabled()
    assert second.form.problem() == ""


def test_a_fresh_or_unreadable_file_gives_the_defaults(qtbot, tmp_path):
    course = [(r.prompt, r.new_tokens, r.arrival) for r in preset("course-batch").requests]
    fresh = _window(qtbot, tmp_path / "none.ini").form.spec()
    assert [(r.prompt, r.new_tokens, r.arrival) for r in fresh.requests] == course
    assert fresh.schedulers == ("static", "continuous", "paged", "prefix") and fresh.blocks == 32
    bad = QSettings(str(tmp_path / "bad.ini"), QSettings.Format.IniFormat)
    bad.setValue("serve/requests", "[[\"a\", 3]")  # cut short
    bad.setValue("serve/blocks", 12)
    bad.sync()
    spec = _window(qtbot, tmp_path / "bad.ini").form.spec()
    assert [(r.prompt, r.new_tokens, r.arrival) for r in spec.requests] == course and spec.blocks == 12
