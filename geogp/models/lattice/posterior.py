"""Stage 2 and the posterior of the lattice model (:class:`~geogp.models.lattice.LatticeRegressor`).

After stage 1 has fitted the local θ on tiles, :func:`lattice_posterior` factorises the
lattice (whole, or tile by tile with :mod:`geogp.models.lattice.tiled`), fits the large-scale θ
and the overall scale c on the small dense part (:func:`fit_large_scales`, stage 2 of
docs/lattice.md), and returns a :class:`LatticePosterior`: per cell the posterior mean,
variance and the neighbour covariances that bilinear prediction needs, from the selected
inverse of B. It reads the fitted model and changes nothing; the estimator's
``_posterior`` (:class:`LatticePosteriorMixin`) keeps the scalars as fitted attributes and
the per-cell state as ``posterior_`` (:mod:`geogp.models.lattice.state`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from geogp.core.optimize import FitReport, minimize_lbfgs
from geogp.core.progress import advance, start_phase
from geogp.exceptions import ApproximationWarning, GeogpError
from geogp.models.lattice.gmrf import (
    LARGE_SCALE_LOSSES,
    PARAM_SCALE,
    PARAMS_LARGE,
    clear_shared_lattice,
    dense_likelihood,
    log_range_cap,
)
from geogp.models.lattice.memory import check_state_disk
from geogp.models.lattice.mid import mid_lattice
from geogp.models.lattice.state import Sampler, Tiled, Whole
from geogp.models.lattice.tiled import (
    CoreState,
    PosteriorTile,
    core_gram,
    core_moments,
    core_state,
    extended_core,
    field_covariance,
    in_core,
    inverse_later,
    selected_inverse,
    solve_tile,
)
from geogp.models.lattice.workers import (
    dask_client,
    local_workers,
    release_memory,
    sparse_pass,
)

if TYPE_CHECKING:  # annotations only
    from distributed import Client

    from geogp.linalg.pattern import SparsePattern
    from geogp.models.lattice.regressor import LatticeRegressor

__all__ = ["LargeScaleFit", "LatticePosterior", "LatticePosteriorMixin", "fit_large_scales",
           "lattice_posterior", "tile_problem", "tile_sampler", "tile_statistics",
           "WHOLE_STEPS"]

# the steps of the posterior on the whole lattice, as its progress bar names them
WHOLE_STEPS = ("factorisation + solves", "selected inversion", "neighbour covariances",
               "large scales", "moments")



class LatticePosterior(NamedTuple):
    """The lattice model's posterior at fitted parameters, a value (:func:`lattice_posterior`).

    Attributes:
        params: θ after stage 2, the overall scale c folded into every variance of Σ_g.
        local_scale: c (1.0 when stage 2 did not run or fell back).
        report_large: stage 2's :class:`~geogp.core.optimize.FitReport` (None: not optimised).
        log_likelihood: log p(y | θ) of the whole lattice; NaN on tiles (not assembled).
        n_obs: observed cells.
        beta: posterior mean of the trend coefficients (p,).
        large_coef: posterior mean of the large-scale coefficients u (k,).
        mean, var: posterior mean and variance of f per lattice cell (n,), standardised.
        cov: covariances with the neighbours (4, n) (see
            :func:`~geogp.models.lattice.tiled.core_moments`).
        sampler: the whole lattice's factored covariance (one tile only; None on tiles).
        n_tiles: the posterior's tiles.
        w_cov: D A⁻¹ D (k + p, k + p), the posterior covariance of the large-scale and trend
            weights in the columns' own scale (the dense part of Cov f is g w_cov gᵀ,
            g = F − S_F; :func:`tile_sampler`).
    """

    params: dict
    local_scale: float
    report_large: FitReport | None
    log_likelihood: float
    n_obs: int
    beta: np.ndarray
    large_coef: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    cov: np.ndarray
    sampler: Sampler | None
    n_tiles: int
    w_cov: np.ndarray


class LargeScaleFit(NamedTuple):
    """Stage 2's result (:func:`fit_large_scales`): θ (c folded in), c, the optimiser's
    report, and the dense part (log p, ŵ, A, D) at θ."""

    params: dict
    local_scale: float
    report: FitReport | None
    dense: tuple


def lattice_posterior(model: LatticeRegressor, params: dict, obs: np.ndarray, ys: np.ndarray,
                      tiles: list, client: Client | None = None,
                      hold: bool = False) -> LatticePosterior:
    """The posterior of the fitted lattice ``model`` at the stage-1 θ ``params``: mean,
    variances and neighbour covariances on the whole lattice, after stage 2 has fitted the
    large scales and c. Tile by tile (:mod:`geogp.models.lattice.tiled`; on ``client``'s
    dask workers when given, :mod:`geogp.models.lattice.workers`), or as one tile, the whole
    lattice. ``model`` is only read (its problem builders and settings); ``obs`` (raster
    shape) and ``ys`` (standardised observed values) are the data. The steps (or tiles) are
    reported to ``model.progress`` (:mod:`geogp.core.progress`). ``hold``: keep the whole
    lattice's factor (and its symbolic analysis) for the next posterior of the same lattice
    (:meth:`LatticePosteriorMixin._posterior`)."""
    single, n, progress = len(tiles) == 1, len(tiles), getattr(model, "progress", None)
    if single:
        start_phase(progress, "posterior on the whole lattice", WHOLE_STEPS)
    else:
        start_phase(progress, f"posterior on {n} tiles (2 passes)",
                    [f"pass 1: tile solves, {i} of {n} done" for i in range(n)]
                    + ["large scales"]
                    + [f"pass 2: tile moments, {i} of {n} done" for i in range(n)])
    raster = np.full(obs.shape, np.nan)
    raster[obs] = ys  # the standardised data, NaN where missing
    # pass 1, each tile's sparse work at the stage-1 θ: M = [y, F]ᵀ Σ_g⁻¹ [y, F] summed over
    # the cores (one tile: exact, with log|Σ_g|), and the states its moments need
    if single:
        m_mat, logdet_sigma, state, sampler = tile_statistics(
            model, raster, tiles[0], params, keep=True, release=not hold)
        kept = contextlib.nullcontext()
    else:
        check_state_disk(tiles, model._n_columns(), client)
        grams, kept = sparse_pass(model, tile_statistics, raster, tiles, (params,), client)
        m_mat = sum(grams)  # in tile order: the same sum wherever it ran
        m_mat, logdet_sigma = 0.5 * (m_mat + m_mat.T), 0.0  # a constant of stage 2
    with kept:
        n_obs, freq2 = int(obs.sum()), np.tile(np.sum(model.freq_**2, axis=1), 2)
        fit = fit_large_scales(model, params, m_mat, logdet_sigma, n_obs, freq2)
        advance(progress)
        ll, w, a, d = fit.dense
        k = freq2.shape[0]
        vbeta = np.linalg.inv(a) if a.size else np.zeros((0, 0))
        # pass 2, dense only: B/c has the inverse c B⁻¹, so the stage-1 solves serve
        args = (fit.local_scale, d, w, vbeta)
        if single:
            parts = [core_moments(state, *args)]
            advance(progress)
        else:
            parts = kept.map(core_moments, args, getattr(model, "tile_progress", None))
        ny, nx = model.shape_
        mean, var, cov = np.zeros((ny, nx)), np.zeros((ny, nx)), np.zeros((4, ny, nx))
        for tile, (m_t, v_t, c_t) in zip(tiles, parts, strict=True):
            mean[tile.core], var[tile.core] = m_t, v_t
            cov[(slice(None), *tile.core)] = c_t
    samples, w_cov = None, d[:, None] * vbeta * d[None, :]
    if single:  # the covariance in factored form (kept in memory only; files keep moments):
        # the dense part of Cov f is r A⁻¹ rᵀ with r = (F − S_F) D, kept as g = F − S_F
        # (the state's own array, no copy) and D A⁻¹ D
        cy, cx = model.shape_  # one tile: its core is the whole lattice
        pattern, b_vals, dense, pi = sampler
        samples = Sampler(pattern, b_vals / fit.local_scale, dense, pi,  # B/c
                          state.g[:cy, :cx].reshape(cy * cx, -1), w_cov)
    return LatticePosterior(
        params=fit.params, local_scale=fit.local_scale, report_large=fit.report,
        log_likelihood=float(ll) if single else float("nan"), n_obs=n_obs, beta=w[k:],
        large_coef=w[:k] * d[:k],  # posterior mean of u
        mean=mean.ravel(), var=var.ravel(), cov=cov.reshape(4, ny * nx), sampler=samples,
        n_tiles=len(tiles), w_cov=w_cov)


def fit_large_scales(model: LatticeRegressor, params: dict, m_mat: np.ndarray, logdet_sigma: float,
                     n_obs: int,
                     freq2: np.ndarray) -> LargeScaleFit:
    """Stage 2 at the local shape (range, noise/sd) of stage 1 (``params``): the large-scale
    θ and one overall scale c of the local field and noise, on the small dense part only (no
    sparse work; ``model.optimize`` False: θ kept, c = 1). Falls back to the stage-1 θ with a
    warning where the dense part is not finite; raises :class:`GeogpError` where it is not
    finite there either."""
    dw, kernel = getattr(model, "_dw", 0.0), model.large_scale_kernel
    stage1 = (dict(params), m_mat, logdet_sigma)
    params, scale, report = dict(params), 1.0, None
    if model.optimize:
        large = PARAMS_LARGE if freq2.shape[0] else ()
        try:
            params, report = minimize_lbfgs(
                LARGE_SCALE_LOSSES[kernel], {**params, PARAM_SCALE: 0.0},
                args=(m_mat, logdet_sigma, n_obs, freq2, dw),
                unconstrained=model._local_keys() + large + (PARAM_SCALE,),
                fixed=model._local_keys(), maxiter=int(model.maxiter),
                bounds=model._large_scale_bounds() if large else None)
        except GeogpError:
            # the dense half is not finite anywhere the optimiser looked: with a noise
            # far below the signal, M = yᵀΣ⁻¹y − … loses most of its digits. Keep the
            # initial large-scale θ and c = 1; the posterior below is checked.
            ratio = math.exp(float(params["log_noise"] - params["log_sd"]))
            warnings.warn(
                "lattice model: the whole-raster likelihood of the large scales could not "
                f"be evaluated (noise sd / signal sd = {ratio:.2g}: nearly noise-free data "
                "make it ill-conditioned); the large-scale parameters keep their initial "
                "values.", ApproximationWarning, stacklevel=5)
            params = {**params, PARAM_SCALE: 0.0}
        # fold c into (sd, mid-scale sd, noise): B = Q + PᵀP/σ² becomes B/c, so M/c,
        # log|Σ_g| + N log c and B⁻¹ c B⁻¹, while B⁻¹Pᵀy/σ² (S) is unchanged
        t = float(params.pop(PARAM_SCALE))
        for key in ("log_sd", "log_noise", "log_sd_mid"):  # every variance of Σ_g
            if key in params:
                params[key] = params[key] + 0.5 * t
        scale = math.exp(t)
        m_mat, logdet_sigma = m_mat / scale, logdet_sigma + n_obs * t

    def dense_part(params, m_mat, logdet_sigma):
        out = tuple(np.asarray(v) for v in dense_likelihood(
            params, m_mat, logdet_sigma, n_obs, freq2, dw, kernel))
        return out, bool(np.isfinite(out[0]) and np.all(np.isfinite(out[1]))
                         and np.all(np.isfinite(out[2])))

    out, finite = dense_part(params, m_mat, logdet_sigma)
    if not finite and model.optimize:
        # stage 2 ended where the small dense system is singular (nearly noise-free data,
        # run-to-run rounding): fall back to the stage-1 θ with its initial large scales
        out, finite = dense_part(*stage1)
        if finite:
            warnings.warn(
                "lattice model: the whole-raster fit of the large scales ended where the "
                "posterior is numerically singular (nearly noise-free data); the stage-1 "
                "parameters with the initial large scales are used instead.",
                ApproximationWarning, stacklevel=5)
            params, scale, report = stage1[0], 1.0, None
    if not finite:
        raise GeogpError(
            "lattice model: the posterior is numerically singular at the fitted parameters "
            f"({ {k: round(float(v), 3) for k, v in params.items()} }); nearly "
            "noise-free data are the usual cause. Pass a larger noise= or sd=, "
            "large_scale=None, or use model='afs'.")
    return LargeScaleFit(params, scale, report, out)


class LatticePosteriorMixin:
    """The estimator's shell around :func:`lattice_posterior` (reads ``params_``,
    ``shape_``, ``mid_factor()``, ``optimize``, ``maxiter``, ``ordering`` and the
    estimator's ``_problem``, ``_local_keys``, ``_features``, ``_trend``)."""

    params_: dict[str, float]  # the fitted θ (set by the estimator's fit)

    def _posterior(self, obs: np.ndarray, ys: np.ndarray, hold: bool = False) -> None:
        """Compute the posterior at ``params_`` (the stage-1 θ) and keep it: the fitted
        attributes ``params_`` (stage 2's θ), ``local_scale_``, ``report_large_``,
        ``log_likelihood_``, ``n_obs_``, ``beta_``, ``large_coef_``, ``posterior_tiles_``
        and ``posterior_``: :class:`~geogp.models.lattice.state.Whole` (with its factored
        covariance) or, on tiles, :class:`~geogp.models.lattice.state.Tiled` (with the
        observed cells and D A⁻¹ D, from which a tile's covariance is rebuilt:
        :func:`tile_sampler`, placement).

        ``hold``: keep the lattice's pattern, symbolic analysis and factor for the next
        posterior of the same lattice (a robust fit's reweighting steps: the analysis costs
        about two factorisations), one factor more at the whole lattice's peak; the caller
        frees them (:func:`~geogp.models.lattice.gmrf.clear_shared_lattice`)."""
        tiles, self.plan_workers_ = self.tile_plan(obs.shape)
        self._stage1_params = dict(self.params_)
        # workers on this machine take the tiles only where their tiles together fit the limit
        on_cluster = len(tiles) > 1 and (self.plan_workers_ > 0
                                         or not local_workers(self.scheduler))
        with dask_client(self.scheduler if on_cluster else None) as client:
            try:
                post = lattice_posterior(self, self._stage1_params, obs, ys, tiles, client,
                                         hold)
            except BaseException:  # a failed posterior holds nothing
                clear_shared_lattice()
                raise
        if not hold:
            clear_shared_lattice()
        self.posterior_tiles_ = post.n_tiles
        self.params_, self.local_scale_ = post.params, post.local_scale
        self.report_large_, self.log_likelihood_ = post.report_large, post.log_likelihood
        self.n_obs_, self.beta_, self.large_coef_ = post.n_obs, post.beta, post.large_coef
        if post.sampler is not None:
            self.posterior_ = Whole(mean=post.mean, var=post.var, cov=post.cov,
                                    sampler_=post.sampler)
        else:
            self.posterior_ = Tiled(mean=post.mean, var=post.var, cov=post.cov,
                                    n_tiles=post.n_tiles, observed=np.array(obs, dtype=bool),
                                    w_cov=post.w_cov)

    def _columns(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """[Φ, X] at whole-lattice cells (row, col): large-scale features, then the trend."""
        return np.concatenate([self._features(rows, cols), self._trend(rows, cols)], axis=1)

    def _large_scale_bounds(self) -> dict:
        """Bounds of the large-scale log lengthscale: from 1/|ω|_max, below which the
        spectral density is flat over the features (their prior iid: only s_L ℓ_L is
        identified, and the fit slid to sub-pixel ℓ_L with a huge s_L that overshot inside
        gaps), to :data:`~geogp.models.lattice.gmrf.RANGE_MAX_EXTENTS` lattice extents."""
        omega = float(np.sqrt(np.max(np.sum(self.freq_**2, axis=1))))
        return {"log_range_large": (-math.log(omega), log_range_cap(self.shape_, self.h_))}


# --------------------------------------------------------------------------- one tile
# Module-level functions of (estimator, standardised raster, tile, ...): what a dask worker
# runs. ``est`` is the fitted estimator or its light copy (lattice_workers.tile_context); only
# the tile's window of ``raster`` is read.
def tile_problem(est: LatticeRegressor, raster: np.ndarray, tile: PosteriorTile,
                 share: bool = True) -> tuple[Any, np.ndarray, tuple[int, int]]:
    """(problem, observed cells (flat, tile lattice), tile lattice shape) of a tile.
    ``share``: reuse the previous tile's lattice (and factor) where the shape is the same
    (tiles solved one after another; False for tiles held together)."""
    window = raster[tile.window]
    obs = np.isfinite(window)
    problem = est._problem(obs, window[obs], None, at=tile.offset,  # offset: window's start
                           share=share)
    m = int(est.margin)
    shape = (window.shape[0] + 2 * m, window.shape[1] + 2 * m)
    r, c = np.nonzero(obs)
    return problem, (r + m) * shape[1] + (c + m), shape


def tile_statistics(est: LatticeRegressor, raster: np.ndarray, tile: PosteriorTile, params: dict,
                    keep: bool = False, later: bool = False,
                    release: bool = True) -> tuple[np.ndarray, Any]:
    """Pass 1 of a tile, its sparse work at the stage-1 θ: (its core's part of M
    (:func:`~geogp.models.lattice.tiled.core_gram`), its core's state
    (:func:`~geogp.models.lattice.tiled.core_state`, F − S_F in float32)). With ``keep`` (one
    tile, the whole lattice): (M, log|Σ_g|, the state in float64, what samples need), the
    factor freed before the state is built unless ``release`` is False (the pattern analysed
    again by the next factorisation).

    ``later`` (tiles run one after another in this process): the state's place holds a
    function that copies the tile's factor and returns the function computing the state (its
    selected inversion releases the GIL), so that the inversion can overlap the next tile's
    factorisation (:func:`~geogp.models.lattice.workers.sparse_pass`); the copy must be taken
    before another tile of the same shape refactorises the shared pattern."""
    mid = est.mid_factor()
    problem, cells, shape = tile_problem(est, raster, tile)
    core = tuple(slice(c.start - o, c.stop - o)
                 for c, o in zip(tile.core, tile.offset, strict=True))
    _, ex, ext = extended_core(shape, core)
    s, m_mat, logdet_sigma, b_vals = solve_tile(params, problem, shape, mid,
                                                rows=None if keep else ext, whole=keep)
    oy, ox = tile.offset

    def columns(rr, cc):  # [Φ, X] at tile cells
        return est._columns(rr + oy, cc + ox)

    if not keep:  # the core's observed cells, and where they sit in the extended core
        c = cells[in_core(cells, shape, tile)]
        r, q = np.divmod(c, shape[1])
        m_mat = core_gram(problem.ptw[c], s[(r - core[0].start) * ex + q - core[1].start],
                          float(np.exp(2.0 * params["log_noise"])),
                          problem.weight[c] if problem.weight.size else None)
    # drop the right-hand sides (a copy: a view would keep the (n, 1 + k + p) array alive)
    problem = dataclasses.replace(problem, ptw=np.zeros((0, problem.ptw.shape[1])))
    if keep:  # one tile: its steps on the progress bar, and the factor freed early
        advance(est.progress)
        z = selected_inverse(problem, b_vals, est.ordering, release=release)
        advance(est.progress)
        state = core_state(shape, core, s, columns,
                           field_covariance(problem.pattern, z, shape, mid),
                           dtype=np.float64, overwrite_s=True)
        del z, s
        advance(est.progress)
        return m_mat, logdet_sigma, state, (
            problem.pattern, np.asarray(b_vals), problem.solve.backend == "dense",
            mid_lattice(shape, mid)[1] if problem.has_mid else None)
    detach = functools.partial(_detach, problem, b_vals, est.ordering, shape, mid, core, s,
                               columns)
    if later:
        return m_mat, detach
    del problem, b_vals, s
    state = detach()()
    del detach
    release_memory()  # on a dask worker too
    return m_mat, state


def _detach(problem: Any, b_vals: np.ndarray, ordering: str, shape: tuple[int, int],
            mid: int | None, core: tuple[slice, slice], s: np.ndarray,
            columns: Callable) -> Callable[[], CoreState]:
    """The function computing a tile's state (:func:`_tile_state`) from a copy of its factor
    taken now (:func:`tile_statistics` with ``later``)."""
    # the pattern without its analysis: a pending state must not keep a factor alive
    return functools.partial(_tile_state, problem.pattern.without_cache(), shape, mid, core, s,
                             columns, inverse_later(problem, b_vals, ordering))


def _tile_state(pattern: SparsePattern, shape: tuple[int, int], mid: int | None,
                core: tuple[slice, slice], s: np.ndarray, columns: Callable,
                inverse: Callable[[], np.ndarray]) -> CoreState:
    """A tile's :class:`CoreState` (float32 F − S_F) from its selected inverse, computed by
    ``inverse()``."""
    return core_state(shape, core, s, columns, field_covariance(pattern, inverse(), shape, mid),
                      dtype=np.float32)


def tile_sampler(est: LatticeRegressor, tile: PosteriorTile, share: bool = True) -> Sampler:
    """The posterior covariance of one posterior tile's lattice at the fitted θ, in the form of
    the whole lattice's (:class:`~geogp.models.lattice.state.Sampler`):
    Cov f = H (B/c)⁻¹ Hᵀ + g (D A⁻¹ D) gᵀ over
    the tile problem's cells (its window plus the margin; row-major, whole-lattice cell
    (r, c) at tile cell (r − offset_y, c − offset_x)).

    Its ``b_vals`` are B/c at the fitted θ (whose local variances carry c), ``g`` = F − S_F
    (n_tile, k + p) from k + p solves with the tile's factor, and ``w_cov`` = D A⁻¹ D (the
    whole raster's: the large-scale and trend weights stay global). Inside the tile's core this
    matches the whole lattice's covariance to the tiles' error (:mod:`~geogp.models.lattice.tiled`);
    for a tile whose core is the whole lattice it is the whole lattice's sampler.

    Needs the observed cells kept by the fit on tiles (``est.posterior_.tile_inputs()``;
    a loaded model refuses). ``share``: as
    :func:`tile_problem` (False: the tile has its own pattern and factor, for samplers held
    together). Cost: one factorisation of the tile's B and k + p solves.
    """
    obs, w_cov = est.posterior_.tile_inputs()
    raster = np.where(obs, 0.0, np.nan)  # only which cells are observed matters here
    problem, _, shape = tile_problem(est, raster, tile, share)
    s, *_, b_vals = solve_tile(est.params_, problem, shape, est.mid_factor())
    oy, ox = tile.offset
    rows, cols = np.divmod(np.arange(shape[0] * shape[1]), shape[1])
    g = est._columns(rows + oy, cols + ox)
    g -= s[:, 1:]
    del s
    return Sampler(problem.pattern, np.asarray(b_vals), problem.solve.backend == "dense",
                   mid_lattice(shape, est.mid_factor())[1] if problem.has_mid else None,
                   g, w_cov)
