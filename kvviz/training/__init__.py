"""Training text for kvviz's own models: the English every CPython carries."""
