"""`kvviz models`: the presets, and the checkpoints in the Hugging Face and ModelScope caches, with their
shapes and KV bytes per token (derived from each config); a cached checkpoint kvviz cannot open says why."""
from __future__ import annotations


def configure(parser) -> None:
    pass


def run(args) -> int:
    from kvviz.format import fmt_bytes
    from kvviz.models.hub import list_cached_models, searched_caches
    from kvviz.models.presets import PRESETS, preset_config

    print(f"{'name':<18} {'layers':>6} {'heads':>6} {'kv':>3} {'d_head':>6} {'hidden':>6} "
          f"{'params':>8} {'KV/token':>10}  description")
    for name, p in PRESETS.items():
        c = preset_config(name)
        print(f"{name:<18} {c.n_layer:>6} {c.n_head:>6} {c.n_kv_head:>3} {c.head_dim:>6} {c.d_model:>6} "
              f"{c.param_count() / 1e6:>7.2f}M {c.kv_bytes_per_token():>8} B  {p.description}"
              + (f" ({p.warning})" if p.warning else ""))
    cached = list_cached_models()
    print()
    if not cached:
        print(f"no cached checkpoints in {searched_caches()}; fetch one with `kvviz download ORG/NAME`")
        return 0
    width = max(len("cached id"), *(len(m.model_id) for m in cached))
    print(f"{'cached id':<{width}} {'arch':<6} {'params':>9} {'KV/token':>10} {'on disk':>10}  cache")
    for m in cached:
        c = m.config
        arch = c.arch if c is not None else "?"
        params = f"{c.param_count() / 1e6:.2f}M" if c is not None else "?"
        kv = fmt_bytes(c.kv_bytes_per_token()) if c is not None else "?"
        line = f"{m.model_id:<{width}} {arch:<6} {params:>9} {kv:>10} {fmt_bytes(m.size_bytes):>10}  {m.source}"
        print(line + (f"  cannot open: {m.problem}" if m.problem else ""))
    return 0
