"""The app's model presets (kvviz.models.presets) in the UI's language: each one-line description and warning,
as the memory calculator and the model picker show them. Knows no widgets; imports no torch (the texts arrive
from the worker's Environment, so the English below must match kvviz.models.presets word for word)."""
from __future__ import annotations

from kvviz.ui.qtutil import translator

_tr = translator("ModelPresets")


def preset_text(text: str) -> str:
    """A preset's description or warning in the current language; any other text (a checkpoint's) as given."""
    known = {
        "the chapter's shape (2 layers, 4 heads of 32), trained on Python's docs":
            _tr("the chapter's shape (2 layers, 4 heads of 32), trained on Python's docs"),
        "the chapter's exact shape with seeded random weights":
            _tr("the chapter's exact shape with seeded random weights"),
        "random; 8 layers, hidden 512, 8 heads of 64: big enough for the cat copy to show":
            _tr("random; 8 layers, hidden 512, 8 heads of 64: big enough for the cat copy to show"),
        "random weights in Qwen3-0.6B's published shape (28 layers, 16 Q / 8 KV heads of 128)":
            _tr("random weights in Qwen3-0.6B's published shape (28 layers, 16 Q / 8 KV heads of 128)"),
        "slow on a CPU: building it and each prefill take seconds; meant for memory figures":
            _tr("slow on a CPU: building it and each prefill take seconds; meant for memory figures"),
    }
    return known.get(text, text)
