"""The speculative engines (kvviz.engines.spec): both drafts under both rollback rules give naive's tokens on the
trained tiny, on Hugging Face checkpoints (a target and a draft written by `kvviz convert`) and where every draft
is rejected or accepted; the bytes the rules write, undo and overwrite against counts taken from the cache's
tensors and the forwards' inputs; the records' rounds; bad settings refused in one line."""
from __future__ import annotations

import numpy as np
import pytest

from kvviz.config import SamplingConfig, TraceOptions
from kvviz.engines import make_engine
from kvviz.engines.drafts import TINY_DRAFT_DIR, PromptLookup

SPEC = ("spec-lookup", "spec-draft")
RULES = ("overwrite", "crop")
# tiny repeats itself here ("of the set of the set"), so both drafts are accepted often and rejected sometimes
PROMPT = "The key of a dictionary"


@pytest.fixture(scope="module")
def tiny(torch_cpu):
    from kvviz.models.presets import load_model

    return load_model("tiny", torch_cpu.device("cpu"))


def tokens(model, key, ids, n, **kw):
    return [t.token_id for t in make_engine(key, model, **kw).generate(ids, n, trace=TraceOptions(masks=False))]


def rounds(traces):
    """(proposed, accepted) of each round after the prefill: the steps that ran a target forward."""
    return [(t.spec_proposed, t.spec_accepted) for t in traces if t.spec_index == 0 and t.phase == "decode"]


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("key", SPEC)
def test_greedy_tokens_are_naives_on_tiny_with_drafts_accepted_and_rejected(tiny, byte_tokenizer, key, rule):
    ids = byte_tokenizer.encode(PROMPT)
    ref = tokens(tiny, "naive", ids, 80)
    traces = list(make_engine(key, tiny, rollback=rule).generate(ids, 80, trace=TraceOptions(masks=False)))
    assert [t.token_id for t in traces] == ref
    done = rounds(traces)
    assert sum(a for _p, a in done) > 0 and sum(p - a for p, a in done) > 0  # both outcomes happened
    assert traces[-1].target_forwards == 1 + len(done) < len(ref)  # fewer target forwards than tokens


def test_spec_draft_drafts_with_the_shipped_draft_for_tiny(tiny):
    assert (TINY_DRAFT_DIR / "model.safetensors").is_file()
    engine = make_engine("spec-draft", tiny)
    assert engine.draft_name == "tiny-draft" and engine.proposer.model.cfg.n_layer < tiny.cfg.n_layer


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("key", SPEC)
@pytest.mark.parametrize("sampling", [SamplingConfig(temperature=0.8, seed=3),
                                      SamplingConfig(temperature=1.0, top_k=5, seed=11)])
def test_seeded_sampling_is_naives(tiny, byte_tokenizer, key, rule, sampling):
    """The target draws each token in order with the run's generator and keeps a draft only where it equals the
    draw: the same draws as a plain loop's."""
    ids = byte_tokenizer.encode(PROMPT)
    ref = [t.token_id for t in make_engine("naive", tiny).generate(ids, 40, sampling)]
    assert [t.token_id for t in make_engine(key, tiny, rollback=rule).generate(ids, 40, sampling)] == ref


class Oracle:
    """A draft that knows the answer: proposes the next k of `answer` (all accepted) or each plus one (all
    rejected). Stands in for the engine's proposer."""

    forwards = 0

    def __init__(self, answer: list[int], n_prompt: int, wrong: bool) -> None:
        self.answer, self.n_prompt, self.wrong = answer, n_prompt, wrong

    def begin(self, n_prompt, max_len):
        pass

    def propose(self, ids, k):
        nxt = self.answer[len(ids) - self.n_prompt:][:k]
        return [(t + 1) % 256 for t in nxt] if self.wrong else nxt

    def accepted(self, n_ids):
        pass


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("wrong", [False, True], ids=["all-accepted", "all-rejected"])
def test_every_draft_accepted_or_every_draft_rejected(tiny_random, byte_tokenizer, rule, wrong):
    ids = byte_tokenizer.encode("Drafts the target always or never takes")
    n = 30
    ref = tokens(tiny_random, "naive", ids, n)
    engine = make_engine("spec-lookup", tiny_random, rollback=rule, spec_k=4)
    engine.proposer = Oracle(ref, len(ids), wrong)
    traces = list(engine.generate(ids, n))
    assert [t.token_id for t in traces] == ref
    done = rounds(traces)
    # k drafts each round, fewer where the run ends first (no draft past the last token)
    assert [p for p, _a in done] == [min(4, n - t.step - 1) for t in traces if t.spec_index == 0][1:]
    if wrong:  # one token per forward, as plain decoding, and every drafted slot rolled back
        assert all(a == 0 for _p, a in done) and traces[-1].target_forwards == n
        assert sum(t.spec_rolled_back for t in traces if t.spec_index == 0) == sum(p for p, _a in done)
    else:  # k + 1 tokens per forward, nothing rolled back
        assert all(a == p for p, a in done) and traces[-1].target_forwards == 1 + -(-(n - 1) // 5)
        assert all(t.spec_rolled_back == 0 for t in traces)


def test_a_prompt_with_no_repeated_ngram_proposes_nothing():
    assert PromptLookup().propose(list(b"abcdefg"), 4) == []
    assert PromptLookup().propose(list(b"the cat. the "), 3) == list(b"cat")  # "the " recurs: what followed it
    assert PromptLookup().propose(list(b"abxab"), 5) == list(b"xab")  # the continuation stops at the text's end


class Spy:
    """Counts the positions each target forward feeds (the rows whose K/V it writes)."""

    def __init__(self, engine) -> None:
        self.fed = []
        verify = engine._verify

        def counted(x, trace):
            self.fed.append(len(x))
            return verify(x, trace)

        engine._verify = counted


def _row_bytes(cfg) -> int:
    return 2 * cfg.n_kv_head * cfg.head_dim * 4 * cfg.n_layer  # K and V, float32, every layer


@pytest.mark.parametrize("key", SPEC)
def test_crop_undoes_the_bytes_of_every_row_fed_and_not_kept(tiny, byte_tokenizer, key):
    ids = byte_tokenizer.encode(PROMPT)
    engine = make_engine(key, tiny, rollback="crop")
    spy = Spy(engine)
    traces = list(engine.generate(ids, 60))
    rows = [k.shape[2] for k in engine.cache.k] + [v.shape[2] for v in engine.cache.v]
    assert set(rows) == {len(ids) + 60 - 1}  # every layer's K and V cut to the kept sequence
    undone_rows = sum(spy.fed) - rows[0]
    assert undone_rows > 0
    assert sum(t.bytes_undone for t in traces) == undone_rows * _row_bytes(tiny.cfg)
    assert all(t.bytes_overwritten == 0 and t.spec_stale == 0 for t in traces)


@pytest.mark.parametrize("key", SPEC)
def test_overwrite_undoes_nothing_and_counts_the_rows_it_writes_over(tiny, byte_tokenizer, key):
    ids = byte_tokenizer.encode(PROMPT)
    n = 60
    engine = make_engine(key, tiny, rollback="overwrite")
    spy = Spy(engine)
    traces = list(engine.generate(ids, n))
    assert all(t.bytes_undone == 0 for t in traces)
    k0 = engine.cache.k[0][0].abs().sum(dim=(0, 2)).numpy()  # (T_max,) zero where no K was ever written
    kept = len(ids) + n - 1
    ever = int(np.flatnonzero(k0)[-1]) + 1  # the static buffer starts at zeros: written rows are the non-zero ones
    assert (k0[:ever] != 0).all()
    assert traces[-1].spec_stale == ever - kept  # rejected rows still in the buffer past the sequence
    overwritten_rows = sum(spy.fed) - ever  # rows written more than once
    assert overwritten_rows > 0
    assert sum(t.bytes_overwritten for t in traces) == overwritten_rows * _row_bytes(tiny.cfg)
    rolled = sum(t.spec_rolled_back for t in traces if t.spec_index == 0)
    assert rolled == overwritten_rows + traces[-1].spec_stale


@pytest.mark.parametrize("rule", RULES)
def test_a_rounds_steps_carry_its_forward_and_its_rows(tiny, byte_tokenizer, rule):
    ids = byte_tokenizer.encode(PROMPT)
    n_layer = tiny.cfg.n_layer
    traces = list(make_engine("spec-lookup", tiny, rollback=rule).generate(
        ids, 50, trace=TraceOptions(weights_layer=1, weights_head=2, logits=True)))
    ref = list(make_engine("naive", tiny).generate(ids, 50, trace=TraceOptions(logits=True)))
    row_bytes = _row_bytes(tiny.cfg)
    for t, r in zip(traces, ref):
        np.testing.assert_allclose(t.logits, r.logits, atol=1e-4, rtol=0)
        assert t.pos_stop == len(ids) + t.step and t.cache_len == t.pos_stop
        assert t.attn_weights.shape == t.mask.shape
        np.testing.assert_allclose(t.attn_weights.sum(-1), 1.0, atol=1e-5)
        if t.phase == "decode":
            assert t.pos_start == t.pos_stop - 1 and t.kv_projections == n_layer
            # the round's first step holds its own row and the rejected ones; each accepted draft its own row
            extra = t.spec_rolled_back if t.spec_index == 0 else 0
            assert t.bytes_written == (1 + extra) * row_bytes
            assert t.spec_index <= t.spec_accepted <= t.spec_proposed <= 4
    first = [t for t in traces if t.spec_index == 0 and t.spec_proposed]
    assert first and all(t.spec_slots == (t.pos_stop, t.pos_stop + t.spec_accepted, t.pos_stop + t.spec_proposed)
                         for t in first)


def test_spec_records_survive_a_saved_run(tiny, byte_tokenizer, tmp_path):
    from kvviz.records import traceio
    from kvviz.records.trace import RunInfo

    ids = byte_tokenizer.encode(PROMPT)
    traces = list(make_engine("spec-draft", tiny, rollback="crop").generate(ids, 20, run_id="r1"))
    info = RunInfo(run_id="r1", model_name="tiny", prompt_ids=tuple(ids), engines=("spec-draft",),
                   max_new_tokens=20, n_layer=tiny.cfg.n_layer, n_head=tiny.cfg.n_head,
                   kv_bytes_per_token=tiny.cfg.kv_bytes_per_token())
    back = traceio.loads_run(traceio.dumps_run(info, {"spec-draft": traces})).traces["spec-draft"]
    fields = ("spec_k", "spec_proposed", "spec_accepted", "spec_rolled_back", "spec_index", "target_forwards",
              "draft_forwards", "bytes_undone", "bytes_overwritten", "spec_stale")
    assert [[getattr(t, f) for f in fields] for t in back] == [[getattr(t, f) for f in fields] for t in traces]
    assert traces[-1].draft_forwards > 0


def test_hugging_face_pair_target_and_draft(tmp_path, byte_tokenizer, torch_cpu):
    """tiny and tiny-draft as Hugging Face Llama checkpoints (`kvviz convert`), read back as checkpoints: the draft
    named by its folder, both rules, both drafts; and transformers' own greedy generate where it is installed."""
    from kvviz.cli import main
    from kvviz.models.presets import load_model

    target_dir, draft_dir = tmp_path / "target", tmp_path / "draft"
    assert main(["convert", "--model", "tiny", "--out", str(target_dir)]) == 0
    assert main(["convert", "--model", str(TINY_DRAFT_DIR), "--out", str(draft_dir)]) == 0
    model = load_model(str(target_dir), torch_cpu.device("cpu"))
    assert model.cfg.arch == "llama"
    ids = byte_tokenizer.encode(PROMPT)
    ref = tokens(model, "naive", ids, 48)
    for rule in RULES:
        assert tokens(model, "spec-lookup", ids, 48, rollback=rule) == ref
        engine = make_engine("spec-draft", model, rollback=rule, draft=str(draft_dir))
        traces = list(engine.generate(ids, 48))
        assert [t.token_id for t in traces] == ref and engine.draft_name == str(draft_dir)
        assert sum(a for _p, a in rounds(traces)) > 0
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=torch_cpu.float32).eval()
    with torch_cpu.no_grad():
        out = hf.generate(torch_cpu.tensor([ids]), max_new_tokens=48, do_sample=False)
    assert out[0, len(ids):].tolist() == ref


def test_early_exit_draft_for_a_model_without_one(tiny_random, byte_tokenizer):
    engine = make_engine("spec-draft", tiny_random)
    assert engine.proposer.model.cfg.n_layer == 1 and "first 1 of 2 layers" in engine.draft_name
    ids = byte_tokenizer.encode("early exit")
    assert tokens(tiny_random, "spec-draft", ids, 25) == tokens(tiny_random, "naive", ids, 25)


@pytest.mark.parametrize("kw, match", [
    (dict(spec_k=0), r"k \(drafts per round\) must be a whole number in 1\.\.64"),
    (dict(spec_k=65), "1..64"),
    (dict(rollback="rewind"), "unknown rollback rule 'rewind'; choose from overwrite, crop"),
])
def test_bad_settings_are_refused_in_one_line(tiny_random, kw, match):
    with pytest.raises(ValueError, match=match):
        make_engine("spec-lookup", tiny_random, **kw)


def test_a_draft_with_another_vocabulary_is_refused(tiny_random, torch_cpu):
    from kvviz.config import ModelConfig
    from kvviz.models.transformer import Transformer

    other = Transformer(ModelConfig(name="other", vocab_size=300, n_layer=1)).init_weights(0)
    with pytest.raises(ValueError, match="vocabulary of 300 tokens, the target 256"):
        make_engine("spec-draft", tiny_random, draft=other)


def test_the_native_kernel_refuses_the_spec_engines(tiny_random):
    with pytest.raises(ValueError, match="spec-lookup"):
        make_engine("spec-lookup", tiny_random, kernel="native")


@pytest.mark.parametrize("rule", RULES)
def test_the_draft_models_cache_rolls_back_to_what_it_would_propose_from_scratch(tiny, byte_tokenizer, rule):
    """Each round's proposals equal the draft model's own greedy continuation of the text so far, run without a
    cache: a draft cache rolled back too far or not far enough would propose from the wrong K/V."""
    ids = byte_tokenizer.encode(PROMPT)
    engine = make_engine("spec-draft", tiny, rollback=rule)
    draft = engine.proposer
    seen = []
    propose = draft.propose

    def recorded(text, k):
        out = propose(text, k)
        seen.append((list(text), out))
        return out

    draft.propose = recorded
    traces = list(engine.generate(ids, 40))
    assert sum(p - a for p, a in rounds(traces)) > 0  # rejections happened, so the draft cache was rolled back
    for text, out in seen:
        plain = [t.token_id for t in make_engine("naive", draft.model).generate(text, len(out))] if out else []
        assert out == plain
