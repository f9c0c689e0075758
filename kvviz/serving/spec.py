"""What the serve form asks for: the workload's requests, the schedulers and the sizes, as a frozen
ServeSpec the worker turns into the library's Workload and scheduler options.

No Qt, no torch: the presets come from kvviz.serving.workload (stdlib only).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvviz import catalog
from kvviz.serving import workload as _workload

SCHEDULERS = catalog.scheduler_keys()
# What vLLM's CPU attention takes (vllm/v1/attention/backends/cpu_attn.py, CPUAttentionBackend's supported head
# sizes and kernel block sizes, vLLM 0.32): the form greys "vLLM beside" before a minute's start-up is spent on
# a refusal. vLLM's own check (kvviz.peers.vllm_child.precheck) still runs.
VLLM_BLOCK_MULTIPLE = 32
VLLM_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
PRESETS = ("course-batch", "shared-prefix", "chat", "random")  # "random" takes its N from the form


@dataclass(frozen=True)
class WorkRequest:
    """One row of the workload table."""

    prompt: str
    new_tokens: int
    arrival: int = 0


@dataclass(frozen=True)
class ServeSpec:
    """One serve run as the form describes it; the worker validates it again against the model."""

    model: str
    requests: tuple[WorkRequest, ...]
    schedulers: tuple[str, ...]
    max_batch: int = 8
    blocks: int = 32
    token_budget: int = 64
    block_size: int = 16
    name: str = "workload"  # the preset it came from, or "workload" once edited
    run_id: str = ""
    start_paused: bool = False
    steps_per_s: float = 0.0  # 0: as fast as possible
    vllm_beside: bool = False  # vLLM runs the same workload beside the schedulers (kvviz.serving.session)

    def workload(self) -> _workload.Workload:
        """The library's Workload of these rows (ValueError, one line, for a bad row)."""
        return _workload.Workload(self.name, tuple(
            _workload.Request(prompt=r.prompt, new_tokens=r.new_tokens, arrival=r.arrival) for r in self.requests))


def preset_requests(name: str) -> list[WorkRequest]:
    """The rows of a preset (`random:N` included)."""
    found = _workload.preset(name)
    if found is None:
        raise ValueError(f"no preset {name!r}")
    return [WorkRequest(r.prompt, r.new_tokens, r.arrival) for r in found.requests]


def folder_head_dim(name: str) -> int | None:
    """The head size a model folder's config.json gives (kvviz's "head_dim", or Hugging Face's head_dim or
    hidden_size / num_attention_heads); None for a preset name, or a config that does not say (the run's
    own check speaks then)."""
    path = Path(name).expanduser() / "config.json"
    try:
        if not path.is_file() or path.stat().st_size > 1 << 20:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    head = doc.get("head_dim")
    if head is None and isinstance(doc.get("hidden_size"), int) and isinstance(doc.get("num_attention_heads"), int):
        head = doc["hidden_size"] // max(1, doc["num_attention_heads"])
    return head if isinstance(head, int) and not isinstance(head, bool) else None


def vllm_refusal(model: str, block_size: int, vllm_found: str, _tr: Callable[[str], str] = str) -> str:
    """Why vLLM cannot run beside this spec ("" when it can, as far as can be told without loading the model):
    `vllm_found` is "" when vLLM was found, else the one line saying it was not. `_tr` translates into the
    reader's language (the serve form passes Qt's, context "ServeForm"; str keeps English)."""
    if vllm_found:
        return vllm_found
    if block_size % VLLM_BLOCK_MULTIPLE:
        return _tr("vLLM's CPU attention needs blocks of a multiple of {0} tokens, not {1}").format(
            VLLM_BLOCK_MULTIPLE, block_size)
    head = folder_head_dim(model) if model else None
    if head is not None and head not in VLLM_HEAD_SIZES:
        return _tr("vLLM's CPU attention takes head sizes {0}; the model's is {1}").format(
            ", ".join(map(str, VLLM_HEAD_SIZES)), head)
    return ""
