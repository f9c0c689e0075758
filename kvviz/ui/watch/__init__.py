"""The Watch view: a running vLLM server (or several, or a recording of them) drawn live in kvviz's pictures,
on the shell (kvviz.ui.shell). Its source is kvviz.peers.watch (a WatchSession, or a recording replayed); the
window repaints from a timer, from a snapshot taken under the source's lock. No torch, no engines.
"""
