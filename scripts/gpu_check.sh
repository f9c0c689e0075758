#!/usr/bin/env bash
# The GPU check, one command, under 5 minutes on one GPU: `kvviz bench` for every engine on the `wide`
# preset and on a random Llama checkpoint in Hugging Face format (grouped-query attention, bf16), device
# memory per engine, the out-of-memory message, kvviz beside transformers, and the GPU tests. On CUDA,
# also `static` with its decode step replayed from a CUDA graph beside eager `static`
# (--kernels torch,cuda-graph), and
# the read ceiling: a float32 matrix-vector product over 1 GiB timed with CUDA events, both
# layouts, beside the device-to-device copy and the nominal peak; each bench row's share of it ("of ceil");
# `kvviz memory --device` prints the roofline beside the bench's measured decode tokens/s.
#
#   scripts/gpu_check.sh                  # on a CUDA machine, from anywhere
#   DEVICE=cpu TOKENS="5 10" REPEAT=1 scripts/gpu_check.sh   # a dry run of the script itself
#
# Figures and JSON go to $OUT_DIR (default: a new temporary folder), printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICE="${DEVICE:-cuda}"
TOKENS="${TOKENS:-100 1000}"
REPEAT="${REPEAT:-3}"
PY="${PYTHON:-python}"
OUT_DIR="${OUT_DIR:-$(mktemp -d -t kvviz-gpu-check-XXXXXX)}"
CKPT="$OUT_DIR/random-llama"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1
export DEVICE TOKENS CKPT
read -r -a TOKEN_LIST <<< "$TOKENS"
start=$SECONDS

# `kvviz bench --kernels torch,cuda-graph` (static replayed from a CUDA graph beside eager static) on model $1 at dtype $2,
# saved as $3. CUDA only; a failure is reported and the check goes on, so the other figures are not lost.
# The graph's attention runs over the whole buffer with a mask, eager static's over the valid slice: in bf16
# the two round differently, and a random model's bf16 logits have exact ties, so the bf16 tokens may part
# (exit 1) where the float32 ones must not.
graph_bench() {
    echo
    if [[ "$DEVICE" != cuda* ]]; then
        echo "== kvviz bench --kernels torch,cuda-graph: $1 ($2): skipped, CUDA graphs need DEVICE=cuda (this run: $DEVICE)"
        return
    fi
    echo "== kvviz bench --kernels torch,cuda-graph: $1 ($2), static eager beside static replayed from a CUDA graph"
    "$PY" -m kvviz bench --model "$1" --device "$DEVICE" --dtype "$2" --engines static --kernels torch,cuda-graph \
        --tokens "${TOKEN_LIST[@]}" --repeat "$REPEAT" --json "$OUT_DIR/$3" || echo "(bench --kernels torch,cuda-graph exit code $?)"
}

echo "== device"
"$PY" - <<'PYEOF'
import os, torch
dev = os.environ["DEVICE"]
print(f"torch {torch.__version__}; CUDA available: {torch.cuda.is_available()}")
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"{p.name}: {p.total_memory / 2**30:.1f} GiB, compute capability {p.major}.{p.minor}")
elif dev.startswith("cuda"):
    raise SystemExit("gpu_check: no CUDA device visible to torch (set DEVICE=cpu for a dry run)")
PYEOF
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv
fi

echo
echo "== read ceiling on $DEVICE (kvviz.measure.bandwidth.read_ceiling: float32 F.linear of one row over a matrix well"
echo "   past the last-level cache, both layouts, fastest of 9; CUDA timed with CUDA events) beside the copy"
"$PY" - <<'PYEOF'
import os

import torch

from kvviz.measure.bandwidth import probe_cuda, read_ceiling
from kvviz.runtime.devices import resolve_device

device = resolve_device(os.environ["DEVICE"])
for threads in ((1, 2) if device.type == "cpu" else (torch.get_num_threads(),)):
    torch.set_num_threads(threads)
    c = read_ceiling(device, refresh=True)
    print(f"{device}: read {c.read_gbps:,.1f} GB/s (median {c.median_gbps:,.1f}; {c.method}; {threads} thread(s)); "
          f"copy {c.copy_gbps or 0:,.1f} GB/s (read + written)"
          + (f"; nominal peak {c.peak_gbps:,.0f} GB/s, read = {100 * c.read_gbps / c.peak_gbps:.0f}% of it"
             if c.peak_gbps else ""))
if device.type == "cuda":  # the copy probe again at the read probe's size, for scale
    copy = probe_cuda(device, buffer_bytes=1 << 30)
    print(f"copy of 1 GiB: {copy.copy_gbps:,.1f} GB/s (read + written)")
PYEOF

echo
echo "== kvviz bench: wide preset, every engine, $DEVICE"
"$PY" -m kvviz bench --model wide --device "$DEVICE" --tokens "${TOKEN_LIST[@]}" --repeat "$REPEAT" \
    --json "$OUT_DIR/bench-wide.json"
graph_bench wide fp32 bench-graph-wide-fp32.json
graph_bench wide bf16 bench-graph-wide-bf16.json

echo
echo "== the roofline of wide on $DEVICE beside the bench's measured decode (kvviz memory --device)"
"$PY" -m kvviz memory --model wide --device "$DEVICE" --tokens "${TOKEN_LIST[@]}" --batch 8 \
    --measured "$OUT_DIR/bench-wide.json" --json "$OUT_DIR/roofline-wide.json" || echo "(kvviz memory exit code $?)"

echo
echo "== building a random Llama checkpoint (Hugging Face format) in $CKPT"
"$PY" - <<'PYEOF'
import os
from pathlib import Path

import torch

from kvviz.config import ModelConfig
from kvviz.models.hf import save_hf_checkpoint, train_tokenizer_json
from kvviz.models.transformer import Transformer

folder = Path(os.environ["CKPT"])
# Grouped-query attention (16 query heads over 4 KV heads), bf16 as real checkpoints ship.
shape = dict(vocab_size=1024, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
             num_attention_heads=16, num_key_value_heads=4, head_dim=64, max_position_embeddings=4096)
tokenizer_json = train_tokenizer_json(shape["vocab_size"])
try:
    import transformers
except ImportError:
    transformers = None
if transformers is not None:
    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(**shape, rope_theta=500000.0, tie_word_embeddings=False,
                                      bos_token_id=None, eos_token_id=None, pad_token_id=None)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    model.save_pretrained(folder)
    (folder / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
    print(f"written by transformers {transformers.__version__}")
else:
    cfg = ModelConfig(name="random-llama", arch="llama", vocab_size=shape["vocab_size"], d_model=shape["hidden_size"],
                      n_layer=shape["num_hidden_layers"], n_head=shape["num_attention_heads"],
                      n_kv_head=shape["num_key_value_heads"], head_dim=shape["head_dim"],
                      d_ff=shape["intermediate_size"], max_seq_len=shape["max_position_embeddings"],
                      rope_theta=500000.0, norm_eps=1e-6, tie_embeddings=False, dtype="bfloat16")
    save_hf_checkpoint(Transformer(cfg).init_weights(0), folder, tokenizer_json=tokenizer_json)
    print("written by kvviz (transformers is not installed)")
PYEOF

echo
echo "== kvviz bench: the checkpoint, every engine, $DEVICE"
"$PY" -m kvviz bench --model "$CKPT" --device "$DEVICE" --tokens "${TOKEN_LIST[@]}" --repeat "$REPEAT" \
    --json "$OUT_DIR/bench-checkpoint.json"
graph_bench "$CKPT" fp32 bench-graph-checkpoint-fp32.json
graph_bench "$CKPT" bf16 bench-graph-checkpoint-bf16.json

echo
echo "== device memory per engine (one run of the largest token count; allocator figures)"
"$PY" - <<'PYEOF'
import os

import torch

from kvviz.format import DEFAULT_PROMPT, fmt_bytes
from kvviz.config import SamplingConfig, TraceOptions
from kvviz.runtime.devices import resolve_device, resolve_dtype
from kvviz.engines import ENGINE_KEYS, make_engine
from kvviz.models.presets import load_model, load_tokenizer

device = resolve_device(os.environ["DEVICE"])
n = max(int(t) for t in os.environ["TOKENS"].split())
cuda = device.type == "cuda"
print(f"{'model':<12} {'engine':<7} {'weights':>10} {'peak cache':>11} {'trace mem (last)':>17} {'peak allocated':>15}")
for name in ("wide", os.environ["CKPT"]):
    model = load_model(name, device, None)
    model = model.to(resolve_dtype(None, device, model.cfg.dtype))
    ids = load_tokenizer(name).encode(DEFAULT_PROMPT)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    for key in ENGINE_KEYS:
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        traces = list(make_engine(key, model).generate(ids, n, SamplingConfig(), TraceOptions(masks=False)))
        last = traces[-1].device_mem_bytes
        peak = torch.cuda.max_memory_allocated(device) if cuda else None
        label = "wide" if name == "wide" else "checkpoint"
        print(f"{label:<12} {key:<7} {fmt_bytes(weights):>10} {fmt_bytes(max(t.cache_bytes for t in traces)):>11} "
              f"{fmt_bytes(last) if last is not None else '-':>17} {fmt_bytes(peak) if peak is not None else '-':>15}")
    del model
PYEOF

if [[ "$DEVICE" == cuda* ]]; then
    echo
    echo "== out of memory, as the CLI and the app report it"
    "$PY" - <<'PYEOF'
import torch

from kvviz.errors import friendly_error

try:
    torch.empty(1 << 50, dtype=torch.uint8, device="cuda")  # a petabyte
except torch.OutOfMemoryError as exc:
    print(friendly_error(exc))
PYEOF
fi

if [[ "$DEVICE" == cuda* ]] && "$PY" -c "import pytest" 2>/dev/null; then
    echo
    echo "== CUDA graph tests (capture, replay, same tokens as eager static)"
    "$PY" -m pytest tests/test_cuda_graph.py -q -p no:cacheprovider || echo "(CUDA graph tests exit code $?)"
fi

if "$PY" -c "import transformers" 2>/dev/null; then
    echo
    echo "== kvviz beside transformers' generate on the checkpoint ($DEVICE)"
    "$PY" -m kvviz hfbench --model "$CKPT" --device "$DEVICE" --tokens 100 --repeat "$REPEAT" \
        --json "$OUT_DIR/hfbench-checkpoint.json" || echo "(hfbench exit code $?)"
    if "$PY" -c "import pytest" 2>/dev/null; then
        echo
        echo "== GPU tests"
        "$PY" -m pytest tests/test_hf.py -m gpu -q -p no:cacheprovider || echo "(GPU tests exit code $?)"
    fi
else
    echo
    echo "(transformers not installed: hfbench and the GPU reference tests skipped)"
fi

echo
echo "gpu_check: done in $((SECONDS - start)) s; JSON in $OUT_DIR"
