"""The Serve panels' colours for watched servers: drawn under the servers' labels, the schedulers' palette (the
catalog's, which the serve page shares) left as it is for every later view and page in the process."""
from __future__ import annotations

from types import SimpleNamespace


def test_a_watched_servers_colour_leaves_the_schedulers_palette_alone(qapp):
    from kvviz import catalog
    from kvviz.ui.serve import colors
    from kvviz.ui.watch.lanes import register_colors

    before = dict(colors.SCHEDULER_COLORS)
    servers = (SimpleNamespace(label="127.0.0.1:8011", color="#123456"),
               SimpleNamespace(label="paged", color="#abcdef"))  # a server named like a scheduler
    try:
        register_colors(SimpleNamespace(servers=servers))
        assert colors.SCHEDULER_COLORS == before == {k: s.color for k, s in catalog.SCHEDULERS.items()}
        assert colors.scheduler_color("127.0.0.1:8011") == "#123456"
        assert colors.scheduler_color("paged") == before["paged"]
    finally:
        for v in servers:
            colors.LANE_COLORS.pop(v.label, None)
