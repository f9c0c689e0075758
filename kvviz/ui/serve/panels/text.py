"""Token stream of the selected request: its prompt and, per scheduler, the text it has generated as of
the step shown (every scheduler's tokens should be the same: the schedulers change who runs when, not
what a request computes). Without a selection, request 0. Once a run has ended and every request has been
run alone (the worker's solo runs), one line per scheduler says whether every request's tokens equal its own
solo run: green "tokens = solo runs: 4 of 4", or red, naming each request that differs and the token and step
where it first does. Where vLLM ran beside them, its text too (the tokens it reported, as kvviz's tokenizer
writes them).

Reads ServeHistory.text_of and ServeHistory.solo_checks only.
"""
from __future__ import annotations

import html

from PySide6.QtWidgets import QTextBrowser, QVBoxLayout, QWidget

from kvviz.serving import narration
from kvviz.serving.history import VLLM, ServeHistory
from kvviz.serving.words import panel_words
from kvviz.ui import style
from kvviz.ui.qtutil import translator
from kvviz.ui.serve import colors
from kvviz.ui.serve.panels.base import ServePanel

PROMPT_CHARS = 600  # a longer prompt is shown by its end
SAME_COLOR = "#1b7f3b"  # tokens equal to the solo runs'
DIFFER_COLOR = "#b00020"

_tr = translator("TextPanel")


def solo_text(checks) -> tuple[bool, str]:
    """(all equal, the words) of one scheduler's SoloChecks in the window's language (kvviz.serving.narration's,
    which the serve page says too): "tokens = solo runs: 4 of 4", or which requests differ, from which token
    (counted from 1) and at which step (requests and steps as the timeline numbers them)."""
    return narration.solo_text(checks, _tr)


class TextPanel(ServePanel):
    key = "text"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.browser = QTextBrowser()
        self.browser.setObjectName("serve_text")
        self.browser.setOpenLinks(False)
        layout.addWidget(self.browser)
        self.request = 0
        self._html = ""

    def title(self) -> str:
        return self.tr("Request {0}: its text").format(self.request)

    def help_text(self) -> str:
        return self.tr("The selected request's prompt and what each scheduler has generated for it so far. "
                       "Click a cell of the timeline or a block of the pool to choose the request.")

    def clear(self) -> None:
        self.browser.clear()
        self._html = ""

    def _solo_html(self, run: ServeHistory) -> str:
        """The solo lines, once the run's results carry the solo runs' tokens (whatever the step shown)."""
        lines = []
        for k in run.schedulers:
            checks = run.solo_checks(k)
            if not checks:
                continue
            ok, words = solo_text(checks)
            lines.append(f'<p class="solo" style="margin:2px 0"><b style="color:{colors.scheduler_color(k)}">'
                         f'{html.escape(k)}</b> <span style="color:{SAME_COLOR if ok else DIFFER_COLOR}">'
                         f'{html.escape(words)}</span></p>')
        if not lines:
            return ""
        return (f'<p style="margin:6px 0 2px 0; color:{style.MUTED_TEXT}">'
                f'{html.escape(narration.workload_text(run.workload_name, run.n_requests(), _tr))}</p>'
                + "".join(lines))

    def show_step(self, run: ServeHistory, step: int, request: int | None) -> None:
        n = run.n_requests()
        if not n:
            self.clear()
            return
        self.request = request if request is not None and request < n else 0
        parts = []
        prompt = ""
        same = set()
        for k in run.schedulers + ((VLLM,) if run.vllm is not None else ()):
            if not run.n_steps(k):
                continue
            prompt, text = run.text_of(k, self.request, step)
            same.add(text)
            parts.append(f'<p style="margin:2px 0"><b style="color:{colors.scheduler_color(k)}">'
                         f'{html.escape(colors.lane_name(k))}</b> {html.escape(text)}</p>')
        if not parts:
            prompt = run.workload.requests[self.request].prompt
        shown = prompt if len(prompt) <= PROMPT_CHARS else "…" + prompt[-PROMPT_CHARS:]
        head = (f'<p style="margin:2px 0; color:{style.MUTED_TEXT}; white-space:pre-wrap">'
                f'{html.escape(shown)}</p>')
        note = ""
        done = run.finished and all(step >= run.n_steps(k) - 1 for k in run.schedulers)
        if done and len(same) > 1:
            note = f'<p style="color:#b00020">{html.escape(panel_words(translator)["differ"])}</p>'
        page = head + "".join(parts) + note + self._solo_html(run)
        if page != self._html:
            self._html = page
            self.browser.setHtml(page)
