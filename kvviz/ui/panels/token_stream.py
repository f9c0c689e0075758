"""Token stream: each engine's prompt and generated text, the selected step's token highlighted.

Reads token_text from the traces only; tokens after the selected step are shown faded, tokens that
differ from the first engine's are underlined in red.
"""
from __future__ import annotations

import html
import json

import numpy as np
from PySide6.QtCore import QEvent, QMimeData, QPointF, Qt
from PySide6.QtGui import QTextOption
from PySide6.QtWidgets import QTextBrowser, QToolTip, QVBoxLayout

from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import engine_step
from kvviz.ui.panels.base import Panel

_ZEBRA = ("#eaf2fb", "#fdf3e1")  # alternate backgrounds: one token per step, boundaries visible
# Up to this many tokens in all engines, one span per token (zebra); beyond, one per run of equal
# style keeps setHtml fast (400 steps of four engines in zebra spans: ~20 ms a draw here).
_ZEBRA_SPANS = 400


# A generated token of whitespace only is drawn as marks (one per character, muted, then a zero-width
# space where a line may end): a step that wrote a space or a tab otherwise shows nothing new, and its
# highlight is a sliver. The prompt reads as text: a single space there stays a space. A newline is the
# arrow and a line break, everywhere.
_WHITESPACE_MARKS = {" ": "\u00b7", "\t": "\u2192", "\r": "\u240d"}
NEWLINE_MARK = "\u21b5"
_BREAK = "\u200b"


def shown_text(text: str, prompt: bool = False) -> str:
    """The characters a token is drawn as (a line break as Qt's U+2028): the text itself, or for a
    whitespace-only token its marks."""
    if text == "\\n":  # a newline as some tokenizers label it
        text = "\n"
    if not text.isspace() or (prompt and text == " "):
        return text.replace("\n", NEWLINE_MARK + "\u2028")
    marks = "".join(_WHITESPACE_MARKS.get(ch, "\u00b7") for ch in text.replace("\n", ""))
    return (marks + _BREAK if marks else "") + (NEWLINE_MARK + "\u2028") * text.count("\n")


def _token_html(text: str, prompt: bool = False) -> str:
    shown = shown_text(text, prompt)
    if text.isspace() and shown.startswith(tuple(_WHITESPACE_MARKS.values())):  # drawn as marks: muted
        marks, rest = shown.split(_BREAK, 1)
        return f'<span style="color:{style.MUTED_TEXT}">{marks}</span>{_BREAK}' + rest.replace("\u2028", "<br>")
    return html.escape(shown).replace("\u2028", "<br>")  # spaces kept by the block's pre-wrap


def _shown_length(text: str, prompt: bool = False) -> int:
    """Positions a token takes in the document as _token_html draws it (UTF-16 units, as Qt counts)."""
    return len(shown_text(text, prompt).encode("utf-16-le")) // 2


class _TokenView(QTextBrowser):
    """The panel's text view: a copy gives the tokens as they are (spaces, not their marks)."""

    def __init__(self, panel: TokenStreamPanel) -> None:
        super().__init__()
        self._panel = panel

    def createMimeDataFromSelection(self) -> QMimeData:  # noqa: N802 (Qt override)
        cursor = self.textCursor()
        data = QMimeData()
        data.setText(self._panel.copy_text(cursor.selectionStart(), cursor.selectionEnd()))
        return data


class TokenStreamPanel(Panel):
    key = "token_stream"
    picks_steps = True  # a click on a generated token shows the step that sampled it; on the prompt, prefill

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._view = _TokenView(self)
        self._view.setOpenLinks(False)
        self._view.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        font = self._view.font()
        font.setPointSize(11)
        self._view.setFont(font)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self._view)
        self._plain: dict[str, str] = {}
        self._highlighted: dict[str, str] = {}
        self._bodies: dict[tuple[str, str], list[str]] = {}  # each token's HTML, made once per run
        self._shown: tuple[RunHistory, int] | None = None
        # Per engine block, in order: where its tokens start in the block, and each token's end.
        self._token_ends: list[tuple[int, np.ndarray]] = []
        self._prompt_length = 0
        self._prompt_ends = np.zeros(0, dtype=np.int64)
        self._lengths: dict[tuple[str, str], list[int]] = {}  # each token's _shown_length, made once per run
        self._view.viewport().installEventFilter(self)
        self.retranslate()

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        if (watched is self._view.viewport() and event.type() == QEvent.Type.MouseButtonRelease
                and event.button() == Qt.MouseButton.LeftButton and not self._view.textCursor().hasSelection()):
            step = self.step_at(event.position())
            if step is not None:
                self.step_picked.emit(step)
        if watched is self._view.viewport() and event.type() == QEvent.Type.ToolTip:
            hit = self.token_at(QPointF(event.pos()))
            if hit is not None:  # the token under the pointer as typed: a blank one is seen for what it is
                engine, step, text = hit
                where = self.tr("prompt") if step < 0 else self.tr("step {step}").format(step=step)
                QToolTip.showText(event.globalPos(), f"{engine}, {where}: {json.dumps(text, ensure_ascii=False)}",
                                  self._view.viewport())
                return True
        return super().eventFilter(watched, event)

    def step_at(self, viewport_pos: QPointF) -> int | None:
        """The step whose token is drawn at this point of the view (0 on the prompt), else None."""
        hit = self.token_at(viewport_pos)
        if hit is None:
            return None
        return 0 if hit[1] < 0 else hit[1]  # the prompt: computed at prefill

    def token_at(self, viewport_pos: QPointF) -> tuple[str, int, str] | None:
        """(engine, step, text) of the token drawn at this point of the view; step -1 for a prompt
        token. None on an engine's name, its note, or past the text."""
        offset = QPointF(self._view.horizontalScrollBar().value(), self._view.verticalScrollBar().value())
        document = self._view.document()
        position = document.documentLayout().hitTest(viewport_pos + offset, Qt.HitTestAccuracy.ExactHit)
        if position < 0 or self._shown is None:
            return None
        block = document.findBlock(position)
        if not 0 <= block.blockNumber() < len(self._token_ends):
            return None
        history = self._shown[0]
        engine = [e for e in history.engines if history.traces.get(e)][block.blockNumber()]
        start, ends = self._token_ends[block.blockNumber()]
        at = position - block.position()
        if at < start - self._prompt_length:
            return None
        if at < start:
            index = int(np.searchsorted(self._prompt_ends, at - (start - self._prompt_length), side="right"))
            labels = self._prompt_labels(history)
            return (engine, -1, labels[index]) if index < len(labels) else None
        step = int(np.searchsorted(ends, at, side="right"))
        traces = history.traces[engine]
        return (engine, step, traces[step].token_text) if step < len(ends) else None

    @staticmethod
    def _prompt_labels(history: RunHistory) -> list[str]:
        return list(history.info.prompt_labels) or [str(i) for i in history.info.prompt_ids]

    def copy_text(self, first: int, last: int) -> str:
        """The document's text from position `first` to `last` as the tokens are: a whitespace token's
        marks become its spaces, tabs or newlines again (whole, if any of its marks is in the range)."""
        document = self._view.document()
        text = document.toPlainText()  # one character per document position
        if self._shown is None:
            return text[first:last]
        history = self._shown[0]
        engines = [e for e in history.engines if history.traces.get(e)]
        labels = self._prompt_labels(history)
        out, at = [], first
        for number, (start, ends) in enumerate(self._token_ends):
            base = document.findBlockByNumber(number).position()
            prompt_start = base + start - self._prompt_length
            tokens = [(prompt_start + (int(self._prompt_ends[i - 1]) if i else 0), prompt_start + int(end), t, True)
                      for i, (end, t) in enumerate(zip(self._prompt_ends, labels))]
            tokens += [(base + (int(ends[i - 1]) if i else start), base + int(end), trace.token_text, False)
                       for i, (end, trace) in enumerate(zip(ends, history.traces[engines[number]]))]
            for begin, end, token, prompt in tokens:
                if end <= at or begin >= last or shown_text(token, prompt) == token:
                    continue
                out.append(text[at:begin] if begin > at else "")
                out.append(token)
                at = end
        out.append(text[at:last] if last > at else "")
        return "".join(out).replace("\u2028", "\n").replace("\u2029", "\n")

    def retranslate(self) -> None:
        self.setToolTip(self.help_text())
        self._view.setPlaceholderText(self.tr(
            "Type a prompt and press Run (Ctrl+R): each engine's tokens appear here, one per step."))
        if self._shown is not None:
            self.show_step(*self._shown)  # "differs from ... from step ..."

    def title(self) -> str:
        return self.tr("Token stream")

    def help_text(self) -> str:
        return self.tr(
            "The prompt (grey) and the tokens each engine generated, one per step (alternating shades). "
            "The selected step's token is highlighted; later tokens are faded. Every engine should write "
            "exactly the same tokens: a KV cache is an optimisation and changes no math. A token that "
            "differs from the first engine's is underlined in red.")

    def plain_text(self, engine: str) -> str:
        """Prompt labels and generated token texts up to the selected step, as drawn."""
        return self._plain.get(engine, "")

    def highlighted(self, engine: str) -> str:
        """The token text highlighted for `engine` (the one sampled at the selected step)."""
        return self._highlighted.get(engine, "")

    def clear(self) -> None:
        self._view.clear()
        self._plain.clear()
        self._highlighted.clear()
        self._bodies.clear()
        self._shown = None
        self._token_ends = []
        self._lengths.clear()

    def show_step(self, history: RunHistory, step: int) -> None:
        engines = [e for e in history.engines if history.traces.get(e)]
        if not engines:
            self.clear()
            return
        self._shown = (history, step)
        prompt_labels = self._prompt_labels(history)
        prompt_html = "".join(_token_html(t, prompt=True) for t in prompt_labels)
        reference = history.token_ids(engines[0])
        if any(key[0] != history.info.run_id for key in self._bodies):
            self._bodies.clear()  # a new run
            self._lengths.clear()
        blocks = []
        self._plain.clear()
        self._highlighted.clear()
        self._token_ends = []
        prompt_lengths = [_shown_length(t, prompt=True) for t in prompt_labels]
        self._prompt_length = sum(prompt_lengths)
        self._prompt_ends = np.cumsum(prompt_lengths, dtype=np.int64)
        for order, engine in enumerate(engines):
            traces = history.traces[engine]
            k = engine_step(history, engine, step)
            zebra = len(traces) * len(engines) <= _ZEBRA_SPANS
            bodies = self._bodies.setdefault((history.info.run_id, engine), [])
            bodies.extend(_token_html(t.token_text) for t in traces[len(bodies):])
            diverged = next((t.step for t in traces if t.step < len(reference)
                             and t.token_id != reference[t.step]), None)
            runs: list[tuple[str, list[str]]] = []  # (css, bodies): equal neighbours share one span
            if not zebra and diverged is None:
                # A long run whose tokens all agree: three spans, without a pass over each token.
                runs = [("", bodies[:k]), (f"background:{style.HIGHLIGHT}; font-weight:bold", bodies[k: k + 1]),
                        (f"color:{style.MUTED_TEXT}", bodies[k + 1:])]
            else:
                for t, body in zip(traces, bodies):
                    differs = t.step < len(reference) and t.token_id != reference[t.step]
                    if t.step == k:
                        css = f"background:{style.HIGHLIGHT}; font-weight:bold"
                    elif t.step > k:
                        css = f"color:{style.MUTED_TEXT}"
                    else:
                        css = f"background:{_ZEBRA[t.step % 2]}" if zebra else ""
                    if differs:
                        css += "; text-decoration:underline; color:#c62828"
                    if runs and runs[-1][0] == css and t.step != k:
                        runs[-1][1].append(body)
                    else:
                        runs.append((css, [body]))
            parts = [f'<span style="{css}">{"".join(bodies)}</span>' for css, bodies in runs if bodies]
            current = traces[k]
            self._plain[engine] = "".join(prompt_labels) + "".join(t.token_text for t in traces[: k + 1])
            self._highlighted[engine] = current.token_text
            color = style.engine_color(engine, order)
            header = "" if diverged is None else self.tr("differs from {first} from step {step}").format(
                first=engines[0], step=diverged)
            # Where each token is in this block's text: the name, two spaces, the note, a line break,
            # the prompt, then one token per step.
            start = _shown_length(engine) + 2 + _shown_length(header) + 1 + self._prompt_length
            lengths = self._lengths.setdefault((history.info.run_id, engine), [])
            lengths.extend(_shown_length(t.token_text) for t in traces[len(lengths):])  # made once per run
            self._token_ends.append((start, start + np.cumsum(lengths, dtype=np.int64)))
            blocks.append(
                f'<div style="margin-bottom:8px; white-space:pre-wrap">'
                f'<span style="color:{color}; font-weight:bold">{html.escape(engine)}</span>'
                f'&nbsp;&nbsp;<span style="color:#c62828; font-size:9pt">{header}</span><br>'
                f'<span style="color:#6b6b6b; background:#efefef">{prompt_html}</span>{"".join(parts)}'
                f'</div>')
        scroll = self._view.verticalScrollBar().value()
        self._view.setHtml("".join(blocks))
        self._view.verticalScrollBar().setValue(scroll)
