"""How long the form's run will take and how much of a run is left, for the window to show: the
latency fits each finished run measured (per model, device and dtype); before any, the slower of the
FLOPs at this machine's probed matrix rate and the bytes a step reads at its measured read bandwidth
(kvviz.measure.bandwidth's cached read ceiling, else its copy figure); and the sentence under the Run button.
The arithmetic is kvviz.costs.estimate's (no Qt there)."""
from __future__ import annotations

import os
from dataclasses import replace

from kvviz.costs import estimate
from kvviz.format import fmt_ms
from kvviz.ui.form import RunForm
from kvviz.ui.history import RunHistory
from kvviz.ui.qtutil import translator

LEFT_FROM_STEPS = 256  # the time left follows the run's last steps (a fit over 2000 had cost ~0.1 s a frame)

_tr = translator("MainWindow")


def _scaled(fit, factor: float):
    """A config bound (or bounds) `factor` times slower."""
    if isinstance(fit, tuple):
        return tuple(_scaled(f, factor) for f in fit)
    coef = None if fit.prefill_coef is None else tuple(c * factor for c in fit.prefill_coef)
    return replace(fit, a_ms=fit.a_ms * factor, b_ms=fit.b_ms * factor, c_ms=fit.c_ms * factor,
                   prefill_ms=fit.prefill_ms * factor, prefill_coef=coef)


class RunEstimates:
    def __init__(self) -> None:
        self.fits: dict[tuple[str, str, str], dict[str, estimate.LatencyFit]] = {}  # measured, per model
        self._flops_per_s: float | None = None  # this machine's matrix rate, probed when first needed
        self._read_gbps: float | None = None  # this machine's read bandwidth, read when first needed

    def record(self, history: RunHistory) -> None:
        """What a finished run measured, per engine: the next run's estimate on this model starts from it."""
        info = history.info
        key = (info.model_name, info.device, info.dtype)
        self.fits[key] = {**self.fits.get(key, {}), **estimate.fit_history(history.traces)}

    def machine_flops_per_s(self) -> float:
        if self._flops_per_s is None:
            self._flops_per_s = estimate.probe_flops_per_s()
        return self._flops_per_s

    def machine_read_gbps(self, threads: int | None = None) -> float | None:
        """The CPU read ceiling cached at these threads (kvviz bench, a run, or the status bar measured it),
        else the copy bandwidth (probed once per machine, ~0.1 s); None if neither can be had."""
        if self._read_gbps is None:
            from kvviz.measure import bandwidth

            # The worker's default: every core but one (a figure at other threads only where none is cached).
            threads = threads or max(1, (os.cpu_count() or 2) - 1)
            ceiling = bandwidth.cached_read_ceiling(threads) or bandwidth.cached_read_ceiling()
            try:
                self._read_gbps = ceiling.read_gbps if ceiling is not None else bandwidth.cpu_bandwidth().copy_gbps
            except (MemoryError, ValueError, OSError):
                return None
        return self._read_gbps

    @staticmethod
    def left_ms(history: RunHistory, steps_per_s: float) -> float | None:
        """The run's remaining rounds, from its own steps' latencies (None before it has decode steps)."""
        info = history.info
        fits = estimate.fit_history(history.traces, recent=LEFT_FROM_STEPS)
        if not fits or not any(t.phase == "decode" for steps in history.traces.values() for t in steps[-1:]):
            return None
        return estimate.run_ms(fits, len(info.prompt_ids), info.max_new_tokens, from_step=history.n_steps(),
                               steps_per_s=steps_per_s)

    def form_ms(self, form: RunForm, steps_per_s: float) -> tuple[float, bool] | None:
        """(ms, measured) for the run the form describes: from the last run of this model, device and
        dtype, engine by engine where it measured them; else from the config, each step the slower of its
        FLOPs and its bytes read at this machine's rates. None when the model's config is not read yet."""
        choice = form.model_choice()
        engines = form.checked_engines()
        if choice is None or choice.config is None or not engines:
            return None
        # The byte tokenizer: a token per UTF-8 byte; another tokenizer makes no more tokens than bytes.
        prompt_len = max(1, len(form.prompt_edit.toPlainText().encode("utf-8")))
        n_new = form.tokens_spin.value()
        read_gbps = self.machine_read_gbps() if form.current_device() == "cpu" else None
        from_config = estimate.bound_fits(choice.config, engines, self.machine_flops_per_s(), read_gbps,
                                          form.dtype() or None)
        measured = self.fits.get((form.current_model(), form.current_device(), form.dtype()), {})
        fits = {e: measured.get(e, from_config[e]) for e in engines}
        measured_all = all(e in measured for e in engines)
        # Measured steps already ran at the machine's load; the config's bounds are an idle machine's.
        slowdown = 1.0 if measured_all else estimate.load_slowdown()
        scaled = {e: fit if e in measured else _scaled(fit, slowdown) for e, fit in fits.items()}
        return estimate.run_ms(scaled, prompt_len, n_new, steps_per_s=steps_per_s), measured_all

    def note(self, form: RunForm, steps_per_s: int, slow_s: float) -> str:
        """The sentence under the Run button for a run longer than slow_s ("" for a shorter one)."""
        found = self.form_ms(form, float(steps_per_s))
        if found is None or found[0] < slow_s * 1000:
            return ""
        ms, measured = found
        paced = steps_per_s > 0 and form.tokens_spin.value() * 1000.0 / steps_per_s >= 0.9 * ms
        if paced:
            why = _tr("at {0} steps/s (the Speed control; 0 runs as fast as possible)").format(steps_per_s)
        elif measured:
            why = _tr("from the step times of the last run of this model here")
        elif self._read_gbps is not None and form.current_device() == "cpu":
            why = _tr("before any run: each step's bytes read at this machine's {0:.3g} GB/s or its FLOPs at "
                      "{1:.3g} GFLOP/s, whichever is slower").format(self._read_gbps, self.machine_flops_per_s() / 1e9)
        else:
            why = _tr("before any run: from the model's size and this machine's measured {0:.3g} GFLOP/s").format(
                self.machine_flops_per_s() / 1e9)
        return _tr("This run will take about {0} ({1}).").format(fmt_ms(ms), why)
