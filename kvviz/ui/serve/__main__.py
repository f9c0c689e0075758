"""`python -m kvviz.ui.serve [--replay FILE] [--settings INI]`: the Serve window alone."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvviz.ui.serve", description="The kvviz Serve window.")
    parser.add_argument("--replay", metavar="FILE",
                        help="show a saved serve record (kvviz serve --json) without a model")
    parser.add_argument("--model", default="tiny", help="the model the form starts with (default: tiny)")
    parser.add_argument("--settings", metavar="FILE", help="keep the window's settings in this INI file")
    args = parser.parse_args(argv)
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setOrganizationName("kvviz")
    app.setApplicationName("kvviz")
    from kvviz.ui.serve.window import open_serve_window

    settings = QSettings(args.settings, QSettings.Format.IniFormat) if args.settings else None
    window = open_serve_window(settings=settings)
    window.form.set_models([args.model], args.model)
    if args.replay and not window.exports.open_record(args.replay):
        print(f"kvviz: {window.error_text()}", file=sys.stderr)
        return 2
    return int(app.exec())


if __name__ == "__main__":
    sys.exit(main())
