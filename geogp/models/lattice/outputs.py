"""Posterior samples, predictions and the fitted hyperparameters of a lattice model
(docs/lattice.md, posterior).

A mixin of :class:`geogp.models.lattice.LatticeRegressor`: it reads the posterior the fit
keeps (``posterior_``, :mod:`geogp.models.lattice.state`: per-cell moments and, for samples,
the factored covariance), the lattice geometry (``shape_``, ``origin_``, ``step_``,
``cell_axes_``, ``margin``), ``scaler_`` and ``noise_var_``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse.linalg as spla

from geogp.exceptions import InputError, OutsideWindowError
from geogp.models.base import Prediction, check_columns, check_fitted
from geogp.models.lattice.gmrf import PARAM_HOLE

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["LatticeOutputsMixin"]


class LatticeOutputsMixin:
    """Samples (:meth:`sample_cells`, :meth:`sample`) and predictions (:meth:`predict`,
    :meth:`predict_grid`) of :class:`~geogp.models.lattice.LatticeRegressor`."""

    # ------------------------------------------------------------------ samples
    def _sample_cells(self, eps_w: np.ndarray, eps_g: np.ndarray) -> np.ndarray:
        """Latent samples at every lattice cell (standardised), linear in the normal draws:

            f = E f + g C ε_w + Πᵀ L⁻ᵀ ε_g,   C Cᵀ = D A⁻¹ D,  Π B Πᵀ = L Lᵀ (CHOLMOD),

        so that Cov f = B⁻¹ + r A⁻¹ rᵀ (r = g D), the posterior of the module docstring. ``eps_w``
        (k + p, n_s), ``eps_g`` (n, n_s); returns (n, n_s). The posterior's state refuses where
        it has no factor (tiles, loaded, observations added).
        """
        sm = self.posterior_.sampler()
        upper, perm = sm.root(self.ordering)
        if perm is None:  # dense reference backend
            g = np.linalg.solve(upper, eps_g)
        else:
            g = np.empty_like(eps_g)
            g[perm] = spla.spsolve_triangular(upper, eps_g, lower=False)
        if sm.pi is not None:  # joint unknowns (g_fine, g_mid): the field is g_fine + Π g_mid
            n = sm.pi.shape[0]
            g = g[:n] + sm.pi @ g[n:]
        return self.posterior_.mean[:, None] + sm.g @ (sm.weights_root() @ eps_w) + g

    def sample_cells(self, n: int,
                     seed: int | np.random.SeedSequence | np.random.Generator | None = None,
                     ) -> np.ndarray:
        """``n`` posterior samples of the latent field at every lattice cell, (n, n_y, n_x),
        standardised units (``seed``: an int, a SeedSequence or a Generator). Exact under the
        model. Cost: one sparse factorisation on the first call, then a triangular solve per
        64 samples."""
        if not (isinstance(n, (int, np.integer)) and n >= 1):
            raise InputError(f"n (number of samples) must be an integer ≥ 1; got {n!r}.")
        check_fitted(self, "posterior_")
        rng = np.random.default_rng(seed)
        sm = self.posterior_.sampler()
        k, size = sm.w_cov.shape[0], sm.size  # size: lattice cells (and mid-scale nodes)
        out = []
        for start in range(0, n, 64):
            m = min(64, n - start)
            out.append(self._sample_cells(rng.standard_normal((k, m)),
                                          rng.standard_normal((size, m))).T)
        return np.concatenate(out).reshape(n, *self.shape_)

    def sample(self, X: ArrayLike, n: int,
               seed: int | np.random.SeedSequence | np.random.Generator | None = None,
               observed: bool = False) -> np.ndarray:
        """``n`` posterior samples at points X (N*, 2) (model units, (y, x)), data units:
        bilinear between cell centres like :meth:`predict`, so each sample is a draw of the
        same interpolated field. ``observed`` adds the noise of a new observation. (n, N*).
        Needs the fit's factorisation: a model loaded from a file refuses (refit it)."""
        check_fitted(self, "posterior_")
        c, w, _inside = self._bilinear(np.asarray(X, dtype=np.float64), "raise")
        rng = np.random.default_rng(seed)
        cells = self.sample_cells(n, rng).reshape(n, -1)
        f = sum(wk[None, :] * cells[:, ck] for wk, ck in zip(w, c, strict=True))
        if observed:
            f = f + math.sqrt(self.noise_var_) * rng.standard_normal(f.shape)
        return self.scaler_.y_mean + self.scaler_.y_scale * f

    # ------------------------------------------------------------------ geometry
    def cell_index(self, X: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Fractional lattice (row, col) of points X (N, 2) (model units, (y, x); margins
        included, so the raster's first cell is (margin, margin)): ``(X − origin_) / step_``
        on a regular raster, piecewise linear along ``cell_axes_`` on a nearly regular one
        (linear beyond its ends), so that every cell centre maps to its integer index."""
        X = np.asarray(X, dtype=np.float64).reshape(-1, 2)
        axes = getattr(self, "cell_axes_", None)
        if axes is None:
            return ((X[:, 0] - self.origin_[0]) / self.step_[0],
                    (X[:, 1] - self.origin_[1]) / self.step_[1])
        return _fractional(X[:, 0], axes[0]), _fractional(X[:, 1], axes[1])

    def cell_centres(self, rows: ArrayLike, cols: ArrayLike) -> np.ndarray:
        """(N, 2) model coordinates (y, x) of the lattice cells (rows, cols) (margins
        included): the inverse of :meth:`cell_index` at integer indices."""
        rows, cols = np.asarray(rows), np.asarray(cols)
        axes = getattr(self, "cell_axes_", None)
        if axes is None:
            return np.stack([self.origin_[0] + rows * self.step_[0],
                             self.origin_[1] + cols * self.step_[1]], axis=1)
        return np.stack([axes[0][rows], axes[1][cols]], axis=1)

    # ------------------------------------------------------------------ prediction
    def _bilinear(self, X: np.ndarray, outside: str):
        """Corner cells and bilinear weights of points X (model units) between cell centres."""
        if X.ndim != 2:
            raise InputError(f"X must have shape (N, 2) (y, x); got {X.shape}.")
        check_columns(X, 2)
        ny, nx = self.shape_
        fy, fx = self.cell_index(X)
        tol = 1e-9
        inside = (fy >= -tol) & (fy <= ny - 1 + tol) & (fx >= -tol) & (fx <= nx - 1 + tol)
        if not inside.all() and outside == "raise":
            raise OutsideWindowError(
                f"{int((~inside).sum())} point(s) lie outside the lattice (the raster plus "
                f"{self.margin} cells on each side); use outside='nan' or a larger margin.")
        fy, fx = np.where(inside, fy, 0.0), np.where(inside, fx, 0.0)
        i0 = np.clip(np.floor(fy + tol).astype(np.int64), 0, ny - 2)
        j0 = np.clip(np.floor(fx + tol).astype(np.int64), 0, nx - 2)
        ty, tx = np.clip(fy - i0, 0.0, 1.0), np.clip(fx - j0, 0.0, 1.0)
        c00 = i0 * nx + j0
        c = (c00, c00 + 1, c00 + nx, c00 + nx + 1)
        w = ((1 - ty) * (1 - tx), (1 - ty) * tx, ty * (1 - tx), ty * tx)
        return c, w, inside

    def predict(self, X: ArrayLike, outside: str = "raise") -> Prediction:
        """Predictive moments at points X (N*, 2) (model units, (y, x)), bilinear between the
        lattice's cell centres (exact at the centres). Points outside the lattice (raster plus
        margin) raise :class:`OutsideWindowError`, or give NaN with ``outside="nan"``.

        Cost: O(N* p²).
        """
        check_fitted(self, "posterior_")
        if outside not in ("raise", "nan"):
            raise InputError(f"outside must be 'raise' or 'nan'; got {outside!r}.")
        X = np.asarray(X, dtype=np.float64)
        c, w, inside = self._bilinear(X, outside)
        post = self.posterior_
        mean = sum(wk * post.mean[ck] for wk, ck in zip(w, c, strict=True))
        var = sum(wk**2 * post.var[ck] for wk, ck in zip(w, c, strict=True))
        cov = post.cov
        var = var + 2.0 * (w[0] * w[1] * cov[0, c[0]] + w[2] * w[3] * cov[0, c[2]]
                           + w[0] * w[2] * cov[1, c[0]] + w[1] * w[3] * cov[1, c[1]]
                           + w[0] * w[3] * cov[2, c[0]] + w[1] * w[2] * cov[3, c[0]])
        pred = self.scaler_.unscale(mean, var, self.noise_var_)
        if not inside.all():
            pred = Prediction(*(np.where(inside, a, np.nan) for a in pred))
        return pred

    def predict_grid(self, axes: Sequence[ArrayLike], outside: str = "raise") -> Prediction:
        """Predictions on the tensor grid ``axes`` = (y, x) (model units), arrays (n_y, n_x)."""
        Y, Xg = np.meshgrid(np.asarray(axes[0], dtype=np.float64),
                            np.asarray(axes[1], dtype=np.float64), indexing="ij")
        pred = self.predict(np.stack([Y.ravel(), Xg.ravel()], axis=1), outside=outside)
        return Prediction(*(np.reshape(a, Y.shape) for a in pred))

    # ------------------------------------------------------------------ reporting
    @property
    def noise_var_(self) -> float:
        """σ² in standardised units."""
        return float(np.exp(2.0 * self.params_["log_noise"]))

    @property
    def range_(self) -> float:
        return float(np.exp(self.params_["log_range"])) * self.unit_

    @property
    def sd_(self) -> float:
        return float(np.exp(self.params_["log_sd"])) * self.scaler_.y_scale

    @property
    def noise_sd_(self) -> float:
        return math.sqrt(self.noise_var_) * self.scaler_.y_scale

    def describe(self) -> dict:
        """Fitted hyperparameters on the data's scale (for
        :meth:`geogp.models.lattice.family.LatticeFamily.describe`)."""
        out = {"lengthscale": np.array([[self.range_, self.range_]]), "signal_sd": self.sd_,
               "noise_sd": self.noise_sd_}
        if "log_range_mid" in self.params_:
            out["mid_scale_range"] = float(np.exp(self.params_["log_range_mid"])) * self.unit_
            out["mid_scale_sd"] = (float(np.exp(self.params_["log_sd_mid"]))
                                   * self.scaler_.y_scale)
        if getattr(self, "mid_dropped_", False):  # mid_scale="auto" dropped the level
            out["mid_scale_dropped"] = (getattr(self, "mid_dropped_ranges_", None)
                                        or (float("nan"), float("nan")))
        if "log_range_large" in self.params_ and self._n_large():
            out["large_scale_lengthscale"] = (float(np.exp(self.params_["log_range_large"]))
                                              * self.unit_)
            out["large_scale_sd"] = (float(np.exp(self.params_["log_sd_large"]))
                                     * self.scaler_.y_scale)
        if PARAM_HOLE in self.params_:  # the oscillating operator: its spectral peak
            b = 1.0 - float(self.params_[PARAM_HOLE])
            kappa = math.sqrt(8.0) / float(np.exp(self.params_["log_range"]))
            out["wavelength"] = (2.0 * math.pi / (kappa * math.sqrt(-b)) * self.unit_
                                 if b < 0 else float("inf"))
        if getattr(self, "varying_basis_", None) is not None:  # varying="auto": their spans
            lr, ls = self._raster_scales()
            out["local_range_span"] = (float(lr.min()), float(lr.max()))
            out["local_sd_span"] = (float(ls.min()), float(ls.max()))
        return {**out, "n_features": self.shape_[0] * self.shape_[1] + self._n_large()}


def _fractional(values: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """Fractional positions of ``values`` along the strictly monotonic ``axis``: linear between
    its entries (exact at them), and beyond its ends with the end steps."""
    sign = 1.0 if axis[-1] > axis[0] else -1.0  # np.interp needs increasing abscissae
    a, v = sign * axis, sign * values
    out = np.interp(v, a, np.arange(a.size, dtype=np.float64))
    out = np.where(v < a[0], (v - a[0]) / (a[1] - a[0]), out)
    return np.where(v > a[-1], a.size - 1 + (v - a[-1]) / (a[-1] - a[-2]), out)
