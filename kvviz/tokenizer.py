"""Tokenizers: bytes for the shipped model (any Unicode text encodes), tokenizer.json for checkpoints,
with limits on what encoding may produce, since a tokenizer.json is rules a stranger wrote: what its
normalizers may grow a text to (checked when it is read), the tokens per character and the time an
encode takes (measured on a probe when it is read, checked on every encode), and the tokenizers
library's panics caught on load, encode and decode, each refusal naming the component at fault.

How labels are shown as text lives in kvviz.textshow. No torch, no Qt.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kvviz.textshow import escape_bytes


class ByteTokenizer:
    """UTF-8 bytes are the tokens: 256 ids, nothing unknown."""

    vocab_size = 256

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")

    def token_text(self, token_id: int) -> str:
        """A label for one token: the character for printable ASCII, else the byte in hex (group_labels
        draws the bytes of one character as that character)."""
        if 32 <= token_id < 127:
            return chr(token_id)
        if token_id == 10:
            return "\\n"
        return f"<{token_id:02x}>"


MAX_TOKENIZER_BYTES = 64 << 20  # the largest published tokenizer.json files are ~20 MB
# A normalizer may grow a text (NFKD splits a character into a few, a Replace of " " by "\u2581"); more
# than this per character, compounded over a sequence of them, is a bomb, not a tokenizer.
MAX_EXPANSION = 16
# Tokens per input character: a byte-level model gives at most 4 (one per UTF-8 byte), byte fallback
# the same, added special tokens a few more.
MAX_TOKENS_PER_CHAR = 8
MAX_TOKEN_LABEL_CHARS = 256  # kvviz.records.traceio.MAX_TOKEN_CHARS: a trace could not hold a longer token's text
# The probe encoded when a tokenizer is read: runs of one letter, digits, spaces, a long word, mixed
# scripts, an emoji sequence; what the regexes of real pre-tokenizers and the merges handle in linear time.
PROBE_TEXTS = ("a" * 2000, "1" * 500 + " " * 500, "ab" * 1000 + "!", "The key and value of a token never change. " * 20,
               "中文字符和emoji 👩\u200d👩\u200d👧 ünïcödé " * 20, "\n\t" * 500)
PROBE_MS_PER_CHAR = 0.2  # 200 us a character: real tokenizers take 1-3 us; a hundred times slower is a bomb
ENCODE_S_FLOOR = 2.0  # an encode may take this long, or as long as the probe's rate says, whichever is more


class HFTokenizer:
    """A `tokenizer.json` read by the `tokenizers` library (local files only), with limits (module doc)."""

    def __init__(self, path: str | Path) -> None:
        from kvviz.fileio import read_bytes

        self.path = path = Path(path)
        try:
            from tokenizers import Tokenizer
        except ImportError:  # pragma: no cover - declared dependency
            raise ValueError("the 'tokenizers' package is needed to read tokenizer.json") from None
        raw = read_bytes(path, MAX_TOKENIZER_BYTES, "tokenizer.json")
        try:
            text = raw.decode("utf-8")
            self._doc = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ValueError(f"{path}: not a valid tokenizer.json ({type(exc).__name__})") from None
        if not isinstance(self._doc, dict):
            raise ValueError(f"{path}: not a valid tokenizer.json (not a JSON object)")
        problem = check_expansion(self._doc)
        if problem:
            raise ValueError(f"{path}: refused: {problem}")
        try:
            with _quiet_panics():
                self._tok = Tokenizer.from_str(text)
        except Exception as exc:  # the library raises a bare Exception on bad files
            raise ValueError(f"{path}: not a valid tokenizer.json ({exc})") from None
        except BaseException as exc:  # a Rust panic (pyo3 PanicException derives from BaseException)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            raise ValueError(f"{path}: not a valid tokenizer.json (the tokenizers library failed: "
                             f"{_panic_text(exc)})") from None
        self.vocab_size = self._tok.get_vocab_size()
        self._byte_level = type(self._tok.decoder).__name__ == "ByteLevel"
        self._s_per_char = self._probe()

    def _probe(self) -> float:
        """Encode PROBE_TEXTS; refuse a tokenizer slower than PROBE_MS_PER_CHAR or making more than
        MAX_TOKENS_PER_CHAR tokens a character. Returns its seconds per character."""
        chars, spent = 0, 0.0
        for text in PROBE_TEXTS:
            started = time.perf_counter()
            self.encode(text, _limit_s=None)
            spent += time.perf_counter() - started
            chars += len(text)
            if spent * 1000 > PROBE_MS_PER_CHAR * sum(len(t) for t in PROBE_TEXTS):
                raise ValueError(f"{self.path}: refused: encoding {chars:,} characters of probe text took "
                                 f"{spent:.1f} s ({self._blame_slow(text)})")
        return spent / chars

    def encode(self, text: str, *, _limit_s: float | None = -1.0) -> list[int]:
        """Token ids of `text` (no special tokens added); ValueError naming the component at fault for a
        panic, more than MAX_TOKENS_PER_CHAR tokens a character, or an encode far slower than the probe's."""
        started = time.perf_counter()
        ids = _guarded(lambda: self._tok.encode(text, add_special_tokens=False).ids,
                       lambda exc: f"{self.path}: cannot encode the text ({self._blame(text, exc)})")
        spent = time.perf_counter() - started
        if len(ids) > MAX_TOKENS_PER_CHAR * max(1, len(text)):
            raise ValueError(f"{self.path}: refused: {len(ids):,} tokens for {len(text):,} characters, more than "
                             f"{MAX_TOKENS_PER_CHAR} a character ({self._blame_growth(text)})")
        if _limit_s is not None:
            limit = max(ENCODE_S_FLOOR, 10 * self._s_per_char * len(text)) if _limit_s < 0 else _limit_s
            if spent > limit:
                raise ValueError(f"{self.path}: refused: encoding {len(text):,} characters took {spent:.1f} s, more "
                                 f"than {limit:.1f} s ({self._blame_slow(text[:2000])})")
        return ids

    def decode(self, ids: list[int]) -> str:
        return _guarded(lambda: self._tok.decode(list(ids), skip_special_tokens=False),
                        lambda exc: f"{self.path}: cannot decode tokens ({_component(self._doc, 'decoder')}: "
                                    f"{_panic_text(exc)})")

    def token_text(self, token_id: int) -> str:
        """The token's text; where it holds part of a character, that part's bytes as `<xx>`."""
        text = self.decode([token_id])
        if "\ufffd" in text:
            raw = self.token_bytes(token_id)
            if raw is not None:
                text = escape_bytes(raw)
        if len(text) > MAX_TOKEN_LABEL_CHARS:
            raise ValueError(f"{self.path}: refused: token {token_id} decodes to {len(text):,} characters, more "
                             f"than {MAX_TOKEN_LABEL_CHARS} ({_component(self._doc, 'decoder')})")
        return text.replace("\n", "\\n") if text else f"<{token_id}>"

    def token_bytes(self, token_id: int) -> bytes | None:
        """The bytes a token stands for, where the vocabulary says (byte-level BPE, `<0xXX>` byte fallback)."""
        piece = self._tok.id_to_token(token_id)
        if piece is None:
            return None
        match = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)
        if match:
            return bytes([int(match.group(1), 16)])
        if self._byte_level:
            table = _byte_decoder()
            if all(c in table for c in piece):
                return bytes(table[c] for c in piece)
        return None

    # -- naming the component at fault -----------------------------------------------------------
    def _stages(self) -> list[tuple[str, Any]]:
        """(name, run(text)) for each normalizer and pre-tokenizer step, alone, in the order encode runs them."""
        stages = []
        for key, field, method in (("normalizer", "normalizers", "normalize_str"),
                                   ("pre_tokenizer", "pretokenizers", "pre_tokenize_str")):
            comp = self._doc.get(key)
            if not isinstance(comp, dict):
                continue
            sequence = comp.get("type") == "Sequence" and isinstance(comp.get(field), list)
            for i, part in enumerate(comp[field] if sequence else [comp]):
                name = f"{key}.{field}[{i}]" if sequence else key
                stages.append((f"{name} ({_type(part)})", _single(key, method, part)))
        return stages

    def _blame(self, text: str, exc: BaseException) -> str:
        """The first stage that fails on `text` alone, else the model or the added tokens."""
        for name, run in self._stages():
            try:
                with _quiet_panics():
                    run(text[:4096])
            except BaseException as stage_exc:  # noqa: BLE001 - a panic is what is looked for
                if isinstance(stage_exc, (KeyboardInterrupt, SystemExit)):
                    raise
                return f"{name}: {_panic_text(stage_exc)}"
        where = "added_tokens" if self._doc.get("added_tokens") else "model"
        return f"{_component(self._doc, 'model') if where == 'model' else where}: {_panic_text(exc)}"

    def _blame_growth(self, text: str) -> str:
        """The stage that grows the text most (normalizers), else the model."""
        sample = text[:256]
        for name, run in self._stages():
            if name.startswith("normalizer"):
                with contextlib.suppress(BaseException), _quiet_panics():
                    if len(run(sample)) > MAX_EXPANSION * max(1, len(sample)):
                        return name
        return _component(self._doc, "model")

    def _blame_slow(self, text: str) -> str:
        """The stage that takes most of the time on `text`."""
        worst, worst_s = _component(self._doc, "model"), 0.0
        for name, run in self._stages():
            started = time.perf_counter()
            with contextlib.suppress(BaseException), _quiet_panics():
                run(text)
            spent = time.perf_counter() - started
            if spent > worst_s:
                worst, worst_s = name, spent
        return worst


def _guarded(call, refusal):
    """call()'s result; an error or a Rust panic from the library (a BaseException) becomes
    ValueError(refusal(exc)), its backtrace held back (_quiet_panics). Ctrl+C and exit pass through."""
    try:
        with _quiet_panics():
            return call()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - pyo3's PanicException is a BaseException
        raise ValueError(refusal(exc)) from None


def _type(comp: Any) -> str:
    return str(comp.get("type", "?"))[:40] if isinstance(comp, dict) else type(comp).__name__


def _component(doc: dict, key: str) -> str:
    return f"{key} ({_type(doc.get(key))})" if isinstance(doc.get(key), dict) else key


def _single(key: str, method: str, part: Any):
    """One normalizer or pre-tokenizer step alone, as a function of a text (built when first called, so a
    step the library cannot build fails there, and is blamed)."""
    def run(text: str):
        from tokenizers import Tokenizer

        doc = {"version": "1.0", "model": {"type": "WordLevel", "vocab": {"x": 0}, "unk_token": "x"}, key: part}
        tok = Tokenizer.from_str(json.dumps(doc))
        return getattr(getattr(tok, key), method)(text)

    return run


def _literal_length(pattern: Any) -> int:
    """The fewest characters a Replace/Split pattern matches: a String's length, 1 for a Regex."""
    if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
        return max(1, len(pattern["String"]))
    return 1


def check_expansion(doc: dict) -> str:
    """'' or one line naming the normalizer (or decoder) step that may grow a text past MAX_EXPANSION times
    (a Replace of one character by hundreds, compounded over a Sequence, took 10 GB in a minute)."""
    for key, field in (("normalizer", "normalizers"), ("decoder", "decoders")):
        comp = doc.get(key)
        if not isinstance(comp, dict):
            continue
        parts = comp.get(field) if comp.get("type") == "Sequence" else [comp]
        if not isinstance(parts, list):
            continue
        factor = 1.0
        for i, part in enumerate(parts):
            if not isinstance(part, dict):
                continue
            step = 1.0
            content = part.get("content")
            if part.get("type") in ("Replace", "Prepend", "Append") and isinstance(content, str):
                step = (len(content) / _literal_length(part.get("pattern"))
                        if part.get("type") == "Replace" else 1 + len(content))
            factor *= max(1.0, step)
            if factor > MAX_EXPANSION:
                name = f"{key}.{field}[{i}]" if comp.get("type") == "Sequence" else key
                return (f"{name} ({_type(part)}) may grow a text {factor:,.0f} times (at most {MAX_EXPANSION} "
                        f"is allowed)")
    return ""


def _panic_text(exc: BaseException) -> str:
    from kvviz.errors import one_line

    text = str(exc).strip() or type(exc).__name__
    return one_line(text, 160)


@contextlib.contextmanager
def _quiet_panics():
    """While the tokenizers library runs: its Rust panic message and backtrace (written straight to file
    descriptor 2) are held back and dropped when the call panicked; other output is passed on."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        panicked = False
        try:
            yield
        except BaseException:
            panicked = True
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if not panicked:
                held.seek(0)
                data = held.read()
                if data:
                    os.write(2, data)


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, character to byte (the printable bytes stand for themselves)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
            *range(ord("\u00ae"), ord("\u00ff") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars
