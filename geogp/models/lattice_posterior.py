"""Stage 2 and the posterior of the lattice model (:class:`~geogp.models.lattice.LatticeRegressor`).

A mixin: after stage 1 has fitted the local θ on tiles, :meth:`_posterior` factorises the whole
lattice once, fits the large-scale θ and the overall scale c on the small dense part (stage 2,
docs/lattice.md), and keeps per cell the posterior mean, variance and the neighbour
covariances that bilinear prediction needs, from the selected inverse of B. With the
mid-scale level the field at a cell is g + Π g_m, and its covariances combine the fine,
cross and coarse blocks of B⁻¹ (:meth:`_field_covariance`).
"""

from __future__ import annotations

import math
import warnings

import jax
import numpy as np

from geogp.exceptions import ApproximationWarning, GeogpError
from geogp.models.lattice_gmrf import (
    LARGE_SCALE_LOSSES,
    PARAM_SCALE,
    PARAMS_LARGE,
    LatticeProblem,
    dense_likelihood,
    log_range_cap,
    mid_lattice,
    mid_stencil,
    sparse_statistics,
)
from geogp.optimize import minimize_lbfgs

__all__ = ["LatticePosteriorMixin"]

_sparse_statistics = jax.jit(sparse_statistics)


def _is_dense(problem: LatticeProblem) -> bool:
    """Whether the problem uses the dense reference backend (small lattices, tests)."""
    return problem.solve.backend == "dense"



class LatticePosteriorMixin:
    """Stage 2 and the posterior moments of :class:`~geogp.models.lattice.LatticeRegressor`
    (reads ``params_``, ``shape_``, ``_mid_factor()``, ``optimize``, ``maxiter``, ``ordering`` and
    the estimator's ``_problem``, ``_local_keys``, ``_features``, ``_trend``)."""

    def _posterior(self, obs: np.ndarray, ys: np.ndarray) -> None:
        """Mean, variances and neighbour covariances on the whole lattice at ``params_``."""
        problem = self._problem(obs, ys)
        logdet_sigma, m_mat, s, b_vals = (np.asarray(v) for v in
                                          _sparse_statistics(self.params_, problem))
        self.local_scale_ = 1.0
        stage1 = (dict(self.params_), m_mat, logdet_sigma, b_vals)
        if self.optimize:
            # stage 2 on the whole raster, at the local shape (range, noise/sd) of stage 1: the
            # large-scale θ and one overall scale c of the local field and noise. Only the small
            # dense part depends on them, so no sparse work is added.
            large = PARAMS_LARGE if problem.n_feat else ()
            try:
                params, self.report_large_ = minimize_lbfgs(
                    LARGE_SCALE_LOSSES[problem.kernel], {**self.params_, PARAM_SCALE: 0.0},
                    args=(m_mat, logdet_sigma, problem.n_obs, problem.freq2, problem.dw),
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
                    "values.", ApproximationWarning, stacklevel=4)
                params, self.report_large_ = {**self.params_, PARAM_SCALE: 0.0}, None
            # fold c into (sd, noise): B = Q + PᵀP/σ² becomes B/c, so M/c, log|Σ| + N log c,
            # and the factor's values / c, while B⁻¹Pᵀy/σ² (``s``) is unchanged
            t = float(params.pop(PARAM_SCALE))
            params["log_sd"] = params["log_sd"] + 0.5 * t
            params["log_noise"] = params["log_noise"] + 0.5 * t
            self.params_, self.local_scale_ = params, math.exp(t)
            m_mat, logdet_sigma = m_mat / self.local_scale_, logdet_sigma + problem.n_obs * t
            b_vals = b_vals / self.local_scale_

        def dense_part(params, m_mat, logdet_sigma):
            out = tuple(np.asarray(v) for v in dense_likelihood(
                params, m_mat, logdet_sigma, problem.n_obs, problem.freq2, problem.dw,
                problem.kernel))
            return out, bool(np.isfinite(out[0]) and np.all(np.isfinite(out[1]))
                             and np.all(np.isfinite(out[2])))

        (ll, w, a, d), finite = dense_part(self.params_, m_mat, logdet_sigma)
        if not finite and self.optimize:
            # stage 2 ended where the small dense system is singular (nearly noise-free data,
            # run-to-run rounding): fall back to the stage-1 θ with its initial large scales
            params0, m0, logdet0, b0 = stage1
            (ll, w, a, d), finite = dense_part(params0, m0, logdet0)
            if finite:
                warnings.warn(
                    "lattice model: the whole-raster fit of the large scales ended where the "
                    "posterior is numerically singular (nearly noise-free data); the stage-1 "
                    "parameters with the initial large scales are used instead.",
                    ApproximationWarning, stacklevel=4)
                self.params_, self.local_scale_ = params0, 1.0
                m_mat, logdet_sigma, b_vals = m0, logdet0, b0
                self.report_large_ = None
        if not finite:
            raise GeogpError(
                "lattice model: the posterior is numerically singular at the fitted parameters "
                f"({ {k: round(float(v), 3) for k, v in self.params_.items()} }); nearly "
                "noise-free data are the usual cause. Pass a larger noise= or sd=, "
                "large_scale=None, or use model='afs'.")
        self.log_likelihood_ = float(ll)
        self.n_obs_ = problem.n_obs
        ny, nx = self.shape_
        n = ny * nx
        k = problem.n_feat
        pi = mid_lattice(self.shape_, self._mid_factor())[1] if problem.has_mid else None
        if pi is not None:  # the field at the cells is g_fine + Π g_mid
            s = s[:n] + pi @ s[n:]
        rr, cc = np.divmod(np.arange(n), nx)
        # columns (Φ√λ, X) and their B⁻¹Pᵀ·/σ²; w = (Λ^{-1/2}u, β), posterior cov A⁻¹
        r = np.concatenate([self._features(rr, cc), self._trend(rr, cc)], axis=1)
        r *= d
        r -= s[:, 1:] * d
        self.beta_ = w[k:]
        self.large_coef_ = w[:k] * d[:k]  # posterior mean of u
        self._mean = s[:, 0] + r @ w
        del s
        vbeta = np.linalg.inv(a) if a.size else np.zeros((0, 0))
        rv = r @ vbeta
        # what posterior samples need (kept in memory only; model files keep the moments)
        self._sampler = {"r": r, "chol_w": np.linalg.cholesky(vbeta) if a.size else vbeta,
                         "pattern": problem.pattern, "b_vals": np.asarray(b_vals),
                         "dense": _is_dense(problem), "pi": pi}
        # B/c has the inverse c B⁻¹: invert the values whose factor the statistics left
        # behind (the stage-1 B) and scale, rather than factorising B/c once more
        z = self._selected_inverse(problem, stage1[3]) * self.local_scale_
        cell = np.arange(n).reshape(ny, nx)
        field_cov = self._field_covariance(problem.pattern, z, n)

        def cov(a, b):  # Cov(f_a, f_b) for lattice neighbours a < b (flat arrays)
            return field_cov(a, b) + np.einsum("ij,ij->i", rv[a], r[b])

        # per cell: var, and the covariances with (i, j+1), (i+1, j), (i+1, j+1), and of
        # (i+1, j) with (i, j+1) (what bilinear interpolation between centres needs)
        self._var = field_cov(np.arange(n), np.arange(n)) + np.einsum("ij,ij->i", rv, r)
        self._cov = np.zeros((4, ny, nx))
        self._cov[0, :, :-1] = cov(cell[:, :-1].ravel(), cell[:, 1:].ravel()).reshape(ny, nx - 1)
        self._cov[1, :-1, :] = cov(cell[:-1, :].ravel(), cell[1:, :].ravel()).reshape(ny - 1, nx)
        self._cov[2, :-1, :-1] = cov(cell[:-1, :-1].ravel(),
                                     cell[1:, 1:].ravel()).reshape(ny - 1, nx - 1)
        self._cov[3, :-1, :-1] = cov(cell[:-1, 1:].ravel(),
                                     cell[1:, :-1].ravel()).reshape(ny - 1, nx - 1)
        self._cov = self._cov.reshape(4, n)

    def _large_scale_bounds(self) -> dict:
        """Bounds of the large-scale log lengthscale: from 1/|ω|_max, below which the
        spectral density is flat over the features (their prior iid: only s_L ℓ_L is
        identified, and the fit slid to sub-pixel ℓ_L with a huge s_L that overshot inside
        gaps), to :data:`~geogp.models.lattice_gmrf.RANGE_MAX_EXTENTS` lattice extents."""
        omega = float(np.sqrt(np.max(np.sum(self.freq_**2, axis=1))))
        return {"log_range_large": (-math.log(omega), log_range_cap(self.shape_, self.h_))}

    def _field_covariance(self, pattern, z: np.ndarray, n: int):
        """``cov(a, b)``: posterior covariances of the GMRF part of f at cells a, b (flat
        arrays, neighbours or equal) from the selected inverse ``z`` of B on ``pattern``:
        (B⁻¹)_ab, plus with the mid-scale level the terms of Π (the pattern holds every
        entry these need, see :func:`geogp.models.lattice_gmrf.make_problem`)."""
        size = pattern.n

        def look(i, j):
            i, j = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
            return z[pattern.positions_of_keys(np.minimum(i, j) * size + np.maximum(i, j))]

        if size == n:  # no mid-scale level: B's unknowns are the cells
            return look
        _, nodes, weights = mid_stencil(self.shape_, self._mid_factor())
        nodes = nodes + n

        def cov(a, b):
            out = look(a, b)
            for k in range(4):
                out = out + weights[b, k] * look(a, nodes[b, k])
                out = out + weights[a, k] * look(b, nodes[a, k])
            # coarse–coarse: the 4 × 4 block of B⁻¹ between the two cells' stencils, looked up
            # once per distinct pair of stencils (a stencil is fixed by its first node)
            pair = nodes[a, 0] * size + nodes[b, 0]
            _, first, inv = np.unique(pair, return_index=True, return_inverse=True)
            na, nb = nodes[a[first]], nodes[b[first]]
            block = np.stack([np.stack([look(na[:, k], nb[:, m]) for m in range(4)], axis=1)
                              for k in range(4)], axis=1)
            return out + np.einsum("ik,ikm,im->i", weights[a], block[inv.ravel()], weights[b])

        return cov

    def _selected_inverse(self, problem: LatticeProblem, b_vals: np.ndarray) -> np.ndarray:
        from geogp import linalg

        if _is_dense(problem):
            return np.linalg.inv(problem.pattern.to_scipy(b_vals).toarray())[
                problem.pattern.rows, problem.pattern.cols]
        return linalg.cholmod.selected_inverse(problem.pattern, b_vals, ordering=self.ordering)
