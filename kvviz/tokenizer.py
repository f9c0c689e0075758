"""Tokenizers: bytes for the shipped model (any Unicode text encodes), tokenizer.json for checkpoints.

No torch, no Qt.
"""
from __future__ import annotations

from pathlib import Path


class ByteTokenizer:
    """UTF-8 bytes are the tokens: 256 ids, nothing unknown."""

    vocab_size = 256

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")

    def token_text(self, token_id: int) -> str:
        """A label for one token: the character for printable ASCII, else the byte in hex."""
        if 32 <= token_id < 127:
            return chr(token_id)
        if token_id == 10:
            return "\\n"
        return f"<{token_id:02x}>"


class HFTokenizer:
    """A `tokenizer.json` read by the `tokenizers` library (local files only)."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"{path}: tokenizer.json not found (kvviz reads only tokenizer.json)")
        try:
            from tokenizers import Tokenizer
        except ImportError:  # pragma: no cover - declared dependency
            raise ValueError("the 'tokenizers' package is needed to read tokenizer.json") from None
        try:
            self._tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # the library raises a bare Exception on bad files
            raise ValueError(f"{path}: not a valid tokenizer.json ({exc})") from None
        self.vocab_size = self._tok.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def token_text(self, token_id: int) -> str:
        text = self._tok.decode([token_id], skip_special_tokens=False)
        return text.replace("\n", "\\n") if text else f"<{token_id}>"
