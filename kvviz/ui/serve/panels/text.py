"""Token stream of the selected request: its prompt and, per scheduler, the text it has generated as of
the step shown (every scheduler's tokens should be the same: the schedulers change who runs when, not
what a request computes). Without a selection, request 0.

Reads ServeHistory.text_of only.
"""
from __future__ import annotations

import html

from PySide6.QtWidgets import QTextBrowser, QVBoxLayout, QWidget

from kvviz.serving.history import ServeHistory
from kvviz.ui import style
from kvviz.ui.serve import colors
from kvviz.ui.serve.panels.base import ServePanel

PROMPT_CHARS = 600  # a longer prompt is shown by its end


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

    def show_step(self, run: ServeHistory, step: int, request: int | None) -> None:
        n = run.n_requests()
        if not n:
            self.clear()
            return
        self.request = request if request is not None and request < n else 0
        parts = []
        prompt = ""
        same = set()
        for k in run.schedulers:
            if not run.n_steps(k):
                continue
            prompt, text = run.text_of(k, self.request, step)
            same.add(text)
            parts.append(f'<p style="margin:2px 0"><b style="color:{colors.scheduler_color(k)}">{html.escape(k)}</b> '
                         f'{html.escape(text)}</p>')
        if not parts:
            prompt = run.workload.requests[self.request].prompt
        shown = prompt if len(prompt) <= PROMPT_CHARS else "…" + prompt[-PROMPT_CHARS:]
        head = (f'<p style="margin:2px 0; color:{style.MUTED_TEXT}; white-space:pre-wrap">'
                f'{html.escape(shown)}</p>')
        note = ""
        done = run.finished and all(step >= run.n_steps(k) - 1 for k in run.schedulers)
        if done and len(same) > 1:
            note = f'<p style="color:#b00020">{html.escape(self.tr("the schedulers generated different text"))}</p>'
        page = head + "".join(parts) + note
        if page != self._html:
            self._html = page
            self.browser.setHtml(page)
