"""How :class:`~geogp.models.afs.AFSRegressor` learns, once its data are standardised: the
window and its features, the statistics (one data pass), θ by L-BFGS, the posterior.

:class:`AdaptiveWindowFit` is the estimator's base class holding this procedure
(``_learn``, docs/afs.md (window)): the window starts at ``window_factor``/``margin`` (or at
what the initial θ needs), a kernel sum named by a string first gets a pilot fit of its first
part (``_pilot``), and while the learnt θ's alias error exceeds the tolerance the statistics
are recomputed on a wider window and θ refitted from where it stopped (at most
``MAX_REFITS`` times). The estimator's ``fit``/``fit_grid`` prepare the data and call it; it
reads the estimator's settings (``kernel``, ``n_features``, ``alias_tol``, ...) and sets the
fitted attributes (``features_``, ``stats_``, ``kernel_``, ``posterior_``, ...).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp
import numpy as np

from geogp.core.kernels import make_kernel
from geogp.core.optimize import FitReport, minimize_lbfgs
from geogp.core.progress import advance, announce_fit, start_phase
from geogp.core.robust import Contamination
from geogp.core.trend import ols
from geogp.core.validation import check_positive
from geogp.exceptions import InputError
from geogp.features.afs_dft import log_lambda
from geogp.features.fourier import FourierFeatures, window
from geogp.features.fourier_statistics import residual_stats
from geogp.models.afs.diagnostics import (
    REFIT_FACTOR,
    REFIT_GROWTH,
    alias_error,
    balanced_width,
    diagnostics,
    refit_reason,
    truncation,
    warn_if_poor,
)
from geogp.models.afs.objectives import loss_and_args, merge_reports, warm_start
from geogp.models.afs.policy import auto_features, check_budget, choose_solver
from geogp.models.collapsed import posterior
from geogp.models.collapsed_iterative import (
    IterativeOptions,
    iterative_posterior,
    rademacher_probes,
)

if TYPE_CHECKING:  # annotations only
    from geogp.models.afs.regressor import AFSRegressor

__all__ = ["AdaptiveWindowFit", "MAX_REFITS", "SUM_SPREAD", "ROBUST_STEPS",
           "ROBUST_REFIT_AFTER", "ROBUST_TEMPER_FOLDS"]

MAX_REFITS = 3  # at most this many refits on a wider window (alias_tol)
SUM_SPREAD = 9.0  # a sum's parts start at the pilot lengthscale ×/÷ 3 (two parts)
# robust=True: EM steps (one data pass and posterior each), and after how many θ is fitted
# again (as the lattice model's)
ROBUST_STEPS = 5
ROBUST_REFIT_AFTER = 4
# ... and, on a raster, the gap-shaped folds its predictive's temperature is fitted on after
# the refit (one data pass and posterior each; 0: no temperature), as the lattice model's
ROBUST_TEMPER_FOLDS = 2


class AdaptiveWindowFit:
    """The fit procedure of :class:`~geogp.models.afs.AFSRegressor` (its base class; module
    docstring): features on an adaptive window, statistics, θ, posterior."""

    # ------------------------------------------------------------------ the window's features
    def _features(self, center, width, choose: bool = True) -> FourierFeatures:
        if self.n_freq is not None:
            ff = FourierFeatures.build(center, width, self.n_freq, self.lattice,
                                       max_bytes=np.inf)
        else:
            M = auto_features(self._n_obs) if self.n_features == "auto" else int(self.n_features)
            check_budget(M, len(np.atleast_1d(width)), self.max_bytes)
            ff = FourierFeatures.for_budget(center, width, M, self.lattice,
                                            max_bytes=np.inf)
        if choose:
            self.solver_ = choose_solver(ff, self)
        return ff

    def _window(self, lo, hi):
        return window(lo, hi, self.window_factor, self.margin)

    def _init_params(self, d):
        check_positive(self.noise, "noise")
        kern = make_kernel(self.kernel, d, self.lengthscale, self.variance)
        return {"kernel": kern, "noise": jnp.asarray(float(self.noise))}

    def _iterative_options(self) -> IterativeOptions:
        return IterativeOptions(tol=float(self.cg_tol))

    def _probes(self):
        return rademacher_probes(self.features_.n_features, int(self.n_probes), int(self.seed))

    def _optimise(self, params, first: bool):
        """θ by L-BFGS on the bound of the current statistics; returns (params, FitReport)."""
        stats = self.stats_
        n = float(stats.n)
        probes = self._probes() if stats.matrix_free else None
        loss, args = loss_and_args(self.features_, stats, params["kernel"],
                                   self._iterative_options(), probes)
        if not self.optimize:
            return params, FitReport(float(loss(params, *args)) * n, 0, 1, True,
                                     "not optimised", 0.0)
        if first and stats.matrix_free and int(self.warm_start) > 0:
            params, self.warm_report_ = warm_start(params, stats, self.features_,
                                                   int(self.warm_start), self.maxiter)
        params, report = minimize_lbfgs(loss, params, args=args, unconstrained=("mean",),
                                        maxiter=self.maxiter, progress=self.progress)
        report.objective *= n
        report.history = [h * n for h in report.history]
        return params, report

    def _build(self, center, width, make_stats) -> None:
        """Features on the window (center, width) and their statistics (one data pass)."""
        self.features_ = self._features(center, width)
        t0 = time.perf_counter()
        self.stats_ = make_stats(self.features_)
        self.stats_time_s_ += time.perf_counter() - t0

    def _pilot(self, params):
        """Data-driven start of a kernel sum named by a string: the sum's first part fitted
        alone on the current statistics, then every part at its lengthscale spread by
        ``SUM_SPREAD`` (ℓ/3 and 3ℓ for two parts) with its variance split evenly. Returns
        (params, report or None); None when the kernel is not such a sum or θ is not learnt.
        """
        if not (self.optimize and isinstance(self.kernel, str) and "+" in self.kernel):
            return params, None
        d = self.features_.n_dims
        first = self.kernel.split("+")[0]
        single = dict(params, kernel=make_kernel(first, d, self.lengthscale, self.variance))
        low = None
        if self.stats_.matrix_free and int(self.warm_start) > 0:  # dense low block: cheap
            single, low = warm_start(single, self.stats_, self.features_,
                                     int(self.warm_start), self.maxiter)
        report = None  # a bound over the lowest frequencies only: not part of the history
        if low is None:
            announce_fit(self.progress, f"pilot fit of {first} alone")
            single, report = self._optimise(single, first=False)
            announce_fit(self.progress, f"fitting {self.kernel}",
                         f"the pilot fit of {first} alone gave the sum's start; fitting the sum")
        k = single["kernel"]
        kern = make_kernel(self.kernel, d, np.asarray(k.lengthscale), float(k.variance),
                           spread=SUM_SPREAD, centred=True)
        return dict(single, kernel=kern), report

    def _learn(self, lo, hi, make_stats, noise_projection=None,
               fixed_width=None) -> AFSRegressor:
        """Window, features, statistics (``make_stats(ff)``), θ by L-BFGS, then the posterior.

        The window (:func:`~geogp.models.afs.diagnostics.balanced_width`) starts at
        ``window_factor``/``margin`` for a single kernel, and at what the initial θ needs when
        θ is not learnt or the kernel is a sum (whose long part could otherwise vanish, aliased,
        before the window adapts; a sum named by a string first gets a data-driven start,
        :meth:`_pilot`). While the learnt θ's alias error exceeds ``REFIT_FACTOR``·max(
        ``alias_tol``, truncation), the statistics are recomputed on the window it needs and
        θ refitted from where it stopped (at most ``MAX_REFITS`` times). ``fixed_width`` (the
        Lemma 3.1 grid window) turns this off. ``noise_projection(S, rng)`` gives Φη for the
        iterative posterior's samples (the only data access after the statistics).
        """
        tol = self._alias_tol()
        center, base = self._window(lo, hi)
        extent = hi - lo
        adapt = fixed_width is None and tol is not None
        width = base if fixed_width is None else np.asarray(fixed_width)
        self.stats_time_s_ = 0.0
        self._build(center, width, make_stats)
        params = self._init_params(lo.size)
        if self.powers_ is not None:
            params["mean"] = jnp.asarray(ols(self.stats_))
        params, pilot_report = self._pilot(params)

        def window(kernel, growth=1.0):  # the window this kernel needs, from the current one
            return balanced_width(width, extent, kernel, tol,
                                  lambda w: self._features(center, w, choose=False), growth,
                                  self.lattice)

        if adapt and (not self.optimize or hasattr(params["kernel"], "parts")):
            start = window(params["kernel"])
            if np.any(start > width * (1 + 1e-9)):
                width = start
                self._build(center, width, make_stats)
        widths, reports = [], [] if pilot_report is None else [pilot_report]
        while True:
            params, report = self._optimise(params, first=not widths)
            widths.append(width)
            reports.append(report)
            if not (adapt and self.optimize) or len(widths) > MAX_REFITS:
                break
            kern = params["kernel"]
            floor = max(tol, truncation(self.features_, kern))
            if alias_error(kern, width, extent, self.lattice) <= REFIT_FACTOR * floor:
                break
            new = window(kern, REFIT_GROWTH)
            if np.all(new <= width * (1 + 1e-9)):
                break  # capped, or truncation-limited: the diagnostics say which
            announce_fit(self.progress, f"refit {len(widths)} on a wider window",
                         refit_reason(len(widths), MAX_REFITS, width, new, extent),
                         "statistics + compile")
            width = new
            self._build(center, width, make_stats)
        self.kernel_, self.noise_ = params["kernel"], float(params["noise"])
        self.beta_ = np.asarray(params["mean"]) if "mean" in params else None
        self.report_ = merge_reports(reports, len(widths) - 1)
        self.window_widths_ = [np.asarray(w) for w in widths]
        self.diagnostics_ = diagnostics(self.features_, self.kernel_, self.noise_, extent)
        self.diagnostics_["window_refits"] = len(widths) - 1
        if not getattr(self, "robust", False):  # a robust fit warns after its EM
            warn_if_poor(self.diagnostics_, stacklevel=3)
        start_phase(self.progress, "posterior", [f"{self.features_.n_features} features"])
        self._set_posterior(noise_projection)
        advance(self.progress)
        return self

    def _set_posterior(self, noise_projection=None) -> None:
        """``posterior_`` at the fitted θ on the current statistics."""
        ff = self.features_
        if self.stats_.matrix_free:
            self.posterior_ = iterative_posterior(
                log_lambda(ff, self.kernel_), self.noise_, self.kernel_.variance_at_zero,
                self.detrended_stats(), noise_projection, int(self.n_samples), int(self.seed),
                IterativeOptions(tol=float(self.cg_tol) / 100))
        else:
            self.posterior_ = posterior(log_lambda(ff, self.kernel_), self.noise_,
                                        self.kernel_.variance_at_zero, self.detrended_stats())

    def _reweight(self, ys: np.ndarray, classes: np.ndarray, make_stats: Callable,
                  projection: Callable, predict_observed: Callable, relearn: Callable,
                  temperature: Callable[[Contamination], float] | None = None) -> None:
        """``robust``: the EM of :mod:`geogp.core.robust` from the plain fit. Each step reads
        the data once more into weighted statistics (``make_stats(ff, weights, targets)``)
        and takes the posterior on the same features; after :data:`ROBUST_REFIT_AFTER` steps
        the whole fit runs again on the weighted data (``relearn(make_stats, projection)``:
        window, θ, posterior). ``predict_observed()``: the posterior's (mean, latent variance)
        at the observations, standardised; ``projection(weights)``: the iterative posterior's
        noise projection with those weights. ``temperature(em)``: after the refit's step, the
        factor (≥ 1) every sd must grow by (gap-shaped folds; rasters only): from the next
        step's posterior on, the kernel's variance and the noise grow by its square, which
        moves no mean (``temperature_``); that step's E-step reads the untempered one."""
        announce_fit(self.progress, "robust refit", (
            f"robust: {ROBUST_STEPS} reweighting steps (one data pass and posterior each), "
            f"the fit run again on the weighted data after {ROBUST_REFIT_AFTER}"),
            "statistics + compile")
        em = Contamination.start(ys)
        plain_report, seconds = self.report_, self.stats_time_s_
        factor = None  # the temperature, applied after the next E-step (as the lattice's)
        for step in range(ROBUST_STEPS):
            mean, var = predict_observed()
            em.step(mean, var, ys, self.noise_, classes)
            if factor is not None:  # this step's posterior is the tempered one
                self._temper(factor)
                factor = None

            def weighted(ff, w=em.weight, t=em.target):
                return make_stats(ff, w, t)

            if step + 1 == ROBUST_REFIT_AFTER and self.optimize:
                relearn(weighted, projection(em.weight))  # resets the time and the report
                seconds += self.stats_time_s_
                self.report_ = merge_reports([plain_report, self.report_], 0)
            else:
                t0 = time.perf_counter()
                self.stats_ = weighted(self.features_)
                seconds += time.perf_counter() - t0
                self._set_posterior(projection(em.weight))
            if step + 1 == ROBUST_REFIT_AFTER < ROBUST_STEPS and temperature is not None:
                factor = temperature(em)
        self.stats_time_s_ = seconds  # every data pass, the plain fit's included
        self.obs_weight_, self.contamination_ = em.weight, em
        warn_if_poor(self.diagnostics_, stacklevel=4)

    def _temper(self, factor: float) -> None:
        """Every variance of the model (the kernel's, the noise) times ``factor``²: the
        posterior taken next (``_set_posterior``, from the same statistics) has the same
        mean and every variance times ``factor``²."""
        self.temperature_ = float(factor)
        if factor != 1.0:
            self.kernel_ = self.kernel_.scaled(factor**2)
            self.noise_ = self.noise_ * factor**2

    def _alias_tol(self):
        tol = self.alias_tol
        if tol is None:
            return None
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 < tol < 1:
            raise InputError(f"alias_tol must be None or a number in (0, 1); got {tol!r}.")
        return float(tol)

    def detrended_stats(self) -> Any:
        """The sufficient statistics of the data less the fitted trend (the data's own
        without one)."""
        if self.beta_ is None:
            return self.stats_
        return residual_stats(self.stats_, jnp.asarray(self.beta_))
