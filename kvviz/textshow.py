"""How token labels are shown as text: a token's label is its text, or `<xx>` per byte where the token
holds part of a character (lossless for the byte model); labels grouped into text as people read it
(a character split over several tokens drawn once).

Shared by the window's panels and the trace record; it knows no tokenizer. Stdlib only: no torch, no Qt.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

_ESCAPE = re.compile(r"<([0-9a-f]{2})>")


def escape_bytes(data: bytes) -> str:
    """`data` as text, each byte that is not part of a whole UTF-8 character as `<xx>`."""
    text = data.decode("utf-8", errors="surrogateescape")
    return "".join(f"<{ord(c) - 0xDC00:02x}>" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in text)


def label_bytes(label: str) -> bytes:
    """The bytes a token label stands for: its text as UTF-8, each `<xx>` as that byte, `\\n` as a newline."""
    label = label.replace("\\n", "\n")
    out, at = bytearray(), 0
    for match in _ESCAPE.finditer(label):
        out += label[at:match.start()].encode("utf-8", errors="surrogatepass") + bytes([int(match.group(1), 16)])
        at = match.end()
    out += label[at:].encode("utf-8", errors="surrogatepass")
    return bytes(out)


@dataclass(frozen=True)
class TextGroup:
    """Tokens [start, stop) and the text they make together: one token, or several that split a character
    (or a cluster a reader sees as one, such as an emoji sequence or a letter and its accent)."""

    start: int
    stop: int
    text: str
    pieces: tuple[bytes, ...]  # each token's bytes

    @property
    def size(self) -> int:
        return self.stop - self.start

    def describe(self, ids: Sequence[int] | None = None) -> str:
        """One line for a tooltip: the tokens' ids (when known) and bytes."""
        parts = []
        for i, piece in enumerate(self.pieces):
            hexed = " ".join(f"{b:02x}" for b in piece)
            parts.append(f"{ids[i]}: {hexed}" if ids is not None and i < len(ids) else hexed)
        return f"{len(self.pieces)} tokens: " + "; ".join(parts) if len(self.pieces) > 1 else parts[0]


def _joins_previous(ch: str, prev: str, regional_run: int) -> bool:
    """True when `ch` continues the cluster `prev` ends (a simplified extended grapheme cluster rule):
    marks, joiners, variation selectors, skin tones, tags, the second of two regional indicators, and
    whatever follows a zero-width joiner."""
    cp = ord(ch)
    if prev == "\u200d" or cp == 0x200D:
        return True
    if unicodedata.category(ch) in ("Mn", "Mc", "Me"):
        return True
    if 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF or 0x1F3FB <= cp <= 0x1F3FF or 0xE0020 <= cp <= 0xE007F:
        return True
    return 0x1F1E6 <= cp <= 0x1F1FF and regional_run % 2 == 1


def group_labels(labels: Sequence[str]) -> list[TextGroup]:
    """Consecutive tokens grouped so that each group ends where a character (a cluster a reader sees as one)
    ends. A group's text is what its bytes decode to; bytes that do not decode stay `<xx>`, and so does an
    unfinished character at the end."""
    pieces = [label_bytes(label) for label in labels]
    groups: list[TextGroup] = []
    start, pending = 0, b""
    regional = 0

    def close(stop: int) -> None:
        nonlocal regional
        text = _visible(escape_bytes(pending))
        for ch in text:
            regional = regional + 1 if 0x1F1E6 <= ord(ch) <= 0x1F1FF else 0
        groups.append(TextGroup(start, stop, text, tuple(pieces[start:stop])))

    for i, piece in enumerate(pieces):
        if pending and _utf8_state(pending + piece) == "invalid":
            close(i)  # an unfinished character the next token does not finish: its bytes stay escaped
            start, pending = i, b""
        pending += piece
        nxt = pieces[i + 1] if i + 1 < len(pieces) else None
        if nxt is not None and _utf8_state(pending) == "incomplete" and _utf8_state(pending + nxt) != "invalid":
            continue
        if nxt is not None:
            text = escape_bytes(pending)
            head = (nxt + b"".join(pieces[i + 2:i + 5])).decode("utf-8", errors="ignore")[:1]
            run = regional
            for ch in text:
                run = run + 1 if 0x1F1E6 <= ord(ch) <= 0x1F1FF else 0
            if head and text and _joins_previous(head, text[-1], run):
                continue
        close(i + 1)
        start, pending = i + 1, b""
    return groups


def _visible(text: str) -> str:
    """Control characters other than tab, newline and carriage return as `<xx>`: they decode but draw nothing."""
    return "".join(f"<{ord(c):02x}>" if unicodedata.category(c) == "Cc" and c not in "\t\n\r" else c
                   for c in text)


def _utf8_state(data: bytes) -> str:
    """"complete" when `data` decodes, "incomplete" when it stops part-way through a character that more
    bytes may finish, else "invalid"."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "incomplete" if exc.reason == "unexpected end of data" and exc.end == len(data) else "invalid"
    return "complete"


def display_labels(labels: Sequence[str], rest: str = "") -> list[str]:
    """One label per token as a reader sees the text: a group's text on its first token, `rest` on the others."""
    out: list[str] = []
    for group in group_labels(labels):
        out.append(group.text)
        out.extend([rest] * (group.size - 1))
    return out


def readable(labels: Sequence[str]) -> str:
    """The text the tokens make together."""
    return "".join(group.text for group in group_labels(labels))
