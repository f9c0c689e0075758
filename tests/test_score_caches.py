"""The caches that evict by score (tova, h2o, knorm, snapkv), each against a reference implementation of its own rule
written here without the cache or the model's forward: the layers in plain torch ops over every position's K/V,
each query reading only the positions held when it ran, and the rule deciding, step by step, which positions
stay. The cache must hold exactly the positions the reference holds after every step, and give its logits."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from kvviz.caches import CACHES
from kvviz.config import ModelConfig, TraceOptions
from kvviz.engines import make_engine
from kvviz.models.transformer import Transformer

RULES = ("tova", "h2o", "knorm")  # evict at every step once full
SNAP_WINDOW, SNAP_POOL = 32, 5  # SnapKV's observation window (at most W/2) and the positions it averages


class Reference:
    """One sequence through the model's weights, written out: RMSNorm, q/k/v, RoPE, softmax attention over the
    positions held, SwiGLU. Every position's K/V is kept here; `held` says which ones a query may read."""

    def __init__(self, model: Transformer, rule: str, window: int) -> None:
        cfg = model.cfg
        assert not cfg.qk_norm and not cfg.qkv_bias and cfg.arch == "kvviz"
        self.cfg, self.rule, self.window = cfg, rule, window
        self.w = {k: v.detach().double() for k, v in model.state_dict().items()}
        self.keys: list[dict[int, torch.Tensor]] = [{} for _ in range(cfg.n_layer)]  # layer -> pos -> (KV, D)
        self.values: list[dict[int, torch.Tensor]] = [{} for _ in range(cfg.n_layer)]
        self.held: list[int] = []
        self.score: dict[int, float] = {}

    def rms(self, x, name):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg.norm_eps) * self.w[name]

    def rope(self, x, pos):  # x (heads, T, D), pos (T,)
        D = self.cfg.head_dim
        inv = 1.0 / self.cfg.rope_theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
        angle = torch.tensor(pos, dtype=torch.float64)[:, None] * inv[None, :]
        cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)
        half = torch.cat([-x[..., D // 2:], x[..., :D // 2]], -1)
        return x * cos + half * sin

    def forward(self, tokens: list[int], positions: list[int], readable: list[list[int]]):
        """Hidden states of `tokens` at `positions`, query i reading keys `readable[i]`. Returns the last
        position's logits and, per layer, each query's weights over its keys, averaged over heads."""
        cfg, w = self.cfg, self.w
        H, KV, D = cfg.n_head, cfg.n_kv_head, cfg.head_dim
        x = w["embed_tokens.weight"][tokens]  # (T, C)
        weights = []
        for layer in range(cfg.n_layer):
            p = f"layers.{layer}."
            h = self.rms(x, p + "input_layernorm.weight")
            q = (h @ w[p + "self_attn.q_proj.weight"].T).view(-1, H, D).transpose(0, 1)  # (H, T, D)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).view(-1, KV, D).transpose(0, 1)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).view(-1, KV, D).transpose(0, 1)
            q, k = self.rope(q, positions), self.rope(k, positions)
            for i, pos in enumerate(positions):
                self.keys[layer][pos], self.values[layer][pos] = k[:, i], v[:, i]
            out, layer_weights = [], []
            for i, keys in enumerate(readable):
                K = torch.stack([self.keys[layer][j] for j in keys], 1)  # (KV, n, D)
                V = torch.stack([self.values[layer][j] for j in keys], 1)
                K, V = K.repeat_interleave(H // KV, 0), V.repeat_interleave(H // KV, 0)  # (H, n, D)
                a = torch.softmax((K @ q[:, i, :, None])[..., 0] / math.sqrt(D), -1)  # (H, n)
                out.append((a[:, :, None] * V).sum(1).reshape(H * D))
                layer_weights.append(dict(zip(keys, a.mean(0).tolist())))
            weights.append(layer_weights)
            x = x + torch.stack(out) @ w[p + "self_attn.o_proj.weight"].T
            h = self.rms(x, p + "post_attention_layernorm.weight")
            gate, up = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
            x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
        head = w["embed_tokens.weight"] if cfg.tie_embeddings else w["lm_head.weight"]
        return self.rms(x[-1], "norm.weight") @ head.T, weights

    def step_scores(self, positions: list[int], readable: list[list[int]], weights) -> dict[int, float]:
        """The rule's score of this step for each key it concerns, averaged over layers."""
        L = self.cfg.n_layer
        total: dict[int, float] = {}
        for layer in range(L):
            if self.rule == "snapkv":  # the observation window's weights on the keys before it, smoothed
                n, w = len(positions), self.observed
                seen = [sum(weights[layer][i][j] for i in range(n - w, n)) / w for j in range(n - w)]
                part = {j: sum(seen[i] for i in range(j - SNAP_POOL // 2, j + SNAP_POOL // 2 + 1) if 0 <= i < n - w)
                        / SNAP_POOL for j in range(n - w)}
            elif self.rule == "tova":  # the last query's weights
                part = weights[layer][-1]
            elif self.rule == "h2o":  # every query's weights, summed
                part = {}
                for row in weights[layer]:
                    for j, a in row.items():
                        part[j] = part.get(j, 0.0) + a
            else:  # knorm: minus the new keys' norms, averaged over KV heads
                part = {p: -float(self.keys[layer][p].norm(dim=-1).mean()) for p in positions}
            for j, s in part.items():
                total[j] = total.get(j, 0.0) + s / L
        return total

    @property
    def observed(self) -> int:
        return max(1, min(SNAP_WINDOW, self.window // 2))

    def evictable(self, held: list[int]) -> list[int]:
        recent = {"h2o": self.window // 2, "snapkv": self.observed}.get(self.rule, 0)
        return sorted(held)[:len(held) - recent]

    def first_to_go(self, held: list[int], scores: dict[int, float]) -> int:
        ranked = sorted(self.evictable(held), key=lambda p: (scores[p], p))
        if len(ranked) > 1:  # a near tie would leave the choice to rounding: this test's cases have none
            assert abs(scores[ranked[1]] - scores[ranked[0]]) > 1e-6, "near tie in the reference"
        return ranked[0]

    def prefill(self, tokens: list[int]):
        positions = list(range(len(tokens)))
        logits, weights = self.forward(tokens, positions, [positions[:i + 1] for i in positions])
        held = list(positions)
        if self.rule == "snapkv" and len(held) <= self.window:
            self.held = held  # nothing to cut, and nothing scored
            return logits
        step = self.step_scores(positions, [positions[:i + 1] for i in positions], weights)
        while len(held) > self.window:
            held.remove(self.first_to_go(held, step))
        self.held, self.score = held, {p: step.get(p, 0.0) for p in held}  # (snapkv scores no window key)
        return logits

    def decode(self, token: int, pos: int):
        if self.rule == "snapkv":  # every new token is kept
            self.held.append(pos)
            return self.forward([token], [pos], [sorted(self.held)])[0]
        if len(self.held) == self.window:
            gone = self.first_to_go(self.held, self.score)
            self.held.remove(gone)
            del self.score[gone]
        self.held.append(pos)
        readable = [sorted(self.held)]
        logits, weights = self.forward([token], [pos], readable)
        step = self.step_scores([pos], readable, weights)
        if self.rule == "tova":
            self.score = {p: step[p] for p in self.held}
        elif self.rule == "h2o":
            self.score[pos] = 0.0
            for p in self.held:
                self.score[p] += step[p]
        else:
            self.score[pos] = step[pos]
        return logits


def run_against_reference(model, rule, prompt, n, window):
    """The engine's run and the reference fed the engine's tokens: held positions and logits, step by step."""
    engine = make_engine(rule, model, window=window)
    ref = Reference(model, rule, window)
    held_steps, tokens = 0, []
    for t in engine.generate(prompt, n, trace=TraceOptions(logits=True)):
        logits = ref.prefill(prompt) if t.step == 0 else ref.decode(tokens[-1], t.pos_start)
        tokens.append(t.token_id)
        assert list(engine.cache.held_positions()) == sorted(ref.held), f"step {t.step}"
        grown = t.pos_stop - len(prompt) if rule == "snapkv" else 0  # snapkv keeps every new token
        assert t.cache_len == len(ref.held) == min(window, len(prompt) if grown else t.pos_stop) + grown
        np.testing.assert_allclose(t.logits, logits.numpy(), atol=1e-4, rtol=0)
        held_steps += len(ref.held) < t.pos_stop  # a step where something had been evicted
    return held_steps


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("prompt_len,window", [(3, 4), (12, 5), (9, 8), (20, 6)])
def test_holds_what_its_rule_holds(tiny_random, rule, prompt_len, window):
    prompt = [(41 * i + 17) % 256 for i in range(prompt_len)]
    assert run_against_reference(tiny_random, rule, prompt, 14, window) >= 10  # the rule chose, most steps


@pytest.mark.parametrize("prompt_len,window", [(12, 5), (20, 6), (60, 16), (40, 1)])
def test_snapkv_cuts_what_its_rule_cuts(tiny_random, prompt_len, window):
    prompt = [(41 * i + 17) % 256 for i in range(prompt_len)]
    assert run_against_reference(tiny_random, "snapkv", prompt, 8, window) == 8  # every step: the cut prompt


def test_snapkv_keeps_a_short_prompt_whole(tiny_random):
    engine = make_engine("snapkv", tiny_random, window=8)
    for t in engine.generate(list(range(65, 71)), 6):
        assert list(engine.cache.held_positions()) == list(range(t.pos_stop))


@pytest.fixture(scope="module")
def gqa_model(torch_cpu):
    """Grouped-query attention: two query heads share each KV head."""
    cfg = ModelConfig(name="gqa", n_layer=3, n_head=4, n_kv_head=2, tie_embeddings=False)
    return Transformer(cfg).init_weights(11).eval()


@pytest.mark.parametrize("rule", RULES + ("snapkv",))
def test_holds_what_its_rule_holds_with_grouped_query_attention(gqa_model, rule):
    prompt = [(29 * i + 5) % 256 for i in range(10)]
    assert run_against_reference(gqa_model, rule, prompt, 12, 6) >= 10


def test_rules_choose_differently(tiny_random):
    """Three rules on one run keep three different sets (each test above could pass with one shared rule
    only if the rules agreed)."""
    prompt = [(41 * i + 17) % 256 for i in range(20)]
    held = {}
    for rule in RULES:
        engine = make_engine(rule, tiny_random, window=6)
        list(engine.generate(prompt, 8))
        held[rule] = tuple(engine.cache.held_positions())
    assert len(set(held.values())) == 3, held


def test_h2o_keeps_its_recent_half(tiny_random):
    engine = make_engine("h2o", tiny_random, window=8)
    for t in engine.generate(list(range(60, 80)), 10):
        assert set(range(t.pos_stop - 4, t.pos_stop)) <= set(engine.cache.held_positions())


@pytest.mark.parametrize("rule", RULES)
def test_a_budget_of_one_is_a_window_of_one(tiny_random, rule):
    """W = 1 on a one-token prompt: whatever the scores, the one slot takes each new token, so every rule
    gives the window's tokens and logits."""
    trace = TraceOptions(logits=True)
    mine = list(make_engine(rule, tiny_random, window=1).generate([65], 10, trace=trace))
    window = list(make_engine("window", tiny_random, window=1).generate([65], 10, trace=trace))
    assert [t.token_id for t in mine] == [t.token_id for t in window]
    for a, b in zip(mine, window):
        np.testing.assert_allclose(a.logits, b.logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("rule", RULES)
def test_bytes_held_and_written(tiny_random, rule):
    cfg = tiny_random.cfg
    per_token = cfg.n_layer * 2 * cfg.n_kv_head * cfg.head_dim * 4  # K and V of every layer, float32
    engine = make_engine(rule, tiny_random, window=8)
    traces = list(engine.generate(list(range(65, 85)), 10))
    held = sum(x.numel() * x.element_size() for x in engine.cache.k + engine.cache.v)
    assert {t.cache_bytes for t in traces} == {held} == {8 * per_token}
    assert {t.cache_capacity for t in traces} == {8}
    assert traces[0].bytes_written == 8 * per_token  # a 20-token prompt: the 8 it keeps are stored
    assert all(t.bytes_written == per_token and t.bytes_copied == t.bytes_gathered == 0 for t in traces[1:])


def test_snapkv_bytes_grow_from_the_cut_prompt(tiny_random):
    cfg = tiny_random.cfg
    per_token = cfg.n_layer * 2 * cfg.n_kv_head * cfg.head_dim * 4
    engine = make_engine("snapkv", tiny_random, window=8)
    traces = list(engine.generate(list(range(65, 85)), 10))
    room = 8 + 10  # the cut prompt, then every new token (the last one sampled, never stored, included)
    held = sum(x.numel() * x.element_size() for x in engine.cache.k + engine.cache.v)
    assert {t.cache_bytes for t in traces} == {held} == {room * per_token}
    assert [t.cache_len for t in traces] == list(range(8, 18))
    assert traces[0].bytes_written == 8 * per_token
    assert all(t.bytes_written == per_token and t.bytes_copied == t.bytes_gathered == 0 for t in traces[1:])


@pytest.mark.parametrize("rule", RULES + ("snapkv",))
def test_bad_budget_refused(tiny_random, rule):
    with pytest.raises(ValueError, match="at least 1"):
        list(make_engine(rule, tiny_random, window=0).generate([65, 66], 2))
    with pytest.raises(ValueError, match="batch"):
        CACHES[rule](tiny_random.cfg, max_len=8, device=torch.device("cpu"), dtype=torch.float32, batch=2)


@pytest.mark.parametrize("rule", ["tova", "h2o"])
def test_a_step_whose_attention_was_not_seen_is_refused(tiny_random, rule):
    """A forward that never hands the cache's keys to scaled_dot_product_attention leaves the rule without
    scores: the step fails in one line instead of evicting by stale ones."""
    cfg = tiny_random.cfg
    cache = CACHES[rule](cfg, max_len=8, device=torch.device("cpu"), dtype=torch.float32, window=4)
    cache.prepare(3)
    for layer in range(cfg.n_layer):
        cache.update(layer, torch.zeros(1, cfg.n_kv_head, 3, cfg.head_dim), torch.zeros(1, cfg.n_kv_head, 3,
                                                                                          cfg.head_dim))
    with pytest.raises(RuntimeError, match="0 of 2 layers were scored"):
        cache.commit(3)


def test_quality_on_a_text_feeds_every_engine_the_text(tiny_random):
    """on_text: the exact engine and each approximate one read the given text, not the exact engine's own
    output; the KL at each step is the one of the two runs each fed the text, computed here apart."""
    from kvviz.measure.quality import kl_divergence, on_text

    prompt, text = [70, 71, 72], [(13 * i + 40) % 256 for i in range(12)]
    found = on_text(make_engine("static", tiny_random), [make_engine("concat", tiny_random),
                                                         make_engine("tova", tiny_random, window=4)], prompt, text)
    assert max(found["concat"].kl) < 1e-8 and all(found["concat"].top1)
    trace = TraceOptions(masks=False, logits=True)
    exact = list(make_engine("static", tiny_random).generate(prompt, len(text), trace=trace, forced_tokens=text))
    mine = list(make_engine("tova", tiny_random, window=4).generate(prompt, len(text), trace=trace,
                                                                     forced_tokens=text))
    assert found["tova"].kl == pytest.approx([kl_divergence(a.logits, b.logits) for a, b in zip(exact, mine)],
                                             abs=1e-9)
    assert max(found["tova"].kl) > 0
    with pytest.raises(ValueError, match="empty"):
        on_text(make_engine("static", tiny_random), [], prompt, [])


@pytest.mark.parametrize("rule", RULES + ("snapkv",))
def test_the_record_says_what_was_held(tiny_random, rule):
    """Each step's record holds exactly the positions the cache held, its mask lets the step read only those,
    the work matrix draws the others as evicted, and a saved run keeps them."""
    from kvviz.records.traceio import decode_step, encode_step
    from kvviz.ui.panels.work_matrix import CACHED, EVICTED, classify

    engine = make_engine(rule, tiny_random, window=6)
    for t in engine.generate(list(range(65, 77)), 10):
        held = engine.cache.held_positions()
        if t.step:
            assert list(t.held) == list(held) and list(np.flatnonzero(t.mask[-1])) == list(held)
            row = classify(t, t.pos_start)[-1]
            assert list(np.flatnonzero(row == EVICTED)) == sorted(set(range(t.pos_start)) - set(held))
            assert list(np.flatnonzero(row == CACHED)) == [p for p in held if p < t.pos_start]
        assert decode_step(encode_step(t), t.engine).mask_spec == t.mask_spec
