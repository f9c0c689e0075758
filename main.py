"""Launch the kvviz desktop app: `python main.py` (same as `kvviz`)."""
import sys

from kvviz.cli import main

if __name__ == "__main__":
    sys.exit(main(["gui", *sys.argv[1:]]))
