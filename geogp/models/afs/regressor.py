"""The AFS variational GP estimator: statistics once, then L-BFGS on θ at no cost in N.

Data flow (docs/bound.md, docs/afs.md): inputs → standardise → window and :class:`FourierFeatures` →
:class:`SufficientStats` (once) → ``collapsed_bound(θ, stats)`` → L-BFGS → :class:`Posterior`
→ predictions at points (NUFFT) or on grids (separable transforms), never an (N* × M) matrix.

This module holds the estimator: its settings, the data preparation (``fit``, ``fit_grid``) and
the results; the fit procedure after the data are standardised (adaptive window, pilot fit of a
kernel sum, refits) is its base class :class:`~geogp.models.afs.fitting.AdaptiveWindowFit`.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from geogp.core.calibration import fold_temperature
from geogp.core.robust import gap_distance_class
from geogp.core.trend import monomial_powers
from geogp.core.validation import as_points, as_targets, check_same_length, warn_if_lonlat
from geogp.exceptions import InputError
from geogp.features.afs_dft import log_lambda as _log_lambda
from geogp.features.data import Grid, Points
from geogp.features.fourier import DEFAULT_WIDTH_FACTOR
from geogp.features.fourier_statistics import (
    DEFAULT_CHUNK_BYTES,
    grid_noise_projection,
    points_noise_projection,
)
from geogp.models.afs import fitting as afs_fitting
from geogp.models.afs import predict as afs_predict
from geogp.models.afs import sampling as afs_sampling
from geogp.models.afs.derived import Derived
from geogp.models.afs.diagnostics import ALIAS_TOL
from geogp.models.afs.fitting import AdaptiveWindowFit
from geogp.models.afs.grid import grid_standardizer
from geogp.models.afs.policy import dense_block_size
from geogp.models.base import Prediction, Standardizer, check_columns, check_fitted
from geogp.models.collapsed import collapsed_bound, trace_term
from geogp.models.collapsed_iterative import iterative_bound

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.core.kernels import Kernel

__all__ = ["AFSRegressor"]


def _on_cells(obs: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` (one per observed cell, row-major) on the raster ``obs``; NaN elsewhere."""
    out = np.full(obs.shape, np.nan)
    out[obs] = values
    return out


class AFSRegressor(AdaptiveWindowFit):
    """Precomputable approximate-Fourier-series variational GP (docs/bound.md, docs/afs.md).

    Args:
        kernel: ``"matern32"`` (default), ``"se"``, ``"matern12"``, ``"matern52"``, sums such as
            ``"matern12+matern32"``, or a Kernel (initial parameters, standardised units). A
            kernel without a spectral density (``ProductKernel``) uses AFS-DFT λ and needs
            ``lattice="full"`` (docs/afs.md, AFS-DFT). A sum named by a string starts from a
            pilot fit of its first part alone (same statistics): the parts start at the
            pilot's lengthscale ÷3 and ×3 with its variance split, so that they start at
            separated, data-driven scales; a Kernel object keeps its own initial values.
        n_features: target number of features M (the realised M is ``features_.n_features``),
            or ``"auto"``: M = N_obs/8 clipped to [2,000, 10,000] (:func:`auto_features`).
        n_freq: explicit K_d per dimension (overrides ``n_features``).
        lattice: ``"odd"`` (default) or ``"full"``.
        window_factor: the window is at least W_d = window_factor · W_xd (default 1/0.95,
            docs/afs.md (window)) plus ``margin``.
        margin: extra window width on each side, in units of the data's extent (e.g. 0.1).
        alias_tol: the window widens beyond ``window_factor``/``margin`` until the kernel
            has decayed to ``alias_tol``·k(0) between the data's farthest points and their
            nearest alias: W_d ≥ W_xd + a few lengthscales (SE 3.0ℓ, Matérn-1/2 4.6ℓ at the
            default 0.01), at most 3·W_xd, and no further than where the alias error meets the
            truncation error (at fixed ``n_features`` a wider window lowers the bandwidth).
            The fit starts on ``window_factor``/``margin``; when the learnt θ needs a wider
            window the statistics are recomputed on it and θ refitted from where it stopped
            (at most 3 times; kernel sums and ``optimize=False`` start on the window their
            initial θ needs). ``None``: the window is exactly ``window_factor``/``margin``
            (the thesis default W_x/0.95 shortens lengthscales that are not ≪ W_x:
            :mod:`geogp.models.afs.diagnostics`).
        lengthscale: initial lengthscale in standardised units (default 0.2: docs/model.md).
        variance: initial signal variance σ_f² in standardised units (default 1).
        noise: initial noise variance σ² in standardised units (default 1).
        mean: mean function, None (zero on the standardised scale: the data's mean),
            ``"constant"``, ``"linear"`` or ``"quadratic"`` trend in the coordinates, learnt
            jointly with θ (:mod:`geogp.core.trend`).
        grid_mode: ``"exact"`` (default) uses the statistics of the observed cells on the
            window above. ``"diagonal"`` is the Lemma 3.1 fast path for
            *complete* rasters (G = N·I, O(M) per optimiser step, docs/afs.md (gridded
            data)): it needs the window W_d = N_d η_d, one cell wider than the data, so the
            odd lattice's negative alias makes opposite edges strongly anti-correlated
            (docs/afs.md (gridded data, pitfall)).
            Measured on non-periodic synthetic rasters, it biases the learnt lengthscale
            (downwards, more so as M grows); use it for periodic fields, or for speed when
            the bias is acceptable (``alias_tol`` does not apply; the aliasing diagnostic warns).
            Rasters with gaps always use the exact route.
        stats_method: scattered points: ``"auto"`` (NUFFT above 2,000 points), ``"nufft"``,
            ``"dense"``.
        optimize: learn θ by L-BFGS (else keep the initial values).
        maxiter: L-BFGS iterations. chunk_bytes: memory bound of one statistics chunk.
        max_bytes: refuse models whose working memory would exceed this (estimated first:
            8M² bytes for the dense solver, the FFT lattices for the iterative one).
        solver: ``"dense"`` (Cholesky of the M × M matrix: O(M³) per step, exact),
            ``"iterative"`` (matrix-free, :mod:`geogp.models.collapsed_iterative`: G as an FFT
            operator, preconditioned CG, stochastic Lanczos log-determinant; O(M log M) per
            product, for M = 10⁴–10⁵) or ``"auto"`` (iterative above 4,096 features).
        n_probes: Rademacher probes of the iterative log-determinant and its gradient.
        n_samples: posterior samples behind the iterative predictive variance.
        cg_tol: relative CG residual while learning θ (the posterior solves use cg_tol/100).
        dense_block: the iterative solver's preconditioner keeps the block of A over this
            many lowest frequencies dense (Cholesky, O(dense_block³) per step); ``"auto"``
            (default): M/10 clipped to [1024, 2048], the fastest measured per step at
            M = 10⁴ (1024) and M ≥ 3·10⁴ (2048, half the CG iterations); the rest is
            Jacobi. Larger blocks mean fewer CG iterations.
        warm_start: the iterative solver first fits θ on the dense bound of this many lowest
            frequencies (a sub-block of the preconditioner's statistics: no extra data pass,
            O(warm_start³) per step), then refines it on the full bound; 0 starts from the
            initial values.
        robust: fit a noise model with gross errors (:mod:`geogp.core.robust`: each
            observation is, with a learnt probability, off by an error of its own), by EM from
            the plain fit: :data:`~geogp.models.afs.fitting.ROBUST_STEPS` reweighting steps,
            each one weighted data pass into the statistics (noise σ²/w_i) and a posterior, θ
            fitted again after :data:`~geogp.models.afs.fitting.ROBUST_REFIT_AFTER` of them.
            Gross errors get weights near 0 (:meth:`observation_weight`, :meth:`gross_errors`).
            On a raster the probability depends on the distance to the nearest gap, as on the
            lattice model.
        seed: of the probes and samples.
        progress: optional callback ``progress(iteration, objective)`` during the fit.

    Attributes:
        features_: the Fourier feature set (:class:`~geogp.features.fourier.FourierFeatures`).
        stats_: the sufficient statistics read once from the data.
        kernel_: the fitted kernel (standardised units).
        noise_: the fitted noise variance (standardised units).
        posterior_: the optimal q(u) at the fitted θ.
        report_: the optimiser's :class:`~geogp.core.optimize.FitReport`.
        scaler_: the :class:`~geogp.models.base.Standardizer` of inputs and outputs.
        beta_: mean-function coefficients (standardised units), or None.
        powers_: the mean function's monomial exponents.
        stats_time_s_: seconds spent reading the data into statistics.
        solver_: ``"dense"`` or ``"iterative"`` (the route taken).
        window_widths_: the window widths fitted in turn (standardised units; more than one
            when the learnt θ needed a wider window).
        diagnostics_: the approximation's diagnostics at the fitted θ (dict: ``alias``,
            ``alias_self``, ``truncation``, ``truncation_to_noise``, ``spectral_edge``,
            ``lengthscale_ratio``, ``part_share``, ``window_factor``, ``n_features``,
            ``window_refits``; :mod:`geogp.models.afs.diagnostics`). Poor values raise an
            :class:`~geogp.exceptions.ApproximationWarning` (with the numbers and the fix) at
            the end of the fit.
        obs_weight_: with ``robust``, (N,) each observation's weight (the fit's order; on a
            raster its observed cells, row-major), else None. contamination_: with
            ``robust``, the gross-error model (:class:`~geogp.core.robust.Contamination`,
            standardised units), else None.
    """

    def __init__(self, kernel: str | Kernel = "matern32", *, n_features: int | str = 1000,
                 n_freq: int | Sequence[int] | None = None, lattice: str = "odd",
                 window_factor: float = DEFAULT_WIDTH_FACTOR, margin: float = 0.0,
                 alias_tol: float | None = ALIAS_TOL,
                 lengthscale: ArrayLike = 0.2, variance: float = 1.0, noise: float = 1.0,
                 mean: str | None = None, grid_mode: str = "exact",
                 stats_method: str = "auto", optimize: bool = True, maxiter: int = 300,
                 chunk_bytes: float = DEFAULT_CHUNK_BYTES, max_bytes: float = 4 * 2**30,
                 solver: str = "auto", n_probes: int = 8,
                 n_samples: int = 64, cg_tol: float = 1e-4, dense_block: int | str = "auto",
                 warm_start: int = 1024, robust: bool = False,
                 seed: int = 0, progress: Callable[[int, float], object] | None = None) -> None:
        self.kernel = kernel
        self.n_features = n_features
        self.n_freq = n_freq
        self.lattice = lattice
        self.window_factor = window_factor
        self.margin = margin
        self.alias_tol = alias_tol
        self.lengthscale = lengthscale
        self.variance = variance
        self.noise = noise
        self.mean = mean
        self.grid_mode = grid_mode
        self.stats_method = stats_method
        self.optimize = optimize
        self.maxiter = maxiter
        self.chunk_bytes = chunk_bytes
        self.max_bytes = max_bytes
        self.solver = solver
        self.n_probes = n_probes
        self.n_samples = n_samples
        self.cg_tol = cg_tol
        self.dense_block = dense_block
        self.warm_start = warm_start
        self.robust = robust
        self.seed = seed
        self.progress = progress
        self._derived: Derived | None = None

    def derived(self) -> Derived:
        """What predictions derive from ``posterior_`` (the trend's parts, the matrix-free
        variance's bins), computed on first use and renewed when the posterior changes."""
        if self._derived is None or self._derived.posterior is not self.posterior_:
            self._derived = Derived(self.posterior_)
        return self._derived

    # ------------------------------------------------------------------ fitting
    def fit(self, X: ArrayLike, y: ArrayLike) -> AFSRegressor:
        """Fit on scattered points X (N, D), y (N,). Returns self."""
        X_in, X = X, as_points(X)
        warn_if_lonlat(X_in, X, "AFSRegressor")
        y = as_targets(y)
        check_same_length(X, y)
        self._check_counts(X.shape[0], X.shape[1])
        self._n_obs = X.shape[0]
        self.scaler_ = Standardizer.from_data(X, y)
        Xs, ys = self.scaler_.x(X), self.scaler_.y(y)
        self.powers_ = monomial_powers(self.mean, X.shape[1])
        method = self.stats_method
        if method == "auto":
            method = "nufft" if X.shape[0] > 2000 else "dense"
        if method not in ("nufft", "dense"):
            raise InputError(f"stats_method must be 'auto', 'dense' or 'nufft'; got {method!r}.")

        def make_stats(ff, weights=None, targets=None):
            dense = method == "dense" and self.solver_ == "dense"
            return ff.statistics(Points(Xs, ys if targets is None else targets),
                                 method="dense" if dense else "nufft",
                                 powers=self.powers_, chunk_bytes=self.chunk_bytes,
                                 gram="operator" if self.solver_ == "iterative" else "dense",
                                 dense_block=dense_block_size(self.dense_block, ff.n_features),
                                 weights=weights)

        def projection(weights=None):
            return lambda S, rng: points_noise_projection(self.features_, Xs, S, rng, weights)

        def learn(stats, proj):
            return self._learn(Xs.min(axis=0), Xs.max(axis=0), stats, proj)

        self._robust_fields(None)
        learn(make_stats, projection())
        if self.robust:
            self._reweight(ys, np.zeros(ys.size, dtype=np.int64), make_stats, projection,
                           lambda: afs_predict.at_points(self, Xs), learn)
            self._fitted_points = X
        return self

    def fit_grid(self, axes: Sequence[ArrayLike], values: ArrayLike) -> AFSRegressor:
        """Fit on a regular grid: ``values`` (N_1, ..., N_D) with NaN = missing, axis coordinates.

        Complete grids use G = N·I when Lemma 3.1 holds and ``grid_mode='diagonal'``; others use
        the exact statistics of the observed cells from separable transforms (docs/afs.md,
        gridded data).
        """
        axes = [np.asarray(a, dtype=np.float64) for a in axes]
        shape = tuple(int(s) for s in values.shape)
        self.scaler_, n_obs, eta = grid_standardizer(axes, values)
        self._check_counts(n_obs, len(axes))
        self._n_obs = n_obs
        x_mean, x_std, y_mean, y_std = (self.scaler_.x_mean, self.scaler_.x_scale,
                                        self.scaler_.y_mean, self.scaler_.y_scale)
        saxes = [(a - m) / s for a, m, s in zip(axes, x_mean, x_std, strict=True)]
        seta = eta / x_std
        lo = np.array([a.min() for a in saxes])
        hi = np.array([a.max() for a in saxes])
        complete = n_obs == int(np.prod(shape))
        diagonal = None
        if self.grid_mode not in ("exact", "diagonal"):
            raise InputError(f"grid_mode must be 'exact' or 'diagonal'; got {self.grid_mode!r}.")
        if complete and self.grid_mode == "diagonal" and self.lattice == "odd":
            # Lemma 3.1 mode: W_d = N_d η_d exactly, centred on the grid cells
            width = np.array(shape) * seta
            n_freq = self._features((lo + hi) / 2, width).n_freq
            if all(2 * k <= n for k, n in zip(n_freq, shape, strict=True)):
                diagonal = width
        if self.grid_mode == "diagonal" and diagonal is None:
            warnings.warn("grid_mode='diagonal' needs a complete raster, the odd lattice and "
                          "2K_d ≤ N_d (Lemma 3.1); using the exact route instead.", stacklevel=2)
        values_std = (values - y_mean) / y_std  # lazy for dask
        self.powers_ = monomial_powers(self.mean, len(axes))

        if self.robust:  # the EM reads the observed cells at every step: held in memory
            values_std = np.asarray(values_std, dtype=np.float64)
            if diagonal is not None:
                raise InputError("robust=True needs grid_mode='exact' (the weights make G "
                                 "differ from N·I).")
        obs = np.isfinite(values_std) if self.robust else None

        def make_stats(ff, weights=None, targets=None):
            if diagonal is not None:
                self.solver_ = "dense"  # G = N·I: O(M) per step, nothing to iterate
            return ff.statistics(Grid(tuple(saxes), values_std if targets is None
                                      else _on_cells(obs, targets)),
                                 diagonal=diagonal is not None, powers=self.powers_,
                                 chunk_bytes=self.chunk_bytes,
                                 gram="operator" if self.solver_ == "iterative" else "dense",
                                 dense_block=dense_block_size(self.dense_block, ff.n_features),
                                 weights=None if weights is None else _on_cells(obs, weights))

        chunk = self.chunk_bytes

        def projection(weights=None, seen=values):  # seen: the raster, NaN where unobserved
            cells = None if weights is None else _on_cells(obs, weights)
            return lambda S, rng: grid_noise_projection(self.features_, saxes, seen, S, rng,
                                                        chunk, cells)

        def learn(stats, proj):
            return self._learn(lo, hi, stats, proj, fixed_width=diagonal)

        def at_cells():
            mean, var = afs_predict.on_grid(self, saxes, "raise")
            return mean[obs], var[obs]

        def temperature(em) -> float:
            """The factor the sds need for 95 % of the clean observed values hidden under
            the raster's own gap shapes (``ROBUST_TEMPER_FOLDS`` folds) to fall in their
            intervals, at the current θ and weights (each fold's posterior from its own data
            pass; :func:`~geogp.core.calibration.fold_temperature`)."""
            def errors(hidden: np.ndarray) -> np.ndarray:
                kept = ~hidden[obs]
                part = copy.copy(self)
                part.stats_ = make_stats(self.features_, em.weight,
                                         np.where(kept, em.target, np.nan))
                part._set_posterior(projection(em.weight, np.where(hidden, np.nan, values)))
                mean, var = afs_predict.on_grid(part, saxes, "raise")
                sd = np.sqrt(var[hidden] + part.noise_)
                clean = em.clean[~kept] > 0.5  # gross errors would widen it for the wrong reason
                return ((values_std[hidden] - mean[hidden]) / sd)[clean]

            return fold_temperature(obs, afs_fitting.ROBUST_TEMPER_FOLDS, errors)

        self._robust_fields(None)
        learn(make_stats, projection())
        if self.robust:
            self._reweight(values_std[obs], gap_distance_class(obs), make_stats, projection,
                           at_cells, learn, temperature)
            self._fitted_cells = (axes, obs)
        return self

    def _robust_fields(self, value) -> None:
        """Reset what a robust fit sets (a plain refit of the same estimator has none)."""
        self.obs_weight_ = self.contamination_ = value
        self._fitted_points = self._fitted_cells = value
        self.temperature_ = 1.0

    def observation_weight(self, points: ArrayLike) -> np.ndarray:
        """(P,) the weight a ``robust`` fit gave the observation at each of ``points`` (P, D),
        the user's coordinates (near 0: a gross error): on a raster the cell holding each
        point (NaN off the raster or where nothing was observed), for scattered data the
        observation at that very point (NaN where there was none)."""
        check_fitted(self, "posterior_")
        if getattr(self, "obs_weight_", None) is None:
            raise InputError("observation_weight() needs a fit with robust=True (a plain fit "
                             "gives every observation the weight 1); model files keep the "
                             "posterior, not the weights.")
        pts = as_points(points, "points")
        check_columns(pts, self.scaler_.x_mean.size, "points")
        out = np.full(pts.shape[0], np.nan)
        if self._fitted_cells is not None:
            axes, obs = self._fitted_cells
            weight = _on_cells(obs, self.obs_weight_)
            idx, inside = [], np.ones(pts.shape[0], dtype=bool)
            for d, a in enumerate(axes):
                step = float(a[1] - a[0]) if a.size > 1 else 1.0
                k = np.rint((pts[:, d] - a[0]) / step).astype(np.int64)
                inside &= (k >= 0) & (k < a.size)
                idx.append(np.clip(k, 0, a.size - 1))
            out[inside] = weight[tuple(k[inside] for k in idx)]
            return out
        from scipy.spatial import cKDTree  # noqa: PLC0415 - scattered fits only

        dist, at = cKDTree(self._fitted_points).query(pts)
        hit = dist <= 1e-9 * (1.0 + np.abs(pts).max(axis=1))
        out[hit] = self.obs_weight_[at[hit]]
        return out

    def gross_errors(self) -> dict:
        """The fitted gross-error model in data units (``robust=True``): ``prior`` (the
        probability per distance class to the nearest gap; scattered points use the first
        only), ``shift`` and ``sd`` of the gross errors, and ``flagged``, the observations
        more likely gross errors than not, and ``temperature``, the factor the sds were
        widened by (gap-shaped folds of a raster; 1 on scattered points)."""
        check_fitted(self, "posterior_")
        em = getattr(self, "contamination_", None)
        if em is None:
            raise InputError("gross_errors() needs a fit with robust=True; model files keep "
                             "the posterior, not the gross-error model.")
        return {"prior": np.asarray(em.prior), "shift": em.shift * self.scaler_.y_scale,
                "sd": float(np.sqrt(em.var)) * self.scaler_.y_scale,
                "flagged": int(np.sum(em.clean < 0.5)), "temperature": self.temperature_}

    @staticmethod
    def _check_counts(n, d):
        n_params = d + 2
        if n <= n_params:
            raise InputError(
                f"only {n} observation(s) for {n_params} hyperparameters; a GP fit needs more "
                "observed points than parameters."
            )

    # ------------------------------------------------------------------ results
    def bound(self) -> float:
        """The collapsed bound L'' at the fitted parameters (standardised scale)."""
        ll = _log_lambda(self.features_, self.kernel_)
        if self.stats_.matrix_free:  # a stochastic estimate (fixed probes), see solver docs
            return float(iterative_bound(ll, self.noise_, self.kernel_.variance_at_zero,
                                         self.detrended_stats(), self._probes(),
                                         self._iterative_options()))
        return float(collapsed_bound(ll, self.noise_, self.kernel_.variance_at_zero,
                                     self.detrended_stats()))

    def trace_diagnostic(self) -> float:
        """t = N k(0) − Σ λ_m G_mm at the fitted parameters (0 would mean M saturates; Σw for
        N after a robust fit)."""
        ll = _log_lambda(self.features_, self.kernel_)
        return float(trace_term(ll, self.kernel_.variance_at_zero, self.stats_))

    @property
    def lengthscale_(self) -> list[np.ndarray]:
        """Lengthscales in the user's units (ℓ_d · x_scale_d), one array per kernel part."""
        parts = getattr(self.kernel_, "parts", (self.kernel_,))
        return [np.broadcast_to(np.asarray(p.lengthscale), self.scaler_.x_scale.shape)
                * self.scaler_.x_scale for p in parts]

    @property
    def noise_variance_(self) -> float:
        return self.noise_ * self.scaler_.y_scale**2

    def predict(self, X: ArrayLike, outside: str = "raise") -> Prediction:
        """Predictive mean and variances at X (N*, D) on the original scale.

        Points outside the feature window raise (``outside='raise'``) or get NaN
        (``outside='nan'``). Cost O(M² + N*) via NUFFT (O(N* M²) below 2,048 points).
        """
        check_fitted(self, "posterior_")
        X = as_points(X, "X (prediction points)")
        check_columns(X, self.scaler_.x_mean.size)
        Xs = self.scaler_.x(X)
        inside = self.features_.check_inside(Xs, outside, self.scaler_)
        mean = np.full(X.shape[0], np.nan)
        var = np.full(X.shape[0], np.nan)
        if inside.any():
            mean[inside], var[inside] = afs_predict.at_points(self, Xs[inside])
        return self.scaler_.unscale(mean, var, self.noise_)

    def sample(self, X: ArrayLike, n: int, seed: int | np.random.SeedSequence | None = None,
               observed: bool = False) -> np.ndarray:
        """``n`` posterior samples at X (N*, D), data units, (n, N*): draws of q(u) pushed
        through the features (:mod:`geogp.models.afs.sampling`). ``observed`` adds the noise
        of a new observation. Points outside the window raise."""
        check_fitted(self, "posterior_")
        X = as_points(X, "X (sample points)")
        check_columns(X, self.scaler_.x_mean.size, "X (sample points)")
        Xs = self.scaler_.x(X)
        self.features_.check_inside(Xs, "raise", self.scaler_)
        return afs_sampling.sample_points(self, Xs, n, np.random.default_rng(seed), observed)

    def sample_grid(self, axes: Sequence[ArrayLike], n: int,
                    seed: int | np.random.SeedSequence | None = None,
                    observed: bool = False) -> np.ndarray:
        """``n`` posterior samples on the tensor grid ``axes`` (D vectors), data units,
        (n, N_1, …, N_D); one separable grid transform per sample."""
        check_fitted(self, "posterior_")
        if len(axes) != self.scaler_.x_mean.size:
            raise InputError(f"expected {self.scaler_.x_mean.size} coordinate vector(s); got "
                             f"{len(axes)}.")
        saxes = [(np.asarray(a, dtype=np.float64).ravel() - m) / s
                 for a, m, s in zip(axes, self.scaler_.x_mean, self.scaler_.x_scale, strict=True)]
        self.features_.check_inside(np.array([[a.min() for a in saxes],
                                              [a.max() for a in saxes]]), "raise", self.scaler_)
        return afs_sampling.sample_grid(self, saxes, n, np.random.default_rng(seed), observed)

    def predict_grid(self, axes: Sequence[ArrayLike], outside: str = "raise") -> Prediction:
        """Predictions on the tensor grid ``axes`` (D vectors); arrays of shape (N_1, ..., N_D).

        Cost O(M² + N·P) through separable transforms: no (N* × M) matrix is formed.
        """
        check_fitted(self, "posterior_")
        if len(axes) != self.scaler_.x_mean.size:
            raise InputError(f"expected {self.scaler_.x_mean.size} coordinate vector(s), one per "
                             f"input dimension; got {len(axes)}.")
        axes = [np.asarray(a, dtype=np.float64) for a in axes]
        saxes = [(a - m) / s
                 for a, m, s in zip(axes, self.scaler_.x_mean, self.scaler_.x_scale, strict=True)]
        mean, var = afs_predict.on_grid(self, saxes, outside)
        return self.scaler_.unscale(mean, var, self.noise_)
