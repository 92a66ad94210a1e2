"""The AFS variational GP estimator: statistics once, then L-BFGS on θ at no cost in N.

Data flow (docs/bound.md, docs/afs.md): inputs → standardise → window and :class:`FourierFeatures` →
:class:`SufficientStats` (once) → ``collapsed_bound(θ, stats)`` → L-BFGS → :class:`Posterior`
→ predictions at points (NUFFT) or on grids (separable transforms), never an (N* × M) matrix.
"""

from __future__ import annotations

import time
import warnings

import jax.numpy as jnp
import numpy as np

from geogp._validation import as_points, as_targets, check_positive, check_same_length
from geogp.exceptions import AllMissingError, InputError
from geogp.features import trig
from geogp.features.afs_dft import log_lambda as _log_lambda
from geogp.features.fourier import DEFAULT_WIDTH_FACTOR, FourierFeatures
from geogp.optimize import FitReport, minimize_lbfgs
from geogp.kernels import make_kernel
from geogp.models.base import Prediction, Standardizer
from geogp.models.collapsed import collapsed_bound, posterior, trace_term
from geogp.models.afs_objectives import (iterative_loss, negative_bound_per_point,
                                         warm_start)
from geogp.models.collapsed_iterative import (IterativeOptions, IterativePosterior,
                                              iterative_bound, iterative_posterior,
                                              predict_moments, rademacher_probes,
                                              variance_bins)
from geogp.stats import (DEFAULT_CHUNK_BYTES, DEFAULT_DENSE_BLOCK, dense_stats,
                         grid_noise_projection, grid_stats, points_noise_projection, points_stats)
from geogp.trend import basis, basis_grid, monomial_powers, ols, residual_stats

__all__ = ["AFSRegressor", "grid_axes_info", "auto_features"]

_DENSE_PREDICT_MAX = 2048  # below this many points, predict with explicit features
ITERATIVE_ABOVE = 4096  # solver="auto": matrix-free above this many features


def auto_features(n_obs: int) -> int:
    """The ``n_features="auto"`` rule: M = N_obs // 8, clipped to [2,000, 10,000].

    From the satellite cross-validation (``benchmarks/heaton_cv.py``, 95k training cells):
    M = 10,000 (matrix-free) cut the random-fold RMSE from 1.24 to 0.93 and the block-fold
    RMSE from 1.68 to 1.64 against M = 2,000, with fit + full-grid prediction in 48 s on 2
    cores. Small data keep M = 2,000 and the exact dense solver.
    """
    return int(np.clip(int(n_obs) // 8, 2000, 10000))


def grid_axes_info(axes) -> tuple[np.ndarray, np.ndarray]:
    """(first coordinate, spacing) per axis; raises unless each axis is regular and monotone."""
    from geogp.exceptions import IrregularGridError

    x0, eta = [], []
    for d, a in enumerate(axes):
        a = np.asarray(a, dtype=np.float64)
        if a.ndim != 1 or a.size < 2:
            raise InputError(f"grid axis {d} must be a vector with ≥ 2 coordinates; got shape {a.shape}.")
        step = np.diff(a)
        if not np.all(np.isfinite(a)):
            raise IrregularGridError(f"grid axis {d} has NaN/inf coordinates.")
        if np.any(step == 0) or not (np.all(step > 0) or np.all(step < 0)):
            raise IrregularGridError(
                f"grid axis {d} is not strictly monotonic (duplicated or unsorted coordinates); "
                "sort the array along that axis (da.sortby) or drop duplicates."
            )
        if not np.allclose(step, step[0], rtol=1e-6, atol=0):
            raise IrregularGridError(
                f"grid axis {d} is not regularly spaced (spacing from {step.min():.6g} to "
                f"{step.max():.6g}); irregular coordinates are fitted as scattered points."
            )
        x0.append(a[0])
        eta.append(abs(step[0]))
    return np.array(x0), np.array(eta)


class AFSRegressor:
    """Precomputable approximate-Fourier-series variational GP (docs/bound.md, docs/afs.md).

    Args:
        kernel: ``"matern32"`` (default), ``"se"``, ``"matern12"``, ``"matern52"``, sums such as
            ``"matern12+matern32"``, or a Kernel (initial parameters, standardised units). A
            kernel without a spectral density (``ProductKernel``) uses AFS-DFT λ and needs
            ``lattice="full"`` (docs/afs.md, AFS-DFT).
        n_features: target number of features M (the realised M is ``features_.n_features``),
            or ``"auto"``: M = N_obs/8 clipped to [2,000, 10,000] (:func:`auto_features`).
        n_freq: explicit K_d per dimension (overrides ``n_features``).
        lattice: ``"odd"`` (default) or ``"full"``.
        window_factor: W_d = window_factor · W_xd (default 1/0.95, docs/afs.md (window)).
        margin: extra window width on each side, in units of the data's extent (e.g. 0.1).
        lengthscale, variance, noise: initial hyperparameters in standardised units
            (defaults ℓ = 0.2, σ_f² = 1, σ² = 1: docs/model.md).
        mean: mean function, None (zero on the standardised scale: the data's mean),
            ``"constant"``, ``"linear"`` or ``"quadratic"`` trend in the coordinates, learnt
            jointly with θ (:mod:`geogp.trend`).
        grid_mode: ``"exact"`` (default) uses the statistics of the observed cells with the
            window W = W_x·window_factor. ``"diagonal"`` is the Lemma 3.1 fast path for
            *complete* rasters (G = N·I, O(M) per optimiser step, docs/afs.md (gridded data)): it needs the
            window W_d = N_d η_d, one cell wider than the data, so the odd lattice's negative
            alias makes opposite edges strongly anti-correlated (docs/afs.md (gridded data, pitfall)).
            Measured on non-periodic synthetic rasters, it biases the learnt lengthscale
            (downwards, more so as M grows); use it for periodic fields, or for speed when
            the bias is acceptable. Rasters with gaps always use the exact route.
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
        seed: of the probes and samples.
        progress: optional callback ``progress(iteration, objective)`` during the fit.

    Attributes:
        features_, stats_, kernel_ (standardised units), noise_, posterior_, report_, scaler_,
        beta_ (mean-function coefficients, standardised units, or None), powers_ (its
        monomial exponents), stats_time_s_: seconds spent reading the data into statistics,
        solver_: ``"dense"`` or ``"iterative"`` (the route taken).
    """

    def __init__(self, kernel="matern32", *, n_features=1000, n_freq=None, lattice="odd",
                 window_factor=DEFAULT_WIDTH_FACTOR, margin=0.0, lengthscale=0.2, variance=1.0,
                 noise=1.0, mean=None, grid_mode="exact", stats_method="auto", optimize=True, maxiter=300,
                 chunk_bytes=DEFAULT_CHUNK_BYTES, max_bytes=4 * 2**30, solver="auto", n_probes=8,
                 n_samples=64, cg_tol=1e-4, dense_block="auto", warm_start=1024,
                 seed=0, progress=None):
        self.kernel = kernel
        self.n_features = n_features
        self.n_freq = n_freq
        self.lattice = lattice
        self.window_factor = window_factor
        self.margin = margin
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
        self.seed = seed
        self.progress = progress

    # ------------------------------------------------------------------ set-up
    def _features(self, center, width) -> FourierFeatures:
        if self.n_freq is not None:
            ff = FourierFeatures.build(center, width, self.n_freq, self.lattice,
                                       max_bytes=np.inf)
        else:
            M = auto_features(self._n_obs) if self.n_features == "auto" else int(self.n_features)
            ff = FourierFeatures.for_budget(center, width, M, self.lattice,
                                            max_bytes=np.inf)
        self._choose_solver(ff)
        return ff

    def _dense_block(self, M: int) -> int:
        if self.dense_block == "auto":
            return int(np.clip(M // 10, DEFAULT_DENSE_BLOCK, 2 * DEFAULT_DENSE_BLOCK))
        return int(self.dense_block)

    def _check_iterative_options(self) -> None:
        """Refuse settings of the matrix-free solver that would give NaN or garbage."""
        def integer(v):
            return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

        problems = []
        if not (integer(self.n_probes) and self.n_probes >= 1):
            problems.append(f"n_probes must be an integer ≥ 1 (got {self.n_probes!r})")
        if not (integer(self.n_samples) and self.n_samples >= 0):
            problems.append(f"n_samples must be an integer ≥ 0 (got {self.n_samples!r})")
        if not (isinstance(self.cg_tol, (int, float)) and 0 < self.cg_tol < 1):
            problems.append(f"cg_tol must be in (0, 1) (got {self.cg_tol!r})")
        block = self.dense_block
        if not (block == "auto" or (integer(block) and block >= 0)):
            problems.append(f"dense_block must be 'auto' or an integer ≥ 0 (got {block!r})")
        if not (integer(self.warm_start) and self.warm_start >= 0):
            problems.append(f"warm_start must be an integer ≥ 0 (got {self.warm_start!r})")
        if problems:
            raise InputError("invalid matrix-free solver settings: " + "; ".join(problems) + ".")

    def _choose_solver(self, ff: FourierFeatures) -> None:
        """Set ``solver_`` and refuse, with the estimate, what would not fit in ``max_bytes``."""
        from geogp.exceptions import MemoryEstimateError
        from geogp.features.gram_operator import operator_bytes

        if self.solver not in ("auto", "dense", "iterative"):
            raise InputError(f"solver must be 'auto', 'dense' or 'iterative'; got {self.solver!r}.")
        M = ff.n_features
        iterative = self.solver == "iterative" or (self.solver == "auto" and M > ITERATIVE_ABOVE)
        if iterative and not hasattr(make_kernel(self.kernel, ff.n_dims), "log_spectral_density"):
            raise InputError("the iterative solver needs a kernel with a spectral density (SE, "
                             "Matérn or their sums); use solver='dense'.")
        self.solver_ = "iterative" if iterative else "dense"
        if iterative:
            self._check_iterative_options()
            cols = int(self.n_probes) + 1
            block = min(self._dense_block(M), M)
            needed = (2 * operator_bytes(ff, cols) + 8.0 * M * (cols * 6 + 2 * self.n_samples)
                      + 8.0 * block * block * 4)
            what = f"{M} Fourier features, matrix-free with {cols} right-hand sides"
            hint = "Reduce n_features or n_probes, or raise max_bytes."
        else:
            needed = 8.0 * M * M * 3
            what = f"{M} Fourier features (dense {M}×{M} statistics and factors)"
            hint = ("Use solver='iterative' (matrix-free), reduce n_features, or raise max_bytes "
                    "if the machine has the memory.")
        if needed > self.max_bytes:
            raise MemoryEstimateError(what, needed, self.max_bytes, hint)

    def _window(self, lo, hi):
        extent = hi - lo
        if self.window_factor < 1:
            raise InputError(f"window_factor must be ≥ 1 (window covers the data); got {self.window_factor}.")
        return (lo + hi) / 2, extent * self.window_factor + 2 * self.margin * extent

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y) -> AFSRegressor:
        """Fit on scattered points X (N, D), y (N,). Returns self."""
        X = as_points(X)
        y = as_targets(y)
        check_same_length(X, y)
        self._check_counts(X.shape[0], X.shape[1])
        self._n_obs = X.shape[0]
        self.scaler_ = Standardizer.from_data(X, y)
        Xs, ys = self.scaler_.x(X), self.scaler_.y(y)
        center, width = self._window(Xs.min(axis=0), Xs.max(axis=0))
        self.features_ = self._features(center, width)
        self.powers_ = monomial_powers(self.mean, X.shape[1])
        t0 = time.perf_counter()
        method = self.stats_method
        if method == "auto":
            method = "nufft" if X.shape[0] > 2000 else "dense"
        gram = "operator" if self.solver_ == "iterative" else "dense"
        if method == "dense" and gram == "dense":
            self.stats_ = dense_stats(self.features_, Xs, ys, self.chunk_bytes, powers=self.powers_)
        elif method in ("nufft", "dense"):
            self.stats_ = points_stats(self.features_, Xs, ys, "nufft", self.chunk_bytes,
                                       powers=self.powers_, gram=gram,
                                       dense_block=self._dense_block(self.features_.n_features))
        else:
            raise InputError(f"stats_method must be 'auto', 'dense' or 'nufft'; got {method!r}.")
        self.stats_time_s_ = time.perf_counter() - t0
        ff = self.features_
        return self._learn(X.shape[1],
                           lambda S, rng: points_noise_projection(ff, Xs, S, rng))

    def fit_grid(self, axes, values) -> AFSRegressor:
        """Fit on a regular grid: ``values`` (N_1, ..., N_D) with NaN = missing, axis coordinates.

        Complete grids use G = N·I when Lemma 3.1 holds and ``grid_mode='diagonal'``; others use
        the exact statistics of the observed cells from separable transforms (docs/afs.md, gridded data).
        """
        axes = [np.asarray(a, dtype=np.float64) for a in axes]
        x0, eta = grid_axes_info(axes)
        shape = tuple(int(s) for s in values.shape)
        if len(axes) != len(shape):
            raise InputError(f"values have {len(shape)} dims but {len(axes)} axes were given.")
        # observed-cell statistics for standardisation (one pass)
        n_obs, s1, s2, ax_w = self._grid_moments(axes, values)
        if n_obs == 0:
            raise AllMissingError("every grid cell is missing (NaN); nothing to fit.")
        self._check_counts(n_obs, len(axes))
        self._n_obs = n_obs
        y_mean = s1 / n_obs
        y_std = np.sqrt(max(s2 / n_obs - y_mean**2, 0.0))
        if not y_std > 0:
            raise InputError("the observed cells all have the same value; there is nothing to model.")
        x_mean = np.array([np.sum(w * a) / n_obs for a, w in zip(axes, ax_w)])
        x_std = np.array([np.sqrt(np.sum(w * (a - m) ** 2) / n_obs) for a, w, m in zip(axes, ax_w, x_mean)])
        x_std = np.where(x_std > 0, x_std, eta)
        self.scaler_ = Standardizer(x_mean, x_std, float(y_mean), float(y_std))
        saxes = [(a - m) / s for a, m, s in zip(axes, x_mean, x_std)]
        seta = eta / x_std
        lo = np.array([a.min() for a in saxes])
        hi = np.array([a.max() for a in saxes])
        complete = n_obs == int(np.prod(shape))
        t0 = time.perf_counter()
        diagonal = False
        if self.grid_mode not in ("exact", "diagonal"):
            raise InputError(f"grid_mode must be 'exact' or 'diagonal'; got {self.grid_mode!r}.")
        if complete and self.grid_mode == "diagonal" and self.lattice == "odd":
            # Lemma 3.1 mode: W_d = N_d η_d exactly, centred on the grid cells
            center = (lo + hi) / 2
            width = np.array(shape) * seta
            ff = self._features(center, width)
            if all(2 * k <= n for k, n in zip(ff.n_freq, shape)):
                diagonal = True
        if self.grid_mode == "diagonal" and not diagonal:
            warnings.warn("grid_mode='diagonal' needs a complete raster, the odd lattice and "
                          "2K_d ≤ N_d (Lemma 3.1); using the exact route instead.", stacklevel=2)
        if not diagonal:
            center, width = self._window(lo, hi)
            ff = self._features(center, width)
        self.features_ = ff
        values_std = (values - y_mean) / y_std  # lazy for dask
        self.powers_ = monomial_powers(self.mean, len(axes))
        if diagonal:
            self.solver_ = "dense"  # G = N·I: O(M) per step, nothing to iterate
        gram = "operator" if self.solver_ == "iterative" else "dense"
        self.stats_ = grid_stats(ff, saxes, values_std, diagonal=diagonal,
                                 chunk_bytes=self.chunk_bytes, powers=self.powers_, gram=gram,
                                 dense_block=self._dense_block(self.features_.n_features))
        self.stats_time_s_ = time.perf_counter() - t0
        chunk = self.chunk_bytes
        return self._learn(len(axes), lambda S, rng: grid_noise_projection(
            ff, saxes, values, S, rng, chunk))

    @staticmethod
    def _grid_moments(axes, values):
        """Count, Σy, Σy² of observed cells and per-axis observed-cell counts, chunked."""
        shape = values.shape
        ax_w = [np.zeros(s) for s in shape]
        n, s1, s2 = 0, 0.0, 0.0
        chunks = getattr(values, "chunks", None)
        if chunks is not None:
            b = np.cumsum((0,) + tuple(chunks[0]))
            slices = [slice(int(p), int(q)) for p, q in zip(b[:-1], b[1:])]
        else:
            step = max(1, int(2**24 // max(1, int(np.prod(shape[1:])))))
            slices = [slice(i, i + step) for i in range(0, shape[0], step)]
        for sl in slices:
            block = np.asarray(values[sl], dtype=np.float64)
            if np.isinf(block).any():
                raise InputError("the grid contains infinite values; replace them by NaN "
                                 "(missing) or finite numbers.")
            obs = np.isfinite(block)
            yb = np.where(obs, block, 0.0)
            n += int(obs.sum())
            s1 += float(yb.sum())
            s2 += float((yb * yb).sum())
            for d in range(len(shape)):
                other = tuple(i for i in range(len(shape)) if i != d)
                cnt = obs.sum(axis=other)
                if d == 0:
                    ax_w[0][sl] += cnt
                else:
                    ax_w[d] += cnt
        return n, s1, s2, ax_w

    @staticmethod
    def _check_counts(n, d):
        n_params = d + 2
        if n <= n_params:
            raise InputError(
                f"only {n} observation(s) for {n_params} hyperparameters; a GP fit needs more "
                "observed points than parameters."
            )

    def _init_params(self, d):
        check_positive(self.noise, "noise")
        kern = make_kernel(self.kernel, d, self.lengthscale, self.variance)
        return {"kernel": kern, "noise": jnp.asarray(float(self.noise))}

    def _iterative_options(self) -> IterativeOptions:
        return IterativeOptions(tol=float(self.cg_tol))

    def _probes(self):
        return rademacher_probes(self.features_.n_features, int(self.n_probes), int(self.seed))

    def _learn(self, d, noise_projection=None) -> AFSRegressor:
        """θ by L-BFGS on the bound, then the posterior. ``noise_projection(S, rng)`` gives Φη
        for the iterative posterior's samples (the only data access after the statistics)."""
        ff, stats = self.features_, self.stats_
        params = self._init_params(d)
        n = float(stats.n)

        if self.powers_ is not None:
            params["mean"] = jnp.asarray(ols(stats))
        if stats.matrix_free:
            loss = iterative_loss(self._iterative_options())
            args = (stats, jnp.asarray(ff.frequencies), jnp.asarray(ff.log_norm), self._probes())
        elif hasattr(params["kernel"], "log_spectral_density"):
            loss = negative_bound_per_point  # module level: compiled once per parameter layout
            args = (stats, jnp.asarray(ff.frequencies), jnp.asarray(ff.log_norm))
        else:  # no closed-form S (e.g. ProductKernel): AFS-DFT, full lattice (docs/afs.md, AFS-DFT)
            def loss(p, st):
                if "mean" in p:
                    st = residual_stats(st, p["mean"])
                return -collapsed_bound(_log_lambda(ff, p["kernel"]), p["noise"],
                                        p["kernel"].variance_at_zero, st) / st.n

            args = (stats,)

        if self.optimize:
            if stats.matrix_free and int(self.warm_start) > 0:
                params, self.warm_report_ = warm_start(params, stats, self.features_,
                                                       int(self.warm_start), self.maxiter)
            params, report = minimize_lbfgs(loss, params, args=args,
                                            unconstrained=("mean",), maxiter=self.maxiter,
                                            progress=self.progress)
            report.objective *= n
            report.history = [h * n for h in report.history]
        else:
            report = FitReport(float(loss(params, *args)) * n, 0, 1, True, "not optimised", 0.0)
        self.kernel_, self.noise_ = params["kernel"], float(params["noise"])
        self.beta_ = np.asarray(params["mean"]) if "mean" in params else None
        self.report_ = report
        self._diagnose()
        if stats.matrix_free:
            self.posterior_ = iterative_posterior(
                _log_lambda(ff, self.kernel_), self.noise_, self.kernel_.variance_at_zero,
                self._residual_stats(), noise_projection, int(self.n_samples), int(self.seed),
                IterativeOptions(tol=float(self.cg_tol) / 100))
        else:
            self.posterior_ = posterior(_log_lambda(ff, self.kernel_), self.noise_,
                                        self.kernel_.variance_at_zero, self._residual_stats())
        return self

    def _variance_bins(self):
        """Quad bins of the matrix-free posterior's variance, computed once per posterior."""
        cache = getattr(self, "_var_bins_cache", None)
        if cache is None or cache[0] is not self.posterior_:
            cache = (self.posterior_, variance_bins(self.features_, self.posterior_))
            self._var_bins_cache = cache
        return cache[1]

    def _residual_stats(self):
        if self.beta_ is None:
            return self.stats_
        return residual_stats(self.stats_, jnp.asarray(self.beta_))

    def _diagnose(self):
        ells = [np.min(np.asarray(p.lengthscale)) for p in getattr(self.kernel_, "parts", [self.kernel_])]
        if min(ells) * 3 > np.min(self.features_.width):
            warnings.warn("a learnt lengthscale is not small compared with the window "
                          "(docs/afs.md, aliasing and truncation): aliasing may bias the fit; widen the window (margin).",
                          stacklevel=3)

    # ------------------------------------------------------------------ results
    def bound(self) -> float:
        """The collapsed bound L'' at the fitted parameters (standardised scale)."""
        ll = _log_lambda(self.features_, self.kernel_)
        if self.stats_.matrix_free:  # a stochastic estimate (fixed probes), see solver docs
            return float(iterative_bound(ll, self.noise_, self.kernel_.variance_at_zero,
                                         self._residual_stats(), self._probes(),
                                         self._iterative_options()))
        return float(collapsed_bound(ll, self.noise_, self.kernel_.variance_at_zero,
                                     self._residual_stats()))

    def trace_diagnostic(self) -> float:
        """t = N k(0) − Σ λ_m G_mm at the fitted parameters (0 would mean M saturates)."""
        ll = _log_lambda(self.features_, self.kernel_)
        return float(trace_term(ll, self.kernel_.variance_at_zero, self.stats_))

    @property
    def lengthscale_(self):
        """Lengthscales in the user's units (ℓ_d · x_scale_d), one array per kernel part."""
        parts = getattr(self.kernel_, "parts", (self.kernel_,))
        return [np.broadcast_to(np.asarray(p.lengthscale), self.scaler_.x_scale.shape)
                * self.scaler_.x_scale for p in parts]

    @property
    def noise_variance_(self) -> float:
        return self.noise_ * self.scaler_.y_scale**2

    def predict(self, X, outside: str = "raise") -> Prediction:
        """Predictive mean and variances at X (N*, D) on the original scale.

        Points outside the feature window raise (``outside='raise'``) or get NaN
        (``outside='nan'``). Cost O(M² + N*) via NUFFT (O(N* M²) below 2,048 points).
        """
        X = as_points(X, "X (prediction points)")
        Xs = self.scaler_.x(X)
        inside = self.features_.check_inside(Xs, outside)
        mean = np.full(X.shape[0], np.nan)
        var = np.full(X.shape[0], np.nan)
        if inside.any():
            m, v = self._predict_std(Xs[inside])
            mean[inside], var[inside] = m, v
        return self.scaler_.unscale(mean, var, self.noise_)

    def _predict_std(self, Xs):
        ff, post = self.features_, self.posterior_
        if isinstance(post, IterativePosterior):
            def evaluate(coef, kind):
                return trig.evaluate_points(ff, Xs, coef, kind)

            mean, var = predict_moments(ff, post, evaluate, self._variance_bins())
        elif Xs.shape[0] <= _DENSE_PREDICT_MAX:
            Phi = ff(Xs)
            mean = Phi @ post.weights
            var = post.kvar0 + (Phi**2 @ post.quad if post.quad.ndim == 1
                                 else np.einsum("nm,mk,nk->n", Phi, post.quad, Phi))
        else:
            mean = trig.evaluate_points(ff, Xs, trig.linear_coefficients(ff, post.weights), "linear")
            var = post.kvar0 + trig.evaluate_points(ff, Xs, _quad_bins(ff, post.quad), "quad")
        if self.beta_ is not None:
            mean = mean + basis(Xs, self.powers_) @ self.beta_
        return mean, np.maximum(var, 0.0)

    def predict_grid(self, axes, outside: str = "raise") -> Prediction:
        """Predictions on the tensor grid ``axes`` (D vectors); arrays of shape (N_1, ..., N_D).

        Cost O(M² + N·P) through separable transforms: no (N* × M) matrix is formed.
        """
        axes = [np.asarray(a, dtype=np.float64) for a in axes]
        saxes = [(a - m) / s for a, m, s in zip(axes, self.scaler_.x_mean, self.scaler_.x_scale)]
        ff, post = self.features_, self.posterior_
        half = ff.width / 2 * (1 + 1e-12)
        inside_axes = [np.abs(a - c) <= h for a, c, h in zip(saxes, ff.center, half)]
        if outside == "raise" and not all(m.all() for m in inside_axes):
            ff.check_inside(np.array([[a.min() for a in saxes], [a.max() for a in saxes]]), "raise")
        if isinstance(post, IterativePosterior):
            def evaluate(coef, kind):
                return trig.evaluate_grid(ff, saxes, coef, kind)

            mean, var = predict_moments(ff, post, evaluate, self._variance_bins())
        else:
            mean = trig.evaluate_grid(ff, saxes, trig.linear_coefficients(ff, post.weights),
                                      "linear")
            var = post.kvar0 + trig.evaluate_grid(ff, saxes, _quad_bins(ff, post.quad),
                                                  "quad")
        var = np.maximum(var, 0.0)
        if self.beta_ is not None:
            for j, b in enumerate(self.beta_):
                mean = mean + b * basis_grid(saxes, self.powers_, j)
        inside = inside_axes[0]
        for m in inside_axes[1:]:
            inside = np.multiply.outer(inside, m)
        mean = np.where(inside, mean, np.nan)
        var = np.where(inside, var, np.nan)
        return self.scaler_.unscale(mean, var, self.noise_)


def _quad_bins(ff: FourierFeatures, quad: np.ndarray) -> np.ndarray:
    """Quad bins of φᵀQφ: Q dense (M, M), or its diagonal (M,) (O(M) instead of O(M²))."""
    if quad.ndim == 1:
        return trig.diag_quad_coefficients(ff, quad)
    return trig.quad_coefficients(ff, quad)
