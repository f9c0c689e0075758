"""What a model folder must hold before anything loads it: kvviz's own (config.json + model.safetensors) or a
Hugging Face one (config.json, safetensors weights, tokenizer.json), and the one line that says what it lacks.
Imports no torch and no Qt, so the window refuses a folder when it is opened, with the words a run would use
(kvviz.models.hf reads the tensors afterwards)."""
from __future__ import annotations

import os
from pathlib import Path

from kvviz.config import ModelConfig
from kvviz.fileio import check_regular, read_json, resolve

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"
TOKENIZER_NAME = "tokenizer.json"
INDEX_DEPTH = 3  # {"metadata": {...}, "weight_map": {name: file}}
# Files that say which other tokenizer format a folder holds, for the error message.
OTHER_TOKENIZERS = {
    "tokenizer.model": "a SentencePiece model",
    "spiece.model": "a SentencePiece model",
    "vocab.json": "a slow BPE vocabulary (vocab.json + merges.txt)",
    "vocab.txt": "a WordPiece vocabulary",
}
OTHER_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "tf_model.h5", "flax_model.msgpack")


def inside(folder: Path, name: str, what: str) -> Path:
    """`folder / name` if `name` is a plain relative path that stays inside `folder` once links are
    followed; ValueError otherwise. Every path a checkpoint's own files name goes through here."""
    if not isinstance(name, str) or not name or "\0" in name:
        raise ValueError(f"{what}: {name!r} is not a file name")
    rel = Path(name)
    if rel.is_absolute() or ".." in rel.parts:
        raise ValueError(f"{what}: {name!r} points outside the checkpoint folder")
    path = folder / rel
    root = resolve(folder, "checkpoint folder")
    # A Hugging Face cache snapshot (.../snapshots/<commit>/) is links into its repo's blobs/ folder.
    roots = (root, root.parent.parent / "blobs") if root.parent.name == "snapshots" else (root,)
    target = resolve(path)
    if not any(target.is_relative_to(r) for r in roots):
        raise ValueError(f"{what}: {name!r} is a link to {target}, outside the checkpoint folder")
    return path


def read_weight_map(folder: Path) -> dict[str, str]:
    """The index's weight_map, every entry a tensor name -> a shard file inside `folder` (an index is
    untrusted: `../`, absolute paths and links out of the folder are refused)."""
    path = folder / INDEX_NAME
    doc = read_json(path, INDEX_DEPTH, max_bytes=64 << 20)
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{path}: no weight_map in the index (an object of tensor name -> shard file)")
    for name, shard in weight_map.items():
        if not isinstance(shard, str):
            raise ValueError(f"{path}: weight_map[{name!r}] is {shard!r}, not a file name")
        inside(folder, shard, str(path))
        if not shard.endswith(".safetensors"):
            raise ValueError(f"{path}: weight_map[{name!r}] names {shard!r}, not a .safetensors file")
    return weight_map


def missing_files(folder: Path, *, tokenizer: bool = True) -> list[str]:
    """The files a checkpoint folder needs and lacks (shards named in an index count too). A file that is
    there but is no regular file (a FIFO, a device, a loop of links) is refused in one line by the reader."""
    for name in (CONFIG_NAME, WEIGHTS_NAME, INDEX_NAME, TOKENIZER_NAME):
        if os.path.lexists(folder / name):
            inside(folder, name, str(folder))  # a link out of the folder is refused, not followed
            check_regular(folder / name, name)
    missing = [] if (folder / CONFIG_NAME).is_file() else [CONFIG_NAME]
    if (folder / INDEX_NAME).is_file():
        shards = sorted(set(read_weight_map(folder).values()))
        for shard in shards:
            if os.path.lexists(folder / shard):
                check_regular(folder / shard, "weights file")
        missing += [s for s in shards if not (folder / s).is_file()]
    elif not (folder / WEIGHTS_NAME).is_file():
        other = [name for name in OTHER_WEIGHTS if (folder / name).is_file()]
        missing.append(WEIGHTS_NAME + (f" (found {other[0]}; kvviz reads only safetensors)" if other else ""))
    if tokenizer and not (folder / TOKENIZER_NAME).is_file():
        other = [f"{name}, {what}" for name, what in OTHER_TOKENIZERS.items() if (folder / name).is_file()]
        missing.append(TOKENIZER_NAME + (f" (found {other[0]}; kvviz reads only tokenizer.json)" if other else ""))
    return missing


def check_folder(folder: str | Path, *, tokenizer: bool = True) -> Path:
    """Raise one ValueError naming every missing file; return the folder as a Path."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such checkpoint folder")
    missing = missing_files(folder, tokenizer=tokenizer)
    if missing:
        raise ValueError(f"{folder}: not a complete checkpoint folder: missing {'; '.join(missing)}")
    return folder


def check_model_folder(folder: str | Path) -> None:
    """Refuse (one-line ValueError, a run's words) a folder that is neither kvviz's own model folder nor a
    complete Hugging Face checkpoint, the test kvviz.models.presets.load_tokenizer makes first."""
    path = Path(folder)
    if (path / WEIGHTS_NAME).is_file() and ModelConfig.is_own_file(path / CONFIG_NAME):
        return
    check_folder(path)
