"""kvviz: watch a transformer's KV cache at work."""
__version__ = "0.1.0"
