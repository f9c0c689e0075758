"""Read a local Hugging Face-format folder (config.json, safetensors weights, tokenizer.json) into kvviz.

Llama, Qwen2 and Qwen3 map onto kvviz's Transformer, GPT-2 onto its GPT2; anything else is refused
by name. Local files only: this module never imports `transformers` and never touches the network.
The writer at the bottom makes such folders from a kvviz model, for tests and device checks without
`transformers`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from kvviz.checkpoint_files import (
    CONFIG_NAME,
    INDEX_NAME,
    TOKENIZER_NAME,
    WEIGHTS_NAME,
    check_folder,
    inside,
    read_weight_map,
)
from kvviz.config import DTYPE_ALIASES, ModelConfig
from kvviz.fileio import read_json
from kvviz.models import build_decoder
from kvviz.models.io import (
    check_dtypes,
    checkpoint_name,
    load_into,
    load_state,
    plan_load,
    read_safetensors_header,
)

CONFIG_DEPTH = 8  # config.json: rope_parameters, text_config and the like nest 2-3 levels

# model_type -> kvviz arch, and the class names that mark the same thing in `architectures`.
SUPPORTED: dict[str, str] = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
                             "gpt2": "GPT2LMHeadModel"}
ROPE_TYPES = ("default", "linear", "llama3")
# Defaults of the transformers config classes for keys a config.json may leave out.
DEFAULT_MAX_POSITIONS = {"llama": 2048, "qwen2": 32768, "qwen3": 32768, "gpt2": 1024}
# GPT-2's activation names that all mean the tanh approximation its MLP uses.
GPT2_ACTIVATIONS = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")
# GPT-2 stores these as Conv1D, (in, out): transposed to nn.Linear's (out, in) on load, back on save.
GPT2_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")



def _read_json(path: Path, max_depth: int = CONFIG_DEPTH) -> Any:
    """config.json or the index, bounded in size and nesting (fileio.read_json)."""
    return read_json(path, max_depth, max_bytes=64 << 20)


# The schema of every config.json field kvviz reads: name -> (accepted kinds, low, high). Anything else in
# the file is left alone; a field read here with another type or out of range is refused by name.
_INT, _NUM, _BOOL, _STR, _DICT, _LIST = "a whole number", "a number", "true or false", "a string", "an object", \
    "a list"
MAX_DIM = 1 << 20  # no published model has a dimension, head count or vocabulary past a million
CONFIG_SCHEMA: dict[str, tuple[str, float, float]] = {
    "model_type": (_STR, 0, 0), "architectures": (_LIST, 0, 0),
    "vocab_size": (_INT, 1, 1 << 24), "hidden_size": (_INT, 1, MAX_DIM), "n_embd": (_INT, 1, MAX_DIM),
    "num_hidden_layers": (_INT, 1, 4096), "n_layer": (_INT, 1, 4096),
    "num_attention_heads": (_INT, 1, 4096), "n_head": (_INT, 1, 4096), "num_key_value_heads": (_INT, 1, 4096),
    "head_dim": (_INT, 1, 4096), "intermediate_size": (_INT, 1, MAX_DIM), "n_inner": (_INT, 1, MAX_DIM),
    "max_position_embeddings": (_INT, 1, 1 << 24), "n_positions": (_INT, 1, 1 << 24), "n_ctx": (_INT, 1, 1 << 24),
    "rms_norm_eps": (_NUM, 0, 1), "layer_norm_epsilon": (_NUM, 0, 1), "rope_theta": (_NUM, 1e-6, 1e12),
    "partial_rotary_factor": (_NUM, 0, 1), "tie_word_embeddings": (_BOOL, 0, 0),
    "rope_parameters": (_DICT, 0, 0), "rope_scaling": (_DICT, 0, 0), "dtype": (_STR, 0, 0),
    "torch_dtype": (_STR, 0, 0), "hidden_act": (_STR, 0, 0), "activation_function": (_STR, 0, 0),
    "attention_bias": (_BOOL, 0, 0), "mlp_bias": (_BOOL, 0, 0), "use_sliding_window": (_BOOL, 0, 0),
    "layer_types": (_LIST, 0, 0), "scale_attn_weights": (_BOOL, 0, 0),
    "scale_attn_by_inverse_layer_idx": (_BOOL, 0, 0), "add_cross_attention": (_BOOL, 0, 0),
}
ROPE_SCHEMA: dict[str, tuple[str, float, float]] = {
    "rope_type": (_STR, 0, 0), "type": (_STR, 0, 0), "rope_theta": (_NUM, 1e-6, 1e12),
    "factor": (_NUM, 1e-3, 1e6), "original_max_position_embeddings": (_INT, 1, 1 << 24),
    "low_freq_factor": (_NUM, 0, 1e6), "high_freq_factor": (_NUM, 0, 1e6), "partial_rotary_factor": (_NUM, 0, 1),
}


def _kind_holds(kind: str, value: Any) -> bool:
    import math

    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _NUM:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, {_BOOL: bool, _STR: str, _DICT: dict, _LIST: list}[kind])


def check_schema(data: dict[str, Any], schema: dict[str, tuple[str, float, float]], where: str) -> None:
    """Each field of `schema` present and not null in `data` has its kind and lies in its range."""
    for key, (kind, low, high) in schema.items():
        value = data.get(key)
        if value is None:
            continue
        if not _kind_holds(kind, value):
            raise ValueError(f"{where}: {key} must be {kind}, got {str(value)[:60]!r}")
        if kind in (_INT, _NUM) and not low <= value <= high:
            raise ValueError(f"{where}: {key} is {value:,}, outside {low:g}..{high:g}")
        if kind == _LIST and not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where}: {key} must be a list of strings")
    for key in ("rope_parameters", "rope_scaling"):
        if isinstance(data.get(key), dict) and schema is CONFIG_SCHEMA:
            check_schema(data[key], ROPE_SCHEMA, f"{where}: {key}")


def _arch(data: dict[str, Any], path: Path) -> str:
    model_type = data.get("model_type")
    archs = data.get("architectures") or []
    if model_type is None and archs:
        model_type = next((k for k, v in SUPPORTED.items() if v == archs[0]), archs[0])
    if model_type in SUPPORTED:
        return model_type
    named = model_type or "none given"
    if archs and archs[0] != model_type:
        named = f"{named} ({archs[0]})"
    raise ValueError(f"{path}: unsupported architecture {named}; kvviz reads {', '.join(SUPPORTED)} "
                     f"(model_type in config.json)")


def _rope(data: dict[str, Any], path: Path) -> tuple[float, dict[str, Any] | None]:
    """(rope_theta, scaling or None). transformers 5 writes `rope_parameters`; 4.x wrote `rope_theta`
    beside `rope_scaling`."""
    params = data.get("rope_parameters") or data.get("rope_scaling") or {}
    if not isinstance(params, dict):
        raise ValueError(f"{path}: rope_parameters must be an object, got {params!r}")
    theta = next((v for v in (params.get("rope_theta"), data.get("rope_theta")) if v is not None), 10000.0)
    kind = params.get("rope_type") or params.get("type") or "default"
    if kind not in ROPE_TYPES:
        raise ValueError(f"{path}: unsupported rope scaling {kind!r}; kvviz reads {', '.join(ROPE_TYPES)}")
    factor = params.get("partial_rotary_factor", data.get("partial_rotary_factor", 1.0))
    if factor != 1.0:
        raise ValueError(f"{path}: partial rotary embeddings (factor {factor}) are not supported")
    if kind == "default":
        return float(theta), None
    scaling = {k: v for k, v in params.items() if k not in ("rope_theta", "type")}
    scaling["rope_type"] = kind
    need = ("factor", "original_max_position_embeddings") if kind == "llama3" else ("factor",)
    absent = [k for k in need if k not in scaling]
    if absent:
        raise ValueError(f"{path}: {kind} rope scaling needs {', '.join(absent)}")
    return float(theta), scaling


def _dtype(data: dict[str, Any], path: Path) -> str:
    name = data.get("dtype", data.get("torch_dtype")) or "float32"
    key = str(name).replace("torch.", "").lower()
    if key not in DTYPE_ALIASES:
        raise ValueError(f"{path}: unsupported dtype {name!r}; kvviz reads float32, bfloat16, float16")
    return DTYPE_ALIASES[key]


def _refuse_unsupported_features(data: dict[str, Any], arch: str, path: Path) -> None:
    """Features of these families that kvviz's Transformer does not have: refuse, never ignore."""
    act = data.get("hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"{path}: activation {act!r} is not supported (kvviz's MLP is SwiGLU with silu)")
    if arch != "qwen2" and data.get("attention_bias"):
        raise ValueError(f"{path}: attention_bias (a bias on o_proj too) is not supported")
    if data.get("mlp_bias"):
        raise ValueError(f"{path}: mlp_bias is not supported")
    layer_types = data.get("layer_types") or []
    if data.get("use_sliding_window") or any(t != "full_attention" for t in layer_types):
        raise ValueError(f"{path}: sliding-window attention is not supported")


def read_hf_config(folder: str | Path) -> ModelConfig:
    """Map a Llama / Qwen2 / Qwen3 / GPT-2 config.json onto kvviz's ModelConfig (dtype and KV heads included)."""
    folder = Path(folder)
    path = folder / CONFIG_NAME
    data = _read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    check_schema(data, CONFIG_SCHEMA, str(path))
    arch = _arch(data, path)
    if arch == "gpt2":
        return _gpt2_config(data, folder, path)
    _refuse_unsupported_features(data, arch, path)
    absent = [k for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                          "intermediate_size") if data.get(k) is None]
    if absent:
        raise ValueError(f"{path}: missing {', '.join(absent)}")
    theta, scaling = _rope(data, path)
    n_head = data["num_attention_heads"]
    head_dim = data.get("head_dim")
    if head_dim is None:
        if not isinstance(n_head, int) or n_head < 1 or data["hidden_size"] % n_head:
            raise ValueError(f"{path}: hidden_size {data['hidden_size']} is not a multiple of "
                             f"num_attention_heads {n_head}, and no head_dim is given")
        head_dim = data["hidden_size"] // n_head
    try:
        return ModelConfig(
            name=checkpoint_name(folder), arch=arch, vocab_size=data["vocab_size"], d_model=data["hidden_size"],
            n_layer=data["num_hidden_layers"], n_head=n_head,
            n_kv_head=data.get("num_key_value_heads") or n_head, head_dim=head_dim,
            d_ff=data["intermediate_size"],
            max_seq_len=data.get("max_position_embeddings") or DEFAULT_MAX_POSITIONS[arch],
            rope_theta=theta, rope_scaling=scaling, norm_eps=float(data.get("rms_norm_eps", 1e-6)),
            qk_norm=arch == "qwen3", qkv_bias=arch == "qwen2",
            tie_embeddings=bool(data.get("tie_word_embeddings", False)), dtype=_dtype(data, path),
            tokenizer=TOKENIZER_NAME)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def _gpt2_config(data: dict[str, Any], folder: Path, path: Path) -> ModelConfig:
    """GPT-2's config.json (n_embd, n_layer, n_head, n_inner, n_positions) as a ModelConfig."""
    act = data.get("activation_function", "gelu_new")
    if act not in GPT2_ACTIVATIONS:
        raise ValueError(f"{path}: activation {act!r} is not supported (kvviz's GPT-2 MLP uses gelu_new)")
    if not data.get("scale_attn_weights", True) or data.get("scale_attn_by_inverse_layer_idx"):
        raise ValueError(f"{path}: attention scaling other than 1/sqrt(head_dim) is not supported")
    if data.get("add_cross_attention"):
        raise ValueError(f"{path}: cross-attention is not supported (kvviz runs decoder-only models)")
    absent = [k for k in ("vocab_size", "n_embd", "n_layer", "n_head") if data.get(k) is None]
    if absent:
        raise ValueError(f"{path}: missing {', '.join(absent)}")
    d, n_head = data["n_embd"], data["n_head"]
    if not isinstance(n_head, int) or n_head < 1 or not isinstance(d, int) or d % n_head:
        raise ValueError(f"{path}: n_embd {d} is not a multiple of n_head {n_head}")
    try:
        return ModelConfig(
            name=checkpoint_name(folder), arch="gpt2", vocab_size=data["vocab_size"], d_model=d,
            n_layer=data["n_layer"], n_head=n_head, n_kv_head=n_head, head_dim=d // n_head,
            d_ff=data.get("n_inner") or 4 * d,
            max_seq_len=data.get("n_positions") or data.get("n_ctx") or DEFAULT_MAX_POSITIONS["gpt2"],
            norm_eps=float(data.get("layer_norm_epsilon", 1e-5)),
            tie_embeddings=bool(data.get("tie_word_embeddings", True)), dtype=_dtype(data, path),
            tokenizer=TOKENIZER_NAME)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def read_hf_state(folder: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """Every tensor of a single or sharded safetensors checkpoint, and the file to blame for a mismatch."""
    if (folder / INDEX_NAME).is_file():
        weight_map = read_weight_map(folder)
        state: dict[str, torch.Tensor] = {}
        for shard in sorted(set(weight_map.values())):
            state.update(load_state(folder / shard))
        return state, folder / INDEX_NAME
    return load_state(folder / WEIGHTS_NAME), folder / WEIGHTS_NAME


def read_hf_shapes(folder: Path) -> tuple[dict[str, tuple[int, ...]], int, Path]:
    """Every tensor's shape from the safetensors headers (nothing else read), the files' total bytes,
    and the file to blame for a mismatch. A sharded index must name exactly the tensors its shards hold."""
    if (folder / INDEX_NAME).is_file():
        weight_map = read_weight_map(folder)
        shapes: dict[str, tuple[int, ...]] = {}
        total = 0
        for shard in sorted(set(weight_map.values())):
            path = inside(folder, shard, str(folder / INDEX_NAME))
            header = read_safetensors_header(path)
            check_dtypes(header, path, _any_derived_buffer)
            total += path.stat().st_size
            for name, (_, shape) in header.items():
                if weight_map.get(name) != shard:
                    raise ValueError(f"{folder / INDEX_NAME}: {shard} holds {name!r}, which the index files "
                                     f"under {weight_map.get(name)!r}")
                shapes[name] = shape
        absent = sorted(set(weight_map) - set(shapes))
        if absent:
            raise ValueError(f"{folder / INDEX_NAME}: names {absent[0]!r}, which its shard does not hold")
        return shapes, total, folder / INDEX_NAME
    path = inside(folder, WEIGHTS_NAME, str(folder))
    header = read_safetensors_header(path)
    check_dtypes(header, path, _any_derived_buffer)
    return {k: shape for k, (_, shape) in header.items()}, path.stat().st_size, path


def _derived_buffer(name: str, arch: str) -> bool:
    """Tensors some checkpoints saved that are computed, not learned: rotary tables (older Llama
    saves), GPT-2's causal-mask buffers (`h.0.attn.bias`, `h.0.attn.masked_bias`)."""
    if arch == "gpt2":
        return name.endswith((".attn.bias", ".attn.masked_bias"))
    return name.endswith("rotary_emb.inv_freq")


def _any_derived_buffer(name: str) -> bool:
    """A derived buffer of any family (dropped on load, so its dtype does not matter: GPT-2 saves a bool mask)."""
    return _derived_buffer(name, "gpt2") or _derived_buffer(name, "llama")


def to_kvviz_names(state: dict[str, torch.Tensor], cfg: ModelConfig, source: Path) -> dict[str, torch.Tensor]:
    """`model.layers.0...` -> `layers.0...` (`transformer.h.0...` -> `h.0...`, Conv1D weights
    transposed); a tied head's saved copy and derived buffers are dropped."""
    out = {_kvviz_name(name, cfg): tensor for name, tensor in state.items() if not _derived_buffer(name, cfg.arch)}
    if cfg.arch == "gpt2":
        out = {name: t.t() if name.endswith(GPT2_CONV1D) and t.dim() == 2 else t for name, t in out.items()}
    embed_name = "wte.weight" if cfg.arch == "gpt2" else "embed_tokens.weight"
    head = out.get("lm_head.weight")
    if cfg.tie_embeddings and head is not None:
        embed = out.get(embed_name)
        if embed is not None and not (head.shape == embed.shape and torch.equal(head, embed)):
            raise ValueError(f"{source}: weights do not match the config: tie_word_embeddings is true but "
                             f"lm_head.weight differs from {embed_name}")
        del out["lm_head.weight"]
    return out


def _kvviz_name(name: str, cfg: ModelConfig) -> str:
    return name.removeprefix("transformer." if cfg.arch == "gpt2" else "model.")


def kvviz_shapes(shapes: dict[str, tuple[int, ...]], cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """to_kvviz_names on shapes alone: the names the model will hold, Conv1D shapes transposed, a tied
    head's copy and derived buffers dropped."""
    out = {}
    for name, shape in shapes.items():
        if _derived_buffer(name, cfg.arch):
            continue
        new = _kvviz_name(name, cfg)
        if cfg.arch == "gpt2" and new.endswith(GPT2_CONV1D) and len(shape) == 2:
            shape = shape[::-1]
        out[new] = shape
    if cfg.tie_embeddings:
        out.pop("lm_head.weight", None)
    return out


def load_hf_model(folder: str | Path) -> nn.Module:
    """A Hugging Face-format Llama / Qwen2 / Qwen3 / GPT-2 folder as a kvviz model, fp32 on the CPU.
    The config is checked against the weights' headers and the machine's memory before anything is
    allocated (models.io.plan_load)."""
    folder = check_folder(folder, tokenizer=False)
    cfg = read_hf_config(folder)
    shapes, file_bytes, source = read_hf_shapes(folder)
    plan_load(cfg, kvviz_shapes(shapes, cfg), file_bytes, source)
    state, source = read_hf_state(folder)
    state = {k: v.float() for k, v in to_kvviz_names(state, cfg, source).items()}
    # Built on the meta device and then given uninitialised storage: random init of a real model's
    # weights would cost seconds only to be overwritten.
    with torch.device("meta"):
        model = build_decoder(cfg)
    model = model.to_empty(device="cpu")
    return load_into(model, state, source).eval()


TOKENIZER_DEPTH = 16  # normalizer and pre-tokenizer sequences nest a few levels; merges are pairs


def check_tokenizer_json(path: Path) -> None:
    """The fields of tokenizer.json that the `tokenizers` library trusts (it panics on some, e.g. a
    100,000-character subword prefix): typed and bounded here before it reads the file."""
    try:
        _check_tokenizer_doc(_read_json(path, TOKENIZER_DEPTH))
    except ValueError as exc:
        raise ValueError(f"{path}: not a valid tokenizer.json ({str(exc).removeprefix(f'{path}: ')})") from None


def _check_tokenizer_doc(doc: Any) -> None:
    from kvviz.records.traceio import MAX_TOKEN_CHARS

    model = doc.get("model") if isinstance(doc, dict) else None
    if not isinstance(model, dict) or not isinstance(model.get("type", "BPE"), str):
        raise ValueError("no 'model' object with a type")
    for key in ("continuing_subword_prefix", "end_of_word_suffix", "unk_token"):
        value = model.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_TOKEN_CHARS):
            raise ValueError(f"model.{key} must be a string of at most {MAX_TOKEN_CHARS} characters")
    vocab = model.get("vocab") or {}
    if not isinstance(vocab, (dict, list)):
        raise ValueError("model.vocab must be an object or a list")
    tokens = vocab if isinstance(vocab, dict) else [v[0] if isinstance(v, list) and v else v for v in vocab]
    added = doc.get("added_tokens") or []
    if not isinstance(added, list):
        raise ValueError("added_tokens must be a list")
    tokens = [*tokens, *(a.get("content") if isinstance(a, dict) else a for a in added)]
    for token in tokens:
        if not isinstance(token, str):
            raise ValueError(f"a token that is not a string: {str(token)[:40]!r}")
        if len(token) > MAX_TOKEN_CHARS:  # a trace could not hold its text, nor a panel draw it
            raise ValueError(f"a token of {len(token):,} characters, more than {MAX_TOKEN_CHARS} "
                             f"(no real vocabulary has one)")


def load_hf_tokenizer(folder: str | Path, cfg: ModelConfig | None = None):
    """The folder's tokenizer.json; refuses one whose ids would fall outside the model's vocabulary."""
    from kvviz.tokenizer import HFTokenizer

    folder = check_folder(folder)
    check_tokenizer_json(folder / TOKENIZER_NAME)
    try:
        tok = HFTokenizer(folder / TOKENIZER_NAME)
    except (KeyboardInterrupt, SystemExit, ValueError):
        raise
    except BaseException as exc:  # the Rust library panics on some malformed files (pyo3 PanicException)
        raise ValueError(f"{folder / TOKENIZER_NAME}: not a valid tokenizer.json ({type(exc).__name__})") from None
    cfg = cfg or read_hf_config(folder)
    if tok.vocab_size > cfg.vocab_size:
        raise ValueError(f"{folder / TOKENIZER_NAME}: {tok.vocab_size} tokens, more than the model's "
                         f"vocab_size of {cfg.vocab_size}")
    return tok


# -- writing, for tests and device checks that must not need `transformers` ----------------------

def hf_config_dict(cfg: ModelConfig) -> dict[str, Any]:
    """The config.json transformers would write for this shape (4.x and 5.x keys both present)."""
    if cfg.arch not in SUPPORTED:
        raise ValueError(f"arch {cfg.arch!r} has no Hugging Face equivalent; use one of {', '.join(SUPPORTED)}")
    if cfg.arch == "gpt2":
        return {"architectures": [SUPPORTED["gpt2"]], "model_type": "gpt2", "vocab_size": cfg.vocab_size,
                "n_embd": cfg.d_model, "n_layer": cfg.n_layer, "n_head": cfg.n_head, "n_inner": cfg.d_ff,
                "n_positions": cfg.max_seq_len, "layer_norm_epsilon": cfg.norm_eps,
                "activation_function": "gelu_new", "tie_word_embeddings": cfg.tie_embeddings,
                "dtype": cfg.dtype, "torch_dtype": cfg.dtype}
    if cfg.qkv_bias != (cfg.arch == "qwen2") or cfg.qk_norm != (cfg.arch == "qwen3"):
        raise ValueError(f"{cfg.arch}: qkv_bias={cfg.qkv_bias}, qk_norm={cfg.qk_norm} do not match the family")
    rope = {"rope_type": "default", "rope_theta": cfg.rope_theta, **(cfg.rope_scaling or {})}
    data = {
        "architectures": [SUPPORTED[cfg.arch]], "model_type": cfg.arch, "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model, "num_hidden_layers": cfg.n_layer, "num_attention_heads": cfg.n_head,
        "num_key_value_heads": cfg.n_kv_head, "head_dim": cfg.head_dim, "intermediate_size": cfg.d_ff,
        "max_position_embeddings": cfg.max_seq_len, "rms_norm_eps": cfg.norm_eps, "hidden_act": "silu",
        "tie_word_embeddings": cfg.tie_embeddings, "dtype": cfg.dtype, "torch_dtype": cfg.dtype,
        "rope_theta": cfg.rope_theta, "rope_parameters": rope,
        "rope_scaling": None if cfg.rope_scaling is None else dict(cfg.rope_scaling),
        "attention_bias": cfg.qkv_bias if cfg.arch == "qwen2" else False,
    }
    return data


def _hf_name(name: str, arch: str) -> str:
    if name == "lm_head.weight":
        return name
    return ("transformer." if arch == "gpt2" else "model.") + name


def save_hf_checkpoint(model: nn.Module, folder: str | Path, *, tokenizer_json: str | None = None) -> Path:
    """Write `model` as a Hugging Face folder (config.json, model.safetensors in the config's dtype,
    and tokenizer.json when given) that `load_hf_model` and transformers both read."""
    from safetensors.torch import save_file

    from kvviz.fileio import atomic_write, atomic_write_text
    from kvviz.runtime.devices import TORCH_DTYPES

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data = hf_config_dict(model.cfg)
    dtype = TORCH_DTYPES[model.cfg.dtype]
    arch = model.cfg.arch
    state = {_hf_name(k, arch): (v.t() if arch == "gpt2" and k.endswith(GPT2_CONV1D) else v)
             .detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items()}
    atomic_write(folder / WEIGHTS_NAME, lambda tmp: save_file(state, str(tmp), metadata={"format": "pt"}))
    atomic_write_text(folder / CONFIG_NAME, json.dumps(data, indent=2) + "\n")
    if tokenizer_json is not None:
        atomic_write_text(folder / TOKENIZER_NAME, tokenizer_json)
    return folder


SAMPLE_TEXT = (
    "The key and value of a token never change once computed, so a cache keeps them. "
    "Each new token attends to every earlier one: its query meets the cached keys, and the "
    "weights mix the cached values. Without the cache the model recomputes the whole history "
    "at every step; with it, one new row per layer is enough. "
)


def train_tokenizer_json(vocab_size: int, text: str = SAMPLE_TEXT) -> str:
    """A byte-level BPE tokenizer.json of at most `vocab_size` tokens (at least 257), trained on `text`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < 257:
        raise ValueError(f"a byte-level tokenizer needs a vocabulary of at least 257, got {vocab_size}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([text] * 4, trainer=trainer)
    return tok.to_str()

