"""The Serve view's step in words, per scheduler: who finished and left, who joined (reusing how many
cached blocks), who was preempted, how much of the pool is free. From the ServeStep records only.

    paged, step 12: request 3 finished and left; request 5 joined and reused 6 blocks of a cached
    prefix; 14 of 32 blocks free (3 more cached)

and in a short form for a narrow box (the transport shows the longest that fits):

    paged 12: r3 left; r5 joined, 6 blocks cached; 14/32 free (3 more cached)

Where vLLM ran beside them, a sentence of what it reported at the step, and where its counts differ from the
scheduler its settings follow, that scheduler's counts beside them:

    vLLM, step 4: 5 running, 0 waiting, 12 blocks in use, 96 prompt tokens from its cache; prefix: 4 running,
    1 waiting

Qt-free (records only), so the Serve view and the serve page say the same: every function takes `_tr`, the
translation of an English string into the reader's language (the window passes Qt's, context "ServeNarration";
the page kvviz.page.strings.translator's; str, the default, keeps English).
"""
from __future__ import annotations

from collections.abc import Callable

from kvviz.serving.history import ServeHistory
from kvviz.serving.record import ServeStep

Translate = Callable[[str], str]


def describe_step(record: ServeStep, _tr: Translate = str) -> list[str]:
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


def describe_short(record: ServeStep, _tr: Translate = str) -> list[str]:
    """The step's events as short clauses: requests as r3, several in one clause, the pool as free/all and the
    cached blocks beyond them as the long form says them."""
    def names(requests) -> str:
        return ", ".join(f"r{r}" for r in requests)

    clauses = []
    if record.finished:
        clauses.append(_tr("{0} left").format(names(record.finished)))
    hits = {h.request: h for h in record.prefix_hits}
    plain = [r for r in record.admitted if r not in hits]
    if plain:
        clauses.append(_tr("{0} joined").format(names(plain)))
    for r in record.admitted:
        if r in hits:
            clauses.append(_tr("r{0} joined, {1} blocks cached").format(r, len(hits[r].blocks)))
    if record.preemptions:
        clauses.append(_tr("{0} preempted").format(names(p.request for p in record.preemptions)))
    padding, idle = record.slots_of("padding"), record.slots_of("idle")
    if padding:
        clauses.append(_tr("{0} padding").format(padding))
    if idle:
        clauses.append(_tr("{0} idle").format(idle))
    pool = record.pool
    tail = _tr("{0}/{1} free").format(pool.n_blocks - pool.used_blocks - pool.cached_blocks, pool.n_blocks)
    if pool.cached_blocks:
        tail += _tr(" ({0} more cached)").format(pool.cached_blocks)  # the long form's words for them
    clauses.append(tail)
    return clauses


VLLM_COUNTS = ("running", "waiting", "blocks", "cached", "preempted")  # ServeHistory.vllm_counts's keys


def count_clauses(counts: dict[str, int], keys, form: str, _tr: Translate = str) -> list[str]:
    full = {"running": _tr("{0} running"), "waiting": _tr("{0} waiting"), "blocks": _tr("{0} blocks in use"),
            "cached": _tr("{0} prompt tokens from its cache"), "preempted": _tr("{0} preempted")}
    short = {"running": _tr("{0} run"), "waiting": _tr("{0} wait"), "blocks": _tr("{0} blocks"),
             "cached": _tr("{0} cached"), "preempted": _tr("{0} preempted")}
    words = full if form == "full" else short
    return [words[k].format(counts[k]) for k in keys]


def narrate_vllm(run: ServeHistory, step: int, form: str = "full", _tr: Translate = str,
                 shown: str | None = None) -> str:
    """vLLM's sentence at `step`: its start-up's wait, its failure, or its counts, with the counterpart
    scheduler's counts where they differ at a step both recorded on its own (`shown`: as in narrate)."""
    lane = run.vllm
    number = step if shown is None else shown
    clause_sep = _tr("; ")
    if lane.state == "failed":
        return _tr("vLLM failed: {0}").format(lane.message)
    if not lane.steps:
        return _tr("vLLM: starting, {0:.0f} s waited").format(lane.waited_s)
    if step >= lane.n_steps and run.finished:
        return _tr("vLLM: done after {0} steps").format(lane.n_steps) if form == "full" else _tr("vLLM: done")
    ours, theirs = run.vllm_counts(step)
    if ours is None:
        words = _tr("vLLM, step {0}: nothing to run") if form == "full" else _tr("vLLM {0}: idle")
        return words.format(number)
    keys = ("running", "waiting", "blocks", "cached") + (("preempted",) if ours["preempted"] else ())
    clauses = count_clauses(ours, keys, form, _tr)
    differ = [key for key in VLLM_COUNTS if theirs is not None and theirs[key] != ours[key]]
    if differ:
        theirs_said = _tr(", ").join(count_clauses(theirs, differ, form, _tr))
        clauses.append(_tr("{0}: {1}").format(lane.counterpart, theirs_said))
    if form == "full":
        return _tr("vLLM, step {0}: {1}").format(number, clause_sep.join(clauses))
    return _tr("vLLM {0}: {1}").format(number, clause_sep.join(clauses))


def vllm_status(run: ServeHistory, _tr: Translate = str) -> str:
    """The status line while vLLM beside the schedulers starts (the seconds waited) or after it failed (why, in one
    line); "" otherwise."""
    lane = run.vllm
    if lane is None or lane.steps:
        return ""
    if lane.state == "failed":
        return _tr("vLLM failed: {0}").format(lane.message)
    return _tr("vLLM: starting, {0:.0f} s waited (35-50 s on a CPU); the schedulers wait for it").format(
        lane.waited_s)


def narrate(run: ServeHistory, step: int, form: str = "full", _tr: Translate = str, shown: str | None = None) -> str:
    """One sentence per scheduler for the step shown (lockstep: a scheduler already done says so); `form`
    "short" says it in fewer words (see the module's docstring). `shown` is written where the step's number
    goes (default the number): the serve page marks it so for a stretch of steps that differ in it alone."""
    parts = []
    clause_sep = _tr("; ")  # the language's own punctuation (Chinese: full-width)
    for k in run.schedulers:
        n = run.n_steps(k)
        if not n:
            continue
        if step >= n and run.finished:
            parts.append(_tr("{0}: done after {1} steps").format(k, n) if form == "full"
                         else _tr("{0}: done").format(k))
            continue
        record = run.at(k, step)
        number = record.step if shown is None else shown
        if form == "full":
            parts.append(_tr("{0}, step {1}: {2}").format(k, number, clause_sep.join(describe_step(record, _tr))))
        else:
            parts.append(_tr("{0} {1}: {2}").format(k, number, clause_sep.join(describe_short(record, _tr))))
    if run.vllm is not None:
        parts.append(narrate_vllm(run, step, form, _tr, shown))
    return _tr(".  ").join(parts)  # between two schedulers' sentences


# The panels' lines the serve page shows as the Serve view's panels word them. `tr_panel` translates in the
# panel's own context (PoolPanel, TimelinePanel, TextPanel), where the window's panels keep these strings.
def pool_heading(scheduler: str, record: ServeStep, tr_panel: Translate = str, form: str = "full") -> str:
    """The block pool's line above a scheduler's blocks: "paged: 14 of 32 blocks free, 3 cached"; `form` "short"
    for a narrow pool: "paged: 14/32 free, 3 cached"."""
    pool = record.pool
    words = tr_panel("{0}: {1} of {2} blocks free") if form == "full" else tr_panel("{0}: {1}/{2} free")
    head = words.format(scheduler, pool.n_blocks - pool.used_blocks - pool.cached_blocks, pool.n_blocks)
    if pool.cached_blocks:
        head += tr_panel(", {0} cached").format(pool.cached_blocks)
    return head


def vllm_heading(run: ServeHistory, step: int, tr_panel: Translate = str) -> str:
    """The timeline's line above vLLM's rows: its start-up's wait, its failure, or what it reported at `step`."""
    lane = run.vllm
    if lane.state == "failed":
        return tr_panel("vLLM failed: {0}").format(lane.message)
    s = lane.record_at(step)
    if s is None:
        return tr_panel("vLLM: starting, {0:.0f} s waited (its start-up takes 35-50 s on a CPU)").format(lane.waited_s)
    return tr_panel("vLLM, step {0}: {1} running, {2} waiting, {3} blocks in use, {4} prompt tokens from its cache, "
                    "{5} preempted").format(s.step, s.running, s.waiting, s.blocks_in_use, s.prompt_cached, s.preempted)


def cell_text(key: str, c: dict[str, float]) -> str:
    """A counter as the counters panel shows it (ServeHistory.counters' or vllm_counters' value of `key`)."""
    if key not in c:
        return "\u2013"  # vLLM reports nothing alike
    if key in ("padding_share", "idle_share", "hit_rate"):
        return f"{c[key]:.0%}"
    if key == "tokens_per_s":
        return f"{c['tokens_per_s']:,.0f}"
    return f"{int(c[key]):,}"


def workload_text(name: str, n_requests: int, tr_panel: Translate = str) -> str:
    """"course-batch: 4 requests": the head of the solo lines and the serve page's status line."""
    return tr_panel("{0}: {1} requests").format(name, n_requests)


def solo_text(checks, tr_panel: Translate = str) -> tuple[bool, str]:
    """(all equal, the line) for a scheduler's SoloChecks: "tokens = solo runs: 4 of 4", or each request that
    differs, from which token and at which step."""
    same = sum(1 for c in checks if c.equal)
    if same == len(checks):
        return True, tr_panel("tokens = solo runs: {0} of {1}").format(same, len(checks))
    where = [tr_panel("request {0} from token {1} (step {2})").format(c.request, c.token + 1, c.step)
             if c.step is not None else
             tr_panel("request {0} from token {1} (cut short)").format(c.request, c.token + 1)
             for c in checks if not c.equal]
    return False, tr_panel("tokens \u2260 solo runs: {0} of {1} equal; {2}").format(same, len(checks), "; ".join(where))
