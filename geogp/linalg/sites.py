"""A posterior covariance over a raster's cells conditioned on measurement sites one by one
(Woodbury): what the lattice model's and the space-time forecast's placement share
(docs/placement.md). After sites s_1, …, s_k, in order,

    C_k e_x = C e_x − Σ_j v_j (v_j)_x / d_j,
    v_j = C_{j−1} e_{s_j},   d_j = (v_j)_{s_j} + σ_{s_j}²,

so a subclass gives C's columns (:meth:`SiteConditioned.prior_columns`) and its diagonal, and
this class keeps the sites' columns (k n floats) and the conditioned variances."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from geogp.exceptions import InputError

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["SiteConditioned"]


class SiteConditioned:
    """Sites absorbed into a covariance over ``n`` cells (module docstring).

    A subclass sets ``n``, ``noise`` (σ², one value or one per cell), ``_var0`` (diag C),
    ``_v`` (k, n), ``_d`` (k,) and ``sites``, and defines :meth:`prior_columns`.
    """

    n: int
    noise: float | np.ndarray
    sites: list[int]
    _var0: np.ndarray
    _v: np.ndarray
    _d: np.ndarray
    cells_word = "cells"  # how an error message names the cells

    def prior_columns(self, cells: ArrayLike) -> np.ndarray:
        """C[:, cells] (n, len(cells)) before any site."""
        raise NotImplementedError

    def _check_cell(self, cell) -> int:
        if isinstance(cell, bool) or not isinstance(cell, (int, np.integer)) or not (
                0 <= cell < self.n):
            raise InputError(f"cell must be a flat index of the {self.cells_word} ({self.n} "
                             f"cells); got {cell!r}.")
        return int(cell)

    def columns(self, cells: ArrayLike) -> np.ndarray:
        """C_k[:, cells] (n, len(cells)) given the sites absorbed so far."""
        cols = self.prior_columns(cells)
        if self._d.size:
            cells = np.atleast_1d(np.asarray(cells, dtype=np.int64))
            cols -= self._v.T @ (self._v[:, cells] / self._d[:, None])
        return cols

    def column(self, cell: int) -> np.ndarray:
        """C_k e_cell over every cell."""
        return self.columns([cell])[:, 0]

    def variance(self) -> np.ndarray:
        """diag C_k: every cell's variance given the sites absorbed so far."""
        if not self._d.size:
            return self._var0.copy()
        return self._var0 - np.einsum("kn,kn,k->n", self._v, self._v, 1.0 / self._d)

    def add(self, cell: int, column: np.ndarray | None = None) -> dict:
        """Absorb a measurement at ``cell``; returns its column v (before the update) and
        d = v_cell + σ_cell². ``column``: C_k e_cell over every cell when the caller has just
        computed it (given the sites so far), else it is computed here."""
        cell = self._check_cell(cell)
        v = self.column(cell) if column is None else np.asarray(column, dtype=np.float64)
        d = float(v[cell]) + float(np.broadcast_to(self.noise, (self.n,))[cell])
        self._v = np.vstack([self._v, v[None, :]])
        self._d = np.append(self._d, d)
        self.sites.append(cell)
        return {"v": v, "d": d}
