"""Figures for docs/figures.md: `kvviz download` throughput against the local Hub stand-in
(tests/hubserver.py on 127.0.0.1), and the time from `kvviz bench --model ORG/NAME` to its first step for a
Qwen3-0.6B-sized checkpoint in the Hugging Face cache (the `qwen3-0.6b-shape` preset with Qwen3-0.6B's
vocabulary of 151,936 and tied embeddings, bf16, random weights: about 1.2 GB). Everything is written under
one temporary folder, deleted at the end.

    python scripts/bench_hub.py [--repeat 3] [--threads 2] [--tmp /tmp]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
REPO = "bench/qwen3-0.6b-shape"


def build_checkpoint(folder: Path) -> Path:
    import torch

    from kvviz.models import build_decoder
    from kvviz.models.hf import save_hf_checkpoint, train_tokenizer_json
    from kvviz.models.presets import PRESETS

    cfg = replace(PRESETS["qwen3-0.6b-shape"].config, vocab_size=151_936, tie_embeddings=True)
    torch.manual_seed(0)
    with torch.device("meta"):
        model = build_decoder(cfg)
    model = model.to_empty(device="cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    return save_hf_checkpoint(model, folder, tokenizer_json=train_tokenizer_json(1000))


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return seconds, done.stdout + done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tmp", default=tempfile.gettempdir())
    args = parser.parse_args()
    from hubserver import HubServer, Repo

    tmp = Path(tempfile.mkdtemp(prefix="kvviz-bench-hub-", dir=args.tmp))
    try:
        t0 = time.perf_counter()
        folder = build_checkpoint(tmp / "ckpt")
        size = sum(p.stat().st_size for p in folder.iterdir())
        print(f"checkpoint: {size / 1e9:.3f} GB written in {time.perf_counter() - t0:.1f} s ({folder})")
        env = dict(os.environ, HF_HUB_CACHE=str(tmp / "hf"), MODELSCOPE_CACHE=str(tmp / "ms"),
                   PYTHONPATH=str(ROOT))
        kvviz = [sys.executable, "-m", "kvviz"]
        with HubServer({REPO: Repo.from_folder(folder)}) as server:
            env["HF_ENDPOINT"] = server.url
            if shutil.which("curl"):  # the server's own pace, for comparison with the Python client's
                weights = f"{server.url}/{REPO}/resolve/main/model.safetensors"
                seconds, _ = timed(["curl", "-s", "-o", os.devnull, weights], env)
                print(f"curl of model.safetensors from the same server: {size / seconds / 1e6:.0f} MB/s")
            seconds, _ = timed([*kvviz, "download", REPO], env)
        print(f"kvviz download (whole command, cold cache): {seconds:.2f} s, {size / seconds / 1e6:.0f} MB/s "
              f"({size / seconds / 2**20:.0f} MiB/s) over 127.0.0.1, sha256 check included")
        shutil.rmtree(folder)  # the cache's copy is the only one now
        env["HF_ENDPOINT"] = "http://127.0.0.1:9"  # nothing listens: the runs below must not need the network
        first = [*kvviz, "bench", "--model", REPO, "--tokens", "1", "--engines", "concat", "--repeat", "1",
                 "--device", "cpu", "--threads", str(args.threads)]
        runs = [timed(first, env)[0] for _ in range(args.repeat)]
        each = ", ".join(f"{r:.2f}" for r in runs)
        print(f"kvviz bench --model {REPO} --tokens 1 (process start to first step printed), "
              f"{args.threads} threads: median {statistics.median(runs):.2f} s of {each}")
        probe = (
            "import time; t=time.perf_counter()\n"
            f"import torch; torch.set_num_threads({args.threads})\n"
            "from kvviz.models.presets import resolve_name, load_model, load_tokenizer\n"
            "from kvviz.engines import make_engine\n"
            "from kvviz.config import SamplingConfig\n"
            f"t1=time.perf_counter(); folder=resolve_name('{REPO}'); t2=time.perf_counter()\n"
            "tok=load_tokenizer(folder); model=load_model(folder, torch.device('cpu')); t3=time.perf_counter()\n"
            "ids=tok.encode('The key and value of a token never change once computed, so')\n"
            "step=next(make_engine('concat', model).generate(ids, 1, SamplingConfig()))\n"
            "t4=time.perf_counter()\n"
            "print(f'imports {t1-t:.2f} s, resolve id {1000*(t2-t1):.1f} ms, load tokenizer+model {t3-t2:.2f} s, "
            "first step (prefill of {len(ids)} tokens) {t4-t3:.2f} s, total {t4-t:.2f} s')\n"
        )
        for _ in range(args.repeat):
            print("  breakdown:", timed([sys.executable, "-c", probe], env)[1].strip().splitlines()[-1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
