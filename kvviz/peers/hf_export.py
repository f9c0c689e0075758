"""A kvviz model written as a Hugging Face checkpoint that transformers and vLLM load: config.json,
model.safetensors, tokenizer.json and tokenizer_config.json. A byte model's tokenizer.json is kvviz's
byte tokenizer exactly (token id = UTF-8 byte). The folder is written whole under a temporary name and
renamed into place. No transformers and no vLLM here: they only read what this writes.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from kvviz.config import ModelConfig

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
TOKENIZER_NAME = "tokenizer.json"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
WRITTEN = (CONFIG_NAME, WEIGHTS_NAME, TOKENIZER_NAME, TOKENIZER_CONFIG_NAME)


def byte_tokenizer_json() -> str:
    """kvviz's ByteTokenizer as a tokenizer.json: GPT-2's byte-level alphabet with each byte's character
    given the byte's own value as its id, no merges, and the regex split off (a text is one word, so
    every byte is one token). The ByteLevel decoder turns tokens back into bytes and decodes them as
    UTF-8 with U+FFFD for a malformed sequence, as ByteTokenizer.decode does."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from kvviz.tokenizer import _byte_decoder

    tok = Tokenizer(models.BPE(vocab=dict(_byte_decoder()), merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return tok.to_str()


def hf_shape(cfg: ModelConfig) -> ModelConfig:
    """kvviz's own architecture is Llama's (RMSNorm, rotate-half RoPE, SwiGLU, no biases): named so."""
    return cfg.replace(arch="llama") if cfg.arch == "kvviz" else cfg


def checkpoint_config(cfg: ModelConfig) -> dict[str, Any]:
    """config.json: transformers' keys for the shape, and no special token ids. Llama's config class
    defaults to bos 1 and eos 2, which are bytes here: generate would stop at byte 2."""
    from kvviz.models.hf import hf_config_dict

    return {**hf_config_dict(hf_shape(cfg)), "bos_token_id": None, "eos_token_id": None, "pad_token_id": None}


def tokenizer_config(cfg: ModelConfig) -> dict[str, Any]:
    """tokenizer_config.json: the tokenizer.json as it is, adding nothing and cleaning no spaces on decode."""
    return {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": cfg.max_seq_len,
            "add_bos_token": False, "add_eos_token": False, "clean_up_tokenization_spaces": False}


class _Renamed:
    """A model seen under another config (its arch's Hugging Face name), for the checkpoint writer."""

    def __init__(self, model, cfg: ModelConfig) -> None:
        self.cfg, self._model = cfg, model

    def state_dict(self):
        return self._model.state_dict()


def write_checkpoint(model, out: str | Path, tokenizer_json: str) -> Path:
    """Write `model` (a kvviz decoder) and `tokenizer_json` as a checkpoint folder at `out`: a new or empty
    folder, or one holding only files this writes (they are replaced). Nothing is left behind on failure."""
    from kvviz.models.hf import save_hf_checkpoint

    out = Path(out).expanduser()
    check_out(out)
    parent = out.parent if str(out.parent) else Path(".")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name[:200]}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise ValueError(f"cannot write {out}: {exc.strerror or exc}") from None
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700 would follow the folder into place
        cfg = model.cfg
        save_hf_checkpoint(_Renamed(model, hf_shape(cfg)), tmp)
        (tmp / CONFIG_NAME).write_text(json.dumps(checkpoint_config(cfg), indent=2) + "\n")
        (tmp / TOKENIZER_NAME).write_text(tokenizer_json)
        (tmp / TOKENIZER_CONFIG_NAME).write_text(json.dumps(tokenizer_config(cfg), indent=2) + "\n")
        if out.is_dir() and any(out.iterdir()):
            for name in WRITTEN:
                os.replace(tmp / name, out / name)
            tmp.rmdir()
        else:
            os.replace(tmp, out)  # a new name, or an empty folder replaced whole
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ValueError(f"cannot write {out}: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def check_out(out: Path) -> None:
    """One-line ValueError unless `out` can become the checkpoint: a new name in an existing folder, an
    empty folder, or a folder holding only the files a conversion writes."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a folder")
    if out.is_dir():
        other = sorted(p.name for p in out.iterdir() if p.name not in WRITTEN)
        if other:
            raise ValueError(f"{out}: the folder holds other files ({', '.join(other[:3])}); give a new or empty "
                             f"folder")
    elif not out.parent.is_dir():
        raise ValueError(f"{out}: the folder {out.parent} does not exist")


def source_tokenizer_json(name_or_path: str, cfg: ModelConfig) -> str:
    """The tokenizer the model was made with: kvviz's bytes, or the source folder's own tokenizer.json."""
    if cfg.tokenizer == "bytes":
        return byte_tokenizer_json()
    from kvviz.fileio import read_bytes
    from kvviz.models.presets import resolve_name
    from kvviz.tokenizer import MAX_TOKENIZER_BYTES

    path = Path(resolve_name(name_or_path)) / TOKENIZER_NAME
    return read_bytes(path, MAX_TOKENIZER_BYTES, "tokenizer.json").decode("utf-8", errors="strict")


def convert(name_or_path: str, out: str | Path) -> Path:
    """`kvviz convert`: any model kvviz loads (a preset, a kvviz folder, a Hugging Face folder or cached hub
    id) written as a checkpoint folder at `out` (write_checkpoint)."""
    from kvviz.models.presets import build_model

    check_out(Path(out).expanduser())
    model = build_model(name_or_path)
    return write_checkpoint(model, out, source_tokenizer_json(name_or_path, model.cfg))


CACHE_ENV = "KVVIZ_CHECKPOINT_CACHE"


def checkpoint_cache() -> Path:
    """Where cached_checkpoint keeps converted models: $KVVIZ_CHECKPOINT_CACHE, else kvviz/checkpoints under
    the user's cache folder ($XDG_CACHE_HOME or ~/.cache)."""
    named = os.environ.get(CACHE_ENV, "").strip()
    if named:
        return Path(named).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache") / "kvviz" / "checkpoints"


def weights_digest(model) -> str:
    """sha256 of the model's config and every tensor's name, dtype, shape and bytes: the same digest exactly
    when the weights are the same."""
    import torch

    h = hashlib.sha256(json.dumps(checkpoint_config(model.cfg), sort_keys=True).encode())
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def cached_checkpoint(name_or_path: str, model, root: str | Path | None = None) -> Path:
    """`model` (loaded from `name_or_path`) as a checkpoint folder under `root` (checkpoint_cache()), named by
    the model and its weights_digest: written the first time (write_checkpoint), found after."""
    base = Path(root).expanduser() if root is not None else checkpoint_cache()
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(str(name_or_path)).name)[:60] or "model"
    out = base / f"{stem}-{weights_digest(model)[:16]}"
    if all((out / n).is_file() for n in WRITTEN):
        return out
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"cannot write the checkpoint cache {base}: {exc.strerror or exc}") from None
    return write_checkpoint(model, out, source_tokenizer_json(name_or_path, model.cfg))
