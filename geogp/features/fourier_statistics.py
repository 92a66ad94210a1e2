"""Sufficient statistics of AFS models, read from the data once (docs/bound.md, docs/afs.md).

Callers reach them through the feature set, ``FourierFeatures.statistics(Points(X, y))`` or
``FourierFeatures.statistics(Grid(axes, values))`` (:mod:`geogp.features.data`), which picks
the route below. After :func:`dense_stats`, :func:`grid_stats` or :func:`points_stats`, the data are
never touched again: the collapsed bound, its gradient and the posterior are functions of
(θ, :class:`SufficientStats`) only.

Routes (all give the same numbers; tests check them against each other):

============================  ===================================  ==========================
route                          cost                                 when
============================  ===================================  ==========================
``dense_stats``                O(N M²), chunked rows                reference, small N
``points_stats`` (NUFFT)       O(N + P^D log P + M²)                scattered points
``grid_stats``                 O(N·P + M²), chunked rows            raster with gaps (NaN)
``grid_stats(diagonal=True)``  O(N·P), G = N·I (Lemma 3.1)          complete raster
============================  ===================================  ==========================

P ≈ 4K is the number of frequency bins per axis. Chunks are summed, so the statistics are the
same for any chunk size, and a dask array is processed block by block (bounded memory).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from geogp.core.trend import basis, basis_grid
from geogp.exceptions import AllMissingError, InputError
from geogp.features import trig
from geogp.features.gram_operator import GramOperator

if TYPE_CHECKING:  # annotations only: the feature set's statistics() method calls this module
    from numpy.typing import ArrayLike

    from geogp.features.fourier import FourierFeatures

__all__ = ["SufficientStats", "residual_stats", "dense_stats", "points_stats", "grid_stats",
           "grid_lemma_holds", "grid_noise_projection", "points_noise_projection",
           "DEFAULT_CHUNK_BYTES", "DEFAULT_DENSE_BLOCK"]

DEFAULT_CHUNK_BYTES = 256 * 2**20  # peak extra memory per chunk: well under 1 GB


@jax.tree_util.register_pytree_node_class
@dataclass
class SufficientStats:
    """G = ΦΦᵀ (M, M) or its diagonal (M,) when ``diagonal``; r = Φy (M,); yy = yᵀy; n = N.

    With a mean function (:mod:`geogp.core.trend`) also F = ΦH (M, p), HH = HᵀH (p, p), Hy = Hᵀy
    (p,);
    these are None otherwise. Statistics add: ``s1 + s2`` is the statistics of the union of two
    disjoint data sets.

    With per-observation weights w (noise variance σ²/w_i: how a robust loss enters, issue
    #44) every product carries W = diag(w): G = ΦWΦᵀ, r = ΦWy, yy = yᵀWy, F = ΦWH, HH = HᵀWH,
    Hy = HᵀWy; n stays the count, ``wsum`` = Σ w_i (the trace term's count) and ``logw`` =
    Σ log w_i (the noise's log-determinant). Both are None without weights (w = 1).
    """

    G: jnp.ndarray
    r: jnp.ndarray
    yy: jnp.ndarray
    n: jnp.ndarray
    diagonal: bool = False
    F: jnp.ndarray | None = None
    HH: jnp.ndarray | None = None
    Hy: jnp.ndarray | None = None
    wsum: jnp.ndarray | None = None
    logw: jnp.ndarray | None = None

    def tree_flatten(self) -> tuple[tuple, bool]:
        return ((self.G, self.r, self.yy, self.n, self.F, self.HH, self.Hy, self.wsum,
                 self.logw), self.diagonal)

    @classmethod
    def tree_unflatten(cls, diagonal: bool, children: tuple) -> SufficientStats:
        G, r, yy, n, F, HH, Hy, wsum, logw = children
        return cls(G, r, yy, n, diagonal, F, HH, Hy, wsum, logw)

    @property
    def weight_total(self) -> jax.Array:
        """Σ w_i (N without weights): the count in the trace term."""
        return self.n if self.wsum is None else self.wsum

    @property
    def log_weights(self) -> jax.Array | float:
        """Σ log w_i (0 without weights)."""
        return 0.0 if self.logw is None else self.logw

    def with_data(self, G: jax.Array, r: jax.Array, F: jax.Array | None = None,
                  diagonal: bool | None = None) -> SufficientStats:
        """These statistics with G, r (and F) replaced: a subset of the features or another
        form of G, the same observations and weights."""
        return SufficientStats(G, r, self.yy, self.n, self.diagonal if diagonal is None
                               else diagonal, F, self.HH, self.Hy, self.wsum, self.logw)

    def __post_init__(self):
        G, r = (self.G.shape if self.matrix_free else np.shape(self.G)), np.shape(self.r)
        if len(r) != 1 or (G != (r[0], r[0]) and not (self.diagonal and G == r)):
            raise InputError(f"inconsistent statistics: G has shape {G}, r has shape {r}.")

    @property
    def matrix_free(self) -> bool:
        """G is a :class:`~geogp.features.gram_operator.GramOperator` (large M), not an array."""
        return isinstance(self.G, GramOperator)

    def __add__(self, other: SufficientStats) -> SufficientStats:
        if self.matrix_free or other.matrix_free:
            raise InputError("matrix-free statistics are built from summed bins; add the data "
                             "before building the operator.")
        if self.diagonal != other.diagonal:
            raise InputError("cannot add diagonal and dense statistics.")

        def add(a, b):
            return None if a is None else a + b

        weighted = self.wsum is not None or other.wsum is not None
        return SufficientStats(self.G + other.G, self.r + other.r, self.yy + other.yy,
                               self.n + other.n, self.diagonal, add(self.F, other.F),
                               add(self.HH, other.HH), add(self.Hy, other.Hy),
                               self.weight_total + other.weight_total if weighted else None,
                               self.log_weights + other.log_weights if weighted else None)

    @property
    def n_features(self) -> int:
        return int(np.shape(self.r)[0])

    @property
    def G_diag(self) -> jax.Array:
        if self.matrix_free:
            return self.G.diag
        return self.G if self.diagonal else jnp.diagonal(self.G)


def _make(G, r, yy, n, diagonal=False, F=None, HH=None, Hy=None,
          weights: _Weights | None = None) -> SufficientStats:
    if n == 0:
        raise AllMissingError("no observed values: every cell/point is missing (NaN).")

    def arr(a):
        return None if a is None else jnp.asarray(a)

    G = G if isinstance(G, GramOperator) else jnp.asarray(G)
    wsum, logw = (None, None) if weights is None else (weights.total, weights.log)
    return SufficientStats(G, jnp.asarray(r), jnp.asarray(float(yy)),
                           jnp.asarray(float(n)), diagonal, arr(F), arr(HH), arr(Hy),
                           arr(wsum), arr(logw))


def residual_stats(stats: SufficientStats, beta: ArrayLike) -> SufficientStats:
    """Statistics of y − Hβ: r − Fβ and yᵀy − 2βᵀHy + βᵀHHβ (differentiable in β)."""
    r = stats.r - stats.F @ beta
    yy = stats.yy - 2.0 * beta @ stats.Hy + beta @ (stats.HH @ beta)
    return SufficientStats(stats.G, r, yy, stats.n, stats.diagonal, wsum=stats.wsum,
                           logw=stats.logw)


class _Weights:
    """Σ w and Σ log w of per-observation weights, summed chunk by chunk (checked: finite,
    > 0); ``None`` weights are ones and add nothing."""

    def __init__(self) -> None:
        self.total, self.log = 0.0, 0.0

    def add(self, w: np.ndarray) -> None:
        if w.size and not (np.all(np.isfinite(w)) and w.min() > 0):
            raise InputError("weights must be finite and > 0 at every observation.")
        self.total += float(w.sum())
        self.log += float(np.log(w).sum())


def _chunk_weights(weights, sl, like: np.ndarray) -> np.ndarray | None:
    """The weights of one chunk (``weights[sl]`` as float64, the shape of ``like``), or None."""
    if weights is None:
        return None
    w = np.asarray(weights[sl], dtype=np.float64)
    if w.shape != like.shape:
        raise InputError(f"weights have shape {w.shape} where the data have {like.shape}.")
    return w


class _TrendAccumulator:
    """Accumulates F = ΦH, HᵀH, Hᵀy chunk by chunk (nothing when ``powers`` is None)."""

    def __init__(self, ff: FourierFeatures, powers):
        self.powers = powers
        if powers is not None:
            p = len(powers)
            self.L = np.zeros((p, *trig.bin_sizes(ff, "linear")), dtype=np.complex128)
            self.F = np.zeros((ff.n_features, p))
            self.HH = np.zeros((p, p))
            self.Hy = np.zeros(p)

    def add_products(self, H: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> None:
        if self.powers is not None:
            wH = H if w is None else H * w[:, None]
            self.HH += H.T @ wH
            self.Hy += wH.T @ y

    def result(self, ff: FourierFeatures):
        if self.powers is None:
            return {}
        F = self.F + np.stack([trig.assemble_linear(ff, L) for L in self.L], axis=1)
        return {"F": F, "HH": self.HH, "Hy": self.Hy}


def _rows_per_chunk(row_bytes: float, chunk_bytes: float) -> int:
    return max(1, int(chunk_bytes // max(row_bytes, 1.0)))


def dense_stats(ff: FourierFeatures, X: ArrayLike, y: ArrayLike,
                chunk_bytes: float = DEFAULT_CHUNK_BYTES,
                chunk_rows: int | None = None, powers: np.ndarray | None = None,
                weights: ArrayLike | None = None) -> SufficientStats:
    """G and r by explicit feature matrices, summed over row chunks (the reference route).

    Args:
        ff: the feature set; X: (N, D) numpy or dask array; y: (N,) numpy or dask array.
        chunk_bytes: bound on the feature-matrix chunk (N_c × M × 8 bytes).
        chunk_rows: explicit rows per chunk (overrides chunk_bytes).
        powers: monomial exponents (p, D) of a mean function (:mod:`geogp.core.trend`), or None.
        weights: (N,) per-observation weights w > 0 (noise variance σ²/w_i), or None (ones).

    Cost: O(N M²) time, O(M² + N_c M) memory.
    """
    trend = _TrendAccumulator(ff, powers)
    M = ff.n_features
    step = chunk_rows or _rows_per_chunk(8.0 * M * 2, chunk_bytes)
    G = np.zeros((M, M))
    r = np.zeros(M)
    yy = 0.0
    N = int(X.shape[0])
    total = None if weights is None else _Weights()
    for start in range(0, N, step):
        Xc = np.asarray(X[start:start + step], dtype=np.float64)
        yc = np.asarray(y[start:start + step], dtype=np.float64)
        wc = _chunk_weights(weights, slice(start, start + step), yc)
        Phi = ff(Xc)
        wPhi = Phi if wc is None else Phi * wc[:, None]
        wy = yc if wc is None else wc * yc
        if total is not None:
            total.add(wc)
        G += Phi.T @ wPhi
        r += Phi.T @ wy
        yy += float(yc @ wy)
        if powers is not None:
            H = basis(Xc, powers)
            trend.F += wPhi.T @ H
            trend.add_products(H, yc, wc)
    return _make(0.5 * (G + G.T), r, yy, N, **trend.result(ff), weights=total)


DEFAULT_DENSE_BLOCK = 1024  # low-frequency block kept dense beside a matrix-free G


def _gram(ff: FourierFeatures, C: np.ndarray, gram: str, dense_block: int):
    """G from the quadratic-form bins: dense (M, M) array, or matrix-free operator (large M)."""
    if gram == "dense":
        return trig.assemble_gram(ff, C)
    if gram == "operator":
        return GramOperator.from_bins(ff, C, n_dense=dense_block)
    raise InputError(f"gram must be 'dense' or 'operator'; got {gram!r}.")


def points_stats(ff: FourierFeatures, X: ArrayLike, y: ArrayLike, method: str = "nufft",
                 chunk_bytes: float = DEFAULT_CHUNK_BYTES, powers: np.ndarray | None = None,
                 gram: str = "dense",
                 dense_block: int = DEFAULT_DENSE_BLOCK,
                 weights: ArrayLike | None = None) -> SufficientStats:
    """G and r at scattered points through type-1 NUFFTs of the weights 1 and y (docs/afs.md,
    statistics); with per-observation ``weights`` w (N,), of w and w·y (SufficientStats).

    ``gram='operator'`` keeps G matrix-free (:class:`GramOperator`, O(M log M) per product),
    with a dense block over the ``dense_block`` lowest frequencies (preconditioner).
    Cost: O(N + P^D log P) for the transforms plus O(M²) to assemble a dense G.
    """
    trend = _TrendAccumulator(ff, powers)
    N = int(X.shape[0])
    step = _rows_per_chunk(8.0 * 8, chunk_bytes)
    C = np.zeros(trig.bin_sizes(ff, "quadratic"), dtype=np.complex128)
    L = np.zeros(trig.bin_sizes(ff, "linear"), dtype=np.complex128)
    yy = 0.0
    total = None if weights is None else _Weights()
    for start in range(0, N, step):
        Xc = np.asarray(X[start:start + step], dtype=np.float64)
        yc = np.asarray(y[start:start + step], dtype=np.float64)
        wc = _chunk_weights(weights, slice(start, start + step), yc)
        if total is not None:
            total.add(wc)
        w1 = np.ones_like(yc) if wc is None else wc
        C += trig.points_bins(ff, Xc, w1, "quadratic", method)
        L += trig.points_bins(ff, Xc, w1 * yc, "linear", method)
        yy += float(yc @ (w1 * yc))
        if powers is not None:
            H = basis(Xc, powers)
            for j in range(len(powers)):
                trend.L[j] += trig.points_bins(ff, Xc, w1 * H[:, j], "linear", method)
            trend.add_products(H, yc, wc)
    return _make(_gram(ff, C, gram, dense_block), trig.assemble_linear(ff, L), yy, N,
                 **trend.result(ff), weights=total)


def grid_lemma_holds(n_cells: Sequence[int], n_freq: Sequence[int]) -> bool:
    """Lemma 3.1 (docs/afs.md, gridded data) for the odd lattice with W_d = N_d η_d exactly.

    Then a_d = 1 and M_d = 2K_d distinct complex frequencies, and the complex Gram matrix of a
    complete grid is N·I iff N_d / gcd(1, N_d) = N_d ≥ 2K_d in every dimension. The real
    features are a unitary transform of the complex ones, so G = N·I too (eq. 3.94).
    """
    return all(int(N) >= 2 * int(K) for N, K in zip(n_cells, n_freq, strict=True))


def grid_stats(ff: FourierFeatures, axes: list, values: ArrayLike, diagonal: bool = False,
               chunk_bytes: float = DEFAULT_CHUNK_BYTES, powers: np.ndarray | None = None,
               gram: str = "dense", dense_block: int = DEFAULT_DENSE_BLOCK,
               weights: ArrayLike | None = None) -> SufficientStats:
    """Statistics of a regular grid whose missing cells are NaN (docs/afs.md, gridded data).

    Args:
        ff: the feature set.
        axes: D coordinate vectors (N_d,) matching the axes of ``values``.
        values: (N_1, ..., N_D) numpy or dask array; NaN marks a missing cell.
        diagonal: use G = N·I (Lemma 3.1). Valid only for a complete grid, the odd lattice and
            W_d = N_d·η_d with 2K_d ≤ N_d; checked here, a violation raises.
        chunk_bytes: bound on the memory of one block of rows (the first axis is chunked).
        powers: monomial exponents (p, D) of a mean function (:mod:`geogp.core.trend`), or None.
        gram: ``'dense'`` (M × M array) or ``'operator'`` (matrix-free, for large M, with a
            dense block over the ``dense_block`` lowest frequencies for the preconditioner).
        weights: per-cell weights w > 0 (the shape of ``values``; read at observed cells
            only), or None (ones): :class:`SufficientStats`. Not with ``diagonal``.

    Cost: O(N Σ_d P_d) for the bins, O(M²) to assemble G (skipped when ``diagonal``).
    """
    if diagonal and weights is not None:
        raise InputError("the diagonal (Lemma 3.1) grid mode holds for unit weights only.")
    shape = tuple(int(s) for s in values.shape)
    if len(shape) != ff.n_dims or len(axes) != len(shape) or any(
            len(a) != s for a, s in zip(axes, shape, strict=True)):
        raise InputError(f"grid values of shape {shape} do not match axes of lengths "
                         f"{[len(a) for a in axes]}.")
    trend = _TrendAccumulator(ff, powers)
    Pq = trig.bin_sizes(ff, "quadratic")
    Pl = trig.bin_sizes(ff, "linear")
    C = np.zeros(Pq, dtype=np.complex128)
    L = np.zeros(Pl, dtype=np.complex128)
    yy, n = 0.0, 0
    row_cells = int(np.prod(shape[1:]))
    row_bytes = 16.0 * (row_cells + max(Pq[-1], 1) * int(np.prod(shape[1:-1] or (1,))) + 4)
    step = _rows_per_chunk(row_bytes * 4, chunk_bytes)
    chunks = getattr(values, "chunks", None)
    if chunks is not None:  # dask: follow its blocks along the first axis
        bounds = np.cumsum((0, *chunks[0]))
        slices = [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds)]
    else:
        slices = [slice(s, s + step) for s in range(0, shape[0], step)]
    total = None if weights is None else _Weights()
    for sl in slices:
        block = np.asarray(values[sl], dtype=np.float64)
        obs = np.isfinite(block)
        wb = _chunk_weights(weights, sl, block)
        # the weight of each cell, 0 where missing (the mask without weights)
        mass = obs.astype(np.float64) if wb is None else np.where(obs, wb, 0.0)
        if total is not None:
            total.add(wb[obs])
        yb = np.where(obs, block, 0.0)
        sub_axes = [np.asarray(axes[0])[sl]] + [np.asarray(a) for a in axes[1:]]
        if not diagonal:
            C += trig.grid_bins(ff, sub_axes, mass, "quadratic")
        L += trig.grid_bins(ff, sub_axes, mass * yb, "linear")
        yy += float(np.sum(mass * yb * yb))
        n += int(obs.sum())
        if powers is not None:
            H = np.stack([basis_grid(sub_axes, powers, j)[obs] for j in range(len(powers))], 1)
            for j in range(len(powers)):
                trend.L[j] += trig.grid_bins(ff, sub_axes,
                                             mass * basis_grid(sub_axes, powers, j), "linear")
            trend.add_products(H, block[obs], None if wb is None else wb[obs])
    if diagonal:
        if ff.lattice != "odd":
            raise InputError("the diagonal (Lemma 3.1) grid mode needs the odd lattice.")
        eta = np.array([abs(a[1] - a[0]) if len(a) > 1 else 0.0 for a in axes])
        if n != int(np.prod(shape)):
            raise InputError(
                f"G = N·I holds only for a complete grid; {int(np.prod(shape)) - n} cells are "
                "missing. Use the exact gappy-grid route (diagonal=False)."
            )
        if not np.allclose(ff.width, np.array(shape) * eta, rtol=1e-9):
            raise InputError(f"G = N·I needs W_d = N_d·η_d = {np.array(shape) * eta}; the "
                             f"window is {ff.width}.")
        if not grid_lemma_holds(shape, ff.n_freq):
            raise InputError(f"Lemma 3.1 violated: need 2K_d ≤ N_d, got K = {list(ff.n_freq)} "
                             f"for grid {list(shape)}. Use fewer features.")
        return _make(np.full(ff.n_features, float(n)), trig.assemble_linear(ff, L), yy, n,
                     diagonal=True, **trend.result(ff))
    return _make(_gram(ff, C, gram, dense_block), trig.assemble_linear(ff, L), yy, n,
                 **trend.result(ff), weights=total)


# ---------------------------------------------------------------------- posterior sampling
def _assemble_batch(ff: FourierFeatures, L: np.ndarray) -> np.ndarray:
    """(M, S) from linear bins (S, P_1, ..., P_D)."""
    return np.stack([trig.assemble_linear(ff, Ls) for Ls in L], axis=1)


def grid_noise_projection(ff: FourierFeatures, axes: list, values: ArrayLike, n_samples: int,
                          rng: np.random.Generator,
                          chunk_bytes: float = DEFAULT_CHUNK_BYTES,
                          weights: np.ndarray | None = None) -> np.ndarray:
    """Φη (M, S) for S independent standard-normal vectors η on the observed cells of a grid
    (ΦW½η with per-cell ``weights``, the grid's shape: covariance G either way).

    Used to draw b ~ N(0, A) for matrix-free posterior samples
    (:func:`geogp.models.collapsed_iterative.iterative_posterior`). Chunked over the first axis
    (numpy or dask values). Cost O(S · N Σ_d P_d).
    """
    shape = tuple(int(s) for s in values.shape)
    row_bytes = 16.0 * n_samples * int(np.prod(shape[1:])) * 3
    step = _rows_per_chunk(row_bytes, chunk_bytes)
    L = np.zeros((n_samples, *trig.bin_sizes(ff, "linear")), dtype=np.complex128)
    for start in range(0, shape[0], step):
        sl = slice(start, start + step)
        obs = np.isfinite(np.asarray(values[sl], dtype=np.float64))
        eta = rng.standard_normal((*obs.shape, n_samples)) * obs[..., None]
        if weights is not None:
            w = np.where(obs, np.asarray(weights[sl], dtype=np.float64), 0.0)
            eta *= np.sqrt(w)[..., None]
        sub_axes = [np.asarray(axes[0])[sl]] + [np.asarray(a) for a in axes[1:]]
        L += trig.grid_bins(ff, sub_axes, eta, "linear")  # batch axis comes out first
    return _assemble_batch(ff, L)


def points_noise_projection(ff: FourierFeatures, X: ArrayLike, n_samples: int,
                            rng: np.random.Generator,
                            weights: np.ndarray | None = None) -> np.ndarray:
    """Φη (M, S) for S standard-normal vectors η at scattered points X (N, D): batched NUFFT
    (ΦW½η with per-point ``weights``: covariance G either way)."""
    X = np.asarray(X, dtype=np.float64)
    eta = rng.standard_normal((n_samples, X.shape[0]))
    if weights is not None:
        eta *= np.sqrt(np.asarray(weights, dtype=np.float64))
    L = trig.points_bins(ff, X, eta, "linear")
    return _assemble_batch(ff, L.reshape((n_samples, *trig.bin_sizes(ff, "linear"))))
