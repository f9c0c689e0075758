"""The compare window's way into the Serve view: View > Serve view opens it, and after a single-request
compare run, Continue serves the text so far plus a typed message as a chat, `prefix` against `paged`:
the second turn's prompt starts with the first turn's prompt and reply, and only `prefix` reuses it.
"""
from __future__ import annotations

from kvviz.textshow import label_bytes
from kvviz.ui.serve.hook import continue_in_serve_view


def test_continue_turns_a_compare_run_into_a_chat_with_reuse(qtbot, open_window):
    w = open_window()
    w.form.set_engines(("static",))
    w.form.tokens_spin.setValue(20)
    with qtbot.waitSignal(w.run_finished, timeout=120_000):
        assert w.start_run()
    generated = label_bytes("".join(t.token_text for t in w.history.traces["static"])).decode("utf-8", "replace")
    assert w.act_continue in w.run_menu.actions() and w.act_serve in w.view_menu.actions()

    serve = continue_in_serve_view(w, "Why does it grow?")
    qtbot.addWidget(serve)
    with qtbot.waitSignal(serve.run_finished, timeout=180_000):
        pass
    assert serve.error_text() == ""
    first, second = serve.run.workload.requests
    assert first.prompt == w.history.info.prompt
    assert second.prompt == f"{first.prompt}{generated}\nUser: Why does it grow?\nAssistant:"
    assert second.arrival > first.new_tokens  # the second turn comes after the first has finished
    assert serve.run.schedulers == ("paged", "prefix")
    paged, prefix = (serve.run.counters(k, serve.run.n_steps()) for k in ("paged", "prefix"))
    assert paged["saved"] == 0 and prefix["saved"] > 0
    assert prefix["prefill"] + prefix["saved"] == paged["prefill"]  # the same positions, some served by the cache
    w.act_serve.trigger()  # View > Serve view again: the same window, raised
    assert w.serve_window is serve and serve.isVisible()
    serve.close()
