"""Many requests, one model: a workload, a shared block pool, schedulers, one batched forward per step,
and the frozen record each step yields (kvviz.serving.record). No Qt here.
"""
