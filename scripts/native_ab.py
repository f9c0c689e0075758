"""Two (or more) versions of kvviz/native/step.c timed in turns in one process, on one static run of `wide`.

    .venv/bin/python scripts/native_ab.py old_step.c kvviz/native/step.c --threads 1 --positions 1 500 1000

Each source is built with kvviz.native's flags into a temporary folder and loaded beside the others; for each
number of new tokens, a static run of `wide` (tracing off), then the step after its last one (the next
position's slot reserved, nothing committed) called by each build in turns of three, the last two of each
timed: the machine's drift (a minute can move the read ceiling by 20% on the shared VM) reaches every build
alike. Prints each build's median step, GB/s of the bytes the step reads, the first build's median over the
last's, and whether every build's logits are the same bit for bit. docs/figures.md's figures for it come
from this script. The old step.c must export what the ctypes binding asks for (kv_decode)."""
from __future__ import annotations

import argparse
import ctypes
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", help="step.c files, the first the baseline")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=100, help="timed steps a build (default 100)")
    parser.add_argument("--positions", type=int, nargs="+", default=[500], help="new tokens before the step")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.steps < 2 or min(args.positions) < 1:
        parser.error("--threads must be 1 or more, --steps 2 or more, --positions 1 or more")
    missing = [s for s in args.sources if not Path(s).is_file()]
    if missing:
        parser.error(f"no such file: {missing[0]}")

    import torch

    torch.set_num_threads(args.threads)
    from kvviz import native
    from kvviz.config import TraceOptions
    from kvviz.costs.wall import WallShape
    from kvviz.engines import make_engine
    from kvviz.models.presets import load_model, load_tokenizer
    from kvviz.runtime.devices import resolve_device

    base = native.load()  # the binding's argument types; torch's OpenMP runtime first
    folder = Path(tempfile.mkdtemp(prefix="kvviz-native-ab-"))
    libs = []
    for i, src in enumerate(args.sources):
        out = folder / f"v{i}.so"
        run = subprocess.run([native.compiler(), *native.FLAGS, "-o", str(out), src, "-lm"], capture_output=True,
                             text=True)
        if run.returncode:
            print(f"native_ab: {src} does not build: {run.stderr.strip().splitlines()[0]}", file=sys.stderr)
            return 2
        lib = ctypes.CDLL(str(out))
        lib.kv_decode.argtypes, lib.kv_decode.restype = base.kv_decode.argtypes, base.kv_decode.restype
        libs.append(lib)
    model = load_model("wide", resolve_device("cpu"), None)
    ids = load_tokenizer("wide").encode("The KV cache keeps every past key and value so that each new token "
                                        "attends without recomputing them; watch it grow.")
    wall = WallShape.from_config(model.cfg, "float32")
    names = [Path(s).name if [Path(t).name for t in args.sources].count(Path(s).name) == 1 else s
             for s in args.sources]
    print(f"wide, static, tracing off, {args.threads} thread(s), {args.steps} steps a build in turns of three")
    for n in args.positions:
        engine = make_engine("static", model, block_size=16, kernel="native")
        traces = list(engine.generate(ids, n, trace=TraceOptions(masks=False)))
        cache, step = engine.cache, engine.native
        cache.reserve(1)
        pos, token = cache.seq_len, traces[-1].token_id
        nbytes = wall.decode(pos + 1).total_bytes
        times: list[list[float]] = [[] for _ in libs]
        logits = []
        for _ in range(-(-args.steps // 2)):
            for j, lib in enumerate(libs):
                step._lib = lib
                for i in range(3):
                    t0 = time.perf_counter()
                    out, _, _ = step(token, pos)
                    if i:
                        times[j].append(time.perf_counter() - t0)
                if len(logits) < len(libs):
                    logits.append(out.clone())
        med = [statistics.median(t) for t in times]
        same = all(torch.equal(logits[0], lg) for lg in logits[1:])
        print(f"position {pos}: " + "; ".join(f"{name} {1e3 * m:.3f} ms, {nbytes / m / 1e9:.2f} GB/s"
                                              for name, m in zip(names, med))
              + f"; {names[0]} / {names[-1]} {med[0] / med[-1]:.3f}x; logits the same bit for bit: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
