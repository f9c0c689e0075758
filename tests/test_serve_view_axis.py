"""The Serve view timeline's step-number axis: under every scheduler's block, labels at a round interval
(1, 2, 5, 10, ...), nine in ten of its multiples labelled at the least, each over its own step's columns
(cell_at there answers that step), none touching the next, each with ink in the grab and a tick at its
step's first column; a narrow panel labels fewer."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint
from test_serve_view_panels import shown
from test_serve_view_records import course_batch_static, shared_prefix_pair

from kvviz.serving.history import ServeHistory


@pytest.mark.parametrize("width", [900, 260])
@pytest.mark.parametrize("which", ["course", "pair"])
def test_the_step_axis_labels_sit_over_their_steps(qtbot, which, width):
    from kvviz.ui.serve.panels.timeline import AXIS_GAP, KEEP_SHARE, TimelinePanel

    runs = ((course_batch_static(),) if which == "course"
            else (shared_prefix_pair("paged"), shared_prefix_pair("prefix")))
    run = ServeHistory.from_runs(runs)
    panel = TimelinePanel()
    image = shown(qtbot, panel, run, step=run.n_steps() - 1, size=(width, 360))
    dark = np.abs(image.astype(int) - 0x30).max(axis=2) <= 90
    assert set(panel.axis) == set(run.schedulers)
    for k, rect, _cell_w in panel.blocks:
        labels = panel.axis[k]
        steps = [s for s, _box in labels]
        assert steps[0] == 0 and steps == sorted(steps)
        interval = min(b - a for a, b in zip(steps, steps[1:])) if len(steps) > 1 else run.n_steps(k)
        assert interval in (1, 2, 5, 10, 20, 50, 100) or len(steps) == 1
        multiples = list(range(0, run.n_steps(k), interval))
        assert set(steps) <= set(multiples) and len(steps) >= KEEP_SHARE * len(multiples)
        for (_s, a), (_t, b) in zip(labels, labels[1:]):
            assert b.left() >= a.right() + 1 + AXIS_GAP
        for step, box in labels:
            assert box.top() > rect.bottom() and rect.left() <= box.left() and box.right() <= rect.right() + 1
            assert dark[box.top(): box.bottom() + 1, box.left(): box.right() + 1].sum() >= 3, (k, step)
            # The label's centre over the step's own columns (or, at the block's end, the label kept inside).
            over = panel.cell_at(QPoint(box.center().x(), rect.top() + 1))
            first = rect.left() + round(run.timeline(k, panel.cap).x0[step] * panel.blocks[0][2])
            assert (over is not None and over[2] == step) or box.right() >= rect.right() - 1, (k, step, over)
            assert dark[box.top() - 2: box.top(), first].any(), (k, step, "tick")
        if width == 900:  # course: 20 steps, one of them 32 slots wide; pair: 4 steps, 2 of them 36 slots
            assert len(labels) >= (6 if which == "course" else 2)
    if width == 260:
        assert max(len(v) for v in panel.axis.values()) < run.n_steps()
