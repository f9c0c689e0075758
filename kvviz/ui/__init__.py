"""The desktop app. Only kvviz/ui/worker.py and kvviz/ui/app.py may import torch or the engines."""
