"""Device and dtype choice; GPU checks that skip cleanly where there is no CUDA device."""
from __future__ import annotations

import pytest
import torch

from kvviz.config import SamplingConfig, TraceOptions
from kvviz.engines import ENGINE_KEYS, make_engine
from kvviz.models.presets import load_model
from kvviz.runtime.devices import resolve_device, resolve_dtype

HAS_CUDA = torch.cuda.is_available()


def test_auto_prefers_cuda_then_mps_then_cpu():
    dev = resolve_device("auto")
    if HAS_CUDA:
        assert dev.type == "cuda"
    elif getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        assert dev.type == "mps"
    else:
        assert dev.type == "cpu"


@pytest.mark.parametrize("name", ["tpu", "gpu0", "cuda:99" if HAS_CUDA else "cuda"])
def test_bad_devices(name):
    with pytest.raises(ValueError):
        resolve_device(name)


def test_dtype_defaults():
    cpu = torch.device("cpu")
    assert resolve_dtype(None, cpu) is torch.float32
    assert resolve_dtype("bf16", cpu) is torch.bfloat16
    assert resolve_dtype("fp16", cpu) is torch.float16
    assert resolve_dtype(None, cpu, "bfloat16") is torch.bfloat16
    assert resolve_dtype(None, torch.device("cuda")) is torch.bfloat16  # no device touched
    with pytest.raises(ValueError):
        resolve_dtype("int8", cpu)


def test_bf16_byte_figures_halve(byte_tokenizer):
    ids = byte_tokenizer.encode("half the bytes")
    m32 = load_model("tiny-random", torch.device("cpu"))
    m16 = load_model("tiny-random", torch.device("cpu"), torch.bfloat16)
    a = list(make_engine("concat", m32).generate(ids, 6))
    b = list(make_engine("concat", m16).generate(ids, 6))
    for x, y in zip(a, b):
        assert y.cache_bytes * 2 == x.cache_bytes and y.bytes_copied * 2 == x.bytes_copied


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("key", ENGINE_KEYS)
def test_cuda_engines_match_cpu(key, byte_tokenizer):
    ids = byte_tokenizer.encode("on the GPU")
    cpu = load_model("tiny-random", torch.device("cpu"))
    gpu = load_model("tiny-random", torch.device("cuda"), torch.float32)
    trace = TraceOptions(logits=True)
    ref = list(make_engine(key, cpu).generate(ids, 12, SamplingConfig(), trace))
    got = list(make_engine(key, gpu).generate(ids, 12, SamplingConfig(), trace))
    assert [t.token_id for t in got] == [t.token_id for t in ref]
    assert all(t.device_mem_bytes and t.device_mem_bytes > 0 for t in got)
