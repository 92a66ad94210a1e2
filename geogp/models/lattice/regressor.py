"""SPDE / LatticeKrig-style Gaussian Markov random field on the raster's own grid.

The model, its likelihood and its posterior are derived in docs/lattice.md. In short: the
latent field g lives on the raster's cells extended by ``margin`` cells a side, with the
sparse precision of the SPDE (κ² − Δ)^{α/2} g = W (Lindgren, Rue & Lindström 2011; α = 2:
Matérn ν = 1, range ρ, marginal sd s), optionally plus a mid-scale field on a coarser lattice
and large-scale Fourier features; the observations are y = Φu + Xβ + P g + ε with a polynomial
trend X (β flat prior, integrated: REML) and noise σ². Every likelihood evaluation is one
sparse Cholesky factorisation of B = Q + PᵀP/σ² (CHOLMOD, behind the custom VJP of
:func:`geogp.linalg.cholmod.logdet_and_solve`); log|Q| is in closed form.

θ is fitted in two stages: the local field's (range, sd, noise) on a composite likelihood of
square tiles (:mod:`geogp.models.lattice.tiles`), then the large scales and one overall scale
on the small dense part (:mod:`geogp.models.lattice.posterior`). The posterior (mean,
variances and neighbour covariances by selected inversion) is computed on the whole lattice,
or on overlapping tiles above :data:`WHOLE_LATTICE_MAX_CELLS` (:mod:`geogp.models.lattice.tiled`).
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import jax.numpy as jnp
import numpy as np

from geogp.core.calibration import fold_temperature
from geogp.core.grid_checks import NEARLY_REGULAR_TOLERANCE, spacing_variation
from geogp.core.optimize import FitReport
from geogp.core.progress import announce_fit
from geogp.core.robust import Contamination, gap_distance_class
from geogp.core.trend import (
    basis,
    check_trend_identifiable,
    monomial_powers,
    standardised_covariates,
)
from geogp.exceptions import GeogpError, InputError, MemoryEstimateError
from geogp.models.base import Standardizer, check_fitted
from geogp.models.lattice.gmrf import (
    HOLE_MAX,
    PARAM_HOLE,
    PARAM_RATIO,
    PARAMS,
    PARAMS_MID,
    RANGE_MAX_EXTENTS,
    LatticeProblem,
    clear_shared_lattice,
    fourier_features,
    log_range_cap,
    low_frequencies,
    make_problem,
)
from geogp.models.lattice.memory import (
    FACTOR_COPIES,
    factor_bytes,
    lattice_bytes,
    lattice_seconds,
    plan_tiles,
    plan_worker_tiles,
    tile_cells,
    varying_bytes,
)
from geogp.models.lattice.outputs import LatticeOutputsMixin
from geogp.models.lattice.posterior import LatticePosteriorMixin
from geogp.models.lattice.settings import check_settings, mid_factor, n_large
from geogp.models.lattice.tiles import composite_loss, every_tile, fit_local, fitting_tiles
from geogp.models.lattice.varying import (
    SPREAD_BLOCKS,
    SPREAD_VARYING,
    VARYING_AUTO_MAX_CELLS,
    VARYING_MAX_CELLS,
    VARYING_PARAMS,
    VaryingBasis,
    calibration_spread,
)
from geogp.models.lattice.workers import local_workers, release_memory

if TYPE_CHECKING:  # annotations only
    from distributed import Client
    from numpy.typing import ArrayLike

__all__ = ["LatticeRegressor", "ROBUST_STEPS", "ROBUST_REFIT_AFTER"]

# the varying range and sd's L-BFGS stops after VARYING_MAXITER iterations: the scores no longer
# move after that many (benchmarks/README.md, bench_nonstationary.py); with two factorisations
# per evaluation the stage costs about VARYING_FIT_COST stationary fits
VARYING_MAXITER = 30
VARYING_FIT_COST = 2
# the oscillating operator's fit starts at u = 1.9 (cos πθ = −0.9, a sharp spectral peak): from
# u = 0 or 1 L-BFGS ended in a lower mode on some periodic fields (benchmarks/README.md)
HOLE_START = 1.9
# robust=True: EM steps (one posterior each), and after how many θ is fitted again
ROBUST_STEPS = 5
ROBUST_REFIT_AFTER = 4
# ... and the gap-shaped folds its predictive's temperature is fitted on, after the refit
# (one posterior each; 0: no temperature)
ROBUST_TEMPER_FOLDS = 2
# a tempered θ: every variance of the model grows by the temperature²; the mean is unchanged
_VARIANCE_KEYS = ("log_sd", "log_noise", "log_sd_mid", "log_sd_large")
# steps within this relative deviation of their mean make a regular axis (origin + i·step), as
# in the front end (geogp.frontend.adapters.check_axis); others map coordinates along the axis
# itself
REGULAR_RTOL = 1e-9



# --------------------------------------------------------------------------- estimator
class LatticeRegressor(LatticeOutputsMixin, LatticePosteriorMixin):
    """SPDE / GMRF Gaussian process on a regular raster (see the module docstring).

    Args:
        alpha: 2 (Matérn ν = 1, default: calibrated intervals), 1 (rougher; more accurate
            means on satellite gaps, but under-dispersed intervals), 3 (Matérn ν = 2, for
            smooth fields) or ``"auto"`` (the front end's default): α = 2, unless its range
            runs beyond the fitting tiles (:meth:`_smoother_wins`), where α = 3 is fitted on
            the same tiles too and the higher likelihood decides. ``alpha_`` is the one used.
        margin: cells added on every side of the raster (the SPDE boundary effect decays over
            about one range).
        mean: trend ``"constant"``, ``"linear"`` (default) or ``"quadratic"`` in the
            standardised coordinates; β integrated with a flat prior.
        range: initial range (model units); default from the data (10 cells).
        sd: initial marginal sd (data units); default from the data.
        noise: initial noise sd (data units); default from the data.
        optimize: learn θ (else keep the initial values). maxiter: L-BFGS iterations.
        fit_cells: lattice cells (margins excluded) in the hyperparameter fit; larger rasters
            are fitted on tiles of ``tile`` cells square (composite likelihood). None: exact
            likelihood of the whole raster.
        tile: side of the fitting tiles, in cells.
        backend: ``"auto"`` (CHOLMOD when available), ``"cholmod"`` or ``"dense"``.
        ordering: CHOLMOD fill-reducing ordering (default nested dissection).
        max_bytes: refuse lattices whose factor would need more memory than this.
        progress: ``progress(iteration, objective)`` after each L-BFGS iteration; a
            :class:`geogp.core.progress.FitProgress` also gets the refit and the posterior's steps.
        large_scale: None (default), a number of large-scale Fourier features (cos/sin pairs of
            the lowest frequencies of a window ``large_scale_window`` times the lattice) or
            ``"auto"`` (:data:`LARGE_SCALE_AUTO` beside the mid-scale level,
            :data:`LARGE_SCALE_ALONE` without it): the multi-resolution model y = Φᵀu + Xβ + g + ε
            with u ~ N(0, Λ(ℓ_L, s_L)), Λ from the spectral density of ``large_scale_kernel``
            (``"matern12"``, ``"matern32"``, ``"matern52"``, ``"se"``); u is integrated exactly in
            the same Woodbury step as β (see :mod:`geogp.models.lattice.gmrf`). θ is fitted in
            two stages: the local (range, sd, noise) on the tiles, each with its own trend
            standing in for the large scales; then (ℓ_L, s_L) and one overall scale of the
            local sd² and noise on the whole raster at that local shape, where only a small
            dense matrix depends on them (no extra sparse work: the posterior's factorisation
            is reused). ``local_scale_`` is that scale.
        second_range: with α = 2, the operator (κ₁² − Δ)(κ₂² − Δ) with two ranges: ρ (from
            κ₁ = √8/ρ) and a shorter one from κ₂ = κ₁(1 + e^t) ≥ κ₁ (parameter ``log_ratio``
            = t, learnt). κ₂ = κ₁ is the Matérn ν = 1 model; κ₂ ≫ κ₁ behaves like α = 1
            between the two ranges and stays smooth below 1/κ₂. Same sparsity and cost as
            α = 2; log|Q| stays in closed form.
        hole_effect: False (default), True or ``"auto"`` (the front end's default): with α = 2,
            the oscillating operator c (κ⁴ + 2bκ²(−Δ) + Δ²), b = cos πθ = 1 − u (parameter
            ``hole``, u ∈ [0, 1.99], learnt): a damped oscillating ("hole effect") covariance
            whose spectrum peaks at wavelength 2π/(κ√−b) once b < 0, for periodic fields
            (waves, dunes, rows); u = 0 is Matérn ν = 1. Same sparsity and cost as α = 2;
            log|Q| stays in closed form. ``"auto"`` fits it beside the α = 3 attempt of
            ``alpha="auto"`` (:meth:`_fit_smoother`) and keeps it where likelier by more than
            its extra parameter; ``hole_`` says whether it is used.
        mid_scale: None (default) or a coarsening factor r ≥ 2: a second, independent
            Matérn ν = 1 field (α = 2, its own range and sd, learnt with the local θ) on a
            lattice r times coarser, bilinearly interpolated to the cells and added to the
            local field: the scales between the local range and the large-scale features.
            ``"auto"`` (the front end's default): r = 12 when both sides of the raster have
            at least 128 cells, else no level.
        posterior_tile: None (the exact posterior of the whole lattice, one factorisation),
            a core side in cells, or ``"auto"`` (default): None up to
            :data:`WHOLE_LATTICE_MAX_CELLS` lattice cells within ``max_bytes``, else the
            largest core up to :data:`POSTERIOR_CORE` whose tile fits ``max_bytes``. Each
            core's moments come from a tile that reaches ``posterior_halo`` cells of data
            beyond it (``"auto"``: :data:`POSTERIOR_HALO`); memory then grows with the tile,
            not the raster (docs/lattice.md, the posterior on tiles, with its error).
        robust: fit a noise model with gross errors (:mod:`geogp.core.robust`:
            each observation is, with a probability learnt per distance to the nearest gap,
            off by an error of its own), by EM: :data:`ROBUST_STEPS` reweighting steps, each
            one posterior, with θ fitted again under the weights after
            :data:`ROBUST_REFIT_AFTER` of them, and the predictive tempered: every variance
            widened by the factor that gap-shaped folds call for (:meth:`_temperature`; the
            mean is unchanged; ``params_`` and the reported sds and noise are the tempered
            ones, ``gross_errors()["temperature"]`` the factor). For cloud-mask leaks and
            spikes; on clean data 3–4.5× the time of a plain fit (docs/gvi.md).
            ``obs_weight_`` then shows what was distrusted.
        varying: a local range and sd that vary over the raster
            (:mod:`geogp.models.lattice.varying`: the non-stationary SPDE, log range and log
            sd on a multiresolution B-spline basis whose fine levels the prior shrinks; α = 2),
            fitted after the stationary θ, from it, on tiles covering the whole raster.
            None (default) or False: one range and sd everywhere; True: varying (the basis's
            levels from the raster's size), or an integer number of levels; ``"auto"`` (the
            front end's default): varying where the stationary fit's leave-one-out
            residuals are unevenly dispersed over the raster
            (:func:`~geogp.models.lattice.varying.calibration_spread`), on rasters up to
            :data:`~geogp.models.lattice.varying.VARYING_AUTO_MAX_CELLS` cells;
            ``varying_reason_`` says what was decided and why. :meth:`local_range` and
            :meth:`local_sd` map them.
        scheduler: where the posterior's tiles run: ``"auto"`` (default) on the current
            ``dask.distributed`` client's workers when one exists, else in this process;
            None: in this process; a ``Client`` or a scheduler address
            (:mod:`geogp.models.lattice.workers`). Same numbers either way.

    Attributes:
        params_: fitted log parameters (lattice units, standardised y).
        report_: the optimiser's :class:`~geogp.core.optimize.FitReport`.
        alpha_: the operator's α (``alpha``, or the one ``"auto"`` chose).
        origin_: the lattice's first cell centre per axis (margin included; model units).
        step_: the lattice's step per axis (model units; the mean step of a nearly regular
            axis).
        cell_axes_: None on a regular raster (cell i of an axis is at origin + i·step); on a
            nearly regular one (steps within
            :data:`~geogp.core.grid_checks.NEARLY_REGULAR_TOLERANCE` of their mean,
            Mercator-like or Gaussian latitudes) the (y, x) coordinates of the lattice's cell
            centres, the margins extended by the mean step: the field is fitted on the cells
            with the mean step (so its distances are off by at most that tolerance), and a
            coordinate maps to its cell along these axes (:meth:`cell_index`), so the raster's
            own cells are predicted exactly.
        scaler_: the :class:`~geogp.models.base.Standardizer` of inputs and outputs.
        range_: fitted range (model units).
        sd_: fitted marginal sd (data units).
        noise_sd_: fitted noise sd (data units).
        beta_: trend coefficients (standardised).
        shape_: lattice shape.
        n_obs_: observed cells.
        log_likelihood_: REML log likelihood of the whole raster at θ (standardised units);
            NaN when the posterior runs on tiles.
        fit_tiles_: number of tiles in the fit.
        mid_dropped_: True when ``mid_scale="auto"`` dropped the mid-scale level because the
            fit gave the local field the longer range (nearly noise-free smooth data); the
            ``progress`` tracker announces the refit (:mod:`geogp.core.progress`).
        mid_dropped_ranges_: that first fit's (local, mid-scale) ranges in model units (None
            when nothing was dropped, or unknown: a model saved before they were kept).
        posterior_tiles_: tiles of the posterior (1: the whole lattice).
        obs_weight_: None for a plain fit (every weight 1); with ``robust``, (n_y, n_x) each
            observed cell's weight (NaN where missing): the noise precision relative to σ² that
            the EM gave it (near 0: treated as a gross error).
        contamination_: with ``robust``, the gross-error model
            (:class:`~geogp.core.robust.Contamination`, standardised units; see
            :meth:`gross_errors`), else None.
    """

    def __init__(self, alpha: int = 2, *, margin: int = 16, mean: str = "linear",
                 range: float | None = None, sd: float | None = None, noise: float | None = None,
                 optimize: bool = True, maxiter: int = 100, fit_cells: int | None = 60_000,
                 tile: int = 128, backend: str = "auto",
                 ordering: str = "nesdis", max_bytes: float = 4 * 2**30,
                 progress: Callable[[int, float], object] | None = None,
                 large_scale: int | str | None = None,
                 large_scale_kernel: str = "matern32", large_scale_window: float = 1.5,
                 second_range: bool = False, hole_effect: bool = False,
                 mid_scale: int | str | None = None, posterior_tile: int | str | None = "auto",
                 posterior_halo: int | str = "auto", robust: bool = False,
                 varying: int | str | None = None,
                 scheduler: str | Client | None = "auto") -> None:
        self.alpha = alpha
        self.margin = margin
        self.mean = mean
        self.range = range
        self.sd = sd
        self.noise = noise
        self.optimize = optimize
        self.maxiter = maxiter
        self.fit_cells = fit_cells
        self.tile = tile
        self.backend = backend
        self.ordering = ordering
        self.max_bytes = max_bytes
        self.progress = progress
        self.large_scale = large_scale
        self.large_scale_kernel = large_scale_kernel
        self.large_scale_window = large_scale_window
        self.second_range = second_range
        self.hole_effect = hole_effect
        self.mid_scale = mid_scale
        self.posterior_tile = posterior_tile
        self.posterior_halo = posterior_halo
        self.robust = robust
        self.varying = varying
        self.scheduler = scheduler

    # called as ``tile_progress(phase, done, total)`` after each posterior tile (progress bars;
    # not a constructor option: a callback is not stored in model files)
    tile_progress = None
    # dask workers on this machine the posterior's tiles were planned for (the plan's sizes
    # depend on them): placement rebuilds the same tiles
    plan_workers_ = 0

    # ------------------------------------------------------------------ checks
    def check_args(self) -> None:
        """Refuse invalid constructor options (``ValueError``, ``InputError``)."""
        check_settings(self)

    @staticmethod
    def _axis(a, name: str) -> tuple[np.ndarray, bool]:
        """The axis as float64 and whether it is regular (steps equal within
        :data:`REGULAR_RTOL`); refuses steps that vary beyond
        :data:`~geogp.core.grid_checks.NEARLY_REGULAR_TOLERANCE`."""
        a = np.asarray(a, dtype=np.float64).ravel()
        if a.size < 2 or not np.all(np.isfinite(a)):
            raise InputError(f"the {name} axis needs at least 2 finite coordinates.")
        step = np.diff(a)
        if not (np.all(step > 0) or np.all(step < 0)):
            raise InputError(f"the {name} axis must be strictly monotonic.")
        variation = spacing_variation(a)
        if variation > NEARLY_REGULAR_TOLERANCE:
            raise InputError(
                f"model='lattice' needs a regularly spaced raster, or a nearly regular one whose "
                f"steps differ from their mean by at most {100 * NEARLY_REGULAR_TOLERANCE:.0f} "
                f"% (the tolerance); the {name} axis spacing varies by up to "
                f"{100 * variation:.3g} %. Regrid it first or use model='afs'.")
        return a, variation <= REGULAR_RTOL

    def memory_estimate(self, raster_shape: tuple[int, int], n_covariates: int = 0) -> float:
        """Estimated peak bytes of fitting a raster of ``raster_shape`` cells and computing its
        posterior (:func:`~geogp.models.lattice.memory.lattice_bytes`): one posterior tile's
        sparse work plus the raster's per-cell arrays, or, with ``varying`` forced and where
        it needs more, the varying stage's fitting tiles held at once
        (:func:`~geogp.models.lattice.memory.varying_bytes`; ``varying="auto"`` skips that
        stage where it would not fit)."""
        return self.cost_estimate(raster_shape, n_covariates=n_covariates)["bytes"]

    def cost_estimate(self, raster_shape: tuple[int, int], workers: int = 1,
                      n_covariates: int = 0) -> dict:
        """What a fit of ``raster_shape`` will take, before it starts: ``tiles`` (the
        posterior's), ``bytes`` (:meth:`memory_estimate`), ``seconds`` (rough: the rate of
        the 2-core reference machine, :func:`~geogp.models.lattice.memory.lattice_seconds`)
        and ``seconds_most``: the same when every refit the settings allow runs (the
        mid-scale level dropped, α = 3 tried: smooth fields such as DEMs)."""
        m = int(self.margin)
        tiles, here = self.tile_plan(raster_shape)
        cells = [tile_cells(t, m) for t in tiles]
        lattice = (raster_shape[0] + 2 * m) * (raster_shape[1] + 2 * m)
        needed = lattice_bytes(lattice, max(cells), self._alpha(),
                               self.mid_factor(raster_shape) is not None,
                               self._n_columns(n_covariates, raster_shape), here)
        robust = bool(self.robust)  # one more fit of θ, and one posterior per EM step
        fits, posteriors = 1 + robust, 1 + robust * ROBUST_STEPS
        hold = 0.0  # a robust fit's posteriors keep the whole lattice's factor, if it fits
        if robust and len(cells) == 1:
            hold = factor_bytes(cells[0], self._alpha(),
                                self.mid_factor(raster_shape) is not None) / FACTOR_COPIES
            hold = hold if needed + hold <= self.max_bytes else 0.0
        needed += hold
        refits = len(self._smoother_candidates()) + (
            self.mid_scale == "auto" and self.mid_factor(raster_shape) is not None)
        # varying="auto" skips the stage where it would not fit (_roughness_varies)
        stage = self._varying_bytes(raster_shape) if self._varying_forced else 0.0
        if self._varying_forced:  # the varying stage
            fits += VARYING_FIT_COST
        elif self.varying == "auto" and raster_shape[0] * raster_shape[1] <= (
                VARYING_AUTO_MAX_CELLS):  # when the data ask for it, and one more posterior
            refits += VARYING_FIT_COST + 1
        return {"tiles": len(cells), "bytes": max(needed, stage), "local_workers": here,
                "varying_stage": stage > needed, "holds_factor": hold > 0.0,
                "seconds": lattice_seconds(sum(cells), workers, fits, posteriors),
                "seconds_most": lattice_seconds(sum(cells), workers, fits + refits,
                                                posteriors)}

    def check_memory(self, raster_shape: tuple[int, int], n_covariates: int = 0) -> None:
        """Refuse, before allocating, a raster whose estimate exceeds ``max_bytes``."""
        cost = self.cost_estimate(raster_shape, n_covariates=n_covariates)
        needed = cost["bytes"]
        if needed > self.max_bytes and cost["varying_stage"]:
            raise MemoryEstimateError(
                f"the lattice model with a range and sd that vary on {raster_shape[0]} × "
                f"{raster_shape[1]} cells (the varying stage holds its "
                f"{len(self._varying_tiles(raster_shape))} fitting tiles' factors at once, and "
                "the raster's arrays)", needed, self.max_bytes,
                "Fit one range and sd (varying=None), crop or coarsen the raster, or raise "
                "max_bytes.",
                cli_hint="Leave out --local-range (one range and sd), crop or coarsen the "
                "raster, or raise --max-memory GIB if the machine has the memory.")
        if needed > self.max_bytes:
            workers = self.tile_plan(raster_shape)[1]
            where = (f" in each of the {workers} dask workers on this machine, their tiles' "
                     "states," if workers else ",")
            raise MemoryEstimateError(
                f"the lattice model on {raster_shape[0]} × {raster_shape[1]} cells (one "
                f"posterior tile's sparse factor and solves{where} and the raster's arrays)",
                needed,
                self.max_bytes, "Raise max_bytes, use a smaller posterior_tile, crop or "
                "coarsen the raster, or use model='afs'.",
                cli_hint="Raise --max-memory GIB if the machine has the memory, compute the "
                "posterior on smaller tiles (geogp fit --posterior-tile N), crop or coarsen "
                "the raster, or use --model afs.")

    # ------------------------------------------------------------------ fitting
    def fit_grid(self, axes: Sequence[ArrayLike], values: ArrayLike,
                 covariates: ArrayLike | None = None) -> LatticeRegressor:
        """Fit on a regular raster: ``axes`` = (y coordinates, x coordinates) in model units,
        ``values`` (n_y, n_x) with NaN = missing. Returns self. A nearly regular axis (steps
        within :data:`~geogp.core.grid_checks.NEARLY_REGULAR_TOLERANCE` of their mean) is fitted
        with its mean step (``cell_axes_``); one that varies more is refused.

        ``covariates``: (k, n_y, n_x) (or (n_y, n_x)) rasters on the same cells, finite at
        every cell, that enter the mean as k more regressors beside the trend (external
        drift / regression kriging), with a flat prior like β. ``covariate_coef_`` gives their
        coefficients in data units per covariate unit.

        Cost: per L-BFGS evaluation one sparse Cholesky (and a selected inversion) of each
        fitting tile; then one factorisation and selected inversion of the whole lattice.
        """
        self.check_args()
        if len(axes) != 2:
            raise InputError(f"model='lattice' needs a 2-D raster; got {len(axes)} axes.")
        (ay, regular_y), (ax, regular_x) = self._axis(axes[0], "y"), self._axis(axes[1], "x")
        v = np.asarray(values, dtype=np.float64)
        if v.shape != (ay.size, ax.size):
            raise InputError(f"values must have shape {(ay.size, ax.size)} (the axes); got "
                             f"{v.shape}.")
        if np.isinf(v).any():
            raise InputError("the raster contains infinite values; replace them by NaN.")
        obs = np.isfinite(v)
        self.obs_weight_, self.contamination_ = None, None  # unit weights until reweighted
        self.varying_basis_ = None  # stationary until the varying stage
        self.alpha_ = 2 if self.alpha == "auto" else int(self.alpha)
        self.hole_ = self.hole_effect is True
        powers = monomial_powers(self.mean, 2)
        m = int(self.margin)
        self._covariates, self.covariate_mean_, self.covariate_scale_ = (
            standardised_covariates(covariates, obs, m))
        p = (0 if powers is None else powers.shape[0]) + (
            0 if self._covariates is None else self._covariates.shape[0])
        if obs.sum() < p + 2:
            raise InputError(f"the raster has {int(obs.sum())} observed cell(s); the lattice "
                             f"model needs at least {p + 2}.")
        shape = (ay.size + 2 * m, ax.size + 2 * m)
        forced = self._varying_forced
        if forced and obs.size > VARYING_MAX_CELLS:  # before any fitting
            raise InputError(
                f"varying range and sd: up to {VARYING_MAX_CELLS:,} raster cells for now (their "
                f"fitting tiles cover the raster and are held together); this raster has "
                f"{obs.size:,}. Crop or coarsen it, or fit one range and sd (varying=None).")
        self.check_memory(v.shape, 0 if self._covariates is None else self._covariates.shape[0])
        # a nearly regular axis is fitted on its cells with the mean step (distances off by at
        # most NEARLY_REGULAR_TOLERANCE); coordinates map to cells along the axis itself
        regular = regular_y and regular_x
        self.step_ = tuple(float(a[1] - a[0] if regular else (a[-1] - a[0]) / (a.size - 1))
                           for a in (ay, ax))
        self.unit_ = unit = abs(self.step_[0])
        self.h_ = (1.0, abs(self.step_[1]) / unit)
        self.origin_ = (ay[0] - m * self.step_[0], ax[0] - m * self.step_[1])
        self.cell_axes_ = None if regular else tuple(
            np.concatenate([a[0] + step * np.arange(-m, 0), a, a[-1] + step * np.arange(1, m + 1)])
            for a, step in zip((ay, ax), self.step_, strict=True))
        self.shape_, self.powers_ = shape, powers
        self._frequencies()
        iy, ix = np.nonzero(obs)
        Xobs = np.stack([ay[iy], ax[ix]], axis=1)
        self.scaler_ = Standardizer.from_data(Xobs, v[obs])
        ys = self.scaler_.y(v[obs])
        trend = self._trend(iy + m, ix + m)
        check_trend_identifiable(trend, 0 if self._covariates is None else len(self._covariates))
        params = self._initial(ys, trend)
        tiles = [sl for sl in fitting_tiles(obs.shape, int(self.tile), self.fit_cells)
                 if obs[sl].sum() >= max(p + 2, 0.01 * obs[sl].size)]  # skip near-empty tiles
        if not tiles:
            tiles = [(slice(0, obs.shape[0]), slice(0, obs.shape[1]))]
        # stage 1 on the tiles
        self.mid_dropped_, self.mid_dropped_ranges_ = False, None
        self.fit_tiles_ = len(tiles)
        params, local, report = self._fit_local_field(obs, ys, trend, tiles)
        self.params_, self.report_ = {**params, **local}, report
        self.varying_spread_, self.varying_reason_ = None, None
        if forced:
            tiles = self._fit_varying(obs, ys, trend)
        hold = self._holds_factor(obs.shape)  # robust: the posteriors share one factor
        if not (self._smoother_candidates() and not forced
                and self._smoother_wins(local, tiles)
                and self._fit_smoother(obs, ys, trend, tiles)):
            release_memory()  # glibc keeps the freed heap of the tiles' factors
            # stage 2 (large scales, inside the posterior's factorisation) and the posterior;
            # a robust fit's reweighting steps factorise the same lattice again
            self._posterior(obs, ys, hold=hold)
        if self.varying == "auto" and self._roughness_varies(obs, ys):
            self._fit_varying(obs, ys, trend)
            release_memory()
            self._posterior(obs, ys)
        if self.robust:
            self._reweight(obs, ys, trend, tiles, hold)
        return self

    def _roughness_varies(self, obs, ys) -> bool:
        """``varying="auto"``: whether the stationary fit's leave-one-out residuals say that
        the roughness varies (:func:`~geogp.models.lattice.varying.calibration_spread` above
        :data:`~geogp.models.lattice.varying.SPREAD_VARYING`); sets ``varying_spread_`` and
        ``varying_reason_``."""
        cells = self._observed_cells(obs)
        spread = calibration_spread(self.posterior_.mean[cells], self.posterior_.var[cells],
                                    ys, self.noise_var_, obs)
        self.varying_spread_ = spread
        words = (f"the dispersion of the stationary fit's leave-one-out residuals varies by "
                 f"a factor {math.exp(spread):.3g} over the raster (geometric sd over a "
                 f"{SPREAD_BLOCKS}×{SPREAD_BLOCKS} partition; threshold "
                 f"{math.exp(SPREAD_VARYING):.3g})")
        if not spread > SPREAD_VARYING:
            self.varying_reason_ = "one range and sd: " + (
                words if math.isfinite(spread) else f"too few observations to compare the "
                f"blocks of a {SPREAD_BLOCKS}×{SPREAD_BLOCKS} partition")
            return False
        if self.alpha_ != 2:
            self.varying_reason_ = (f"one range and sd (alpha={self.alpha_}, the varying form "
                                    f"needs alpha=2) although {words}")
            return False
        if self.hole_:
            self.varying_reason_ = (f"one range and sd (the oscillating covariance fits best; "
                                    f"the varying form is not oscillating) although {words}")
            return False
        if self.robust:  # gross errors disperse the residuals unevenly too: the EM's job
            self.varying_reason_ = (f"one range and sd (robust=True: gross errors explain "
                                    f"uneven residuals) although {words}")
            return False
        if obs.size > VARYING_AUTO_MAX_CELLS:
            self.varying_reason_ = (f"one range and sd (the varying fit is chosen on rasters "
                                    f"up to {VARYING_AUTO_MAX_CELLS:,} cells) although {words}")
            return False
        need = self._varying_bytes(obs.shape)
        if need > self.max_bytes:  # the stage is optional here: skipped, not refused
            self.varying_reason_ = (f"one range and sd (the varying fit's tiles would need "
                                    f"about {need / 2**30:.2f} GiB, above the limit of "
                                    f"{self.max_bytes / 2**30:.2f} GiB) although {words}")
            return False
        self.varying_reason_ = f"range and sd varying: {words}"
        return True

    def _observed_cells(self, obs: np.ndarray) -> np.ndarray:
        """Flat whole-lattice indices of the raster's observed cells (row-major, the order of
        the standardised data ``ys``)."""
        m = int(self.margin)
        iy, ix = np.nonzero(obs)
        return (iy + m) * self.shape_[1] + ix + m

    def _fit_varying(self, obs, ys, trend) -> list:
        """``varying``: the local range and sd's coefficients (and the local θ again) from the
        stationary fit, on tiles covering the whole raster (a coefficient off the tiles would
        have only its prior). Returns those tiles."""
        levels = None if self.varying in ("auto", True) else int(self.varying)
        self.varying_basis_ = VaryingBasis.auto(obs.shape, levels)
        tiles = [sl for sl in self._varying_tiles(obs.shape)
                 if obs[sl].sum() >= 2 + trend.shape[1]]
        announce_fit(self.progress, "fit the varying range and sd", (
            f"a range and sd varying over the raster: {self.varying_basis_.n_coef} "
            f"coefficients each on {len(self.varying_basis_.intervals)} levels, fitted on "
            f"{len(tiles)} tile(s) from the stationary fit"), "setup + compile")
        _, local, self.report_ = self._fit_local_field(obs, ys, trend, tiles, start=self.params_)
        self.params_ = {**self.params_, **local}
        self.fit_tiles_ = len(tiles)
        release_memory()
        return tiles

    @property
    def _varying_forced(self) -> bool:
        """Whether the varying stage always runs (``varying=True`` or a number of levels)."""
        return self.varying not in (None, False, "auto")

    def _varying_bytes(self, shape: tuple[int, int]) -> float:
        """The varying stage's estimated peak on a raster of ``shape``
        (:func:`~geogp.models.lattice.memory.varying_bytes`)."""
        m = int(self.margin)
        return varying_bytes(
            (shape[0] + 2 * m) * (shape[1] + 2 * m),
            [(sy.stop - sy.start + 2 * m) * (sx.stop - sx.start + 2 * m)
             for sy, sx in self._varying_tiles(shape)])

    def _varying_tiles(self, shape: tuple[int, int]) -> list[tuple[slice, slice]]:
        """The windows the varying stage fits on: the whole raster up to ``fit_cells``
        cells, else tiles covering it all (a coefficient off the tiles would have only its
        prior)."""
        if self.fit_cells is None or shape[0] * shape[1] <= self.fit_cells:
            return [(slice(0, shape[0]), slice(0, shape[1]))]
        return every_tile(shape, int(self.tile))

    def local_range(self) -> np.ndarray:
        """(n_y, n_x) the local field's range at each raster cell, in model units (constant
        without ``varying``)."""
        return self._raster_scales()[0]

    def local_sd(self) -> np.ndarray:
        """(n_y, n_x) the local field's marginal sd at each raster cell, in data units
        (constant without ``varying``)."""
        return self._raster_scales()[1]

    def local_scales_at(self, points: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """((P,) local range in model units, (P,) local sd in data units) at ``points`` (P, 2)
        (model units); constant without ``varying``; beyond the raster, its edge's values."""
        check_fitted(self, "params_")
        m = int(self.margin)
        return self._scales(*(f - m for f in self.cell_index(points)))

    def _raster_scales(self) -> tuple[np.ndarray, np.ndarray]:
        """(local range, local sd) maps (n_y, n_x) on the raster's own cells."""
        check_fitted(self, "params_")
        rows, cols = np.indices(tuple(self._sides()))
        return tuple(a.reshape(rows.shape) for a in self._scales(rows.ravel(), cols.ravel()))

    def _scales(self, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(local range in model units, local sd in data units) at fractional raster
        positions (rows, cols)."""
        basis = getattr(self, "varying_basis_", None)
        out = []
        for key, coef, unit in (("log_range", VARYING_PARAMS[0], self.unit_),
                                ("log_sd", VARYING_PARAMS[1], self.scaler_.y_scale)):
            dev = (np.zeros(np.shape(rows)) if basis is None
                   else basis.at(np.asarray(self.params_[coef]), rows, cols))
            out.append(np.exp(float(self.params_[key]) + dev) * unit)
        return out[0], out[1]

    def _reweight(self, obs, ys, trend, tiles, hold: bool) -> None:
        """``robust``: the EM of :mod:`geogp.core.robust` from the plain fit; ``hold``: its
        posteriors keep the lattice's factor between them (:meth:`_holds_factor`)."""
        announce_fit(self.progress, "robust refit", (
            f"robust: {ROBUST_STEPS} reweighting steps (one posterior each), θ fitted again "
            f"after {ROBUST_REFIT_AFTER}"), "setup + compile")
        classes = gap_distance_class(obs)
        cells = self._observed_cells(obs)
        em = Contamination.start(ys)
        optimize, self.temperature_ = self.optimize, 1.0
        noise = self.noise_var_  # σ² of the posterior the next E-step reads
        try:
            for step in range(ROBUST_STEPS):
                em.step(self.posterior_.mean[cells], self.posterior_.var[cells], ys, noise,
                        classes)
                self.obs_weight_ = np.full(obs.shape, np.nan)
                self.obs_weight_[obs] = em.weight
                if step + 1 == ROBUST_REFIT_AFTER and self.optimize:
                    clear_shared_lattice()  # the fitting tiles' factors instead of the lattice's
                    # (the released factor is refactorised if the posterior's sampler is used)
                    _, local, self.report_ = self._fit_local_field(obs, em.target, trend, tiles)
                    self.params_ = {**self.params_, **local}
                    release_memory()
                # every step's lattice has one pattern: analysed once, its factor kept between
                self._posterior(obs, em.target, hold=hold and step + 1 < ROBUST_STEPS)
                noise = self.noise_var_
                if step + 1 == ROBUST_REFIT_AFTER < ROBUST_STEPS:  # the next posteriors use it
                    self.temperature_ = self._temperature(obs, ys, em, hold)
                    self.params_ = {k: v + math.log(self.temperature_) if k in _VARIANCE_KEYS
                                    else v for k, v in self.params_.items()}
                    self.optimize = False  # stage 2 keeps the tempered θ (c = 1)
        finally:
            self.optimize = optimize
            clear_shared_lattice()
        self.contamination_ = em

    def _holds_factor(self, raster_shape: tuple[int, int]) -> bool:
        """Whether a robust fit's posteriors keep the whole lattice's factor between them
        (one symbolic analysis for all): one posterior tile, and one more factor within
        ``max_bytes`` (:meth:`cost_estimate`)."""
        n_cov = 0 if self._covariates is None else self._covariates.shape[0]
        return bool(self.robust) and self.cost_estimate(raster_shape,
                                                        n_covariates=n_cov)["holds_factor"]

    def _temperature(self, obs: np.ndarray, ys: np.ndarray, em: Contamination,
                     hold: bool = False) -> float:
        """``robust``: the factor by which the predictive sds must grow for 95 % of clean
        observed values hidden under the raster's own gap shapes
        (:func:`~geogp.core.folds.gap_folds`, :data:`ROBUST_TEMPER_FOLDS` of them) to fall in
        the 95 % intervals, at the current θ and weights (the posterior of each fold, θ kept):
        the GVI predictive's temperature, fitted rather than assumed. Never below 1, and 1
        unless the folds show it beyond their own noise
        (:func:`~geogp.core.calibration.fold_temperature`). ``hold``: the folds' posteriors
        keep the lattice's factor (:meth:`_holds_factor`)."""
        def errors(hidden: np.ndarray) -> np.ndarray:
            part = copy.copy(self)
            part.optimize, part.progress, part.tile_progress = False, None, None
            kept = ~hidden[obs]
            part._posterior(obs & ~hidden, em.target[kept], hold=hold)
            at = self._observed_cells(hidden)
            sd = np.sqrt(part.posterior_.var[at] + part.noise_var_)
            clean = em.clean[~kept] > 0.5  # gross errors would widen it for the wrong reason
            return ((ys[~kept] - part.posterior_.mean[at]) / sd)[clean]

        return fold_temperature(obs, ROBUST_TEMPER_FOLDS, errors)

    def observation_weight(self, points: ArrayLike) -> np.ndarray:
        """(P,) the weight a ``robust`` fit gave the observed cell at each of ``points``
        (P, 2) (model units, snapped to the nearest cell centre; near 0: a gross error); NaN
        off the raster or where nothing was observed. A plain fit weighs every observation 1
        and has no map (InputError); model files keep a robust fit's weights."""
        check_fitted(self, "scaler_")
        pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        m = int(self.margin)
        idx = [np.rint(f).astype(np.int64) - m for f in self.cell_index(pts)]
        sides = [n - 2 * m for n in self.shape_]
        inside = (idx[0] >= 0) & (idx[0] < sides[0]) & (idx[1] >= 0) & (idx[1] < sides[1])
        out = np.full(pts.shape[0], np.nan)
        weight = getattr(self, "obs_weight_", None)
        if weight is None:
            raise InputError(
                "observation_weight() needs the weights of a fit with robust=True; this model "
                "file was written before files kept them, so fit again." if self.robust else
                "observation_weight() needs a fit with robust=True (a plain fit gives every "
                "observation the weight 1).")
        out[inside] = weight[idx[0][inside], idx[1][inside]]
        return out

    def gross_errors(self) -> dict:
        """The fitted gross-error model in data units (``robust=True``): ``prior`` (the
        probability per distance to the nearest gap, 1 … ``DISTANCE_CLASSES`` or more
        cells), ``shift`` and ``sd`` of the gross errors, and ``flagged``, the observed cells
        more likely gross errors than not; ``temperature``, the factor the predictive's sds
        were widened by (gap-shaped folds; 1: none)."""
        check_fitted(self, "scaler_")
        em = getattr(self, "contamination_", None)
        if em is None:
            raise InputError(
                "gross_errors() needs the fit itself: model files keep a robust fit's weights "
                "(observation_weight()), not its gross-error model; fit again." if self.robust
                else "gross_errors() needs a fit with robust=True.")
        return {"prior": np.asarray(em.prior), "shift": em.shift * self.scaler_.y_scale,
                "sd": float(np.sqrt(em.var)) * self.scaler_.y_scale,
                "flagged": int(np.sum(em.clean < 0.5)),
                "temperature": float(self.temperature_)}

    def _smoother_candidates(self) -> list[tuple[int, bool]]:
        """The operators, (α, hole effect), that ``"auto"`` settings try beside ν = 1 on a
        smooth field: α = 3 (``alpha="auto"``) and the oscillating one
        (``hole_effect="auto"``, which needs α = 2 alone and the optimiser)."""
        out = [(3, False)] if self.alpha == "auto" else []
        if (self.hole_effect == "auto" and self.alpha in (2, "auto") and self.optimize
                and not self.second_range):
            out.append((2, True))
        return out

    def _fit_smoother(self, obs, ys, trend, tiles) -> bool:
        """Where ν = 1's range runs beyond the tiles (:meth:`_smoother_wins`), fit each of
        :meth:`_smoother_candidates` on the tiles too; keep the likeliest (the oscillating
        operator's extra parameter costs 1 in log-likelihood, as in AIC) and compute its
        posterior. Returns whether one was kept; otherwise the ν = 1 fit stands, with
        everything the attempts warned about discarded. A ν = 1 field imitating a smooth one
        runs to the intrinsic limit, whose intervals are far too narrow deep in large gaps,
        and a periodic field needs a covariance that oscillates to be carried across a gap
        larger than its period (docs/lattice.md)."""
        candidates = self._smoother_candidates()
        names = {3: "ν = 2 (alpha=3)", 2: "an oscillating covariance (hole effect)"}
        why = (f"the local field's range ({float(np.exp(self.params_['log_range'])):.4g} cells) "
               f"runs beyond the fitting tiles: the field is smoother than Matérn ν = 1; fitting "
               f"{' and '.join(names[a] for a, _ in candidates)} too and keeping the most likely")
        rough = (self.params_, self.report_, self.mid_dropped_, self.mid_dropped_ranges_)
        n_fit = sum(int(obs[sl].sum()) for sl in tiles)
        best, best_loss, best_operator = rough, rough[1].objective, (2, False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for k, (alpha, hole) in enumerate(candidates):
                self.alpha_, self.hole_ = alpha, hole
                announce_fit(self.progress, f"fit {names[alpha]}", None if k else why,
                             "setup + compile")
                penalty = 1.0 / n_fit if hole else 0.0  # the objective is per observation
                # α = 3 from ν = 1's optimum (ranges mean the same distance for every ν), then,
                # where that ends below ν = 1 or fails (a flat ridge), from the usual start;
                # the oscillating operator from its own start (HOLE_START: its likelihood has
                # a separate mode there, which L-BFGS from ν = 1's optimum does not reach)
                starts = [rough[0], None] if alpha == 3 and self.optimize else [None]
                for start in starts:
                    self.mid_dropped_, self.mid_dropped_ranges_ = rough[2:]
                    try:
                        params, local, report = self._fit_local_field(obs, ys, trend, tiles,
                                                                      start=start)
                    except GeogpError:  # not finite anywhere from this start
                        continue
                    if report.objective + penalty < best_loss:
                        best = ({**params, **local}, report, self.mid_dropped_,
                                self.mid_dropped_ranges_)
                        best_loss, best_operator = report.objective + penalty, (alpha, hole)
                        break
            kept = best_operator != (2, False)
            self.alpha_, self.hole_ = best_operator
            self.params_, self.report_, self.mid_dropped_, self.mid_dropped_ranges_ = best
            if kept:
                release_memory()
                try:
                    self._posterior(obs, ys)
                except GeogpError:  # nearly noise-free data: singular where ν = 1 is not
                    kept = False
        if not kept:
            self.alpha_, self.hole_ = 2, False
            self.params_, self.report_, self.mid_dropped_, self.mid_dropped_ranges_ = rough
            return False
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return True

    def _smoother_wins(self, local: dict, tiles: list) -> bool:
        """Whether ``"auto"`` should try α = 3: the ν = 1 field's range exceeds the largest
        fitting lattice's extent, where only the field's smoothness is being fitted."""
        top = self._range_bounds(tiles)["log_range"][1]
        return float(local["log_range"]) >= top - math.log(RANGE_MAX_EXTENTS)

    def _fit_local_field(self, obs, ys, trend, tiles,
                         start: dict | None = None) -> tuple[dict, dict, FitReport]:
        """Stage 1 at ``alpha_``: (initial parameters, fitted local θ, report); with
        ``mid_scale="auto"``, drops the mid-scale level where the fit makes the local field
        the longer-ranged one. ``start``: local parameters to start from (those it has)."""
        params = self._initial(ys, trend)
        if start is not None:
            params.update({k: v for k, v in start.items() if k in params})
        problems = [self._problem(obs, ys, sl, large=False) for sl in tiles]
        local, report = self._stage1(params, problems, tiles)
        if (self.mid_scale == "auto" and self.mid_factor() is not None
                and local["log_range"] >= local["log_range_mid"]):
            # the likelihood made the "local" field the longer-ranged one (nearly noise-free,
            # smooth data such as a DEM): the level is not identified there and only pushes the
            # noise towards a singular posterior. "auto" drops it and fits the local field
            # again from the usual start (from where it ended, the noise, which such data do
            # not identify, stayed where the level had pushed it).
            self.mid_dropped_ = True
            self.mid_dropped_ranges_ = tuple(float(np.exp(local[k]) * self.unit_)
                                             for k in ("log_range", "log_range_mid"))
            announce_fit(self.progress, "refit without the mid-scale field", (
                "mid-scale field dropped: the first fit gave the local field a longer range "
                f"({float(np.exp(local['log_range'])):.4g} cells) than the mid-scale field "
                f"({float(np.exp(local['log_range_mid'])):.4g} cells), which is then not "
                "identified; fitting the local field again without it"), "setup + compile")
            params = self._initial(ys, trend)
            problems = [self._problem(obs, ys, sl, large=False) for sl in tiles]
            local, report = self._stage1(params, problems, tiles)
        return params, local, report

    def _hole(self) -> bool:
        """Whether the operator is the oscillating one: the fitted ``hole_``; before a fit,
        ``hole_effect is True``."""
        fitted = getattr(self, "hole_", None)
        return bool(fitted) if fitted is not None else self.hole_effect is True

    def _alpha(self) -> int:
        """The operator's α: the fitted ``alpha_``; before a fit ``alpha``, with 2 for
        ``"auto"`` (α = 3 is chosen only after stage 1, and its posterior tiles are planned
        then)."""
        fitted = getattr(self, "alpha_", None)
        if fitted is not None:
            return int(fitted)
        return 2 if self.alpha == "auto" else int(self.alpha)

    def plan_posterior_tiles(self, raster_shape: tuple[int, int],
                             workers: int | None = None) -> list:
        """The posterior's tiles on a raster of ``raster_shape`` (:meth:`tile_plan`, for the
        local dask workers of ``scheduler``, or for ``workers`` of them)."""
        return self.tile_plan(raster_shape, workers)[0]

    def tile_plan(self, raster_shape: tuple[int, int],
                  workers: int | None = None) -> tuple[list, int]:
        """(the posterior's tiles, how many dask workers on this machine run them).

        ``posterior_tile="auto"`` takes the whole lattice when it has at most
        :data:`WHOLE_LATTICE_MAX_CELLS` cells within ``max_bytes``, else the largest core up
        to :data:`POSTERIOR_CORE` that fits (:func:`~geogp.models.lattice.memory.plan_tiles`).
        With ``workers`` on this machine (None: those of ``scheduler``,
        :func:`~geogp.models.lattice.workers.local_workers`) each holding a tile, the tiles
        are sized so that all of them fit together
        (:func:`~geogp.models.lattice.memory.plan_worker_tiles`); where no sensible size
        does, the tiles run in this process (0 workers).
        """
        m = int(self.margin)
        mid, columns = self.mid_factor(raster_shape), self._n_columns(0, raster_shape)
        alone = plan_tiles(raster_shape, m, self._alpha(), mid, columns, self.max_bytes,
                           self.posterior_tile, self.posterior_halo)
        workers = local_workers(self.scheduler) if workers is None else int(workers)
        if workers <= 0 or len(alone) == 1:
            return alone, 0
        if self.posterior_tile != "auto":  # tiles given: the workers run them if they fit
            lattice = (raster_shape[0] + 2 * m) * (raster_shape[1] + 2 * m)
            needed = lattice_bytes(lattice, max(tile_cells(t, m) for t in alone),
                                   self._alpha(), mid is not None, columns, workers)
            return alone, workers if needed <= self.max_bytes else 0
        shared = plan_worker_tiles(raster_shape, m, self._alpha(), mid, columns,
                                   self.max_bytes, workers, self.posterior_halo)
        return (alone, 0) if shared is None else (shared, workers)

    def _n_columns(self, n_covariates: int = 0, raster_shape=None) -> int:
        """1 + k + p: the data, large-scale feature and trend columns of the solves."""
        powers = monomial_powers(self.mean, 2)
        return (1 + self._n_large(raster_shape) + n_covariates
                + (0 if powers is None else len(powers)))

    def _stage1(self, params: dict, problems: list, tiles: list) -> tuple[dict, FitReport]:
        """The local field's θ on the tiles (each tile's own trend stands in for the large
        scales, which a tile cannot identify)."""
        local = {k: params[k] for k in self._local_keys()}
        basis = getattr(self, "varying_basis_", None)
        prior = None if basis is None else basis.prior_sd()
        if not self.optimize:
            out = local, FitReport(float(composite_loss(local, tuple(problems), prior)), 0, 1,
                                   True, "not optimised", 0.0)
        else:
            maxiter = int(self.maxiter) if basis is None else min(int(self.maxiter),
                                                                  VARYING_MAXITER)
            out = fit_local(local, problems, self._range_bounds(tiles),
                            maxiter=maxiter, progress=self.progress, prior=prior)
        for problem in problems:  # the compiled likelihood keeps their factors alive
            problem.pattern.release_factors()
        return out

    def _range_bounds(self, tiles: list) -> dict:
        """Upper bounds of the fields' log ranges: :data:`RANGE_MAX_EXTENTS` times the
        largest fitting lattice's extent (lattice units).

        Far beyond the lattice the field is its intrinsic limit: the likelihood rises ever more
        slowly along a ridge (ρ → ∞ with s ∝ ρ) and, as the constant mode's prior precision
        c κ⁴ vanishes against the data's N/σ², M_XX = XᵀΣ⁻¹X loses its digits to
        cancellation. Unbounded, L-BFGS followed the ridge into that noise and stopped
        wherever the rounding of the installed BLAS/JAX let it."""
        m = 2 * int(self.margin)
        top = (None, max(log_range_cap([sl.stop - sl.start + m for sl in tile], self.h_)
                         for tile in tiles))
        out = {k: top for k in ("log_range", "log_range_mid") if k in self._local_keys()}
        if PARAM_HOLE in self._local_keys():
            out[PARAM_HOLE] = (0.0, HOLE_MAX)
        return out

    @property
    def covariate_coef_(self) -> np.ndarray:
        """Coefficients of the covariates, in data units per covariate unit (k,)."""
        check_fitted(self, "beta_")
        k = 0 if getattr(self, "covariate_scale_", None) is None else self.covariate_scale_.size
        if k == 0:
            return np.zeros(0)
        return self.scaler_.y_scale * np.asarray(self.beta_)[-k:] / self.covariate_scale_

    def _trend(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Trend features at lattice cells (row, col): the polynomial in the standardised
        coordinates, then the standardised covariates."""
        if self.powers_ is None:
            out = np.zeros((rows.size, 0))
        else:
            out = basis(self.scaler_.x(self.cell_centres(rows, cols)), self.powers_)
        cov = getattr(self, "_covariates", None)
        if cov is not None:
            out = np.concatenate([out, cov[:, rows, cols].T], axis=1)
        return out

    def _local_keys(self) -> tuple:
        """The local field's parameters (stage 1)."""
        return (PARAMS + ((PARAM_RATIO,) if self.second_range else ())
                + ((PARAM_HOLE,) if self._hole() else ())
                + (PARAMS_MID if self.mid_factor() is not None else ())
                + (VARYING_PARAMS if getattr(self, "varying_basis_", None) is not None
                   else ()))

    def _sides(self, raster_shape=None):
        return (raster_shape if raster_shape is not None
                else [n - 2 * int(self.margin) for n in self.shape_])

    def mid_factor(self, raster_shape: tuple[int, int] | None = None) -> int | None:
        """The mid-scale level's coarsening factor on a raster of ``raster_shape`` (default:
        the fitted one; None: no level, also once the fit has dropped it, ``mid_dropped_``)."""
        if getattr(self, "mid_dropped_", False):
            return None
        return mid_factor(self.mid_scale, self._sides(raster_shape))

    def _n_large(self, raster_shape=None) -> int:
        """The large-scale feature columns on a raster of ``raster_shape`` (default: the
        fitted one); see :func:`~geogp.models.lattice.settings.n_large`."""
        return n_large(self.large_scale, self.mid_scale, self._sides(raster_shape))

    def _frequencies(self) -> None:
        self.freq_, self._dw = low_frequencies(self.shape_, self.h_, self._n_large() // 2,
                                               self.large_scale_window)

    def _features(self, rows: np.ndarray, cols: np.ndarray, freq=None) -> np.ndarray:
        """Large-scale features at lattice cells (row, col); ``freq`` default ``freq_``."""
        return fourier_features(rows * self.h_[0], cols * self.h_[1],
                                self.freq_ if freq is None else freq)

    def _initial(self, ys: np.ndarray, X: np.ndarray) -> dict:
        resid = ys - X @ np.linalg.lstsq(X, ys, rcond=None)[0] if X.shape[1] else ys
        sd0 = max(float(np.std(resid)), 1e-3)
        sd = self.sd / self.scaler_.y_scale if self.sd is not None else sd0
        noise = self.noise / self.scaler_.y_scale if self.noise is not None else 0.3 * sd0
        rng = self.range / self.unit_ if self.range is not None else 10.0
        out = {"log_range": jnp.asarray(math.log(rng)), "log_sd": jnp.asarray(math.log(sd)),
               "log_noise": jnp.asarray(math.log(noise))}
        if self.second_range:
            out[PARAM_RATIO] = jnp.asarray(0.0)  # κ₂ = 2κ₁
        if self._hole():
            out[PARAM_HOLE] = jnp.asarray(HOLE_START)
        if self.mid_factor() is not None:
            # start the two fields at separated scales (ranges ×10 apart) sharing the variance:
            # fewer L-BFGS evaluations to the same optimum (benchmarks/README.md, design)
            if self.sd is None:
                out["log_sd"] = jnp.asarray(math.log(sd / math.sqrt(2.0)))
            out["log_range_mid"] = jnp.asarray(math.log(10.0 * rng))
            out["log_sd_mid"] = jnp.asarray(math.log(sd / math.sqrt(2.0)))
        basis = getattr(self, "varying_basis_", None)
        if basis is not None:
            out.update({k: jnp.zeros(basis.n_coef) for k in VARYING_PARAMS})
        if self._n_large():
            ext = 0.25 * max(n * h for n, h in zip(self.shape_, self.h_, strict=True))
            out["log_range_large"] = jnp.asarray(math.log(ext))
            out["log_sd_large"] = jnp.asarray(math.log(sd))
        return out

    def _problem(self, obs: np.ndarray, ys: np.ndarray, sl=None, large: bool = True,
                 at=(0, 0), share: bool = False) -> LatticeProblem:
        """The problem of the raster window ``sl`` (default all) extended by the margin. With
        ``large`` (the posterior's problems): the large-scale features, and with the mid-scale
        level the pattern entries of the exact neighbour covariances; without (a fitting
        tile): neither. ``at``: the raster's (row, col) of ``obs[0, 0]`` (when ``obs`` and
        ``ys`` are a window of the raster). ``share``: see
        :func:`~geogp.models.lattice.gmrf.make_problem`."""
        sy, sx = sl if sl is not None else (slice(0, obs.shape[0]), slice(0, obs.shape[1]))
        m = int(self.margin)
        full = np.full(obs.shape, -1, dtype=np.int64)
        full[obs] = np.arange(ys.size)
        idx = full[sy, sx]
        shape = (idx.shape[0] + 2 * m, idx.shape[1] + 2 * m)
        r, c = np.nonzero(idx >= 0)
        order = idx[r, c]
        rows, cols = r + sy.start + at[0] + m, c + sx.start + at[1] + m
        X = self._trend(rows, cols)
        cells = (r + m) * shape[1] + (c + m)
        freq = self.freq_ if large else self.freq_[:0]
        f2 = np.tile(np.sum(freq**2, axis=1), 2)
        feats = self._features(rows, cols, freq)
        weight = getattr(self, "obs_weight_", None)
        basis = getattr(self, "varying_basis_", None)
        return make_problem(shape, self.h_, self._alpha(), cells, ys[order], X,
                            self.backend, self.ordering, feats, f2,
                            getattr(self, "_dw", 0.0), self.large_scale_kernel,
                            self.mid_factor(), neighbours=large, share=share,
                            weights=None if weight is None else weight[rows - m, cols - m],
                            varying=None if basis is None else (
                                basis, sy.start + at[0] - m, sx.start + at[1] - m))
