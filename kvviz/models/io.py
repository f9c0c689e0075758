"""Save and load a model as `config.json` + `model.safetensors` in one folder; every failure names the file."""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from kvviz.config import ModelConfig
from kvviz.fileio import atomic_write
from kvviz.models import build_decoder

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"


def save_model(model: nn.Module, folder: str | Path) -> Path:
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    atomic_write(folder / WEIGHTS_NAME, lambda tmp: save_file(state, str(tmp), metadata={"format": "pt"}))
    model.cfg.save_json(folder / CONFIG_NAME)
    return folder


def load_state(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    if not path.is_file():
        raise ValueError(f"{path}: weights file not found")
    try:
        return load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types for corrupt headers
        raise ValueError(f"{path}: not a readable safetensors file ({exc})") from None


def load_into(model: nn.Module, state: dict[str, torch.Tensor], source: Path) -> nn.Module:
    """Copy `state` into `model`, refusing missing, unexpected or mis-shaped tensors by name."""
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if missing:
        raise ValueError(f"{source}: weights do not match the config: missing {', '.join(missing[:3])}"
                         + (f" and {len(missing) - 3} more" if len(missing) > 3 else ""))
    if unexpected:
        raise ValueError(f"{source}: weights do not match the config: unexpected {', '.join(unexpected[:3])}"
                         + (f" and {len(unexpected) - 3} more" if len(unexpected) > 3 else ""))
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(own[name].shape):
            raise ValueError(f"{source}: weights do not match the config: {name} has shape "
                             f"{tuple(tensor.shape)}, the config implies {tuple(own[name].shape)}")
    model.load_state_dict(state, strict=True)
    return model


def load_model_folder(folder: str | Path) -> nn.Module:
    """A kvviz folder (config.json in kvviz's schema + model.safetensors), in fp32 on the CPU."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such model folder")
    cfg = ModelConfig.load_json(folder / CONFIG_NAME)
    state = load_state(folder / WEIGHTS_NAME)
    model = build_decoder(cfg)
    return load_into(model, {k: v.float() for k, v in state.items()}, folder / WEIGHTS_NAME)
