"""What the compare window's two Serve actions do (kvviz/ui/actions.py calls these, importing them only
when asked, so the main window still loads without pyqtgraph): View > Serve view opens the Serve window
(one per main window), and Run > Continue in the Serve view turns the compare run shown into a `chat`
workload, the text so far plus a message the user types, served by `prefix` against `paged`.
"""
from __future__ import annotations

from PySide6.QtWidgets import QInputDialog, QLineEdit

from kvviz.serving.spec import ServeSpec, WorkRequest
from kvviz.textshow import label_bytes
from kvviz.ui.qtutil import companion_window, translator
from kvviz.ui.serve.window import ServeWindow, open_serve_window

CONTINUE_SCHEDULERS = ("paged", "prefix")
REPLY_TOKENS = 16
TURN_GAP_STEPS = 2  # the second turn arrives this many steps after the first has finished

_tr = translator("ServeHook")


def open_serve_view(main) -> ServeWindow:
    """The main window's Serve window, made on first use (its models from the compare form; it ends its worker as
    the app quits), raised."""
    return companion_window(main, "serve_window", lambda: open_serve_window(main, getattr(main, "settings", None)))


def text_so_far(history) -> tuple[str, str, int]:
    """(prompt, generated text, tokens generated) of the compare run shown, from its first engine."""
    engines = [k for k in history.engines if history.traces.get(k)]
    if not engines:
        raise ValueError(_tr("Run the compare view first: Continue serves its text as the first turn of a chat"))
    traces = history.traces[engines[0]]
    generated = label_bytes("".join(t.token_text for t in traces)).decode("utf-8", errors="replace")
    return history.info.prompt, generated, len(traces)


def chat_spec(model: str, prompt: str, generated: str, n_generated: int, message: str) -> ServeSpec:
    """Turn 1 re-sends the compare run's prompt; turn 2, arriving after turn 1 has finished, sends
    everything so far plus the message: what a chat server receives, the second turn's prefix
    already in the pool's cached blocks under `prefix`."""
    first = WorkRequest(prompt, max(1, n_generated), 0)
    second = WorkRequest(f"{prompt}{generated}\nUser: {message}\nAssistant:", REPLY_TOKENS,
                         max(1, n_generated) + TURN_GAP_STEPS)
    return ServeSpec(model=model, requests=(first, second), schedulers=CONTINUE_SCHEDULERS, name="chat")


def continue_in_serve_view(main, message: str | None = None) -> ServeWindow | None:
    """Run > Continue in the Serve view: ask for the message (unless given), fill the Serve window's form
    with the chat workload and run it. None (the reason in the status bar) when there is nothing to
    continue or the user cancelled."""
    try:
        prompt, generated, n = text_so_far(main.history)
    except ValueError as exc:
        main.statusBar().showMessage(str(exc), 10_000)
        return None
    if message is None:
        message, ok = QInputDialog.getText(main, _tr("Continue in the Serve view"),
                                           _tr("Your next message (the text so far is re-sent before it):"),
                                           QLineEdit.EchoMode.Normal, _tr("Why does the cache grow?"))
        if not ok or not message.strip():
            return None
    window = open_serve_view(main)
    window.form.apply(chat_spec(main.history.info.model_name, prompt, generated, n, message.strip()))
    window.start_run()
    return window
