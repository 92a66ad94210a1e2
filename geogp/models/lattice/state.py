"""The lattice model's posterior as a value, one type per state (``est.posterior_``).

A fitted :class:`~geogp.models.lattice.LatticeRegressor` predicts from five numbers per
lattice cell (:class:`Moments`: posterior mean, variance and the neighbour covariances that
bilinear prediction needs, standardised units). What else it can do depends on how it came
to be, and each state carries only what it supports:

* :class:`Whole`: fitted on the whole lattice in this session; keeps the sparse factor's
  inputs (:class:`Sampler`), so it samples, places and conditions.
* :class:`Tiled`: fitted on posterior tiles; keeps the observed cells and the dense part's
  weights, from which each tile's factor is rebuilt to place and condition; no samples.
* :class:`Moments`: read from a model file; predicts only.
* :class:`Conditioned`: observations added since the fit (``add_observations``); places on
  from its base's factor with them absorbed; samples need a refit.

Asking a state for what it does not have raises :class:`~geogp.exceptions.InputError` with
what to do instead.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from geogp import linalg
from geogp.exceptions import GeogpError, InputError

__all__ = ["Sampler", "Added", "Moments", "Whole", "Tiled", "Conditioned"]


class Sampler:
    """The posterior covariance of a lattice at the fitted θ, in factored form:
    Cov f = H (B/c)⁻¹ Hᵀ + g (D A⁻¹ D) gᵀ (docs/lattice.md, posterior).

    Attributes:
        pattern: the sparsity pattern of B. b_vals: B/c on it.
        dense: whether B is factorised by the dense reference backend.
        pi: the mid-scale map Π (joint unknowns (g_fine, g_mid)), or None.
        g: F − S_F (n_cells, k + p). w_cov: D A⁻¹ D (k + p, k + p).
    """

    def __init__(self, pattern: Any, b_vals: np.ndarray, dense: bool, pi: Any,
                 g: np.ndarray, w_cov: np.ndarray) -> None:
        self.pattern, self.b_vals, self.dense, self.pi = pattern, b_vals, bool(dense), pi
        self.g, self.w_cov = g, w_cov
        self._root: tuple | None = None  # computed on the first draw
        self._w_root: np.ndarray | None = None

    @property
    def size(self) -> int:
        """Unknowns of B: the lattice's cells and the mid-scale nodes."""
        return int(self.pattern.n)

    def root(self, ordering: str) -> tuple:
        """(Lᵀ, Π) with Π B Πᵀ = L Lᵀ (Π None: dense), computed once and kept."""
        if self._root is None:
            if self.dense:
                B = self.pattern.to_scipy(self.b_vals).toarray()
                self._root = (np.linalg.cholesky(B).T, None)
            else:
                lower, perm = linalg.cholmod.analyze(
                    self.pattern, ordering=ordering).factor_and_perm(self.b_vals)
                self._root = (lower.T.tocsr(), perm)
        return self._root

    def weights_root(self) -> np.ndarray:
        """C with C Cᵀ = D A⁻¹ D, kept: a symmetric eigendecomposition, so that a numerically
        semi-definite A⁻¹ (flat directions of the trend) still has a root."""
        if self._w_root is None:
            cov = np.asarray(self.w_cov, dtype=np.float64)
            if cov.size == 0:
                self._w_root = cov
            else:
                lam, vec = np.linalg.eigh(0.5 * (cov + cov.T))
                if not np.all(np.isfinite(lam)) or lam.min() < -1e-8 * max(lam.max(), 1e-300):
                    raise GeogpError(
                        "posterior samples: the covariance of the lattice model's trend and "
                        "large-scale coefficients is not positive semi-definite (smallest "
                        f"eigenvalue {lam.min():.3g}); the fit is numerically singular. Refit "
                        "with a simpler mean (mean='constant') or large_scale=None.")
                self._w_root = vec * np.sqrt(np.clip(lam, 0.0, None))
        return self._w_root


@dataclass(frozen=True)
class Added:
    """Observations absorbed since the fit: the lattice cells, in order, the variances before
    them and, on the whole lattice, the covariance columns ``v`` (one row per cell) and the
    conditional variances ``d`` of the rank-one updates (None on tiles: each tile redoes its
    own)."""

    var0: np.ndarray
    sites: tuple[int, ...] = ()
    v: np.ndarray | None = None
    d: np.ndarray | None = None


@dataclass(frozen=True, eq=False, kw_only=True)
class Moments:
    """Per-cell posterior moments (standardised): ``mean``, ``var`` (n,), ``cov`` (4, n) (see
    :func:`~geogp.models.lattice.tiled.core_moments`), and the tiles they were computed on.
    The state of a model read from a file: it predicts, and nothing more."""

    mean: np.ndarray
    var: np.ndarray
    cov: np.ndarray
    n_tiles: int = 1

    def sampler(self) -> Sampler:
        """The whole lattice's factor for posterior samples."""
        raise InputError("posterior samples need a lattice model fitted in this session; a "
                         "model loaded from a file cannot draw them (the file keeps the "
                         "per-cell moments, not the sparse factorisation samples need). "
                         "predict() works on it; refit the model to sample.")

    def factor(self) -> Sampler:
        """The whole lattice's factor for placement and conditioning."""
        raise InputError("placement on this lattice model needs the fit's sparse factor; a "
                         "model loaded from a file keeps only the per-cell moments. Refit the "
                         "model in this session.")

    def tile_inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """(observed cells (raster shape), D A⁻¹ D): what a posterior tile's factor is rebuilt
        from."""
        raise InputError(
            f"placement on this lattice model's {self.n_tiles} posterior tiles refactorises "
            "each tile from the fit's observed cells; a model loaded from a file does not keep "
            "them. Refit the model in this session.")

    @property
    def added(self) -> Added:
        """The observations absorbed since the fit (none here)."""
        return Added(var0=self.var)

    def factor_size(self) -> int:
        """Unknowns of the sparse factor that placement refactorises."""
        return int(self.mean.size)

    def conditioned(self, mean: np.ndarray, var: np.ndarray, cov: np.ndarray,
                    added: Added) -> Conditioned:
        """These moments updated by the observations ``added`` (a new value)."""
        return Conditioned(mean=mean, var=var, cov=cov, n_tiles=self.n_tiles, base=self,
                           added_=added)

    def moments(self) -> Moments:
        """Only the moments (what a model file keeps)."""
        return Moments(mean=self.mean, var=self.var, cov=self.cov, n_tiles=self.n_tiles)


@dataclass(frozen=True, eq=False, kw_only=True)
class Whole(Moments):
    """Fitted on the whole lattice in this session: samples, placement and conditioning."""

    sampler_: Sampler

    def sampler(self) -> Sampler:
        return self.sampler_

    def factor(self) -> Sampler:
        return self.sampler_

    def factor_size(self) -> int:
        return self.sampler_.size


@dataclass(frozen=True, eq=False, kw_only=True)
class Tiled(Moments):
    """Fitted on posterior tiles in this session: each tile's factor is rebuilt from the
    observed cells (1 byte a cell) and the dense part's weights D A⁻¹ D."""

    observed: np.ndarray
    w_cov: np.ndarray

    def sampler(self) -> Sampler:
        raise InputError(
            f"posterior samples need the whole lattice's factor; this model's posterior was "
            f"computed on {self.n_tiles} tiles. Refit with posterior_tile=None, memory "
            "permitting, or crop the raster.")

    def tile_inputs(self) -> tuple[np.ndarray, np.ndarray]:
        return self.observed, self.w_cov


@dataclass(frozen=True, eq=False, kw_only=True)
class Conditioned(Moments):
    """``base`` with observations added since the fit (``added_``), θ kept."""

    base: Moments
    added_: Added

    def sampler(self) -> Sampler:
        raise InputError("posterior samples of a lattice model with observations added since "
                         "its fit (add_observations) need a refit with them.")

    def factor(self) -> Sampler:
        return self.base.factor()

    def tile_inputs(self) -> tuple[np.ndarray, np.ndarray]:
        return self.base.tile_inputs()

    @property
    def added(self) -> Added:
        return self.added_

    def factor_size(self) -> int:
        return self.base.factor_size()

    def conditioned(self, mean: np.ndarray, var: np.ndarray, cov: np.ndarray,
                    added: Added) -> Conditioned:
        return dataclasses.replace(self, mean=mean, var=var, cov=cov, added_=added)
