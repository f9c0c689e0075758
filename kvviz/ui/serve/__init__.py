"""The Serve view: many requests served by one model, scheduler beside scheduler, a window of
its own beside the compare view's. `open_serve_window()` opens it; `python -m kvviz.ui.serve` starts it
alone (`--replay FILE` shows a saved serve record without any model).
"""
