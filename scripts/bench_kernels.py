"""How fast each kernel reads a decode step's matrices: torch's F.linear and numpy's OpenBLAS, row-major
and column-major, over a model's projections in turn (every matrix read from memory, as a decode step
reads them: the whole set is larger than the last-level cache).

    python scripts/bench_kernels.py --threads 1 [--model wide] [--rounds 40]

Prints GB/s per projection and kernel (the median over rounds of each matrix's own time inside the
chain) and for the chain as a whole. docs/figures.md holds the
figures. Needs numpy on OpenBLAS and threadpoolctl for the OpenBLAS columns.
"""
from __future__ import annotations

import argparse
import statistics
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default="wide", help="a kvviz preset (its shapes; random weights)")
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    if args.threads < 1 or args.rounds < 3:
        parser.error("--threads must be at least 1 and --rounds at least 3")

    import numpy as np
    import torch
    import torch.nn.functional as F

    from kvviz.kernels.openblas import openblas
    from kvviz.models.presets import preset_config

    torch.set_num_threads(args.threads)
    openblas().set_num_threads(args.threads)
    cfg = preset_config(args.model)
    d, qkv_out = cfg.d_model, (cfg.n_head + 2 * cfg.n_kv_head) * cfg.head_dim
    shapes = {"qkv": (qkv_out, d), "o": (d, cfg.n_head * cfg.head_dim), "gate/up": (2 * cfg.d_ff, d),
              "down": (d, cfg.d_ff)}
    gen = torch.Generator().manual_seed(0)
    layers = [{k: torch.randn(o, i, generator=gen) / i ** 0.5 for k, (o, i) in shapes.items()}
              for _ in range(cfg.n_layer)]

    def kernel(kind: str, w: torch.Tensor):
        if kind == "torch, row-major":
            return lambda x: F.linear(x, w)
        if kind == "torch, column-major":
            wc = w.t().contiguous().t()
            return lambda x: F.linear(x, wc)
        if kind == "OpenBLAS, row-major":
            wn = w.numpy().T  # (in, out) view of the row-major bytes: BLAS's trans flag
            return lambda x: torch.from_numpy(np.matmul(x.numpy(), wn))
        wn = w.t().contiguous().numpy()  # (in, out) C-contiguous
        return lambda x: torch.from_numpy(np.matmul(x.numpy(), wn))

    kinds = ["torch, row-major", "torch, column-major", "OpenBLAS, row-major", "OpenBLAS, column-major"]
    chains = {k: [{s: kernel(k, layer[s]) for s in shapes} for layer in layers] for k in kinds}
    inputs = {i: torch.randn(1, i, generator=gen) for _, i in shapes.values()}
    each = {(k, s): [] for k in kinds for s in shapes}
    whole = {k: [] for k in kinds}
    clock = time.perf_counter
    with torch.inference_mode():
        for r in range(args.rounds):
            for k in kinds:
                total = 0.0
                for layer in chains[k]:
                    for s, (_, i) in shapes.items():
                        t0 = clock()
                        layer[s](inputs[i])
                        dt = clock() - t0
                        total += dt
                        if r >= 2:  # the first rounds touch pages and pick kernels
                            each[(k, s)].append(dt)
                if r >= 2:
                    whole[k].append(total)
    print(f"{args.model}: {cfg.n_layer} layers; {args.threads} thread(s); GB/s, the median of {args.rounds - 2} rounds")
    print(f"{'matrix':<20}" + "".join(f"{k:>24}" for k in kinds))
    for s, (o, i) in shapes.items():
        nbytes = o * i * 4
        print(f"{f'{s} {o} x {i}':<20}" + "".join(f"{nbytes / statistics.median(each[(k, s)]) / 1e9:>24.1f}"
                                                   for k in kinds))
    nbytes = sum(o * i * 4 for o, i in shapes.values()) * cfg.n_layer
    print(f"{f'all {4 * cfg.n_layer} in a chain':<20}" + "".join(f"{nbytes / statistics.median(whole[k]) / 1e9:>24.1f}"
                                                              for k in kinds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
