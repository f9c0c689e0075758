"""A live watch session for a program that draws it (a window, a notebook, a test): the servers' threads
(kvviz.peers.watch.client), one more thread applying their records to a WatchHistory under a lock and
appending them to the recording. A view reads `history` under `lock` from its own timer. No Qt.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from kvviz.peers.watch.client import LiveWatch, ServerAddress, WatchOptions
from kvviz.peers.watch.history import WINDOW_S, WatchHistory
from kvviz.peers.watch.recording import Header, Record, RecordingWriter


class WatchSession:
    def __init__(self, addresses: list[ServerAddress], options: WatchOptions | None = None, *,
                 record: str | Path | None = None, model: str = "", window_s: float = WINDOW_S,
                 text_of: Callable[[tuple[int, ...]], str] | None = None,
                 listener: Callable[[Record], None] | None = None) -> None:
        """`listener(record)` is called on the pump's thread after each record is applied, under the lock (a
        view asks for a repaint there)."""
        self.listener = listener
        self.options = options or WatchOptions()
        self.header = Header(self.options.clock(), tuple(a.url for a in addresses), tuple(a.ranks for a in addresses),
                             model)
        self.history = WatchHistory(self.header, window_s=window_s, text_of=text_of)
        self.lock = threading.Lock()
        self.writer = RecordingWriter(record, self.header) if record is not None else None
        self._live = LiveWatch(addresses, self.options)
        self._stopping = threading.Event()
        self._pump = threading.Thread(target=self._run, name="kvviz-watch-pump", daemon=True)

    def start(self) -> WatchSession:
        self._live.start()
        self._pump.start()
        return self

    def _run(self) -> None:
        while not self._stopping.is_set():
            record = self._live.get(0.1)
            if record is None:
                continue
            with self.lock:
                self.history.apply(record)
                if self.writer is not None:
                    self.writer.write(record)
                if self.listener is not None:
                    self.listener(record)

    def wait_for(self, predicate: Callable[[WatchHistory], bool], timeout_s: float) -> bool:
        """Whether predicate(history) came true within timeout_s (checked under the lock every 50 ms)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if predicate(self.history):
                    return True
            time.sleep(0.05)
        return False

    def stop(self) -> Path | None:
        """Stop the threads; the recording, if any, closed and renamed into place (its path returned)."""
        self._live.stop()
        self._stopping.set()
        self._pump.join(timeout=5)
        while (record := self._live.get(0)) is not None:  # what the threads handed over before they stopped
            self.history.apply(record)
            if self.writer is not None:
                self.writer.write(record)
        return self.writer.close() if self.writer is not None else None
