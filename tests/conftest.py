"""Test setup: Qt offscreen before any Qt import, one torch thread, small seeded models."""
from __future__ import annotations

import os
import stat
import tempfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
if not os.environ.get("XDG_RUNTIME_DIR"):
    _runtime = tempfile.mkdtemp(prefix="kvviz-xdg-")
    os.chmod(_runtime, stat.S_IRWXU)
    os.environ["XDG_RUNTIME_DIR"] = _runtime

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def torch_cpu():
    import torch

    torch.set_num_threads(1)
    return torch


@pytest.fixture(scope="session")
def tiny_random(torch_cpu):
    from kvviz.models.presets import load_model

    return load_model("tiny-random", torch_cpu.device("cpu"))


@pytest.fixture(scope="session")
def byte_tokenizer():
    from kvviz.tokenizer import ByteTokenizer

    return ByteTokenizer()
