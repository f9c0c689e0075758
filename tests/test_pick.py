"""The greedy pick (kvviz.sampling._argmax): numpy's argmax on a CPU in float32, torch's elsewhere, the same
index in every case torch.argmax defines (never timed)."""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from kvviz.sampling import NonFiniteLogits, _argmax, check_picked  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_the_pick_is_torchs_argmax_in_every_case(dtype):
    gen = torch.Generator().manual_seed(3)
    cases = [torch.randn(V, generator=gen) for V in (1, 2, 259, 32000, 151936)]
    tie = torch.zeros(500)
    tie[[7, 99, 400]] = 2.0  # equal maxima: the first
    nan = torch.randn(300, generator=gen)
    nan[[41, 200]] = math.nan  # NaN counts as the largest: the first NaN
    inf = torch.randn(300, generator=gen)
    inf[[12, 13]] = math.inf
    cases += [tie, nan, inf, torch.full((64,), -math.inf), torch.full((64,), 1.5)]
    for logits in cases:
        logits = logits.to(dtype)
        assert _argmax(logits) == int(logits.argmax())
    row = torch.randn(2, 300, generator=gen).to(dtype)[1]  # a row of a batch, as the engines pass it
    assert _argmax(row) == int(row.argmax())


def test_a_nan_pick_is_refused_in_one_line():
    logits = torch.randn(300)
    logits[41] = math.nan
    token = _argmax(logits)
    assert token == 41
    with pytest.raises(NonFiniteLogits, match="not finite numbers"):
        check_picked(logits, token)
