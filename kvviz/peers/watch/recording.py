"""A watch session as records, and its file: every frame as received (raw, so a replay decodes it again and
counts the same malformed ones), every metric sample and every note (up, down, gap, restart), each stamped
with the watcher's clock. The file is gzip of a magic line and length-prefixed msgpack records, written under
a temporary name and renamed when the session ends. No socket, no Qt.
"""
from __future__ import annotations

import gzip
import os
import struct
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from kvviz.peers.watch.metrics import MetricSample

MAGIC = b"kvviz watch recording 1\n"
MAX_RECORD_BYTES = 64 << 20
FLUSH_S = 1.0  # the file is flushed at most this often, so a session cut short keeps all but its last second


class Header(msgspec.Struct, frozen=True, tag="header", array_like=True, gc=False):
    """The session: when it started and which servers (URLs) with how many data-parallel ranks each."""

    started: float
    servers: tuple[str, ...]
    ranks: tuple[int, ...]
    model: str = ""  # the tokenizer named with --model ("" for none)


class Frame(msgspec.Struct, frozen=True, tag="frame", array_like=True, gc=False):
    """One frame of a KV event stream as received: `via` is "live" (the PUB socket) or "replay"."""

    t: float
    server: int
    rank: int
    via: str
    parts: tuple[bytes, ...]


class Sample(msgspec.Struct, frozen=True, tag="sample", array_like=True, gc=False):
    t: float
    server: int
    metrics: MetricSample


class Note(msgspec.Struct, frozen=True, tag="note", array_like=True, gc=False):
    """A change in a server's state: kind is one of NOTE_KINDS; text says it in a sentence."""

    t: float
    server: int
    kind: str
    text: str
    rank: int = 0


# up: /metrics answers; down: it does not (connection refused, an error); stalled: it does not answer in time, or
# requests run and no token comes; restarted: the server's process start time changed (the mirror is emptied);
# events: how the event stream is followed (caught up from replay, live only); gap: sequence numbers skipped
# (caught up from replay, or lost); metrics-malformed: /metrics is not a vLLM page.
NOTE_KINDS = ("up", "down", "stalled", "restarted", "events", "gap", "lost", "metrics-malformed")
Record = Header | Frame | Sample | Note
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(type=Record)


class RecordingWriter:
    """Records appended to FILE's temporary name beside it; `close()` renames it into place."""

    def __init__(self, path: str | Path, header: Header) -> None:
        from kvviz.fileio import check_writable, output_target, temp_prefix

        self.path = Path(path).expanduser()
        check_writable(self.path, "the recording")
        target = output_target(self.path, "the recording")
        self._final = target.path
        self._in_place = target.in_place
        if self._in_place:
            self._tmp = None
            self._raw = open(target.path, "wb")  # noqa: SIM115 - a device or FIFO, written as it goes
        else:
            folder = target.path.parent
            fd, tmp = tempfile.mkstemp(prefix=temp_prefix(folder, target.path.name, ".part"), suffix=".part",
                                       dir=folder)
            self._tmp = Path(tmp)
            self._raw = os.fdopen(fd, "wb")
        self._gz = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=4)
        self._gz.write(MAGIC)
        self._flushed = time.monotonic()
        self.records = 0
        self.write(header)

    def write(self, record: Record) -> None:
        data = _ENCODER.encode(record)
        self._gz.write(struct.pack(">I", len(data)))
        self._gz.write(data)
        self.records += 1
        self.flush()

    def flush(self) -> None:
        """What was written reaches the file, at most once per FLUSH_S (call it when idle too)."""
        now = time.monotonic()
        if now - self._flushed >= FLUSH_S:
            self._gz.flush(zlib.Z_SYNC_FLUSH)
            self._flushed = now

    def close(self) -> Path:
        """End the file and rename it into place; ValueError (one line) when it cannot be written."""
        try:
            self._gz.close()
            self._raw.flush()
            if not self._in_place:
                os.fsync(self._raw.fileno())
            self._raw.close()
            if self._tmp is not None:
                os.replace(self._tmp, self._final)
        except OSError as exc:
            self.discard()
            raise ValueError(f"cannot write the recording {self.path}: {exc.strerror or exc}") from None
        return self.path

    def discard(self) -> None:
        try:
            self._raw.close()
        except OSError:
            pass
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)


@dataclass
class RecordingReader:
    """The records of a recording file, in order; `truncated` is set when the file ends inside a record."""

    path: Path
    truncated: bool = False

    def __iter__(self) -> Iterator[Record]:
        from kvviz.fileio import open_regular

        with open_regular(self.path, "watch recording") as fh, gzip.GzipFile(fileobj=fh, mode="rb") as gz:
            try:
                magic = gz.read(len(MAGIC))
            except (OSError, EOFError, zlib.error):
                magic = b""
            if magic != MAGIC:
                raise ValueError(f"{self.path}: not a kvviz watch recording")
            first = True
            while True:
                try:
                    head = gz.read(4)
                    if not head:
                        return
                    if len(head) < 4:
                        self.truncated = True
                        return
                    (n,) = struct.unpack(">I", head)
                    if n > MAX_RECORD_BYTES:
                        raise ValueError(f"{self.path}: a record of {n:,} bytes, more than a recording holds")
                    data = gz.read(n)
                except (EOFError, zlib.error, gzip.BadGzipFile):
                    self.truncated = True
                    return
                if len(data) < n:
                    self.truncated = True
                    return
                try:
                    record = _DECODER.decode(data)
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    raise ValueError(f"{self.path}: a record that is not one ({str(exc)[:120]})") from None
                if first and not isinstance(record, Header):
                    raise ValueError(f"{self.path}: the recording does not begin with its header")
                first = False
                yield record


def read_header(path: str | Path) -> Header:
    for record in RecordingReader(Path(path)):
        return record  # the reader checks that the first record is the header
    raise ValueError(f"{path}: an empty recording")
