"""A block's tokens as text, with the tokenizer a model name or folder names (`--model`, the Watch window's
Tokenizer field): what the mirror's MirrorState.texts and the page show. Loads the tokenizer through
kvviz.models.presets; no socket, no Qt.
"""
from __future__ import annotations

from collections.abc import Callable


def text_of_tokens(model: str) -> Callable[[tuple[int, ...]], str]:
    """The tokens of a block as readable text; ValueError (one line) for a model that names no tokenizer."""
    from kvviz.models.presets import load_tokenizer
    from kvviz.textshow import readable

    tok = load_tokenizer(model)
    return lambda ids: readable([tok.token_text(i) for i in ids])
