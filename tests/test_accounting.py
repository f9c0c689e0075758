"""Each cache's byte accounting against an independent count: the bytes of the aten ops that its
`update` actually ran, observed with a TorchDispatchMode (not the formula the cache code uses)."""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kvviz.caches import CACHES
from kvviz.config import TraceOptions
from kvviz.engines import make_engine

aten = torch.ops.aten
VIEWS = {"view", "slice", "permute", "transpose", "select", "unsqueeze", "alias", "as_strided", "t", "expand",
         "_unsafe_view", "_reshape_alias", "detach", "squeeze", "unbind", "split", "lift_fresh"}


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class OpBytes(TorchDispatchMode):
    """Classifies the bytes each op moves: `copied` = existing content moved (inputs of cat but the
    last), `written` = new values stored in place or appended, `gathered` = fresh copies read out."""

    def __init__(self) -> None:
        super().__init__()
        self.copied = self.written = self.gathered = 0
        self.unclassified: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if name == "cat":
            tensors = args[0]
            self.copied += sum(nbytes(t) for t in tensors[:-1])
            self.written += nbytes(tensors[-1])
        elif name in ("copy_", "index_copy_", "index_put_"):
            src = args[1] if name == "copy_" else args[-1]
            self.written += nbytes(src) if isinstance(src, torch.Tensor) else 0
        elif name in ("index_select", "index", "gather", "clone", "_to_copy"):
            self.gathered += nbytes(out)
        elif name in ("reshape", "contiguous") and out.untyped_storage().data_ptr() == \
                args[0].untyped_storage().data_ptr():
            pass  # resolved to a view: nothing moved
        elif name not in VIEWS:
            self.unclassified.append(name)
        return out


def _moves_only_in_update(key: str) -> bool:
    """int8's update also quantises and dequantises (arithmetic, not moves): its bytes are checked against hand
    counts and the tensors it holds in test_approx_caches.py. A score cache ranks a long prompt after the step
    (commit) and writes the W it keeps there: its bytes are checked against its tensors in test_score_caches.py."""
    from kvviz.caches.scored import ScoredCache

    return key != "int8" and not issubclass(CACHES[key], ScoredCache)


@pytest.mark.parametrize("key", [k for k in CACHES if _moves_only_in_update(k)])
@pytest.mark.parametrize("block_size", [4, 16])
def test_counters_equal_observed_op_bytes(tiny_random, byte_tokenizer, key, block_size, monkeypatch):
    observed: list[OpBytes] = []
    cls = CACHES[key]
    original = cls.update

    def watched(self, layer, k, v):
        if layer == 0:
            observed.append(OpBytes())
        with observed[-1]:
            return original(self, layer, k, v)

    monkeypatch.setattr(cls, "update", watched)
    ids = byte_tokenizer.encode("count the bytes")
    # torch's path, where every decode step goes through update (the native step's figures are held to these
    # very figures, step by step, in tests/test_native.py)
    traces = list(make_engine(key, tiny_random, block_size=block_size, window=9, sinks=3, kernel="torch").generate(
        ids, 40, trace=TraceOptions(masks=False)))
    assert len(observed) == len(traces)
    for t, ops in zip(traces, observed):
        assert ops.unclassified == [], ops.unclassified
        assert (t.bytes_copied, t.bytes_written, t.bytes_gathered) == (ops.copied, ops.written, ops.gathered)


def test_concat_copies_the_whole_history(tiny_random, byte_tokenizer):
    """Independent arithmetic from the chapter: the history at decode step k is P + k - 1 tokens."""
    cfg = tiny_random.cfg
    per_token = cfg.n_layer * 2 * cfg.n_kv_head * cfg.head_dim * 4  # fp32: 2 layers * K,V * 4*32 * 4 B
    assert per_token == 2048
    P = 10
    traces = list(make_engine("concat", tiny_random).generate(list(range(65, 65 + P)), 20))
    assert traces[0].bytes_copied == 0
    for t in traces[1:]:
        assert t.bytes_copied == (P + t.step - 1) * per_token
        assert t.bytes_written == per_token
    assert sum(t.bytes_copied for t in traces) == per_token * sum(P + k - 1 for k in range(1, 20))


def test_static_and_paged_copy_nothing_and_hold_what_they_say(tiny_random, byte_tokenizer):
    ids = list(range(65, 75))
    static = list(make_engine("static", tiny_random).generate(ids, 20))
    paged = list(make_engine("paged", tiny_random, block_size=16).generate(ids, 20))
    assert all(t.bytes_copied == 0 for t in static + paged)
    # resident bytes against the tensors actually allocated by the caches
    eng = make_engine("static", tiny_random)
    list(eng.generate(ids, 20))
    assert static[-1].cache_bytes == sum(nbytes(x) for x in eng.cache.k + eng.cache.v)
    eng = make_engine("paged", tiny_random, block_size=16)
    list(eng.generate(ids, 20))
    block_bytes = sum(nbytes(x[0]) for x in eng.cache.k_pool + eng.cache.v_pool)
    assert paged[-1].cache_bytes == len(paged[-1].block_table) * block_bytes
    # gathered = every held block of every layer, K and V, each step
    assert paged[-1].bytes_gathered == len(paged[-1].block_table) * block_bytes


def test_concat_resident_bytes_equal_tensors(tiny_random):
    eng = make_engine("concat", tiny_random)
    traces = list(eng.generate(list(range(65, 80)), 12))
    assert traces[-1].cache_bytes == sum(nbytes(x) for x in eng.cache.k + eng.cache.v)
