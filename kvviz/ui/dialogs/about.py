"""Help > About: what kvviz is, its version, and the PyTorch it runs on."""
from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget

from kvviz import __version__
from kvviz.runtime.messages import Environment
from kvviz.ui.qtutil import translator

_tr = translator("About")


def show_about(parent: QWidget, env: Environment | None) -> None:
    extra = _tr("PyTorch {0}, {1} CPU thread(s)").format(env.torch_version, env.threads) if env else ""
    QMessageBox.about(parent, _tr("About kvviz"), _tr("kvviz {0}").format(__version__) + "\n\n" + _tr(
        "kvviz makes a transformer's KV cache visible: type a prompt, pick engines and watch "
        "decode step by step.") + ("\n\n" + extra if extra else ""))
