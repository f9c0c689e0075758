"""kvviz.serving against single requests: every request's tokens under every scheduler equal its own solo
run with the `static` engine (greedy and seeded sampling, the byte model and a BPE checkpoint), logits
within 1e-4, padding and idle slots read by nothing, and the course's static-batching figures."""
from __future__ import annotations

import pytest

from kvviz.serving.record import SCHEDULERS, SchedulerSettings
from kvviz.serving.workload import Request, Workload, course_batch, load_workload

BPE_VOCAB = 320


@pytest.fixture(scope="module")
def tiny(torch_cpu):
    from kvviz.models.presets import load_model, load_tokenizer

    return load_model("tiny", torch_cpu.device("cpu")), load_tokenizer("tiny")


@pytest.fixture(scope="module")
def bpe(torch_cpu, tmp_path_factory):
    """A small Llama checkpoint with a byte-level BPE tokenizer.json, loaded as the Hub's would be."""
    pytest.importorskip("tokenizers")
    from kvviz.config import ModelConfig
    from kvviz.models.hf import save_hf_checkpoint, train_tokenizer_json
    from kvviz.models.presets import load_model, load_tokenizer
    from kvviz.models.transformer import Transformer

    folder = tmp_path_factory.mktemp("bpe")
    cfg = ModelConfig(name="ck", arch="llama", vocab_size=BPE_VOCAB, d_model=64, n_layer=2, n_head=4, n_kv_head=2,
                      head_dim=16, d_ff=96, max_seq_len=512, norm_eps=1e-6, tie_embeddings=False)
    save_hf_checkpoint(Transformer(cfg).init_weights(5), folder, tokenizer_json=train_tokenizer_json(BPE_VOCAB))
    return load_model(str(folder), torch_cpu.device("cpu")), load_tokenizer(str(folder))


def solo(model, ids, n, seed=0, temperature=0.0, top_k=None, logits=False):
    """The request alone through the static engine (kvviz.serving.solo, the check `kvviz serve` and the Serve
    view run): its tokens (and, for the logits test, each step's logits from the same engine)."""
    from kvviz.config import SamplingConfig, TraceOptions
    from kvviz.engines import make_engine
    from kvviz.serving.solo import solo_tokens

    sampling = SamplingConfig(temperature=temperature, top_k=top_k, seed=seed)
    if not logits:
        return list(solo_tokens(model, ids, n, sampling)), None
    traces = list(make_engine("static", model).generate(ids, n, sampling, TraceOptions(masks=False, logits=True)))
    return [t.token_id for t in traces], [t.logits for t in traces]


def settings(**kw) -> SchedulerSettings:
    base = dict(max_batch=8, blocks=64, block_size=16, token_budget=32)
    base.update(kw)
    return SchedulerSettings(**base)


def run(model, tok, workload, key, s):
    from kvviz.serving.engine import serve

    return serve(model, tok, workload, key, s)


def assert_solo(model, tok, workload, key, s):
    from kvviz.serving.engine import tokenize
    from kvviz.serving.record import solo_checks
    from kvviz.serving.solo import request_sampling, run_with_solo, solo_runs

    r = run(model, tok, workload, key, s)
    prompts = tokenize(workload, tok)
    for i, (ids, req) in enumerate(zip(prompts, workload.requests)):
        seed = req.seed if req.seed is not None else s.seed + i
        assert request_sampling(s, workload, i).seed == seed
        want, _ = solo(model, ids, req.new_tokens, seed, s.temperature, s.top_k)
        assert list(r.results[i].token_ids) == want, (key, i)
    assert all(c.equal for c in solo_checks(run_with_solo(r, solo_runs(model, prompts, workload, s))))
    return r


# -- the course's figures ----------------------------------------------------------------------
def test_static_course_batch_reproduces_the_course_figures(tiny):
    model, tok = tiny
    wl = course_batch()
    prompts, news = [10, 30, 5, 20], [15, 10, 20, 12]
    assert [len(tok.encode(r.prompt)) for r in wl.requests] == prompts
    assert [r.new_tokens for r in wl.requests] == news
    r = assert_solo(model, tok, wl, "static", settings())
    # counted from the records' work, not from the summary
    padding = sum(w.n_slots for s in r.steps for w in s.work if w.kind == "padding")
    prefill = sum(w.n_slots for s in r.steps for w in s.work if w.kind == "prefill")
    idle = sum(w.n_slots for s in r.steps for w in s.work if w.kind == "idle")
    emitted = sum(1 for s in r.steps for w in s.work if w.token_id is not None)
    assert (padding, prefill + padding) == (55, 120) == (sum(30 - p for p in prompts), 4 * 30)
    assert (idle, emitted + idle) == (23, 80) == (sum(20 - n for n in news), 4 * 20)
    s = r.summary()
    assert round(100 * s.padding_share) == 46 and round(100 * s.idle_share) == 29
    assert len(r.steps) == 20  # one prefill, then decode until the longest (20 new tokens) is done
    assert all(len({w.request for w in st.work}) == 4 for st in r.steps)  # every row stays in the batch


def test_every_scheduler_but_static_wastes_nothing_on_course_batch(tiny):
    model, tok = tiny
    for key in SCHEDULERS[1:]:
        s = run(model, tok, course_batch(), key, settings()).summary()
        assert (s.padding_slots, s.idle_slots) == (0, 0), key


# -- the same tokens as a solo run -------------------------------------------------------------
@pytest.mark.parametrize("key", SCHEDULERS)
@pytest.mark.parametrize("preset", ["course-batch", "shared-prefix", "chat"])
def test_greedy_tokens_equal_solo_static(tiny, key, preset):
    model, tok = tiny
    assert_solo(model, tok, load_workload(preset), key, settings(max_batch=4, blocks=24))


@pytest.mark.parametrize("key", SCHEDULERS)
def test_seeded_sampling_equals_solo_static(tiny, key):
    model, tok = tiny
    wl = Workload("w", tuple(Request(prompt=p, new_tokens=n, arrival=a, seed=sd) for p, n, a, sd in [
        ("def f(x):", 14, 0, 7), ("The cache", 9, 0, None), ("import os\n", 12, 2, 3), ("A list is", 10, 3, None)]))
    r = assert_solo(model, tok, wl, key, settings(max_batch=3, blocks=4, block_size=8, temperature=0.9, top_k=40,
                                                  seed=11))
    assert len({r.results[i].token_ids for i in range(4)}) == 4


@pytest.mark.parametrize("key", SCHEDULERS)
def test_bpe_checkpoint_tokens_equal_solo_static(bpe, key):
    model, tok = bpe
    wl = load_workload("shared-prefix")
    assert len(tok.encode(wl.requests[0].prompt)) < len(wl.requests[0].prompt)  # really BPE
    assert_solo(model, tok, wl, key, settings(max_batch=4, blocks=16, block_size=8, token_budget=16))


def test_preemption_recomputes_and_keeps_tokens(tiny):
    model, tok = tiny
    r = assert_solo(model, tok, course_batch(), "paged", settings(blocks=4))
    pre = [p for s in r.steps for p in s.preemptions]
    assert pre and sum(res.preemptions for res in r.results) == len(pre)
    for p in pre:  # the victim is the most recently admitted of those running before it
        step = next(s for s in r.steps if p in s.preemptions)
        assert next(x for x in step.requests if x.request == p.request).state in ("preempted", "running")
    # recomputation shows in the prefill positions computed
    assert r.summary().prefill_computed > r.summary().prompt_tokens


def test_logits_within_1e4_of_solo_static(tiny, bpe):
    from kvviz.serving.engine import ServeEngine, tokenize

    for model, tok in (tiny, bpe):
        for key, wl in (("chunked", load_workload("random:6:2")), ("prefix", load_workload("shared-prefix")),
                        ("static", course_batch())):
            eng = ServeEngine(model, tok, wl, key, settings(max_batch=3, blocks=30, block_size=8, token_budget=16))
            seen: dict[tuple[int, int], object] = {}
            run_rows = eng.runner.run

            def spy(rows, run_rows=run_rows, seen=seen):
                out = run_rows(rows)
                for row, lg in zip((r for r in rows if r.emits), out):
                    seen[(row.seq.index, len(row.seq.generated))] = lg.numpy().copy()
                return out

            eng.runner.run = spy
            eng.run()
            for i, (ids, req) in enumerate(zip(tokenize(wl, tok), wl.requests)):
                _, want = solo(model, ids, req.new_tokens, i, logits=True)
                for k in range(req.new_tokens):
                    assert abs(seen[(i, k)] - want[k]).max() < 1e-4, (key, i, k)


# -- padding and idle slots ----------------------------------------------------------------------
POISON = 1e6


def _poisoned_engine(model, tok, wl, key, s, *, rows: str):
    """An engine whose thrown-away slots (rows="thrown") or real slots (rows="real") store huge K/V, and
    whose scratch block holds huge values before every write."""
    from kvviz.serving.engine import ServeEngine

    eng = ServeEngine(model, tok, wl, key, s)
    runner = eng.runner
    plain = type(runner).write

    def write(layer, k, v, slots):
        pick = runner.thrown_rows
        if rows == "real":
            keep = set(runner.thrown_rows.tolist())
            import torch

            pick = torch.tensor([i for i in range(k.shape[0]) if i not in keep], dtype=torch.long)
        k, v = k.clone(), v.clone()
        k[pick], v[pick] = POISON, POISON
        S = runner.block_size
        runner.k_pool[layer][runner.scratch * S:] = POISON
        runner.v_pool[layer][runner.scratch * S:] = POISON
        plain(runner, layer, k, v, slots)

    runner.write = write
    return eng


def test_padded_and_idle_kv_never_reach_a_real_position(tiny):
    import numpy as np

    model, tok = tiny
    wl = course_batch()
    s = settings()
    clean = run(model, tok, wl, "static", s)
    poisoned = _poisoned_engine(model, tok, wl, "static", s, rows="thrown").run()
    kinds = {w.kind for st in poisoned.steps for w in st.work}
    assert {"padding", "idle"} <= kinds
    assert [r.token_ids for r in poisoned.results] == [r.token_ids for r in clean.results]
    # the poison is strong enough to show: in the real slots it changes what comes out
    broken = _poisoned_engine(model, tok, wl, "static", s, rows="real").run()
    assert [r.token_ids for r in broken.results] != [r.token_ids for r in clean.results]
    assert np.isfinite([st.latency_ms for st in poisoned.steps]).all()


def test_continuous_batch_decode_masks_other_lengths(tiny):
    """One-token rows of different lengths share one padded attention call: the padding keys (the
    scratch block, poisoned) must not count."""
    model, tok = tiny
    wl = course_batch()
    clean = run(model, tok, wl, "continuous", settings())
    poisoned = _poisoned_engine(model, tok, wl, "continuous", settings(), rows="thrown").run()
    assert [r.token_ids for r in poisoned.results] == [r.token_ids for r in clean.results]


# -- prefix caching, counted independently ------------------------------------------------------
def _common(a, b) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_prefix_hits_are_the_longest_run_of_full_shared_blocks(tiny):
    model, tok = tiny
    wl = load_workload("shared-prefix")
    S = 16
    r = assert_solo(model, tok, wl, "prefix", settings(block_size=S))
    hits = {h.request: h for st in r.steps for h in st.prefix_hits}
    assert 0 not in hits
    for j in range(1, len(wl.requests)):
        pj = list(r.results[j].prompt_ids)
        # the requests whose blocks were written before j was admitted: their prompt and generated tokens
        earlier = [list(r.results[i].prompt_ids) + list(r.results[i].token_ids) for i in range(j)
                   if r.results[i].admitted_step < r.results[j].admitted_step]
        want = min(max(_common(e, pj) for e in earlier) // S, (len(pj) - 1) // S)
        assert len(hits[j].blocks) == want and hits[j].tokens == want * S, j
    s = r.summary()
    assert s.cached_tokens == sum(h.tokens for h in hits.values())
    assert s.prefill_computed == s.prompt_tokens - s.cached_tokens
    paged = run(model, tok, wl, "paged", settings(block_size=S, blocks=100)).summary()  # room: no preemption
    assert paged.cached_tokens == 0 and paged.prefill_computed == s.prompt_tokens


def test_requests_admitted_in_one_step_share_the_blocks_computed_in_it(tiny):
    """As vLLM keys a block when it allocates its slots: requests arriving together with one system prompt
    compute it once; the first computes it, the rest take its full blocks in the same step and forward."""
    model, tok = tiny
    system = "You are a careful teacher. "  # 27 bytes: six full blocks of 4 (seven with the next question's "Wh")
    wl = Workload("together", tuple(Request(prompt=system + q, new_tokens=5, arrival=0)
                                   for q in ("What is a cache?", "Why keys?", "And values?")))
    r = assert_solo(model, tok, wl, "prefix", settings(block_size=4))
    assert [x.cached_tokens for x in r.results] == [0, 28, 24]
    assert all(x.admitted_step == 0 for x in r.results)
    s = r.summary()
    assert s.prefill_computed == s.prompt_tokens - 52


def test_chat_turns_reuse_the_conversation_so_far(tiny):
    model, tok = tiny
    wl = load_workload("chat")
    r = assert_solo(model, tok, wl, "prefix", settings())
    prompts = [list(x.prompt_ids) for x in r.results]
    for t in (1, 2):
        assert prompts[t][:len(prompts[t - 1])] == prompts[t - 1]  # each turn re-sends the one before
        assert r.results[t].cached_tokens >= (len(prompts[t - 1]) // 16) * 16
        assert r.results[t].computed_tokens < len(prompts[t]) // 2


# -- the pool's bookkeeping, against the records ------------------------------------------------
@pytest.mark.parametrize("key", SCHEDULERS)
def test_records_hold_together(tiny, key):
    model, tok = tiny
    wl = load_workload("random:10:4")
    s = settings(max_batch=4, blocks=12, block_size=8, token_budget=24)
    r = assert_solo(model, tok, wl, key, s)
    for st in r.steps:
        held: dict[int, list[int]] = {}
        for q in st.requests:
            assert len(set(q.block_table)) == len(q.block_table)
            if q.state != "running":
                assert q.block_table == () and q.computed == 0
            for b in q.block_table:
                held.setdefault(b, []).append(q.request)
        for b in range(st.pool.n_blocks):
            assert st.pool.ref_counts[b] == len(held.get(b, [])), (st.step, b)
            assert sorted(st.pool.owners[b]) == sorted(held.get(b, []))
            if st.pool.ref_counts[b] > 1:
                assert key == "prefix" and st.pool.hashed[b]
        running = [q for q in st.requests if q.state == "running"]
        assert len(running) <= s.max_batch
        if key == "chunked":
            assert sum(w.n_slots for w in st.work) <= s.token_budget
        if key == "reserve":  # every running request holds its whole maximum length
            for q in running:
                res = r.results[q.request]
                assert len(q.block_table) == -(-(len(res.prompt_ids) + wl.requests[q.request].new_tokens - 1) // 8)
        if key != "static":
            assert {w.kind for w in st.work} <= {"prefill", "decode"}


def test_reserve_fits_fewer_requests_than_paged_in_one_pool(tiny):
    model, tok = tiny
    wl = Workload("w", tuple(Request(prompt="x = [1, 2, 3]\n", new_tokens=40) for _ in range(6)))
    s = settings(blocks=12, block_size=8)
    pag = assert_solo(model, tok, wl, "paged", s).summary()
    res = assert_solo(model, tok, wl, "reserve", s).summary()
    per_request = -(-(14 + 40 - 1) // 8)  # 7 blocks reserved each
    assert res.peak_running == 12 // per_request == 1
    assert pag.peak_running > res.peak_running
    assert res.peak_reserved_bytes > res.peak_used_bytes


def test_continuous_admits_a_waiting_request_the_step_after_one_finishes(tiny):
    model, tok = tiny
    wl = load_workload("random:8:1")
    r = run(model, tok, wl, "continuous", settings(max_batch=2))
    for st, nxt in zip(r.steps, r.steps[1:]):
        waiting = [q for q in st.requests if q.state == "waiting"]
        if st.finished and waiting:
            assert nxt.admitted[:1] == (waiting[0].request,)


def test_chunked_prefill_keeps_decoding_beside_a_long_prompt(tiny):
    model, tok = tiny
    wl = Workload("w", (Request(prompt="a b c d", new_tokens=20), Request(prompt="x" * 200, new_tokens=4, arrival=3)))
    s = settings(token_budget=32)
    r = assert_solo(model, tok, wl, "chunked", s)
    long_steps = [st for st in r.steps if any(w.request == 1 and w.kind == "prefill" for w in st.work)]
    assert len(long_steps) == -(-200 // 31)  # 31 prefill positions a step beside the one decode token
    assert all(any(w.request == 0 and w.kind == "decode" for w in st.work) for st in long_steps)
    cont = run(model, tok, wl, "continuous", s)
    assert sum(1 for st in cont.steps if any(w.request == 1 and w.kind == "prefill" for w in st.work)) == 1


def test_gpt2_is_refused_in_one_line(torch_cpu):
    from kvviz.config import ModelConfig
    from kvviz.models.gpt2 import GPT2
    from kvviz.serving.model_runner import ModelRunner

    cfg = ModelConfig(name="g", arch="gpt2", vocab_size=256, d_model=64, n_layer=1, n_head=4, n_kv_head=4,
                      head_dim=16, d_ff=96, max_seq_len=64)
    with pytest.raises(ValueError, match="Llama-family") as err:
        ModelRunner(GPT2(cfg).init_weights(0), 4, 4)
    assert "\n" not in str(err.value) and "gpt2" in str(err.value)


def test_one_forward_per_step(tiny, monkeypatch):
    """Batching is one pass of every weight for the whole batch, never one forward per request."""
    import torch.nn.functional as F

    model, tok = tiny
    from kvviz.serving.model_runner import NativeLinear, PackedLinear

    calls = []
    real = F.linear
    monkeypatch.setattr(F, "linear", lambda *a, **k: (calls.append(a[1].data_ptr()), real(*a, **k))[1])
    for hook in (PackedLinear, NativeLinear):  # the batched step's projections (packed weights, step.c's product)
        monkeypatch.setattr(hook, "__call__", lambda s, x, w, b=None, call=hook.__call__:
                            (calls.append(w.data_ptr()), call(s, x, w, b))[1])
    r = run(model, tok, course_batch(), "continuous", settings())
    qkv = model.plan().layers[0].qkv.data_ptr()
    assert calls.count(qkv) == len([s for s in r.steps if s.work]) == 20


@pytest.mark.parametrize("arch, changes", [("qwen3", dict(qk_norm=True)), ("qwen2", dict(qkv_bias=True))])
def test_qwen_shapes_equal_solo_static(torch_cpu, byte_tokenizer, arch, changes):
    """q/k norms before the rotation (Qwen3) and QKV biases (Qwen2) take the batched path too."""
    import torch

    from kvviz.config import ModelConfig
    from kvviz.models.transformer import Transformer

    cfg = ModelConfig(name=arch, arch=arch, vocab_size=256, d_model=64, n_layer=2, n_head=4, n_kv_head=2,
                      head_dim=16, d_ff=96, max_seq_len=256, tie_embeddings=False, **changes)
    model = Transformer(cfg).init_weights(3).eval()
    with torch.no_grad():  # biases and norms away from their init, so skipping them would show
        for name, p in model.named_parameters():
            if name.endswith(("bias", "norm.weight")):
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(len(name))) * 0.3)
    for key in ("static", "chunked", "prefix"):
        assert_solo(model, byte_tokenizer, load_workload("shared-prefix"), key,
                    settings(max_batch=4, blocks=60, block_size=8, token_budget=16))


def test_a_batched_step_multiplies_through_packed_weights_equal_to_f_linear(tiny, monkeypatch):
    """Steps of more than NATIVE_ROWS rows run every projection through oneDNN's packed weights (CPU, float32),
    steps of fewer through step.c's multi-row product; each equals F.linear's to a rounding for 1 to 17 rows."""
    import torch
    import torch.nn.functional as F

    from kvviz.serving.model_runner import NATIVE_ROWS, NativeLinear, PackedLinear, native_linear, packable

    model, tok = tiny
    assert packable(model)
    plan = model.plan()
    packed, nat = PackedLinear(plan), native_linear(model)
    if nat is None:
        pytest.skip("kvviz/native/step.c cannot be built here")
    for w in (plan.layers[0].qkv, plan.layers[0].o, plan.layers[-1].gate_up, plan.layers[-1].down, plan.head):
        for n in (1, 2, 8, 17):
            x = torch.randn(1, n, w.shape[1], generator=torch.Generator().manual_seed(n))
            want = F.linear(x, w)
            for hook in (packed, nat):
                assert torch.allclose(hook(x, w), want, rtol=1e-5, atol=1e-5 * want.abs().max().item())
    rows_seen = {PackedLinear: [], NativeLinear: []}
    for hook in rows_seen:
        monkeypatch.setattr(hook, "__call__", lambda s, x, w, b=None, call=hook.__call__, seen=rows_seen[hook]:
                            (seen.append(x.shape[1]), call(s, x, w, b))[1])
    r = run(model, tok, course_batch(), "continuous", settings())
    rows = [sum(w.pos_stop - w.pos_start for w in st.work) for st in r.steps if st.work]
    per_step = 4 * model.cfg.n_layer + 1
    many = [n for n in rows if n > NATIVE_ROWS]
    assert many and len(rows_seen[PackedLinear]) == len(many) * per_step
    assert set(many) <= set(rows_seen[PackedLinear])  # (the head multiplies only the rows that emit)
    assert len(rows_seen[NativeLinear]) == (len(rows) - len(many)) * per_step
    assert max(rows_seen[NativeLinear]) <= NATIVE_ROWS
