"""A panel added as one class and one entry in kvviz.ui.panels.PANELS is in the compare window: built by the grid
with its title and help, toggled from View, shown alone, and drawn at the step the window shows."""
from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel, QVBoxLayout

from kvviz.ui.panels import PANELS
from kvviz.ui.panels.base import Panel

ENTRY = ("throwaway", f"{__name__}:ThrowawayPanel")


class ThrowawayPanel(Panel):
    """Each engine's token at the shown step, as text."""

    def __init__(self) -> None:
        super().__init__()
        self.label = QLabel()
        QVBoxLayout(self).addWidget(self.label)

    def title(self) -> str:
        return "Throwaway"

    def help_text(self) -> str:
        return "Each engine's token at the shown step."

    def show_step(self, history, step: int) -> None:
        self.label.setText(" ".join(f"{e}={t.token_id}" for e in history.engines
                                    if (t := history.at(e, step)) is not None))

    def readable_size(self) -> tuple[int, int]:
        return 160, 40


@pytest.fixture
def registered():
    """The one registry entry, taken out again after the test (the grid reads the same list)."""
    PANELS.append(ENTRY)
    yield
    PANELS.remove(ENTRY)


@pytest.fixture
def saved_run(tmp_path, tiny_random, byte_tokenizer):
    """A three-token concat run on tiny-random, saved as a trace file, and its tokens."""
    from kvviz.engines import make_engine
    from kvviz.records import traceio
    from kvviz.records.trace import RunInfo

    ids = byte_tokenizer.encode("KV")
    cfg = tiny_random.cfg
    steps = list(make_engine("concat", tiny_random).generate(ids, 3, run_id="t"))
    info = RunInfo(run_id="t", model_name=cfg.name, device="cpu", dtype="float32", prompt="KV",
                   prompt_ids=tuple(ids), prompt_labels=tuple("KV"), engines=("concat",), max_new_tokens=3,
                   n_layer=cfg.n_layer, n_head=cfg.n_head, n_kv_head=cfg.n_kv_head, head_dim=cfg.head_dim,
                   kv_bytes_per_token=cfg.kv_bytes_per_token(), block_size=16)
    return traceio.save_run(tmp_path / "run.kvviz.json", info, {"concat": steps}), [t.token_id for t in steps]


def test_a_panel_of_one_class_and_one_registry_entry_is_built_toggled_and_drawn(qtbot, tmp_path, registered,
                                                                                  saved_run):
    from tests.test_export import make_window

    path, tokens = saved_run
    window, actions = make_window(tmp_path)
    qtbot.addWidget(window)
    assert actions.open_trace(str(path)), window.error_text()
    grid = window.grid
    panel = grid.panels["throwaway"]
    assert isinstance(panel, ThrowawayPanel) and panel.key == "throwaway" and grid.load_errors == []
    frame = grid.frames["throwaway"]
    assert frame.header.text() == "Throwaway" and frame.toolTip().startswith("Each engine's token")
    toggle = grid.panel_actions["throwaway"]
    assert toggle.text() == "Throwaway" and toggle.isChecked()
    toggle.trigger()  # View > Throwaway: hidden
    assert frame.isHidden() and "throwaway" not in grid.shown_panels()
    toggle.trigger()
    grid.show_alone("throwaway")
    qtbot.waitUntil(lambda: not frame.isHidden() and grid.shown_panels() == ["throwaway"], timeout=5_000)
    window.act_last.trigger()  # End: the replay's last step, drawn by the window's frame
    qtbot.waitUntil(lambda: panel.label.text() == f"concat={tokens[-1]}", timeout=5_000)
    window.act_first.trigger()  # Home
    qtbot.waitUntil(lambda: panel.label.text() == f"concat={tokens[0]}", timeout=5_000)
    window.close()
