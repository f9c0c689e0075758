"""`kvviz models`: the presets, their shapes and KV bytes per token (derived from each config)."""
from __future__ import annotations


def configure(parser) -> None:
    pass


def run(args) -> int:
    from kvviz.models.presets import PRESETS, preset_config

    print(f"{'name':<18} {'layers':>6} {'heads':>6} {'kv':>3} {'d_head':>6} {'hidden':>6} "
          f"{'params':>8} {'KV/token':>10}  description")
    for name, p in PRESETS.items():
        c = preset_config(name)
        print(f"{name:<18} {c.n_layer:>6} {c.n_head:>6} {c.n_kv_head:>3} {c.head_dim:>6} {c.d_model:>6} "
              f"{c.param_count() / 1e6:>7.2f}M {c.kv_bytes_per_token():>8} B  {p.description}"
              + (f" ({p.warning})" if p.warning else ""))
    return 0
