"""A running vLLM server watched read-only: its /metrics polled, its KV cache events subscribed to, a mirror of
its prefix cache kept, the session recorded and replayed. Qt-free records (frozen, numpy) a view draws.

No Qt, no torch, no vLLM import: vLLM's event messages are mirrored in kvviz.peers.watch.events.
"""
from __future__ import annotations
