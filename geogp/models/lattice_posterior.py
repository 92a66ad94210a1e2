"""Stage 2 and the posterior of the lattice model (:class:`~geogp.models.lattice.LatticeRegressor`).

A mixin: after stage 1 has fitted the local θ on tiles, :meth:`_posterior` factorises the
lattice (whole, or tile by tile with :mod:`geogp.models.lattice_tiled`), fits the large-scale θ
and the overall scale c on the small dense part (stage 2, docs/lattice.md), and keeps per cell
the posterior mean, variance and the neighbour covariances that bilinear prediction needs,
from the selected inverse of B.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import warnings

import numpy as np

from geogp.exceptions import ApproximationWarning, GeogpError
from geogp.models.lattice_gmrf import (
    LARGE_SCALE_LOSSES,
    PARAM_SCALE,
    PARAMS_LARGE,
    clear_shared_lattice,
    dense_likelihood,
    log_range_cap,
    mid_lattice,
)
from geogp.models.lattice_memory import check_state_disk
from geogp.models.lattice_tiled import (
    PosteriorTile,
    core_gram,
    core_moments,
    core_state,
    extended_core,
    field_covariance,
    in_core,
    selected_inverse,
    solve_tile,
)
from geogp.models.lattice_workers import dask_client, release_memory, sparse_pass
from geogp.optimize import minimize_lbfgs

__all__ = ["LatticePosteriorMixin"]



class LatticePosteriorMixin:
    """Stage 2 and the posterior moments of :class:`~geogp.models.lattice.LatticeRegressor`
    (reads ``params_``, ``shape_``, ``_mid_factor()``, ``optimize``, ``maxiter``, ``ordering`` and
    the estimator's ``_problem``, ``_local_keys``, ``_features``, ``_trend``)."""

    def _posterior(self, obs: np.ndarray, ys: np.ndarray) -> None:
        """Mean, variances and neighbour covariances on the whole lattice at ``params_``:
        tile by tile (:mod:`geogp.models.lattice_tiled`; on a dask cluster's workers when
        one is in use, :mod:`geogp.models.lattice_workers`), or as one tile, the whole
        lattice."""
        tiles = self._posterior_tiles(obs.shape)
        self.posterior_tiles_ = len(tiles)
        with dask_client(None if len(tiles) == 1 else self.scheduler) as client:
            self._posterior_on(tiles, obs, ys, client)
        clear_shared_lattice()

    def _posterior_on(self, tiles: list, obs: np.ndarray, ys: np.ndarray, client) -> None:
        """:meth:`_posterior` on ``tiles``, on ``client``'s workers (None: here)."""
        self._stage1_params = dict(self.params_)
        single = len(tiles) == 1
        raster = np.full(obs.shape, np.nan)
        raster[obs] = ys  # the standardised data, NaN where missing
        # pass 1, each tile's sparse work at the stage-1 θ: M = [y, F]ᵀ Σ_g⁻¹ [y, F] summed over
        # the cores (one tile: exact, with log|Σ_g|), and the states its moments need
        if single:
            m_mat, logdet_sigma, state, sampler = tile_statistics(
                self, raster, tiles[0], self.params_, keep=True)
            kept = contextlib.nullcontext()
        else:
            check_state_disk(tiles, self._n_columns(), client)
            grams, kept = sparse_pass(self, tile_statistics, raster, tiles, (self.params_,),
                                      client)
            m_mat = sum(grams)  # in tile order: the same sum wherever it ran
            m_mat, logdet_sigma = 0.5 * (m_mat + m_mat.T), 0.0  # a constant of stage 2
        with kept:
            n_obs, freq2 = int(obs.sum()), np.tile(np.sum(self.freq_**2, axis=1), 2)
            ll, w, a, d = self._stage2(m_mat, logdet_sigma, n_obs, freq2)
            self.log_likelihood_ = float(ll) if single else float("nan")
            self.n_obs_ = n_obs
            k = freq2.shape[0]
            self.beta_ = w[k:]
            self.large_coef_ = w[:k] * d[:k]  # posterior mean of u
            vbeta = np.linalg.inv(a) if a.size else np.zeros((0, 0))
            # pass 2, dense only: B/c has the inverse c B⁻¹, so the stage-1 solves serve
            args = (self.local_scale_, d, w, vbeta)
            if single:
                parts = [core_moments(state, *args)]
            else:
                parts = kept.map(core_moments, args, getattr(self, "_tile_progress", None))
        ny, nx = self.shape_
        self._mean, self._var = np.zeros((ny, nx)), np.zeros((ny, nx))
        self._cov = np.zeros((4, ny, nx))
        for tile, (mean, var, cov) in zip(tiles, parts):
            self._mean[tile.core], self._var[tile.core] = mean, var
            self._cov[(slice(None), *tile.core)] = cov
        self._mean, self._var = self._mean.ravel(), self._var.ravel()
        self._cov = self._cov.reshape(4, ny * nx)
        self._sampler = None
        if single:  # what posterior samples need (kept in memory only; files keep moments):
            # the dense part of Cov f is r A⁻¹ rᵀ with r = (F − S_F) D, kept as g = F − S_F
            # (the state's own array, no copy) and D A⁻¹ D
            cy, cx = self.shape_  # one tile: its core is the whole lattice
            self._sampler = {**sampler, "g": state.g[:cy, :cx].reshape(cy * cx, -1),
                             "b_vals": sampler["b_vals"] / self.local_scale_,  # B/c
                             "w_cov": d[:, None] * vbeta * d[None, :]}

    def _stage2(self, m_mat, logdet_sigma, n_obs: int, freq2):
        """Stage 2 at the local shape (range, noise/sd) of stage 1: the large-scale θ and one
        overall scale c of the local field and noise, on the small dense part only (no sparse
        work). Sets ``params_`` (c folded into sd and noise), ``local_scale_``,
        ``report_large_``; returns the dense part (log p, ŵ, A, D) at the result."""
        self.local_scale_, self._log_scale, self.report_large_ = 1.0, 0.0, None
        dw, kernel = getattr(self, "_dw", 0.0), self.large_scale_kernel
        stage1 = (dict(self.params_), m_mat, logdet_sigma)
        if self.optimize:
            large = PARAMS_LARGE if freq2.shape[0] else ()
            try:
                params, self.report_large_ = minimize_lbfgs(
                    LARGE_SCALE_LOSSES[kernel], {**self.params_, PARAM_SCALE: 0.0},
                    args=(m_mat, logdet_sigma, n_obs, freq2, dw),
                    unconstrained=self._local_keys() + large + (PARAM_SCALE,),
                    fixed=self._local_keys(), maxiter=int(self.maxiter),
                    bounds=self._large_scale_bounds() if large else None)
            except GeogpError:
                # the dense half is not finite anywhere the optimiser looked: with a noise
                # far below the signal, M = yᵀΣ⁻¹y − … loses most of its digits. Keep the
                # initial large-scale θ and c = 1; the posterior below is checked.
                ratio = math.exp(float(self.params_["log_noise"] - self.params_["log_sd"]))
                warnings.warn(
                    "lattice model: the whole-raster likelihood of the large scales could not "
                    f"be evaluated (noise sd / signal sd = {ratio:.2g}: nearly noise-free data "
                    "make it ill-conditioned); the large-scale parameters keep their initial "
                    "values.", ApproximationWarning, stacklevel=5)
                params = {**self.params_, PARAM_SCALE: 0.0}
            # fold c into (sd, mid-scale sd, noise): B = Q + PᵀP/σ² becomes B/c, so M/c,
            # log|Σ_g| + N log c
            # and B⁻¹ c B⁻¹, while B⁻¹Pᵀy/σ² (S) is unchanged
            t = float(params.pop(PARAM_SCALE))
            for key in ("log_sd", "log_noise", "log_sd_mid"):  # every variance of Σ_g
                if key in params:
                    params[key] = params[key] + 0.5 * t
            self.params_, self.local_scale_, self._log_scale = params, math.exp(t), t
            m_mat, logdet_sigma = m_mat / self.local_scale_, logdet_sigma + n_obs * t

        def dense_part(params, m_mat, logdet_sigma):
            out = tuple(np.asarray(v) for v in dense_likelihood(
                params, m_mat, logdet_sigma, n_obs, freq2, dw, kernel))
            return out, bool(np.isfinite(out[0]) and np.all(np.isfinite(out[1]))
                             and np.all(np.isfinite(out[2])))

        out, finite = dense_part(self.params_, m_mat, logdet_sigma)
        if not finite and self.optimize:
            # stage 2 ended where the small dense system is singular (nearly noise-free data,
            # run-to-run rounding): fall back to the stage-1 θ with its initial large scales
            out, finite = dense_part(*stage1)
            if finite:
                warnings.warn(
                    "lattice model: the whole-raster fit of the large scales ended where the "
                    "posterior is numerically singular (nearly noise-free data); the stage-1 "
                    "parameters with the initial large scales are used instead.",
                    ApproximationWarning, stacklevel=5)
                self.params_, self.local_scale_, self._log_scale = stage1[0], 1.0, 0.0
                self.report_large_ = None
        if not finite:
            raise GeogpError(
                "lattice model: the posterior is numerically singular at the fitted parameters "
                f"({ {k: round(float(v), 3) for k, v in self.params_.items()} }); nearly "
                "noise-free data are the usual cause. Pass a larger noise= or sd=, "
                "large_scale=None, or use model='afs'.")
        return out

    def _columns(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """[Φ, X] at whole-lattice cells (row, col): large-scale features, then the trend."""
        return np.concatenate([self._features(rows, cols), self._trend(rows, cols)], axis=1)

    def _large_scale_bounds(self) -> dict:
        """Bounds of the large-scale log lengthscale: from 1/|ω|_max, below which the
        spectral density is flat over the features (their prior iid: only s_L ℓ_L is
        identified, and the fit slid to sub-pixel ℓ_L with a huge s_L that overshot inside
        gaps), to :data:`~geogp.models.lattice_gmrf.RANGE_MAX_EXTENTS` lattice extents."""
        omega = float(np.sqrt(np.max(np.sum(self.freq_**2, axis=1))))
        return {"log_range_large": (-math.log(omega), log_range_cap(self.shape_, self.h_))}


# --------------------------------------------------------------------------- one tile
# Module-level functions of (estimator, standardised raster, tile, ...): what a dask worker
# runs. ``est`` is the fitted estimator or its light copy (lattice_workers.tile_context); only
# the tile's window of ``raster`` is read.
def _tile_problem(est, raster: np.ndarray, tile: PosteriorTile):
    """(problem, observed cells (flat, tile lattice), tile lattice shape) of a tile."""
    window = raster[tile.window]
    obs = np.isfinite(window)
    problem = est._problem(obs, window[obs], None, at=tile.offset,  # offset: window's start
                           share=True)
    m = int(est.margin)
    shape = (window.shape[0] + 2 * m, window.shape[1] + 2 * m)
    r, c = np.nonzero(obs)
    return problem, (r + m) * shape[1] + (c + m), shape


def tile_statistics(est, raster: np.ndarray, tile: PosteriorTile, params, keep=False):
    """Pass 1 of a tile, its sparse work at the stage-1 θ: (its core's part of M
    (:func:`~geogp.models.lattice_tiled.core_gram`), its core's state
    (:func:`~geogp.models.lattice_tiled.core_state`, F − S_F in float32)). With ``keep`` (one
    tile, the whole lattice): (M, log|Σ_g|, the state in float64, what samples need)."""
    mid = est._mid_factor()
    problem, cells, shape = _tile_problem(est, raster, tile)
    core = tuple(slice(c.start - o, c.stop - o) for c, o in zip(tile.core, tile.offset))
    _, ex, ext = extended_core(shape, core)
    s, m_mat, logdet_sigma, b_vals = solve_tile(params, problem, shape, mid,
                                                rows=None if keep else ext, whole=keep)
    if not keep:  # the core's observed cells, and where they sit in the extended core
        c = cells[in_core(cells, shape, tile)]
        r, q = np.divmod(c, shape[1])
        m_mat = core_gram(problem.ptw[c], s[(r - core[0].start) * ex + q - core[1].start],
                          float(np.exp(2.0 * params["log_noise"])))
    # drop the right-hand sides (a copy: a view would keep the (n, 1 + k + p) array alive)
    problem = dataclasses.replace(problem, ptw=np.zeros((0, problem.ptw.shape[1])))
    z = selected_inverse(problem, b_vals, est.ordering, release=keep)  # one tile: no reuse
    oy, ox = tile.offset
    state = core_state(shape, core, s, lambda rr, cc: est._columns(rr + oy, cc + ox),
                       field_covariance(problem.pattern, z, shape, mid),
                       dtype=np.float64 if keep else np.float32, overwrite_s=keep)
    del z, s
    if keep:
        return m_mat, logdet_sigma, state, {
            "pattern": problem.pattern, "b_vals": np.asarray(b_vals),
            "dense": problem.solve.backend == "dense",
            "pi": mid_lattice(shape, mid)[1] if problem.has_mid else None}
    del problem, b_vals
    release_memory()  # on a dask worker too
    return m_mat, state
