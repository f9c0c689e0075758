"""A workload: the requests a server is sent, each a prompt, a number of new tokens and an arrival step.

Presets (`course-batch`, `shared-prefix`, `chat`, `random:N[:SEED]`) and a small JSON file reader
(`{"requests": [{"prompt": "...", "new_tokens": 12, "arrival": 0}, ...]}`). Stdlib only: it knows no
model, tokenizer or torch; a prompt is text (or token ids) and is tokenized by the engine.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PRESETS = ("course-batch", "shared-prefix", "chat", "random:N[:SEED]")
MAX_REQUESTS = 4096  # a workload a CPU serves in minutes; far past any preset
MAX_PROMPT_CHARS = 1 << 20
MAX_NEW_TOKENS = 1_000_000
MAX_ARRIVAL = 1_000_000  # scheduler steps
MAX_FILE_BYTES = 64 << 20
REQUEST_KEYS = ("prompt", "prompt_ids", "new_tokens", "arrival", "seed")


@dataclass(frozen=True)
class Request:
    """One request as a client sends it."""

    prompt: str
    """The prompt as text (tokenized by the engine's tokenizer); empty when `prompt_ids` is given."""
    new_tokens: int
    """Tokens to generate (at least 1); the first comes out of the request's prefill."""
    arrival: int = 0
    """The scheduler step at which the request arrives (0: before the first step)."""
    seed: int | None = None
    """Sampling seed of this request's own generator; None: the run's seed plus the request's index."""
    prompt_ids: tuple[int, ...] | None = None
    """The prompt as token ids instead of text (None: tokenize `prompt`)."""

    def __post_init__(self) -> None:
        if self.prompt_ids is None and not self.prompt:
            raise ValueError("a request's prompt is empty")
        if self.prompt_ids is not None and self.prompt:
            raise ValueError("a request gives either prompt or prompt_ids, not both")
        if self.prompt_ids is not None and not self.prompt_ids:
            raise ValueError("a request's prompt_ids is empty")


@dataclass(frozen=True)
class Workload:
    """The requests of one run, in the order they were given (a request's index is its id)."""

    name: str
    """The preset's name, or the file's path."""
    requests: tuple[Request, ...]
    """Every request; index i is request i in every record."""

    def __post_init__(self) -> None:
        if not self.requests:
            raise ValueError(f"workload {self.name}: no requests")
        if len(self.requests) > MAX_REQUESTS:
            raise ValueError(f"workload {self.name}: {len(self.requests):,} requests, more than {MAX_REQUESTS:,}")

    def to_dict(self) -> dict[str, Any]:
        out = []
        for r in self.requests:
            d: dict[str, Any] = {"new_tokens": r.new_tokens, "arrival": r.arrival}
            if r.prompt_ids is not None:
                d["prompt_ids"] = list(r.prompt_ids)
            else:
                d["prompt"] = r.prompt
            if r.seed is not None:
                d["seed"] = r.seed
            out.append(d)
        return {"name": self.name, "requests": out}


# -- presets ------------------------------------------------------------------------------------
def _text_of(n_chars: int, words: tuple[str, ...], rng: random.Random | None = None) -> str:
    """ASCII text of exactly n_chars characters (so exactly n_chars tokens for the byte model)."""
    rng = rng or random.Random(n_chars)
    parts: list[str] = []
    while sum(len(p) + 1 for p in parts) < n_chars:
        parts.append(rng.choice(words))
    return " ".join(parts)[:n_chars]


_WORDS = ("the", "cache", "holds", "keys", "and", "values", "of", "every", "token", "a", "model", "reads",
          "them", "each", "step", "so", "memory", "grows", "with", "length", "python", "list", "returns",
          "function", "object", "when", "called", "block", "pool", "request")


def course_batch() -> Workload:
    """The course's static-batching example (step 08): prompts of 10 / 30 / 5 / 20 tokens (byte model:
    ASCII characters) and 15 / 10 / 20 / 12 new tokens, all arriving at step 0."""
    reqs = tuple(Request(prompt=_text_of(p, _WORDS), new_tokens=n)
                 for p, n in zip((10, 30, 5, 20), (15, 10, 20, 12)))
    return Workload("course-batch", reqs)


SYSTEM_PROMPT = ("You are a helpful assistant for a class on language models. Answer in one short "
                 "sentence, and say when unsure.\n")  # ~100 bytes: 6 full blocks of 16 for the byte model
QUESTIONS = ("What is a KV cache?", "Why is decode slow?", "What does RoPE rotate?", "Is prefill compute bound?",
             "What is a block table?", "Why batch requests?", "What is preemption?", "What is a prefix hit?",
             "Why page the cache?", "What is TTFT?")


def shared_prefix() -> Workload:
    """One system prompt followed by ten different short questions, one arriving per step (so the
    first request's blocks are computed, and can be reused, before the next request is admitted)."""
    reqs = tuple(Request(prompt=f"{SYSTEM_PROMPT}Q: {q}\nA:", new_tokens=12, arrival=i)
                 for i, q in enumerate(QUESTIONS))
    return Workload("shared-prefix", reqs)


CHAT_TURNS = (("What is a KV cache?", "It keeps the keys and values of past tokens."),
              ("Why does it grow?", "Every new token adds one key and one value per layer."),
              ("How do servers share it?", ""))
CHAT_GAP_STEPS = 40  # the next turn arrives after the previous one has had time to finish


def chat() -> Workload:
    """A three-turn conversation: each turn re-sends everything so far (system prompt, earlier messages
    and the assistant's earlier replies, here fixed text) plus a new message."""
    reqs, so_far = [], SYSTEM_PROMPT
    for turn, (question, answer) in enumerate(CHAT_TURNS):
        so_far += f"User: {question}\nAssistant:"
        reqs.append(Request(prompt=so_far, new_tokens=16, arrival=turn * CHAT_GAP_STEPS))
        so_far += f" {answer}\n"
    return Workload("chat", tuple(reqs))


def random_workload(n: int, seed: int = 0) -> Workload:
    """N requests: prompts of 4..64 characters, 4..32 new tokens, arrivals a seeded random walk with
    gaps of 0..3 steps (a quarter of the requests arrive together with the one before)."""
    if not 1 <= n <= MAX_REQUESTS:
        raise ValueError(f"random:N needs 1 <= N <= {MAX_REQUESTS:,}, got {n}")
    rng = random.Random(seed)
    reqs, arrival = [], 0
    for _ in range(n):
        reqs.append(Request(prompt=_text_of(rng.randint(4, 64), _WORDS, rng), new_tokens=rng.randint(4, 32),
                            arrival=arrival))
        arrival += rng.choice((0, 1, 2, 3))
    return Workload(f"random:{n}:{seed}", tuple(reqs))


def preset(name: str) -> Workload | None:
    """The preset called `name` (`random:N[:SEED]` included), None for a name that is no preset."""
    fixed = {"course-batch": course_batch, "shared-prefix": shared_prefix, "chat": chat}
    if name in fixed:
        return fixed[name]()
    if name.startswith("random:"):
        parts = name.split(":")
        if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts[1:]):
            raise ValueError(f"workload {name!r}: expected random:N or random:N:SEED with whole numbers")
        return random_workload(int(parts[1]), int(parts[2]) if len(parts) == 3 else 0)
    return None


# -- files --------------------------------------------------------------------------------------
def is_whole(v: Any) -> bool:
    """A JSON whole number (true and false are not)."""
    return isinstance(v, int) and not isinstance(v, bool)


def request_from_dict(doc: Any, where: str) -> Request:
    """One request object of a workload file; one-line ValueError naming `where` for anything else."""
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: a request must be a JSON object")
    unknown = sorted(set(doc) - set(REQUEST_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)[:80]} (known: {', '.join(REQUEST_KEYS)})")
    prompt, ids = doc.get("prompt"), doc.get("prompt_ids")
    if (prompt is None) == (ids is None):
        raise ValueError(f"{where}: give exactly one of prompt (text) or prompt_ids (token ids)")
    if prompt is not None and (not isinstance(prompt, str) or not prompt or len(prompt) > MAX_PROMPT_CHARS):
        raise ValueError(f"{where}: prompt must be non-empty text of at most {MAX_PROMPT_CHARS:,} characters")
    if ids is not None and not (isinstance(ids, list) and ids and len(ids) <= MAX_PROMPT_CHARS
                                and all(is_whole(i) and 0 <= i < 1 << 24 for i in ids)):
        raise ValueError(f"{where}: prompt_ids must be a non-empty list of token ids")
    n = doc.get("new_tokens")
    if not (is_whole(n) and 1 <= n <= MAX_NEW_TOKENS):
        raise ValueError(f"{where}: new_tokens must be a whole number in 1..{MAX_NEW_TOKENS:,}, got {str(n)[:40]}")
    arrival = doc.get("arrival", 0)
    if not (is_whole(arrival) and 0 <= arrival <= MAX_ARRIVAL):
        raise ValueError(f"{where}: arrival must be a step in 0..{MAX_ARRIVAL:,}, got {str(arrival)[:40]}")
    seed = doc.get("seed")
    if seed is not None and not (is_whole(seed) and 0 <= seed < 2**31):
        raise ValueError(f"{where}: seed must be a whole number in 0..2^31-1, got {str(seed)[:40]}")
    return Request(prompt=prompt or "", prompt_ids=None if ids is None else tuple(ids), new_tokens=n,
                   arrival=arrival, seed=seed)


def workload_from_dict(doc: Any, name: str) -> Workload:
    """A workload object; `name` names it in errors, and is its name unless it carries its own."""
    if not isinstance(doc, dict) or not isinstance(doc.get("requests"), list):
        raise ValueError(f"{name}: a workload is an object with a list \"requests\"")
    unknown = sorted(set(doc) - {"requests", "name"})
    if unknown:
        raise ValueError(f"{name}: unknown key(s) {', '.join(unknown)[:80]} (known: requests, name)")
    reqs = doc["requests"]
    if not reqs:
        raise ValueError(f"{name}: no requests")
    if len(reqs) > MAX_REQUESTS:
        raise ValueError(f"{name}: {len(reqs):,} requests, more than {MAX_REQUESTS:,}")
    own = doc.get("name", name)
    if not isinstance(own, str) or len(own) > 4096:
        raise ValueError(f"{name}: name must be a string")
    return Workload(own, tuple(request_from_dict(r, f"{name}: request {i}") for i, r in enumerate(reqs)))


def read_workload(path: str | Path) -> Workload:
    """A workload JSON file; one-line ValueError for a missing, malformed or oversized one."""
    from kvviz.fileio import read_json

    return workload_from_dict(read_json(Path(path), max_depth=4, max_bytes=MAX_FILE_BYTES), str(path))


def load_workload(spec: str) -> Workload:
    """A preset name (`course-batch`, `shared-prefix`, `chat`, `random:N[:SEED]`) or a JSON file's path."""
    if not spec.strip():
        raise ValueError(f"the workload is empty: give a preset ({', '.join(PRESETS)}) or a JSON file")
    found = preset(spec)
    if found is not None:
        return found
    if not Path(spec).exists():
        raise ValueError(f"workload {spec!r} is neither a preset ({', '.join(PRESETS)}) nor a file")
    return read_workload(spec)
