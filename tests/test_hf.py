"""Local Hugging Face checkpoints: tiny random Llama / Qwen2 / Qwen3 / GPT-2 folders built with `transformers`,
read by kvviz, compared with transformers' own forward and `generate`; bad folders via the CLI.

`transformers` is a test-only dependency: the reference tests skip without it, the rest do not need it.
No network: HF_HUB_OFFLINE is set before transformers is imported, and only local folders are opened.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest  # noqa: E402

from kvviz.config import ModelConfig  # noqa: E402
from kvviz.engines import EXACT_KEYS  # noqa: E402  (the approximate caches have their own reference tests)

VOCAB = 320
PROMPT = "The key and value of a token never change"
NEW_TOKENS = 24
LOGIT_TOL = 1e-4

# One shape per family, each exercising what sets the family apart.
ARCHS = {
    # grouped-query attention (4 query heads share 2 KV heads) and Llama-3 rope scaling whose
    # original context (32) is short enough that the scaled frequencies matter over the prompt.
    "llama": dict(num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0, tie_word_embeddings=False,
                  rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                    original_max_position_embeddings=32)),
    # q/k/v biases, tied embeddings
    "qwen2": dict(num_attention_heads=4, num_key_value_heads=2, rope_theta=1e6, tie_word_embeddings=True),
    # q/k RMSNorm, head_dim (32) not hidden/heads (16), one KV head for four query heads
    "qwen3": dict(num_attention_heads=4, num_key_value_heads=1, head_dim=32, rope_theta=1e6,
                  tie_word_embeddings=False),
    # LayerNorm with biases, learned positions, GELU MLP, Conv1D weights stored (in, out)
    "gpt2": dict(n_head=4, tie_word_embeddings=True),
}


@pytest.fixture(scope="module")
def transformers(torch_cpu):
    return pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tokenizer_json() -> str:
    from kvviz.models.hf import train_tokenizer_json

    return train_tokenizer_json(VOCAB)


def _seeded_weights_(model, seed: int):
    """Norms near (not at) 1 and non-zero biases, so a loader that skipped them would show; linear
    layers N(0, 1/fan_in) so the greedy choice varies from token to token with a clear margin."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    tied = model.config.tie_word_embeddings if hasattr(model, "config") else model.cfg.tie_embeddings
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if name.endswith("norm.weight") or (".ln_" in name and name.endswith(".weight")):
                p.copy_(1.0 + 0.1 * noise)
            elif name.endswith(".bias"):
                p.copy_(0.1 * noise)
            elif name.endswith("wte.weight"):  # GPT-2's tied embedding, read through the residual: kept
                p.copy_(0.02 * noise)  # small, or it echoes the input token back (GPT-2's own init)
            elif p.dim() == 2 and "embed" not in name:
                p.copy_(noise / math.sqrt(p.shape[1]))
            elif tied:  # a tied head at full scale would mostly echo the input token back
                p.copy_(0.1 * noise)
            else:
                p.copy_(noise)
    return model


def build_hf_checkpoint(transformers, arch: str, folder: Path, tokenizer_json: str, *, seed: int = 3,
                        **save_kw):
    """A tiny random checkpoint saved by transformers itself, with a tokenizer.json; returns the HF model."""
    if arch == "gpt2":
        config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=64, n_inner=128, n_layer=2, n_positions=256,
                                         bos_token_id=None, eos_token_id=None, pad_token_id=None, **ARCHS[arch])
    else:
        config_cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
                      "qwen3": transformers.Qwen3Config}[arch]
        config = config_cls(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            max_position_embeddings=256, rms_norm_eps=1e-6, bos_token_id=None, eos_token_id=None,
                            pad_token_id=None, **ARCHS[arch])
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    _seeded_weights_(model, seed).eval()
    model.save_pretrained(folder, **save_kw)
    (folder / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
    return model


@pytest.fixture(scope="module", params=list(ARCHS))
def checkpoint(request, transformers, tokenizer_json, tmp_path_factory):
    """(arch, folder, transformers model) per family."""
    folder = tmp_path_factory.mktemp(f"hf-{request.param}")
    model = build_hf_checkpoint(transformers, request.param, folder, tokenizer_json)
    return request.param, folder, model


def _hf_generate(hf_model, prompt_ids: list[int], n: int) -> list[int]:
    """transformers' greedy `generate` (its default dynamic cache), exactly n new tokens."""
    import torch
    from transformers import GenerationConfig

    gen = GenerationConfig(max_new_tokens=n, min_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0)
    x = torch.tensor([prompt_ids], device=hf_model.device)
    with torch.no_grad():
        out = hf_model.generate(x, attention_mask=torch.ones_like(x), generation_config=gen)
    return out[0, len(prompt_ids):].tolist()


# -- against the reference -------------------------------------------------------------------------

def test_config_maps_each_family(checkpoint):
    from kvviz.models.hf import read_hf_config

    arch, folder, hf_model = checkpoint
    cfg = read_hf_config(folder)
    hc = hf_model.config
    assert cfg.arch == arch and cfg.d_ff == 128
    assert cfg.max_seq_len == 256 and cfg.dtype == "float32" and cfg.tokenizer == "tokenizer.json"
    assert cfg.tie_embeddings == ARCHS[arch]["tie_word_embeddings"]
    if arch == "gpt2":
        assert (cfg.n_head, cfg.n_kv_head, cfg.head_dim) == (4, 4, 16) and cfg.norm_eps == hc.layer_norm_epsilon
        return
    assert (cfg.n_head, cfg.n_kv_head) == (hc.num_attention_heads, hc.num_key_value_heads)
    assert cfg.head_dim == ARCHS[arch].get("head_dim", 64 // hc.num_attention_heads)
    assert cfg.qk_norm == (arch == "qwen3") and cfg.qkv_bias == (arch == "qwen2")
    assert cfg.rope_theta == ARCHS[arch]["rope_theta"]
    assert (cfg.rope_scaling or {}).get("rope_type") == ARCHS[arch].get("rope_scaling", {}).get("rope_type")


def test_logits_match_transformers(checkpoint):
    import torch

    from kvviz.models.hf import load_hf_model
    from kvviz.models.presets import load_tokenizer

    arch, folder, hf_model = checkpoint
    model = load_hf_model(folder)
    n_params = sum(p.numel() for p in hf_model.parameters())
    assert sum(p.numel() for p in model.parameters()) == n_params == model.cfg.param_count()
    ids = load_tokenizer(str(folder)).encode(PROMPT * 3)  # long enough for llama3 scaling to bite
    assert len(ids) > 32
    if arch == "gpt2":  # its positions are learned: each must come from its own row of wpe
        assert not torch.equal(model.wpe.weight[0], model.wpe.weight[1])
    x = torch.tensor([ids])
    with torch.no_grad():
        ours = model(x, all_logits=True).logits[0]  # (T, V)
        ref = hf_model(x).logits[0]
    diff = float((ours - ref).abs().max())
    print(f"{arch}: max |logit diff| over {len(ids)} positions = {diff:.2e}")
    assert diff < LOGIT_TOL, f"{arch}: max logit difference {diff:.2e}"


@pytest.mark.parametrize("engine", EXACT_KEYS)
def test_greedy_tokens_match_generate(checkpoint, engine):
    import torch

    from kvviz.config import SamplingConfig, TraceOptions
    from kvviz.engines import make_engine
    from kvviz.models.presets import load_model, load_tokenizer

    arch, folder, hf_model = checkpoint
    model = load_model(str(folder), torch.device("cpu"))
    ids = load_tokenizer(str(folder)).encode(PROMPT)
    ref = _hf_generate(hf_model, ids, NEW_TOKENS)
    assert len(set(ref)) > 8, "the random model should not settle on one token (pick another seed)"
    traces = list(make_engine(engine, model, block_size=4).generate(
        ids, NEW_TOKENS, SamplingConfig(), TraceOptions(masks=False)))
    assert [t.token_id for t in traces] == ref


def test_sharded_checkpoint_loads_the_same(transformers, tokenizer_json, tmp_path):
    import torch

    from kvviz.checkpoint_files import INDEX_NAME
    from kvviz.models.hf import load_hf_model

    hf_model = build_hf_checkpoint(transformers, "llama", tmp_path, tokenizer_json, max_shard_size="50KB")
    index = json.loads((tmp_path / INDEX_NAME).read_text())
    assert len(set(index["weight_map"].values())) > 1 and not (tmp_path / "model.safetensors").exists()
    x = torch.tensor([[5, 17, 200, 3, 99]])
    with torch.no_grad():
        diff = float((load_hf_model(tmp_path)(x, all_logits=True).logits - hf_model(x).logits).abs().max())
    assert diff < LOGIT_TOL


WRITTEN = {
    "qwen3": dict(arch="qwen3", n_kv_head=2, rope_theta=1e6, norm_eps=1e-6, qk_norm=True, tie_embeddings=False),
    "gpt2": dict(arch="gpt2", n_kv_head=4, tie_embeddings=True),
    "gpt2-untied": dict(arch="gpt2", n_kv_head=4, tie_embeddings=False),  # its own lm_head.weight saved
}


@pytest.mark.parametrize("case", list(WRITTEN))
def test_kvviz_written_checkpoint_reads_in_transformers(transformers, tokenizer_json, tmp_path, case):
    """save_hf_checkpoint (used by the GPU check without transformers) writes what transformers reads."""
    import torch

    from kvviz.models import build_decoder
    from kvviz.models.hf import load_hf_model, save_hf_checkpoint

    cfg = ModelConfig(name="w", vocab_size=VOCAB, d_model=64, n_layer=2, n_head=4, head_dim=16,
                      d_ff=96, max_seq_len=128, **WRITTEN[case])
    model = _seeded_weights_(build_decoder(cfg), 3).eval()
    save_hf_checkpoint(model, tmp_path, tokenizer_json=tokenizer_json)
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True).eval()
    x = torch.tensor([[1, 2, 3, 250, 7, 9]])
    with torch.no_grad():
        diff = float((model(x, all_logits=True).logits - hf_model(x).logits).abs().max())
        again = load_hf_model(tmp_path)(x, all_logits=True).logits
    assert diff < LOGIT_TOL
    assert torch.equal(again, model(x, all_logits=True).logits)


# -- dtype and KV heads in the byte figures (no transformers needed) --------------------------------

def _kvviz_checkpoint(folder: Path, tokenizer_json: str | None, **changes) -> Path:
    from kvviz.models.hf import save_hf_checkpoint
    from kvviz.models.transformer import Transformer

    fields = dict(name="ck", arch="llama", vocab_size=VOCAB, d_model=64, n_layer=2, n_head=4, n_kv_head=2,
                  head_dim=16, d_ff=96, max_seq_len=128, norm_eps=1e-6, tie_embeddings=False)
    fields.update(changes)
    return save_hf_checkpoint(Transformer(ModelConfig(**fields)).init_weights(0), folder,
                              tokenizer_json=tokenizer_json)


def _assert_bf16_kv_figures(model, per_token: int) -> list:
    """Every engine's cache bytes are its capacity times `per_token`, counted by hand by the caller."""
    from kvviz.config import SamplingConfig, TraceOptions
    from kvviz.engines import make_engine

    all_traces = []
    for key in EXACT_KEYS:
        traces = list(make_engine(key, model, block_size=4).generate([1, 2, 3, 4, 5], 3, SamplingConfig(),
                                                                     TraceOptions(masks=False)))
        if key == "naive":
            assert [t.cache_bytes for t in traces] == [0, 0, 0]
        else:
            assert [t.cache_len for t in traces] == [5, 6, 7], key
            assert [t.cache_bytes for t in traces] == [t.cache_capacity * per_token for t in traces], key
        all_traces += traces
    return all_traces


def test_cache_bytes_use_checkpoint_dtype_and_kv_heads(torch_cpu, tokenizer_json, tmp_path):
    from kvviz.models.hf import read_hf_config
    from kvviz.models.presets import load_model

    folder = _kvviz_checkpoint(tmp_path, tokenizer_json, dtype="bfloat16", n_layer=3, n_head=8, n_kv_head=2)
    raw = json.loads((folder / "config.json").read_text())
    raw.pop("dtype")  # a transformers 4.x file names it torch_dtype only
    (folder / "config.json").write_text(json.dumps(raw))
    cfg = read_hf_config(folder)
    assert cfg.dtype == "bfloat16"
    model = load_model(str(folder), torch_cpu.device("cpu"))  # dtype None: the checkpoint's
    assert next(model.parameters()).dtype == torch_cpu.bfloat16
    per_token = 3 * 2 * 2 * 16 * 2  # layers x (K, V) x KV heads x head_dim x bytes of bf16
    assert cfg.kv_bytes_per_token() == per_token
    traces = _assert_bf16_kv_figures(model, per_token)
    assert all(t.device_mem_bytes is None for t in traces)  # a CPU has no allocator figure to report


# -- bad input: one line on stderr, exit code 2 ----------------------------------------------------

def _bench(path: Path | str, capsys) -> tuple[int, str]:
    from kvviz.cli import main

    rc = main(["bench", "--model", str(path), "--tokens", "2", "--repeat", "1", "--device", "cpu",
               "--threads", "1"])
    err = capsys.readouterr().err
    return rc, err


def _one_line_error(rc: int, err: str, *needles: str) -> None:
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture
def good(tmp_path, tokenizer_json) -> Path:
    return _kvviz_checkpoint(tmp_path / "ck", tokenizer_json)


def test_good_folder_benches(good, capsys):
    rc, err = _bench(good, capsys)
    assert rc == 0, err


@pytest.mark.parametrize("remove, named", [
    (["config.json"], ["config.json"]),
    (["model.safetensors", "tokenizer.json"], ["model.safetensors", "tokenizer.json"]),
])
def test_missing_files_are_named(good, capsys, remove, named):
    for name in remove:
        (good / name).unlink()
    _one_line_error(*_bench(good, capsys), "missing", *named)


def test_missing_shard_is_named(good, capsys):
    (good / "model.safetensors").rename(good / "model-00001-of-00002.safetensors")
    (good / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors"}}))
    _one_line_error(*_bench(good, capsys), "model-00002-of-00002.safetensors")


def test_pytorch_bin_only_is_refused(good, capsys):
    (good / "model.safetensors").rename(good / "pytorch_model.bin")
    _one_line_error(*_bench(good, capsys), "pytorch_model.bin", "safetensors")


@pytest.mark.parametrize("model_type, arch_class", [("bert", "BertForMaskedLM"), ("gpt_neox", "GPTNeoXForCausalLM")])
def test_unsupported_architecture_is_named(good, capsys, model_type, arch_class):
    raw = json.loads((good / "config.json").read_text())
    raw.update(model_type=model_type, architectures=[arch_class])
    (good / "config.json").write_text(json.dumps(raw))
    _one_line_error(*_bench(good, capsys), f"unsupported architecture {model_type}", "llama, qwen2, qwen3, gpt2")


@pytest.mark.parametrize("change, needle", [
    ({"intermediate_size": 128}, "mlp.down_proj.weight has shape (64, 96), the config implies (64, 128)"),
    ({"num_key_value_heads": 4}, "k_proj.weight has shape (32, 64), the config implies (64, 64)"),
    ({"tie_word_embeddings": True}, "lm_head.weight differs from embed_tokens.weight"),
])
def test_shapes_that_do_not_match_the_config(good, capsys, change, needle):
    raw = json.loads((good / "config.json").read_text())
    raw.update(change)
    (good / "config.json").write_text(json.dumps(raw))
    _one_line_error(*_bench(good, capsys), "weights do not match the config", needle)


@pytest.mark.parametrize("change, needle", [
    ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0}}, "unsupported rope scaling 'yarn'"),
    ({"hidden_act": "gelu"}, "activation 'gelu'"),
    ({"use_sliding_window": True}, "sliding-window"),
    ({"dtype": "float64", "torch_dtype": "float64"}, "unsupported dtype 'float64'"),
    ({"num_attention_heads": 3}, "must be a multiple of n_kv_head"),
])
def test_unsupported_config_features(good, capsys, change, needle):
    raw = json.loads((good / "config.json").read_text())
    raw.update(change)
    (good / "config.json").write_text(json.dumps(raw))
    _one_line_error(*_bench(good, capsys), "config.json", needle)


@pytest.mark.parametrize("other", ["tokenizer.model", "vocab.json"])
def test_tokenizer_that_is_not_tokenizer_json(good, capsys, other):
    (good / "tokenizer.json").rename(good / other)
    _one_line_error(*_bench(good, capsys), f"missing tokenizer.json (found {other}", "reads only tokenizer.json")


def test_unreadable_or_oversized_tokenizer(good, capsys, tmp_path):
    from kvviz.models.hf import train_tokenizer_json

    (good / "tokenizer.json").write_text("{not json")
    _one_line_error(*_bench(good, capsys), "not a valid tokenizer.json")
    (good / "tokenizer.json").write_text(train_tokenizer_json(VOCAB + 40))
    _one_line_error(*_bench(good, capsys), "more than the model's vocab_size of 320")


def test_command_line_exit_code(tmp_path):
    """The real entry point, in a fresh interpreter: a folder with no config.json."""
    (tmp_path / "tokenizer.json").write_text("{}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "kvviz", "bench", "--model", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"kvviz bench: error: {tmp_path}: not a complete checkpoint folder: missing config.json; model.safetensors"]


# -- GPT-2 without transformers: the original OpenAI naming, its bad inputs, its position limit ------

def _gpt2_checkpoint(folder: Path, tokenizer_json: str, **changes) -> Path:
    from kvviz.models.gpt2 import GPT2
    from kvviz.models.hf import save_hf_checkpoint

    fields = dict(name="g", arch="gpt2", vocab_size=VOCAB, d_model=64, n_layer=2, n_head=4, n_kv_head=4,
                  head_dim=16, d_ff=96, max_seq_len=24)
    fields.update(changes)
    return save_hf_checkpoint(GPT2(ModelConfig(**fields)).init_weights(0), folder, tokenizer_json=tokenizer_json)


@pytest.fixture
def good_gpt2(tmp_path, tokenizer_json) -> Path:
    return _gpt2_checkpoint(tmp_path / "g2", tokenizer_json)


def test_gpt2_original_naming_and_mask_buffers_load_the_same(good_gpt2, torch_cpu, tmp_path):
    """openai-community/gpt2 saved its tensors without `transformer.` and with each layer's causal-mask
    buffer (`h.0.attn.bias`); both forms load to the same model."""
    from safetensors.torch import load_file, save_file

    from kvviz.models.hf import load_hf_model

    state = {k.removeprefix("transformer."): v for k, v in load_file(str(good_gpt2 / "model.safetensors")).items()}
    for i in range(2):
        state[f"h.{i}.attn.bias"] = torch_cpu.tril(torch_cpu.ones(1, 1, 24, 24))
        state[f"h.{i}.attn.masked_bias"] = torch_cpu.tensor(-1e4)
    save_file(state, str(good_gpt2 / "model.safetensors"))
    x = torch_cpu.tensor([[1, 2, 3, 250, 7]])
    before = _gpt2_checkpoint(tmp_path / "plain", None)
    with torch_cpu.no_grad():
        a = load_hf_model(good_gpt2)(x, all_logits=True).logits
        b = load_hf_model(before)(x, all_logits=True).logits
    assert torch_cpu.equal(a, b)


def test_gpt2_every_engine_agrees_and_counts_its_cache(good_gpt2, torch_cpu):
    from kvviz.config import SamplingConfig, TraceOptions
    from kvviz.engines import make_engine
    from kvviz.models.presets import load_model

    model = load_model(str(good_gpt2), torch_cpu.device("cpu"))
    runs = {key: list(make_engine(key, model, block_size=4).generate(
        [5, 9, 200, 31], 12, SamplingConfig(), TraceOptions(weights_layer=1, weights_head=3)))
        for key in EXACT_KEYS}
    tokens = {key: [t.token_id for t in traces] for key, traces in runs.items()}
    assert all(ids == tokens["naive"] for ids in tokens.values()), tokens
    per_token = 2 * 2 * 4 * 16 * 4  # layers x (K, V) x heads x head_dim x 4 B
    assert model.cfg.kv_bytes_per_token() == per_token
    last = runs["concat"][-1]
    assert last.cache_len == 15 and last.cache_bytes == 15 * per_token
    assert last.attn_weights.shape == (1, 15) and abs(float(last.attn_weights.sum()) - 1) < 1e-5


def test_gpt2_request_past_its_learned_positions(good_gpt2, capsys):
    from kvviz.cli import main

    rc = main(["bench", "--model", str(good_gpt2), "--prompt", "x" * 20, "--tokens", "10", "--device", "cpu"])
    _one_line_error(rc, capsys.readouterr().err, "exceeds the model's context of 24")


@pytest.mark.parametrize("change, needle", [
    ({"activation_function": "relu"}, "activation 'relu'"),
    ({"scale_attn_by_inverse_layer_idx": True}, "attention scaling"),
    ({"n_head": 5}, "n_embd 64 is not a multiple of n_head 5"),
    ({"n_inner": 128}, "h.0.mlp.c_fc.bias has shape (96,), the config implies (128,)"),
    ({"n_positions": 32}, "wpe.weight has shape (24, 64), the config implies (32, 64)"),
])
def test_gpt2_bad_configs(good_gpt2, capsys, change, needle):
    raw = json.loads((good_gpt2 / "config.json").read_text())
    raw.update(change)
    (good_gpt2 / "config.json").write_text(json.dumps(raw))
    _one_line_error(*_bench(good_gpt2, capsys), needle)


def test_gpt2_published_config(tmp_path):
    from kvviz.models.hf import read_hf_config

    (tmp_path / "config.json").write_text(json.dumps(GPT2_SMALL))
    cfg = read_hf_config(tmp_path)
    assert (cfg.n_layer, cfg.n_head, cfg.head_dim, cfg.d_ff, cfg.max_seq_len) == (12, 12, 64, 3072, 1024)
    assert cfg.param_count() == 124_439_808  # the "124M" of the model card, counted by hand in the paper's shape
    assert cfg.kv_bytes_per_token() == 12 * 2 * 12 * 64 * 4 == 73_728
    from kvviz.costs.memory import MEMORY_PRESETS  # the calculator's preset is this very shape

    assert cfg.replace(name="gpt2-small", tokenizer="bytes") == MEMORY_PRESETS["gpt2-small"].config


# -- friendly errors ---------------------------------------------------------------------------------

def test_friendly_error_for_out_of_memory(torch_cpu):
    from kvviz.errors import friendly_error, is_out_of_memory

    exc = torch_cpu.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
    assert is_out_of_memory(exc)
    msg = friendly_error(exc)
    assert msg.startswith("out of device memory") and "\n" not in msg and "--dtype bf16" in msg
    assert is_out_of_memory(RuntimeError("MPS backend out of memory (MPS allocated: 1 GB)"))
    assert friendly_error(ValueError("x: bad")) == "x: bad"
    assert friendly_error(FileNotFoundError(2, "No such file or directory", "/p")) == "/p: No such file or directory"
    assert friendly_error(KeyError("k")) == "KeyError: 'k'"


# -- GPU (skipped without CUDA) ----------------------------------------------------------------------

def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


needs_cuda = pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA device")


@pytest.mark.gpu
@needs_cuda
def test_gpu_logits_and_tokens_match_transformers(checkpoint):
    import torch

    from kvviz.config import SamplingConfig, TraceOptions
    from kvviz.engines import make_engine
    from kvviz.models.presets import load_model, load_tokenizer

    dev = torch.device("cuda")
    arch, folder, hf_model = checkpoint
    model = load_model(str(folder), dev, torch.float32)
    ref_model = hf_model.to(dev)
    try:
        ids = load_tokenizer(str(folder)).encode(PROMPT)
        x = torch.tensor([ids], device=dev)
        with torch.no_grad():
            diff = float((model(x, all_logits=True).logits - ref_model(x).logits).abs().max())
        assert diff < 1e-3, f"{arch}: {diff:.2e}"
        ref = _hf_generate(ref_model, ids, NEW_TOKENS)
        for key in EXACT_KEYS:
            traces = list(make_engine(key, model).generate(ids, NEW_TOKENS, SamplingConfig(), TraceOptions()))
            assert [t.token_id for t in traces] == ref, key
            assert all(t.device_mem_bytes and t.device_mem_bytes > 0 for t in traces)
    finally:
        hf_model.to("cpu")


@pytest.mark.gpu
@needs_cuda
def test_gpu_defaults_to_bf16_and_reports_device_memory(good):
    import torch

    from kvviz.models.presets import load_model
    from kvviz.runtime.devices import resolve_dtype

    dev = torch.device("cuda")
    dtype = resolve_dtype("auto", dev, "float32")
    assert dtype == torch.bfloat16
    model = load_model(str(good), dev, dtype)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    traces = _assert_bf16_kv_figures(model, 2 * 2 * 2 * 16 * 2)  # layers x (K, V) x KV heads x head_dim x 2 B
    assert all(t.device_mem_bytes >= weights for t in traces)


@pytest.mark.gpu
@needs_cuda
def test_gpu_out_of_memory_is_one_clear_line():
    import torch

    from kvviz.errors import friendly_error

    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")  # a petabyte
    msg = friendly_error(info.value)
    assert msg.startswith("out of device memory (") and "GiB free of" in msg and "\n" not in msg


# -- kvviz hfbench (a command that prints figures; here only that it runs and agrees) ---------------

@pytest.mark.slow
@pytest.mark.parametrize("engine, kernel", [(None, None), (None, "torch"), ("static", "native")])
def test_hfbench_runs_both_sides_on_the_same_weights(transformers, capsys, tmp_path, monkeypatch, engine, kernel):
    from kvviz import native
    from kvviz.cli import main

    if kernel == "native":
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the build, not in the user's cache
        try:
            native.load()
        except ValueError as exc:
            pytest.skip(f"kvviz/native/step.c cannot be built here: {exc}")
    out_json = tmp_path / "h.json"
    rc = main(["hfbench", "--tokens", "3", "--repeat", "1", "--json", str(out_json)]
              + (["--engine", engine] if engine else []) + (["--kernel", kernel] if kernel else []))
    out = capsys.readouterr().out
    assert rc == 0, out
    side = f"kvviz {engine or 'concat'}"
    assert side in out and "transformers" in out and "decode speed, kvviz / transformers:" in out
    assert "tokens identical: yes" in out
    doc = json.loads(out_json.read_text())
    assert doc["engine"] == (engine or "concat") and [s["name"] for s in doc["sides"]] == [side, "transformers"]
    # kvviz's decode kernel: PyTorch's ops, as transformers' own, unless another is asked for; the line says which
    assert doc["kernel"] == (kernel or "torch")
    assert ("kvviz's decode kernel: C step (native)" if kernel == "native" else
            "kvviz's decode kernel: PyTorch (torch)") in out


def test_hfbench_refuses_a_missing_folder(tmp_path, capsys):
    from kvviz.cli import main

    pytest.importorskip("transformers")
    rc = main(["hfbench", "--model", str(tmp_path / "nowhere")])
    _one_line_error(rc, capsys.readouterr().err, "no such checkpoint folder")


# -- published configs (typed from the public config.json files; no weights needed) ----------------

QWEN3_0_6B = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
    "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960,
    "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
    "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
}
LLAMA_3_2_1B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": False,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0", "use_cache": True, "vocab_size": 128256,
}


GPT2_SMALL = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
    "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": None,
    "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
    "summary_use_proj": True, "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
    "vocab_size": 50257,
}


def test_qwen3_0_6b_config_matches_the_preset_shape(tmp_path):
    from kvviz.models.hf import read_hf_config
    from kvviz.models.presets import PRESETS

    (tmp_path / "config.json").write_text(json.dumps(QWEN3_0_6B))
    cfg = read_hf_config(tmp_path)
    preset = PRESETS["qwen3-0.6b-shape"].config
    for key in ("arch", "d_model", "n_layer", "n_head", "n_kv_head", "head_dim", "d_ff", "rope_theta", "norm_eps",
                "qk_norm", "qkv_bias", "dtype"):
        assert getattr(cfg, key) == getattr(preset, key), key
    assert cfg.kv_bytes_per_token() == 28 * 2 * 8 * 128 * 2 == 114688  # 112 KiB per token in bf16
    assert (cfg.max_seq_len, cfg.vocab_size, cfg.tie_embeddings) == (40960, 151936, True)
    assert round(cfg.param_count() / 1e6) == 596  # the model card's 0.6B (0.44B without embeddings)


def test_llama_3_2_1b_config_keeps_its_rope_scaling(tmp_path):
    import torch

    from kvviz.models.hf import read_hf_config
    from kvviz.models.transformer import rope_inv_freq

    (tmp_path / "config.json").write_text(json.dumps(LLAMA_3_2_1B))
    cfg = read_hf_config(tmp_path)
    assert (cfg.n_head, cfg.n_kv_head, cfg.head_dim, cfg.rope_theta) == (32, 8, 64, 500000.0)
    assert cfg.rope_scaling["rope_type"] == "llama3" and cfg.rope_scaling["factor"] == 32.0
    assert cfg.kv_bytes_per_token() == 16 * 2 * 8 * 64 * 2
    inv = rope_inv_freq(cfg)
    plain = rope_inv_freq(cfg.replace(rope_scaling=None))
    assert torch.equal(inv[:8], plain[:8])  # high frequencies untouched
    assert torch.allclose(inv[-4:], plain[-4:] / 32)  # the lowest divided by the factor
