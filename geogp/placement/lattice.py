"""Sensor placement on the lattice model's posterior (issue #29, docs/placement.md).

With θ fixed, the lattice model's posterior covariance of the latent field at the lattice's
cells is (docs/lattice.md)

    C = H (B/c)⁻¹ Hᵀ + R A⁻¹ Rᵀ,

with H = [I, Π] the cells' view of the joint unknowns (the fine field, plus the mid-scale
level through its bilinear map Π), B/c the GMRF part's posterior precision, R = (F − S_F) D the
cells' large-scale and trend columns less their smoothed part and A⁻¹ the posterior
covariance of their whitened weights: the large and mid scales are part of C, not dropped.
A measurement at cell s with noise σ² conditions C on one more observation; after sites
s_1, …, s_k, in order (Woodbury),

    C_k e_x = C e_x − Σ_j v_j (v_j)_x / d_j,    v_j = C_{j−1} e_{s_j},
    d_j = (C_{j−1})_{s_j s_j} + σ²,

so each site costs one sparse solve with the model's factor (Hᵀe_s on the right), one product
with R, and O(k n) for the earlier sites; its column v_j over every cell is kept (k n floats).
The posterior variances follow as diag C_k = diag C − Σ_j v_j² / d_j, from the model's own
per-cell variances (selected inversion).

:class:`LatticeCovariance` holds that state for a fitted whole-lattice model.
"""

from __future__ import annotations

import numpy as np

from geogp.exceptions import InputError

__all__ = ["LatticeCovariance"]


class LatticeCovariance:
    """The lattice posterior's covariance columns at cells, conditioned on sites added one by
    one (module docstring). Standardised units; cells are flat indices of the model's lattice
    (``est.shape_``, margin included).

    Attributes:
        noise: σ² of a new measurement (standardised). n: cells of the lattice.
        sites: the cells absorbed so far, in order.
    """

    def __init__(self, est):
        sm = est._require_sampler()  # whole lattice only: refuses with the reason on tiles
        self.noise = float(est.noise_var_)
        self.n = int(est.shape_[0] * est.shape_[1])
        self._pi, self._r = sm.get("pi"), np.asarray(sm["r"])
        chol_w = np.asarray(sm["chol_w"])
        self._ainv = chol_w @ chol_w.T
        self._var0 = np.asarray(est._var, dtype=np.float64)
        pattern, b_vals = sm["pattern"], np.asarray(sm["b_vals"])  # B/c
        if sm["dense"]:
            dense = np.linalg.inv(pattern.to_scipy(b_vals).toarray())

            def solve(rhs):
                return dense @ rhs
        else:
            from geogp import linalg

            factor = linalg.cholmod.analyze(pattern, ordering=est.ordering)

            def solve(rhs):
                logdet, out = factor.host_forward(b_vals, rhs)
                if not np.isfinite(logdet):
                    raise InputError("the lattice posterior's precision is not positive "
                                     "definite; refit the model.")
                return out
        self._solve, self._size = solve, pattern.n
        self._v = np.zeros((0, self.n))
        self._d = np.zeros(0)
        self.sites: list[int] = []

    def _check_cell(self, cell) -> int:
        if isinstance(cell, bool) or not isinstance(cell, (int, np.integer)) or not (
                0 <= cell < self.n):
            raise InputError(f"cell must be a flat index of the lattice's {self.n} cells; "
                             f"got {cell!r}.")
        return int(cell)

    def prior_column(self, cell: int) -> np.ndarray:
        """C e_cell over every cell, given the data only (one sparse solve)."""
        cell = self._check_cell(cell)
        rhs = np.zeros(self._size)
        rhs[cell] = 1.0
        if self._pi is not None:  # Hᵀ e_s: the cell and its four mid-scale nodes
            row = self._pi.getrow(cell)
            rhs[self.n + row.indices] = row.data
        x = self._solve(rhs)
        col = x[:self.n] if self._pi is None else x[:self.n] + self._pi @ x[self.n:]
        return col + self._r @ (self._ainv @ self._r[cell])

    def column(self, cell: int) -> np.ndarray:
        """C_k e_cell over every cell, given the data and the sites absorbed so far."""
        col = self.prior_column(cell)
        if self._d.size:
            col -= self._v.T @ (self._v[:, cell] / self._d)
        return col

    def variance(self) -> np.ndarray:
        """diag C_k: the latent posterior variance of every cell given the data and the
        sites absorbed so far."""
        if not self._d.size:
            return self._var0.copy()
        return self._var0 - np.einsum("kn,kn,k->n", self._v, self._v, 1.0 / self._d)

    def add(self, cell: int) -> dict:
        """Absorb a measurement at ``cell``; returns its column v (before the update) and
        d = v_cell + σ²."""
        cell = self._check_cell(cell)
        v = self.column(cell)
        d = float(v[cell]) + self.noise
        self._v = np.vstack([self._v, v[None, :]])
        self._d = np.append(self._d, d)
        self.sites.append(cell)
        return {"v": v, "d": d}
