"""Named models: the trained default, random models of the chapter's and of larger shapes.

`load_model(name_or_path, device, dtype)` is the one way every command and the app get a model.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from kvviz.config import ModelConfig
from kvviz.models.transformer import Transformer

ASSETS = Path(__file__).resolve().parent.parent.parent / "assets"
TINY_DIR = ASSETS / "tiny"


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    config: ModelConfig
    trained: bool = False  # weights shipped in assets/<name>
    warning: str = ""


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset("tiny", "the chapter's shape (2 layers, 4 heads of 32), trained on Python's docs",
               ModelConfig(name="tiny"), trained=True),
        Preset("tiny-random", "the chapter's exact shape with seeded random weights",
               # Untied head: with a random tied head the logits favour the input token itself and
               # a random model repeats one byte forever, which makes engine comparisons trivial.
               ModelConfig(name="tiny-random", tie_embeddings=False)),
        Preset("wide", "random; 8 layers, hidden 512, 8 heads of 64: big enough for the cat copy to show",
               ModelConfig(name="wide", d_model=512, n_layer=8, n_head=8, n_kv_head=8, head_dim=64,
                           d_ff=1536, max_seq_len=4096, tie_embeddings=False)),
        Preset("qwen3-0.6b-shape",
               "random weights in Qwen3-0.6B's published shape (28 layers, 16 Q / 8 KV heads of 128)",
               ModelConfig(name="qwen3-0.6b-shape", arch="qwen3", d_model=1024, n_layer=28, n_head=16,
                           n_kv_head=8, head_dim=128, d_ff=3072, max_seq_len=4096, rope_theta=1e6,
                           norm_eps=1e-6, qk_norm=True, dtype="bfloat16"),
               warning="slow on a CPU: building it and each prefill take seconds; meant for memory figures"),
    ]
}


OTHER_NAMES = "(or a folder path, or a cached hub id ORG/NAME)"  # what else --model accepts


def preset_warning(name_or_path: str) -> str:
    """What a command prints to stderr before loading this preset, its size derived from its config;
    empty for folders and presets without a warning."""
    preset = PRESETS.get(name_or_path)
    if preset is None or not preset.warning:
        return ""
    return f"{preset.name}: {preset.config.param_count() / 1e9:.2f} B parameters; {preset.warning}"


def preset_config(name: str) -> ModelConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown model {name!r}; presets: {', '.join(PRESETS)} {OTHER_NAMES}")
    preset = PRESETS[name]
    if preset.trained and (TINY_DIR / "config.json").is_file():
        return ModelConfig.load_json(TINY_DIR / "config.json")
    return preset.config


def resolve_name(name_or_path: str) -> str:
    """The one place a model name is resolved: a preset name or a folder path comes back as given, a hub
    id (`ORG/NAME`, `ORG/NAME@REVISION`) as its snapshot folder in the Hugging Face or ModelScope cache
    (offline; a ValueError of one line when no cache holds it complete)."""
    from kvviz.models.hub import looks_like_hub_id, resolve_hub_id

    if name_or_path in PRESETS or not looks_like_hub_id(name_or_path):
        return name_or_path
    return str(resolve_hub_id(name_or_path))


def build_model(name_or_path: str, *, seed: int = 0) -> nn.Module:
    """A model on the CPU in fp32: a preset by name, a folder (kvviz or Hugging Face format), or a hub id."""
    name_or_path = resolve_name(name_or_path)
    if name_or_path in PRESETS:
        preset = PRESETS[name_or_path]
        if preset.trained:
            from kvviz.models.io import load_model_folder

            if not (TINY_DIR / "model.safetensors").is_file():
                raise ValueError(f"{TINY_DIR / 'model.safetensors'}: shipped weights missing; "
                                 "run `kvviz train --out assets/tiny`")
            return load_model_folder(TINY_DIR)
        return Transformer(preset.config).init_weights(seed)
    path = Path(name_or_path)
    if path.is_dir():
        if (path / "model.safetensors").is_file() and ModelConfig.is_own_file(path / "config.json"):
            from kvviz.models.io import load_model_folder

            return load_model_folder(path)
        from kvviz.models.hf import load_hf_model

        return load_hf_model(path)
    if path.exists():
        raise ValueError(f"{path}: a model is a folder (config.json + weights), not a file")
    raise ValueError(f"unknown model {name_or_path!r}; presets: {', '.join(PRESETS)} {OTHER_NAMES}")


def load_model(name_or_path: str, device: torch.device, dtype: torch.dtype | None = None,
               *, seed: int = 0) -> nn.Module:
    """Build, cast and move a model; eval mode. dtype None keeps the config's."""
    model = build_model(name_or_path, seed=seed)
    from kvviz.runtime.devices import TORCH_DTYPES

    target = dtype or TORCH_DTYPES[model.cfg.dtype]
    check_device_memory(model, torch.device(device), target)
    return model.to(device=device, dtype=target).eval()


def check_device_memory(model: nn.Module, device: torch.device, dtype: torch.dtype) -> None:
    """Refuse (InsufficientMemory, exit 1) a model whose weights alone exceed the CUDA device's free
    memory, before the copy starts; other devices cannot say what is free."""
    if device.type != "cuda":
        return
    from kvviz.models.io import check_memory

    need = sum(t.numel() for t in model.state_dict().values()) * torch.empty((), dtype=dtype).element_size()
    free, _ = torch.cuda.mem_get_info(device)
    check_memory(need, f"{model.cfg.name} on {device}", available=free)


def load_tokenizer(name_or_path: str):
    """Byte tokenizer for presets and kvviz folders; tokenizer.json for Hugging Face folders."""
    from kvviz.tokenizer import ByteTokenizer

    name_or_path = resolve_name(name_or_path)
    if name_or_path in PRESETS:
        return ByteTokenizer()
    path = Path(name_or_path)
    if not path.is_dir():
        raise ValueError(f"unknown model {name_or_path!r}; presets: {', '.join(PRESETS)} {OTHER_NAMES}")
    if (path / "model.safetensors").is_file() and ModelConfig.is_own_file(path / "config.json"):
        return ByteTokenizer()
    from kvviz.models.hf import load_hf_tokenizer

    return load_hf_tokenizer(path)
