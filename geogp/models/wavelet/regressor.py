"""Multiresolution (wavelet) variational GP with sparse precomputation (docs/bound.md,
docs/wavelets.md, docs/sparse_vjp.md).

The prior is the finite wavelet expansion f(x) = Σ_m u_m φ_m(x), u_m ~ N(0, λ_m(θ)) ("option A"
of docs/wavelets.md (sparsity and bound): the model kernel is the truncated sum, K_ff = ΦᵀΛΦ). Only
λ depends on θ, so the data enter once, through the sparse statistics G = ΦΦᵀ, r = Φy, yᵀy and N
(:func:`geogp.features.wavelet_statistics.wavelet_statistics`). The collapsed bound in whitened
form is

    A = I + σ⁻² Λ^{1/2} G Λ^{1/2}  (lower triangle on the fixed pattern P),   b = σ⁻² Λ^{1/2} r
    (δ, γ) = (log|A|, A⁻¹b)    sparse Cholesky behind a custom VJP (docs/sparse_vjp.md)
    L′ = −½ [N log 2πσ² + δ + σ⁻² yᵀy − bᵀγ]

and, because the trace term vanishes for the truncated prior, L′ equals the exact log marginal
likelihood log N(y | 0, ΦᵀΛΦ + σ²I) (docs/tests.md T20). Features with no data in their support are
pruned from the bound (they cancel) but kept for prediction, where they add their prior variance.

Example:
    >>> import numpy as np
    >>> X = np.linspace(-5, 5, 120)[:, None]
    >>> y = np.sin(X[:, 0]) + np.sin(3 * X[:, 0]) * (X[:, 0] > 1)
    >>> model = WaveletRegressor("db4", iota=-2, j_max=2, maxiter=20).fit(X, y)
    >>> float(np.sqrt(np.mean((model.predict(X).mean - y) ** 2))) < 0.1
    True
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from geogp.core.optimize import FitReport, minimize_lbfgs
from geogp.core.validation import as_points, as_targets, check_same_length, warn_if_lonlat
from geogp.exceptions import ApproximationWarning, InputError, MemoryEstimateError
from geogp.features.data import Grid, Points
from geogp.features.wavelet import make_basis
from geogp.features.wavelet_basis import canonical_family
from geogp.models.base import Prediction, Standardizer, check_columns, check_fitted
from geogp.models.wavelet.bound import BACKENDS, loss_per_point, make_problem, posterior
from geogp.models.wavelet.prior import (
    LOCATIONS,
    NORMALISATIONS,
    effective_lengthscale,
    init_params,
)

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["WaveletRegressor", "AUTO_MAX_FEATURES"]

# automatic levels of db2–db8 stop below this many functions: their nearly dense pattern costs
# a dense factorisation per evaluation (benchmarks/README.md, design measurements); an explicit
# j_max is capped by max_bytes only
AUTO_MAX_FEATURES = 4000


def _is_auto(value) -> bool:
    return isinstance(value, str) and value == "auto"


class WaveletRegressor:
    """Non-stationary GP regression with a multiresolution (wavelet) prior (docs/wavelets.md).

    Inputs and targets are z-scored with training statistics (docs/model.md); the basis, window
    and parameters live in standardised units. ``fit`` learns θ = (a_0, a_q, c_q, s_q, σ², and
    optionally b_q and σ_f²) per input dimension by L-BFGS on the collapsed bound.

    Args:
        family: ``"haar"`` or ``"db1"`` … ``"db8"``.
        iota: canonical scale ι (coarsest level), or ``"auto"`` (default): the largest ι
            whose scale 2^{-ι} spans the window (standardised units).
        j_max: finest wavelet level, or ``"auto"`` (default): the coarsest level whose scale
            2^{-j} is within 2× of the pixel size (rasters, :meth:`fit_grid`) or of the typical
            spacing (extent/N)^{1/D} of scattered points, lowered until the memory estimate
            fits ``max_bytes`` and, for db2–db8 (overlapping supports, nearly dense
            patterns), until the basis has at most ``AUTO_MAX_FEATURES`` = 4,000 functions
            (then an :class:`~geogp.exceptions.ApproximationWarning` says how far from the
            pixel size the finest level stays, and why). An integer is used as given
            and refused with the estimate when it does not fit.
        n_components: Q, localised fine-scale components per dimension (eq. 4.26).
        normalisation: ``"amplitude"`` (unit-amplitude basis, default) or ``"l2"``.
        location: where the bumps g_q read a basis function's position: ``"left"`` (t 2^{−j},
            thesis eq. 4.26, default) or ``"centre"`` (middle of its support; for db4 at coarse
            levels the left end is far from where the function lives).
        decay: initial value of the decay, as ``component_decay``, ``component_weight``,
            ``component_centre``, ``component_width``, ``noise`` and ``amplitude`` are of
            theirs (thesis App. C.2.2 defaults; standardised units).
        learn_weights: optimise b_q (the thesis keeps them fixed at 1).
        learn_amplitude: optimise σ_f² (fixed at 1 by default, as in the thesis).
        margin: extra window width on each side, in units of the data's extent per dimension
            (as in ``AFSRegressor``; default 0.1). It adds data-free features only, so the
            bound is unchanged (they are pruned); predictions outside the window raise
            ``OutsideWindowError``.
        level: cascade level of the tabulated wavelets.
        standardize: z-score inputs and targets (docs/model.md).
        optimize: learn θ (else keep the initial values).
        maxiter: L-BFGS iteration limit.
        backend: ``"auto"`` (CHOLMOD, or dense LAPACK for patterns filled to ≥ 20 %),
            ``"cholmod"`` or ``"dense"``.
        chunk_size: data points per chunk when accumulating statistics.
        max_bytes: refuse, before the statistics are accumulated, bases whose sparse G (an
            upper bound: min(N·K², M²) entries, K = features per point, M = basis size; with
            its pattern counts, the factor and the selected inverse, about 6 copies) would need
            more memory than this.

    Attributes:
        params_: fitted parameters (standardised units).
        report_: :class:`geogp.core.optimize.FitReport`.
        bound_: collapsed bound at ``params_`` (= exact LML of the finite prior, standardised).
        scaler_: the :class:`~geogp.models.base.Standardizer`. basis_, stats_, problem_,
        posterior_: the basis, statistics, problem and posterior.
        n_features_: M (all basis functions). n_active_features_: M_a (with data in support).
        stats_time_s_: seconds spent reading the data into the sparse statistics.

    Example:
        >>> import numpy as np
        >>> X = np.linspace(0, 1, 50)[:, None]; y = np.cos(4 * X[:, 0])
        >>> m = WaveletRegressor("haar", iota=0, j_max=2, n_components=0, optimize=False).fit(X, y)
        >>> m.predict(X[:2]).mean.shape
        (2,)
    """

    def __init__(self, family: str = "db4", *, iota: int | str = "auto", j_max: int | str = "auto",
                 n_components: int = 1,
                 normalisation: str = "amplitude", location: str = "left", decay: float = 0.5,
                 component_decay: ArrayLike = 0.5,
                 component_weight: ArrayLike = 1.0,
                 component_centre: ArrayLike | None = None, component_width: ArrayLike = 1.0,
                 noise: float = 0.5, amplitude: float = 1.0,
                 learn_weights: bool = False, learn_amplitude: bool = False, margin: float = 0.1,
                 level: int = 12,
                 standardize: bool = True, optimize: bool = True, maxiter: int = 500,
                 backend: str = "auto", chunk_size: int | None = None,
                 max_bytes: float = 4 * 2**30) -> None:
        self.family = family
        self.iota = iota
        self.j_max = j_max
        self.n_components = n_components
        self.normalisation = normalisation
        self.location = location
        self.decay = decay
        self.component_decay = component_decay
        self.component_weight = component_weight
        self.component_centre = component_centre
        self.component_width = component_width
        self.noise = noise
        self.amplitude = amplitude
        self.learn_weights = learn_weights
        self.learn_amplitude = learn_amplitude
        self.margin = margin
        self.level = level
        self.standardize = standardize
        self.optimize = optimize
        self.maxiter = maxiter
        self.backend = backend
        self.chunk_size = chunk_size
        self.max_bytes = max_bytes

    def check_args(self) -> None:
        """Refuse invalid constructor options (``ValueError``, ``InputError``)."""
        canonical_family(self.family)
        for name in ("iota", "j_max"):
            v = getattr(self, name)
            if not (_is_auto(v) or (isinstance(v, (int, np.integer)) and not isinstance(v, bool))):
                raise InputError(f"{name} must be an integer level or 'auto'; got {v!r}.")
        if int(self.n_components) != self.n_components or self.n_components < 0:
            raise InputError(
                f"n_components must be a non-negative integer; got {self.n_components!r}.")
        if not (np.isfinite(self.margin) and self.margin >= 0):
            raise InputError(f"margin must be finite and ≥ 0; got {self.margin!r}.")
        if self.normalisation not in NORMALISATIONS:
            raise InputError(
                f"normalisation must be one of {NORMALISATIONS}; got {self.normalisation!r}.")
        if self.location not in LOCATIONS:
            raise InputError(f"location must be one of {LOCATIONS}; got {self.location!r}.")
        if self.backend not in BACKENDS:
            raise InputError(f"backend must be one of {BACKENDS}; got {self.backend!r}.")

    @staticmethod
    def _needed_bytes(basis, n: int) -> float:
        """Memory estimate of the statistics and factorisation for ``n`` points."""
        k, m = basis.max_local, basis.n_features
        entries = min(float(n) * k * k, float(m) * m)
        return 6 * 12.0 * entries + 12.0 * n * k  # G-like sparse arrays, and Φ in chunks

    @staticmethod
    def _grid_needed_bytes(basis, n: int) -> float:
        """The same for a raster's grid route, which never forms Φ: G-like arrays and the
        per-axis pair products (at most M_d·(2K_d − 1) pairs per axis)."""
        k, m = basis.max_local, basis.n_features
        pairs = np.prod([b.size * (2 * b.max_local - 1) for b in basis.dims])
        return 6 * 12.0 * min(float(n) * k * k, float(m) * m) + 64.0 * float(pairs)

    def _check_memory(self, n: int) -> None:
        """Refuse, with the estimate, a basis whose statistics would not fit in max_bytes."""
        k, m = self.basis_.max_local, self.basis_.n_features
        needed = self._needed_bytes(self.basis_, n)
        if needed > self.max_bytes:
            raise MemoryEstimateError(
                f"wavelet statistics for {n} points and {m} basis functions ({k} per point)",
                needed, self.max_bytes, "Lower j_max (the finest level), use fewer points, or "
                "raise max_bytes if the machine has the memory.")

    def fit(self, X: ArrayLike, y: ArrayLike) -> WaveletRegressor:
        """Precompute the statistics of X (N, D ≤ 2), y (N,) and learn θ. Returns self.

        Cost: O(N·K²) once for the statistics (K = nonzeros per column of Φ), then one sparse
        Cholesky of A per L-BFGS evaluation, independent of N.
        """
        self.check_args()
        X_in, X = X, as_points(X, max_dims=2)
        warn_if_lonlat(X_in, X, "WaveletRegressor")
        y = as_targets(y)
        check_same_length(X, y)
        Xs, ys = self._standardise_and_lay_out(X, y)
        self._check_memory(X.shape[0])
        t0 = time.perf_counter()
        self.stats_ = self.basis_.statistics(Points(Xs, ys), chunk_size=self.chunk_size)
        self.stats_time_s_ = time.perf_counter() - t0
        return self._learn(X.shape[1])

    def _standardise_and_lay_out(self, X: np.ndarray, y: np.ndarray, spacing=None,
                                 needed_bytes=None):
        """Set ``scaler_`` from (X, y), the levels (``iota_``, ``j_max_``) and ``basis_`` on
        the data's box widened by ``margin``; returns the standardised (X, y). ``spacing``:
        the pixel size per dimension (original units; None: scattered points);
        ``needed_bytes(basis, n)``: the memory estimate that caps the automatic finest level
        (default :meth:`_needed_bytes`, the scattered-point route)."""
        self.scaler_ = (Standardizer.from_data(X, y) if self.standardize
                        else Standardizer.identity(X.shape[1]))
        Xs, ys = self.scaler_.x(X), self.scaler_.y(y)
        lo, hi = Xs.min(axis=0), Xs.max(axis=0)
        pad = self.margin * (hi - lo)
        window = np.stack([lo - pad, hi + pad], axis=1)
        extent = float(np.max(window[:, 1] - window[:, 0]))
        self.iota_ = (math.floor(-math.log2(extent)) if _is_auto(self.iota)
                      else int(self.iota))
        scale = np.asarray(self.scaler_.x_scale, dtype=np.float64)
        if spacing is None:  # typical spacing of N points over the data's box
            box = np.maximum(hi - lo, 1e-300)
            self.spacing_ = float(np.prod(box) / X.shape[0]) ** (1.0 / X.shape[1])
            self._data_units = float(np.prod(scale) ** (1.0 / scale.size))  # same mean
        else:  # the finest axis in standardised units, and its scale back to data units
            ratios = np.asarray(spacing, dtype=np.float64) / scale
            self.spacing_ = float(ratios.min())
            self._data_units = float(scale[int(np.argmin(ratios))])
        if _is_auto(self.j_max):
            self._auto_finest_level(window, X.shape[0], needed_bytes or self._needed_bytes)
        else:
            self.j_max_ = int(self.j_max)
            self.basis_ = make_basis(self.family, self.iota_, self.j_max_, window, self.level)
        return Xs, ys

    def _auto_finest_level(self, window: np.ndarray, n: int, needed_bytes) -> None:
        """j_max_ and basis_: within 2× of the spacing, lowered to fit max_bytes and, for the
        overlapping families (db2–db8), the cost cap AUTO_MAX_FEATURES."""
        target = max(self.iota_, math.ceil(-math.log2(2.0 * self.spacing_)))
        overlapping = canonical_family(self.family)[1] > 1

        def too_big(b):
            over_memory = needed_bytes(b, n) > self.max_bytes
            return over_memory, overlapping and b.n_features > AUTO_MAX_FEATURES

        j = target
        basis = make_basis(self.family, self.iota_, j, window, self.level)
        need = needed_bytes(basis, n)  # at the target level (for the warning)
        m_target = basis.n_features
        why = set()
        while j > self.iota_:
            memory, cost = too_big(basis)
            if not (memory or cost):
                break
            why |= {"memory"} if memory else set()
            why |= {"cost"} if cost else set()
            j -= 1
            basis = make_basis(self.family, self.iota_, j, window, self.level)
        self.j_max_, self.basis_ = j, basis
        if j < target:
            finest = 2.0**-j * self._data_units
            pixel = self.spacing_ * self._data_units
            reasons = []
            if "memory" in why:
                reasons.append(f"would need about {need / 2**30:.1f} GiB (max_bytes = "
                               f"{self.max_bytes / 2**30:.1f} GiB)")
            if "cost" in why:
                reasons.append(f"would have {m_target} basis functions (> {AUTO_MAX_FEATURES}: "
                               f"each L-BFGS step factorises a nearly dense matrix of that "
                               f"size, overlapping {self.family} supports)")
            warnings.warn(
                f"wavelet levels: the finest level (j_max = {j}, scale {finest:.3g} in data "
                f"units) is {finest / pixel:.0f}× the data's spacing ({pixel:.3g}); j_max = "
                f"{target} {' and '.join(reasons)}. The tensor-product basis grows with the "
                "square of the levels; fine structure below that scale is not modelled. Pass "
                "j_max explicitly to go finer (family='haar' keeps the pattern sparse).",
                ApproximationWarning, stacklevel=4)

    def fit_grid(self, axes: Sequence[ArrayLike], values: ArrayLike) -> WaveletRegressor:
        """Fit a 2-D raster: ``axes`` = (y, x) coordinates, ``values`` (n_y, n_x), NaN missing.

        Same model, window and result as :meth:`fit` on the observed cells, but the statistics
        come from per-axis evaluations (:mod:`geogp.features.wavelet_grid`): sparse products
        over the overlapping pairs of row and column functions instead of K² products per
        observation. Returns self.
        """
        self.check_args()
        if len(axes) != 2:
            raise InputError(f"fit_grid needs two axes (y, x); got {len(axes)}.")
        ay, ax = (np.asarray(a, dtype=np.float64).ravel() for a in axes)
        v = np.asarray(values, dtype=np.float64)
        if v.shape != (ay.size, ax.size):
            raise InputError(f"values must have shape {(ay.size, ax.size)}; got {v.shape}.")
        if np.isinf(v).any():
            raise InputError("the raster contains infinite values; replace them by NaN.")
        obs = np.isfinite(v)
        Y, X = np.meshgrid(ay, ax, indexing="ij")
        pixel = [abs(a[1] - a[0]) if a.size > 1 else np.inf for a in (ay, ax)]
        self._standardise_and_lay_out(np.stack([Y[obs], X[obs]], axis=1), as_targets(v[obs]),
                                      spacing=pixel, needed_bytes=self._grid_needed_bytes)
        saxes = [(a - m) / sc for a, m, sc in zip((ay, ax), self.scaler_.x_mean,
                                                   self.scaler_.x_scale, strict=True)]
        t0 = time.perf_counter()
        self.stats_ = self.basis_.statistics(
            Grid(tuple(saxes), np.where(obs, self.scaler_.y(v), np.nan)), max_bytes=self.max_bytes)
        self.stats_time_s_ = time.perf_counter() - t0
        return self._learn(2)

    def _learn(self, n_dims: int) -> WaveletRegressor:
        """θ by L-BFGS on the sparse bound of ``stats_``, then the posterior."""
        self.problem_ = make_problem(self.stats_, self.backend, self.normalisation, self.location)
        params = init_params(
            n_dims, int(self.n_components), decay=self.decay,
            component_decay=self.component_decay, component_weight=self.component_weight,
            component_centre=self.component_centre, component_width=self.component_width,
            noise=self.noise, amplitude=self.amplitude)
        n = self.stats_.n
        problem = self.problem_
        fixed = tuple(k for k, learn in (("component_weight", self.learn_weights),
                                         ("amplitude", self.learn_amplitude)) if not learn)
        if self.optimize:
            params, report = minimize_lbfgs(loss_per_point, params, args=(problem,),
                                            unconstrained=("component_centre",), fixed=fixed,
                                            maxiter=self.maxiter)
            report.objective *= n
            report.history = [h * n for h in report.history]
        else:
            report = FitReport(float(loss_per_point(params, problem)) * n, 0, 1, True,
                               "not optimised", 0.0)
        self.params_ = params
        self.report_ = report
        self.posterior_ = posterior(params, problem)
        self.bound_ = self.posterior_.bound
        self.n_features_ = self.basis_.n_features
        self.n_active_features_ = self.stats_.n_active
        return self

    def _points(self, X, what="X (prediction points)") -> np.ndarray:
        check_fitted(self, "posterior_")
        X = as_points(X, what)
        check_columns(X, self.basis_.n_dims, what)
        return self.scaler_.x(X)

    def predict(self, X: ArrayLike) -> Prediction:
        """Predictive mean and latent/observed variances at X (N*, D), original scale.

        Cost: see :meth:`WaveletPosterior.predict`.
        """
        Xs = self._points(X)
        mean, var = self.posterior_.predict(Xs, self.chunk_size)
        return self.scaler_.unscale(mean, var, float(self.params_["noise"]))

    def predict_grid(self, *axes: ArrayLike) -> Prediction:
        """Predictions on the grid spanned by one coordinate vector per dimension.

        Args:
            axes: D 1-D arrays of coordinates (original units).

        Returns:
            :class:`~geogp.models.base.Prediction` with arrays of shape (len(axes[0]), …).
        """
        axes, std_axes = self._grid_axes(axes)
        if self.posterior_.grid_ready():  # separable: no solve per cell
            mean, var = self.posterior_.predict_grid(std_axes)
            return self.scaler_.unscale(mean, var, float(self.params_["noise"]))
        mesh = np.meshgrid(*axes, indexing="ij")
        pred = self.predict(np.stack([m.ravel() for m in mesh], axis=1))
        shape = mesh[0].shape
        return Prediction(*(np.reshape(v, shape) for v in pred))

    # ------------------------------------------------------------------ samples
    def _sample_weights(self, n, seed):
        """(rng, (M, n) weight draws) after the checks; refuses above ``max_bytes``."""
        check_fitted(self, "posterior_")
        if not (isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1):
            raise InputError(f"n (number of samples) must be an integer ≥ 1; got {n!r}.")
        need = self.posterior_.sample_bytes() + 8.0 * self.basis_.n_features * n
        if need > self.max_bytes:
            raise MemoryEstimateError(
                f"posterior samples of a wavelet model with {self.stats_.n_active} active "
                "features (A's dense Cholesky factor)", need, self.max_bytes,
                "Use fewer levels (j_max), fewer samples per call, or raise max_bytes.")
        rng = np.random.default_rng(seed)
        return rng, self.posterior_.sample_weights(int(n), rng)

    def _finish_samples(self, f, rng, observed: bool) -> np.ndarray:
        if observed:
            f = f + math.sqrt(float(self.params_["noise"])) * rng.standard_normal(f.shape)
        return self.scaler_.y_mean + self.scaler_.y_scale * f

    def sample(self, X: ArrayLike, n: int, seed: int | np.random.SeedSequence | None = None,
               observed: bool = False) -> np.ndarray:
        """``n`` posterior samples of f at X (N*, D), data units, (n, N*): whitened weights
        drawn from q(u) (active features) and the prior (pruned ones), pushed through the
        sparse features. ``observed`` adds the noise of a new observation. Exact under the
        finite prior; the dense Cholesky factor of A is computed once (M_a² memory)."""
        Xs = self._points(X, "X (sample points)")
        rng, w = self._sample_weights(n, seed)
        return self._finish_samples(self.posterior_.sample_points(Xs, w), rng, observed)

    def sample_grid(self, axes: Sequence[ArrayLike], n: int,
                    seed: int | np.random.SeedSequence | None = None,
                    observed: bool = False) -> np.ndarray:
        """``n`` posterior samples on the grid spanned by ``axes`` (D vectors, data units),
        (n, N_1, …, N_D); a 2-D basis goes per axis (no feature matrix is formed). The same
        draws as :meth:`sample` on the mesh for the same ``seed``."""
        _, std_axes = self._grid_axes(axes)
        rng, w = self._sample_weights(n, seed)
        if self.basis_.n_dims == 2:
            f = self.posterior_.sample_grid(std_axes, w)
        else:
            mesh = np.meshgrid(*std_axes, indexing="ij")
            pts = np.stack([m.ravel() for m in mesh], axis=1)
            f = self.posterior_.sample_points(pts, w).reshape(w.shape[1], *mesh[0].shape)
        return self._finish_samples(f, rng, observed)

    def _grid_axes(self, axes) -> tuple[list, list]:
        """(axes, standardised axes) of a grid: one non-empty vector of finite coordinates
        per input dimension (original units), checked."""
        check_fitted(self, "posterior_")
        if len(axes) != self.basis_.n_dims:
            raise InputError(
                f"expected {self.basis_.n_dims} coordinate vector(s); got {len(axes)}.")
        axes = [np.asarray(a, dtype=np.float64).ravel() for a in axes]
        for d, a in enumerate(axes):
            if a.size == 0 or not np.all(np.isfinite(a)):
                raise InputError(f"grid axis {d} must be a non-empty vector of finite "
                                 f"coordinates (got {a.size} value(s), "
                                 f"{int(np.sum(~np.isfinite(a)))} not finite).")
        sc = self.scaler_
        return axes, [(a - sc.x_mean[d]) / sc.x_scale[d] for d, a in enumerate(axes)]

    def prior_variance(self, X: ArrayLike) -> np.ndarray:
        """Prior variance k(x, x) of f at X (N*, D), original scale (s_y² · Σ_m λ_m φ_m(x)²)."""
        return self.scaler_.y_scale**2 * self.posterior_.prior_variance(self._points(X))

    def signal_to_noise(self, X: ArrayLike) -> np.ndarray:
        """Learnt SNR √(k(x, x)/σ²) at X (N*, D) (thesis eq. 4.37)."""
        return np.sqrt(self.posterior_.prior_variance(self._points(X))
                       / float(self.params_["noise"]))

    def effective_lengthscale(self, X: ArrayLike) -> np.ndarray:
        """Heuristic local lengthscale (N*, D) in original units (docs/wavelets.md, effective
        lengthscale)."""
        X = as_points(X, "X", max_dims=2)
        ell = effective_lengthscale(self.params_, self.basis_.dims[0].iota, self.scaler_.x(X))
        return np.asarray(ell) * self.scaler_.x_scale

    def log_marginal_likelihood(self) -> float:
        """The bound at the fitted θ (= exact LML of the finite prior), standardised scale."""
        return self.bound_
