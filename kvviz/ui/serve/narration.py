"""The serve view's step in words, per scheduler: who finished and left, who joined (reusing how many
cached blocks), who was preempted, how much of the pool is free. From the ServeStep records only.

    paged, step 12: request 3 finished and left; request 5 joined and reused 6 blocks of a cached
    prefix; 14 of 32 blocks free
"""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication

from kvviz.serving.history import ServeHistory
from kvviz.serving.record import ServeStep


def _tr(text: str) -> str:
    return QCoreApplication.translate("ServeNarration", text)


def describe_step(record: ServeStep) -> list[str]:
    """The step's events as clauses, in the order they happen."""
    clauses = []
    for r in record.finished:
        clauses.append(_tr("request {0} finished and left").format(r))
    hits = {h.request: h for h in record.prefix_hits}
    for r in record.admitted:
        hit = hits.get(r)
        if hit is not None:
            clauses.append(_tr("request {0} joined and reused {1} blocks of a cached prefix ({2} tokens not "
                               "prefilled)").format(r, len(hit.blocks), hit.tokens))
        else:
            clauses.append(_tr("request {0} joined").format(r))
    for p in record.preemptions:
        clauses.append(_tr("request {0} was preempted ({1} blocks freed, {2} positions to compute again)").format(
            p.request, len(p.blocks), p.tokens_lost))
    padding, idle = record.slots_of("padding"), record.slots_of("idle")
    if padding:
        clauses.append(_tr("{0} padding slots computed and thrown away").format(padding))
    if idle:
        clauses.append(_tr("{0} idle slots of finished requests").format(idle))
    if not record.work:
        clauses.append(_tr("nothing to run"))
    pool = record.pool
    free = pool.n_blocks - pool.used_blocks - pool.cached_blocks
    tail = _tr("{0} of {1} blocks free").format(free, pool.n_blocks)
    if pool.cached_blocks:
        tail += _tr(" ({0} more cached)").format(pool.cached_blocks)
    clauses.append(tail)
    return clauses


def narrate(run: ServeHistory, step: int) -> str:
    """One sentence per scheduler for the step shown (lockstep: a scheduler already done says so)."""
    parts = []
    for k in run.schedulers:
        n = run.n_steps(k)
        if not n:
            continue
        if step >= n and run.finished:
            parts.append(_tr("{0}: done after {1} steps").format(k, n))
            continue
        record = run.at(k, step)
        parts.append(_tr("{0}, step {1}: {2}").format(k, record.step, "; ".join(describe_step(record))))
    return ".  ".join(parts)
