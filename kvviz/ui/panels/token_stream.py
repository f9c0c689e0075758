"""Token stream: each engine's prompt and generated text, the selected step's token highlighted.

Reads token_text from the traces only; tokens after the selected step are shown faded, tokens that
differ from the first engine's are underlined in red. Tokens that split a character (bytes of one
UTF-8 character, BPE pieces) are drawn as that character once, in a shade of their own, the tooltip
naming each token's id and bytes (kvviz.textshow.group_labels).
"""
from __future__ import annotations

import functools
import html
import json

import numpy as np
from PySide6.QtCore import QEvent, QMimeData, QPointF, Qt
from PySide6.QtGui import QTextOption
from PySide6.QtWidgets import QTextBrowser, QToolTip, QVBoxLayout

from kvviz.page.said import said
from kvviz.textshow import TextGroup, group_labels
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import engine_step
from kvviz.ui.panels._shown import shown_engines
from kvviz.ui.panels.base import Panel, said_text

_ZEBRA = ("#eaf2fb", "#fdf3e1")  # alternate backgrounds: one token per step, boundaries visible
_SPLIT = ("#d9efd4", "#c6e5f0")  # a character made of several tokens: drawn once, in these shades
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
    whitespace-only token its marks. A generated token ends with a zero-width space: a line may end
    between any two tokens, never inside one. (Without it Qt's word-or-anywhere wrap left a run of
    tokens without spaces unwrapped at some widths: at 284 px, under Xvfb, a 647 px line, a horizontal
    scroll bar, and the selected token past the right edge.)"""
    if text == "\\n":  # a newline as some tokenizers label it
        text = "\n"
    if not text.isspace() or (prompt and text == " "):
        shown = text.replace("\n", NEWLINE_MARK + "\u2028")
        return shown if prompt or not text else shown + _BREAK
    marks = "".join(_WHITESPACE_MARKS.get(ch, "\u00b7") for ch in text.replace("\n", ""))
    return (marks + _BREAK if marks else "") + (NEWLINE_MARK + "\u2028") * text.count("\n")


@functools.lru_cache(maxsize=4096)
def _token_html(text: str, prompt: bool = False) -> str:
    shown = shown_text(text, prompt)
    if text.isspace() and shown.startswith(tuple(_WHITESPACE_MARKS.values())):  # drawn as marks: muted
        marks, rest = shown.split(_BREAK, 1)
        return f'<span style="color:{style.MUTED_TEXT}">{marks}</span>{_BREAK}' + rest.replace("\u2028", "<br>")
    return html.escape(shown).replace("\u2028", "<br>")  # spaces kept by the block's pre-wrap


@functools.lru_cache(maxsize=4096)
def _shown_length(text: str, prompt: bool = False) -> int:
    """Positions a token takes in the document as _token_html draws it (UTF-16 units, as Qt counts)."""
    return len(shown_text(text, prompt).encode("utf-16-le")) // 2


class _Grouped:
    """One token sequence grouped as people read it: per token its display text (a group's text on its first
    token, "" on the others) and the group it belongs to."""

    def __init__(self, labels: list[str]) -> None:
        self.labels = labels
        self.groups = group_labels(labels)
        self.shown: list[str] = []
        self.group_of: list[int] = []
        for number, group in enumerate(self.groups):
            self.shown += [group.text] + [""] * (group.size - 1)
            self.group_of += [number] * group.size

    def group(self, index: int) -> TextGroup:
        return self.groups[self.group_of[index]]


def describe_group(group: TextGroup, ids) -> str:
    """The tooltip's account of a group: its text, then each token's id and bytes."""
    return f"{json.dumps(group.text, ensure_ascii=False)} ({group.describe(list(ids))})"


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


PROMPT_SHOWN = 2000  # prompt tokens shown at most: the first and last half of them


class TokenStreamPanel(Panel):
    key = "token_stream"
    picks_steps = True  # a click on a generated token shows the step that sampled it; on the prompt, prefill

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._view = _TokenView(self)
        self._view.setOpenLinks(False)
        self._view.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        # the lines wrap at the view's width (a break after every token): nothing to scroll sideways to,
        # where a glyph's sub-pixel overhang (0.6 px at 206 px) had shown a scroll bar
        self._view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._set_font()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self._view)
        self._plain: dict[str, str] = {}
        self._highlighted: dict[str, str] = {}
        self._grouped: dict[tuple, _Grouped] = {}  # token sequences grouped as read, per engine and length
        self._shown: tuple[RunHistory, int] | None = None
        # Per engine block, in order: where its tokens start in the block, and each token's end.
        self._token_ends: list[tuple[int, np.ndarray]] = []
        self._prompt_length = 0
        self._prompt_ends = np.zeros(0, dtype=np.int64)
        self._view.viewport().installEventFilter(self)
        self.retranslate()

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        if (watched is self._view.viewport() and event.type() == QEvent.Type.MouseButtonRelease
                and event.button() == Qt.MouseButton.LeftButton and not self._view.textCursor().hasSelection()):
            step = self.step_at(event.position())
            if step is not None:
                self.step_picked.emit(step)
        if watched is self._view.viewport() and event.type() == QEvent.Type.ToolTip:
            tip = self.tooltip_at(QPointF(event.pos()))
            if tip:  # the token under the pointer as typed: a blank one is seen for what it is
                QToolTip.showText(event.globalPos(), tip, self._view.viewport())
                return True
        return super().eventFilter(watched, event)

    def tooltip_at(self, viewport_pos: QPointF) -> str:
        """The engine, the step (or steps) and the text under the point, with each token's id and bytes."""
        hit = self._hit(viewport_pos)
        if hit is None or self._shown is None:
            return ""
        engine, step, text = hit
        history = self._shown[0]
        if step < 0:
            grouped, index = self._prompt_grouped(history), -step - 1
            ids = self._prompt_ids(history)
            group = grouped.group(index) if index < len(grouped.group_of) else None
            where = self.tr("prompt")
        else:
            grouped = self._grouped_steps(history, engine)
            ids = [t.token_id for t in history.traces[engine]]
            group = grouped.group(step) if step < len(grouped.group_of) else None
            where = (self.tr("steps {first}-{last}").format(first=group.start, last=group.stop - 1)
                     if group is not None and group.size > 1 else self.tr("step {step}").format(step=step))
        if group is None:
            return f"{engine}, {where}: {json.dumps(text, ensure_ascii=False)}"
        return f"{engine}, {where}: {describe_group(group, ids[group.start:group.stop])}"

    def step_at(self, viewport_pos: QPointF) -> int | None:
        """The step whose token is drawn at this point of the view (0 on the prompt), else None."""
        hit = self.token_at(viewport_pos)
        if hit is None:
            return None
        return 0 if hit[1] < 0 else hit[1]  # the prompt: computed at prefill

    def token_at(self, viewport_pos: QPointF) -> tuple[str, int, str] | None:
        """(engine, step, text) of the token drawn at this point of the view (for a character made of several
        tokens, its first token and the character); step -1 for a prompt token. None on an engine's name,
        its note, or past the text."""
        hit = self._hit(viewport_pos)
        return None if hit is None else (hit[0], max(hit[1], -1), hit[2])

    def _hit(self, viewport_pos: QPointF) -> tuple[str, int, str] | None:
        """As token_at, but a prompt token's step is -1 - its index in the prompt."""
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
            shown = self._prompt_grouped(history).shown
            return (engine, -1 - index, shown[index]) if index < len(shown) else None
        step = int(np.searchsorted(ends, at, side="right"))
        shown = self._grouped_steps(history, engine).shown
        return (engine, step, shown[step]) if step < len(ends) else None

    @staticmethod
    def _prompt_ids(history: RunHistory) -> list[int]:
        """The prompt's ids as shown: a prompt longer than PROMPT_SHOWN shows its start and its end,
        with one mark (id -1) between them for the tokens left out."""
        ids = history.info.prompt_ids
        if len(ids) <= PROMPT_SHOWN:
            return list(ids)
        half = PROMPT_SHOWN // 2
        return [*ids[:half], -1, *ids[len(ids) - half:]]

    def _prompt_labels(self, history: RunHistory) -> list[str]:
        ids = history.info.prompt_ids
        labels = list(history.info.prompt_labels[:len(ids)]) if history.info.prompt_labels else []
        if len(ids) <= PROMPT_SHOWN:
            return labels or [str(i) for i in ids]
        half = PROMPT_SHOWN // 2
        head = labels[:half] if labels else [str(i) for i in ids[:half]]
        tail = labels[len(ids) - half:] if labels else [str(i) for i in ids[len(ids) - half:]]
        # A million prompt tokens laid out as text took the window minutes: drawing costs what is shown.
        gap = self.tr(" … {n} prompt tokens not shown … ").format(n=f"{len(ids) - 2 * half:,}")
        return [*head, gap, *tail]

    def _prompt_grouped(self, history: RunHistory) -> _Grouped:
        key = ("prompt", history.info.run_id, len(history.info.prompt_ids))
        if key not in self._grouped:
            self._grouped[key] = _Grouped(self._prompt_labels(history))
        return self._grouped[key]

    def _grouped_steps(self, history: RunHistory, engine: str) -> _Grouped:
        """The engine's generated tokens grouped, made again only when steps have come since."""
        traces = history.traces[engine]
        key = (engine, history.info.run_id, len(traces))
        if key not in self._grouped:
            self._grouped = {k: v for k, v in self._grouped.items() if k[:2] != key[:2]}
            self._grouped[key] = _Grouped([t.token_text for t in traces])
        return self._grouped[key]

    def copy_text(self, first: int, last: int) -> str:
        """The document's text from position `first` to `last` as the tokens are: a whitespace token's
        marks become its spaces, tabs or newlines again (whole, if any of its marks is in the range)."""
        document = self._view.document()
        text = document.toPlainText()  # one character per document position
        if self._shown is None:
            return text[first:last]
        history = self._shown[0]
        engines = [e for e in history.engines if history.traces.get(e)]
        labels = self._prompt_grouped(history).shown
        out, at = [], first
        for number, (start, ends) in enumerate(self._token_ends):
            base = document.findBlockByNumber(number).position()
            prompt_start = base + start - self._prompt_length
            tokens = [(prompt_start + (int(self._prompt_ends[i - 1]) if i else 0), prompt_start + int(end), t, True)
                      for i, (end, t) in enumerate(zip(self._prompt_ends, labels))]
            shown = self._grouped_steps(history, engines[number]).shown
            tokens += [(base + (int(ends[i - 1]) if i else start), base + int(end), text, False)
                       for i, (end, text) in enumerate(zip(ends, shown))]
            for begin, end, token, prompt in tokens:
                if end <= at or begin >= last or shown_text(token, prompt) == token:
                    continue
                out.append(text[at:begin] if begin > at else "")
                out.append(token)
                at = end
        out.append(text[at:last] if last > at else "")
        return "".join(out).replace("\u2028", "\n").replace("\u2029", "\n")

    def _set_font(self) -> None:
        font = self._view.font()
        font.setPointSizeF(style.points("text"))
        self._view.setFont(font)

    priority = 45

    def readable_size(self) -> tuple[int, int]:
        """Four lines of the tokens' type, about 24 characters wide, and the margins."""
        metrics = self._view.fontMetrics()
        return metrics.horizontalAdvance("0" * 24) + 8, 4 * metrics.lineSpacing() + 12

    def apply_zoom(self) -> None:
        self._set_font()
        self.retranslate()

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
            "A character made of several tokens (bytes of one character, or pieces of it) is drawn once, "
            "shaded green or blue; its tooltip lists each token's id and bytes. "
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
        self._grouped.clear()
        self._shown = None
        self._token_ends = []

    def show_step(self, history: RunHistory, step: int) -> None:
        engines = shown_engines(self, history, step)
        if not engines:
            return
        prompt_labels = self._prompt_grouped(history).shown
        prompt_html = "".join(_token_html(t, prompt=True) for t in prompt_labels)
        reference = history.token_ids(engines[0])
        if any(key[1] != history.info.run_id for key in self._grouped):
            self._grouped.clear()  # a new run
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
            grouped = self._grouped_steps(history, engine)
            bodies = [_token_html(text) for text in grouped.shown]  # cached per text: a char's group may grow
            diverged = next((t.step for t in traces if t.step < len(reference)
                             and t.token_id != reference[t.step]), None)
            runs: list[tuple[str, list[str]]] = []  # (css, bodies): equal neighbours share one span
            if not zebra and diverged is None:
                # A long run whose tokens all agree: three spans, without a pass over each token.
                first, last = grouped.group(k).start, grouped.group(k).stop  # the character step k is part of
                runs = [("", bodies[:first]), (f"background:{style.HIGHLIGHT}; font-weight:bold", bodies[first:last]),
                        (f"color:{style.MUTED_TEXT}", bodies[last:])]
            else:
                for t, body in zip(traces, bodies):
                    group = grouped.group(t.step)
                    differs = any(i < len(reference) and traces[i].token_id != reference[i]
                                  for i in range(group.start, group.stop))  # one character: one mark
                    number = grouped.group_of[t.step]
                    if group.start <= k < group.stop:
                        css = f"background:{style.HIGHLIGHT}; font-weight:bold"
                    elif group.start > k:
                        css = f"color:{style.MUTED_TEXT}"
                    elif group.size > 1:
                        css = f"background:{_SPLIT[number % 2]}"
                    else:
                        css = f"background:{_ZEBRA[number % 2]}" if zebra else ""
                    if differs:
                        css += "; text-decoration:underline; color:#c62828"
                    if runs and runs[-1][0] == css:  # neighbours differ unless one character's tokens
                        runs[-1][1].append(body)
                    else:
                        runs.append((css, [body]))
            parts = [f'<span style="{css}">{"".join(bodies)}</span>' for css, bodies in runs if bodies]
            self._plain[engine] = "".join(prompt_labels) + "".join(grouped.shown[: grouped.group(k).stop])
            self._highlighted[engine] = grouped.group(k).text
            color = style.engine_color(engine, order)
            header = "" if diverged is None else said_text(said("TokenStreamPanel", "differs from {first} from step "
                                                                "{step}", first=engines[0], step=diverged))
            # Where each token is in this block's text: the name, two spaces, the note, a line break,
            # the prompt, then one token per step (each with its zero-width space, in shown_text).
            start = _shown_length(engine, True) + 2 + _shown_length(header, True) + 1 + self._prompt_length  # as text
            lengths = [_shown_length(text) for text in grouped.shown]
            self._token_ends.append((start, start + np.cumsum(lengths, dtype=np.int64)))
            blocks.append(
                f'<div style="margin-bottom:8px; white-space:pre-wrap">'
                f'<span style="color:{color}; font-weight:bold">{html.escape(engine)}</span>'
                f'&nbsp;&nbsp;<span style="color:#c62828; font-size:{style.points("tick"):g}pt">{header}</span><br>'
                f'<span style="color:#6b6b6b; background:#efefef">{prompt_html}</span>{"".join(parts)}'
                f'</div>')
        scroll = self._view.verticalScrollBar().value()
        self._view.setHtml("".join(blocks))
        self._view.verticalScrollBar().setValue(scroll)
