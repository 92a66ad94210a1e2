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

The marginal ``"mi"`` criterion over a target set too large for its candidates × targets
covariance (every cell of a raster) is taken to first order in the squared correlations,
½ Σ_i C_ai² / (ρ_i d_a) with ρ_i = C_ii + σ² and d_a = C_aa + σ² (the expected reduction of the
targets' variances, each in units of its own), and Σ_i C_ai²/ρ_i is estimated for every
candidate at once with m random-sign probes z: the mean of (C W^½ z)_a², W = diag(1/ρ), is
unbiased, with a relative standard deviation of at most √(2/m) (12.5 % at the default
m = :data:`PROBES`). One solve with m right-hand sides, then O(N m) per site: P ← P −
v (vᵀW^½Z)/d. A thinned target set instead would reward sites next to the kept targets, since
the posterior correlation is shorter than their spacing.

``"reduction"`` (total variance reduction, A-optimal) scores Σ_i C_ai² / d_a, the expected drop
of the targets' summed variances (the squared error a map's user sees), with the same probes
and W = I over every cell, or exactly over an explicit small target set.

With probes, each pick is refined: the :data:`REFINE_TOP` best-probed candidates are scored
exactly (one solve with as many columns of C_k) and the best of them is taken, so that the
probes' noise does not decide between candidates whose scores lie within it.

:class:`LatticeCovariance` holds that state for a fitted whole-lattice model;
:func:`lattice_greedy` builds the greedy state of :mod:`geogp.placement.greedy` on it for
``"variance"`` and ``"mi"`` (marginal and joint: one column per target).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import scipy.linalg as sla

from geogp import linalg
from geogp.core.validation import as_points
from geogp.exceptions import InputError
from geogp.linalg.sites import SiteConditioned
from geogp.models.base import check_fitted
from geogp.models.lattice.memory import factor_bytes
from geogp.models.lattice.posterior import tile_sampler
from geogp.models.lattice.state import Added
from geogp.models.lattice.tiled import tile_lattice
from geogp.placement.candidates import MIN_DISTANCE_FRACTION, packing_distance
from geogp.placement.greedy import Greedy
from geogp.placement.operators import Problem

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.models.lattice.tiled import PosteriorTile

__all__ = ["PROBES", "REFINE_TOP", "LatticeCovariance", "LatticeGreedy", "CellOps",
           "CellCovariance",
           "add_lattice_observations", "condition_moments", "observation_cells",
           "check_lattice", "cells_of", "lattice_min_distance", "lattice_memory_estimate"]

_LOCATION_BYTES = 400  # per candidate/target: cells, variances, scores, masks
PROBES = 128  # random-sign probes of the marginal mi over every cell (module docstring)
REFINE_TOP = 16  # best-probed candidates whose score is computed exactly before each pick


class LatticeCovariance(SiteConditioned):
    """The lattice posterior's covariance columns at cells, conditioned on sites added one by
    one (module docstring). Standardised units; cells are flat indices of the model's lattice
    (``est.shape_``, margin included), or with ``tile`` of that posterior tile's lattice (its
    window plus the margin, :func:`~geogp.models.lattice.posterior.tile_sampler`: the whole
    lattice's covariance to the tiles' error inside its core), whose variances before any site
    are the model's own.

    Attributes:
        noise: σ² of a new measurement (standardised). n: cells of the lattice.
        shape: its (rows, cols). offset: the whole lattice's (row, col) of its cell 0.
        sites: the cells absorbed so far, in order.
    """

    def __init__(self, est: Any, tile: PosteriorTile | None = None) -> None:
        post = est.posterior_
        added = post.added  # observations added since the fit (none: the fit's own state)
        if tile is None:  # the whole lattice: the fit's factor (refused on tiles or loaded)
            sm = post.factor()
            self.shape = tuple(int(v) for v in est.shape_)
            self.offset = (0, 0)
        else:  # one posterior tile's lattice (its window plus the margin), at the fitted θ
            # tiles of one window shape share the lattice and its CHOLMOD analysis; the
            # numeric factor follows the values solved with (held tiles refactorise in turn)
            sm = tile_sampler(est, tile)
            r0, r1, c0, c1 = tile_lattice(tile, est.margin)
            self.shape, self.offset = (r1 - r0, c1 - c0), (r0, c0)
            rows, cols = np.divmod(np.arange(self.shape[0] * self.shape[1]), self.shape[1])
            self._var0 = np.asarray(added.var0, dtype=np.float64)[
                (rows + self.offset[0]) * int(est.shape_[1]) + cols + self.offset[1]]
        self.noise = float(est.noise_var_)
        self.cells_word = "lattice"
        self.n = int(self.shape[0] * self.shape[1])
        self.batch = 64  # right-hand sides a solve takes in the greedy's set-up
        # the dense part of the covariance, r A⁻¹ rᵀ = g (D A⁻¹ D) gᵀ
        self._pi, self._r = sm.pi, np.asarray(sm.g)
        self._ainv = np.asarray(sm.w_cov)
        pattern, b_vals = sm.pattern, np.asarray(sm.b_vals)  # B/c
        if sm.dense:
            dense = np.linalg.inv(pattern.to_scipy(b_vals).toarray())

            def solve(rhs):
                return dense @ rhs
        else:
            factor = linalg.cholmod.analyze(pattern, ordering=est.ordering)

            def solve(rhs):
                logdet, out = factor.host_forward(b_vals, rhs)
                if not np.isfinite(logdet):
                    raise InputError("the lattice posterior's precision is not positive "
                                     "definite; refit the model.")
                return out
        self._factor = None if sm.dense or tile is None else factor  # a tile's own factor
        self._solve, self._size = solve, pattern.n
        self._v = np.zeros((0, self.n))
        self._d = np.zeros(0)
        self.sites: list[int] = []
        if tile is None:  # start from the observations added since the fit
            self._var0 = np.asarray(added.var0, dtype=np.float64)
            if added.sites:
                self._v, self._d = added.v.copy(), added.d.copy()
                self.sites = list(added.sites)

    def release(self) -> None:
        """Free a tile's sparse factor now (the whole lattice's belongs to the model; a later
        solve factorises again)."""
        if self._factor is not None:
            self._factor.release()

    def prior_columns(self, cells: ArrayLike) -> np.ndarray:
        """C[:, cells] (n, len(cells)) given the data only: one sparse solve with as many
        right-hand sides Hᵀe_s (the cell and its four mid-scale nodes)."""
        cells = np.array([self._check_cell(c) for c in np.atleast_1d(cells)], dtype=np.int64)
        rhs = np.zeros((self._size, cells.size), order="F")
        rhs[cells, np.arange(cells.size)] = 1.0
        if self._pi is not None:
            rhs[self.n:] = self._pi[cells].T.toarray()
        x = self._solve(rhs)
        col = x[:self.n] if self._pi is None else x[:self.n] + self._pi @ x[self.n:]
        return col + self._r @ (self._ainv @ self._r[cells].T)

    def apply(self, x: np.ndarray) -> np.ndarray:
        """C_k x for x (n, m) over every cell: one sparse solve with m right-hand sides."""
        x = np.asarray(x, dtype=np.float64)
        rhs = np.zeros((self._size, x.shape[1]), order="F")
        rhs[:self.n] = x
        if self._pi is not None:
            rhs[self.n:] = self._pi.T @ x
        y = self._solve(rhs)
        out = y[:self.n] if self._pi is None else y[:self.n] + self._pi @ y[self.n:]
        out += self._r @ (self._ainv @ (self._r.T @ x))
        if self._d.size:
            out -= self._v.T @ ((self._v @ x) / self._d[:, None])
        return out

    def prior_column(self, cell: int) -> np.ndarray:
        """C e_cell over every cell, given the data only (one sparse solve)."""
        return self.prior_columns([cell])[:, 0]

    def absorbed(self) -> Added:
        """The sites absorbed so far, as the posterior's record of added observations."""
        return Added(var0=self._var0, sites=tuple(self.sites), v=self._v, d=self._d)


# =========================================================================== the greedy state
class CellOps:
    """Candidate or target locations as lattice cells (what the greedy loop counts)."""

    def __init__(self, cells: np.ndarray) -> None:
        self.cells = np.asarray(cells, dtype=np.int64)
        self.n = int(self.cells.size)


def check_lattice(model: Any, strategy: str, criterion: str = "marginal") -> None:
    """Refuse an unfitted lattice model, or a strategy it does not support (on a posterior
    computed on tiles: the joint mi, which needs the targets' whole covariance)."""
    check_fitted(model, "posterior_")
    if strategy not in ("variance", "mi", "reduction"):
        raise InputError(f"strategy {strategy!r} is not available for the lattice model; use "
                         "'variance', 'mi' or 'reduction'.")
    tiles = getattr(model, "posterior_tiles_", 1)
    if tiles > 1 and strategy == "mi" and criterion == "joint":
        raise InputError(
            f"the joint mi needs the targets' whole covariance; this lattice model's posterior "
            f"was computed on {tiles} tiles, which place tile by tile. Use criterion="
            "'marginal' or strategy='reduction'.")
    if tiles > 1:  # each tile is refactorised from the fit's observed cells
        model.posterior_.tile_inputs()  # refuses a loaded model, which has none


def lattice_min_distance(model: Any, coords: np.ndarray, n_sites: int) -> float:
    """Default minimum distance (model units): ¼ of the local field's range, at most half the
    spacing of ``n_sites`` spread evenly over the uncertain candidates among ``coords``:
    those whose latent posterior variance exceeds the noise variance (not pinned by their own
    observation; all of them if fewer than ``n_sites`` are). On a smooth field (range 95
    cells) ¼ of the range alone let one site into a 15 × 20-cell gap and sent the rest to
    the raster's corners."""
    coords = np.asarray(coords, dtype=np.float64)
    uncertain = model.posterior_.var[cells_of(model, coords, "candidates", exact=False)] > float(
        model.noise_var_)
    pool = coords[uncertain] if uncertain.sum() >= max(int(n_sites), 2) else coords
    return min(MIN_DISTANCE_FRACTION * float(model.range_), packing_distance(pool, n_sites))


def cells_of(model: Any, coords: np.ndarray, what: str, exact: bool = True) -> np.ndarray:
    """Flat lattice cells of ``coords`` (N, 2) in model units (y, x). ``exact``: they must be
    cell centres of the raster (else the nearest cell of the raster)."""
    coords = np.asarray(coords, dtype=np.float64)
    m = int(model.margin)
    ny, nx = model.shape_
    fy, fx = model.cell_index(coords)  # along the axes themselves on a nearly regular raster
    iy, ix = np.rint(fy).astype(np.int64), np.rint(fx).astype(np.int64)
    off = np.maximum(np.abs(fy - iy), np.abs(fx - ix))
    inside = (iy >= m) & (iy < ny - m) & (ix >= m) & (ix < nx - m)
    if not inside.all() or (exact and np.any(off > 1e-6)):
        bad = int(np.flatnonzero(~inside | (off > 1e-6 if exact else False))[0])
        raise InputError(
            f"{what}: the lattice model places sites on its raster's cells; location {bad} "
            f"({coords[bad, 0]:.6g}, {coords[bad, 1]:.6g}) is "
            + ("outside the raster." if not inside[bad] else "not a cell centre (use "
               "Candidates.grid of the raster's coordinates)."))
    return iy * nx + ix


def lattice_memory_estimate(model: Any, n_candidates: int, n_targets: int, n_sites: int,
                            strategy: str, criterion: str) -> float:
    """Bytes the lattice placement needs beyond the fitted model (an upper bound): the factor
    of B refactorised (as at the fit), the kept columns (one per site over every cell) and,
    for ``"mi"`` and ``"reduction"``, the candidates × targets covariance (twice for the
    joint mi), or the candidates × probes products (``n_targets`` = the probes)."""
    n = model.shape_[0] * model.shape_[1]
    size = model.posterior_.factor_size()
    out = factor_bytes(size, model.alpha_, size > n) + 8.0 * n * (n_sites + 6)
    out += _LOCATION_BYTES * (n_candidates + n_targets)
    if strategy in ("mi", "reduction"):
        joint = strategy == "mi" and criterion == "joint"
        out += 8.0 * n_candidates * n_targets * (2 if joint else 1)
        out += 3 * 8.0 * n_targets**2 if joint else 0.0
    return out


class CellCovariance(Protocol):
    """What :class:`LatticeGreedy` asks of a posterior covariance over a raster's cells:
    :class:`LatticeCovariance`, or a space-time forecast's
    (:class:`~geogp.models.spacetime.forecast.ForecastCovariance`)."""

    n: int
    batch: int  # right-hand sides per product or columns call (each call refactorises tiles)

    @property
    def noise(self) -> float | np.ndarray:
        """A new measurement's noise variance (per cell where it varies)."""

    def variance(self) -> np.ndarray: ...

    def columns(self, cells: ArrayLike) -> np.ndarray: ...

    def apply(self, x: np.ndarray) -> np.ndarray: ...

    def add(self, cell: int, column: np.ndarray | None = None) -> dict: ...


class LatticeGreedy(Greedy):
    """The greedy state of :class:`~geogp.placement.greedy.Greedy` on the lattice
    posterior: h_c = C_cc and the target variances from :class:`LatticeCovariance`, the
    candidate–target covariances ("mi") from one column per target."""

    noise_c: np.ndarray
    noise_t: np.ndarray

    def __init__(self, pb: Problem, lc: CellCovariance, strategy: str,
                 criterion: str, probes: int = 0, seed: int = 0) -> None:
        self.pb, self.lc, self.strategy, self.criterion = pb, lc, strategy, criterion
        self.lazy, self.lazy_batch, self.screen = False, 16, None
        # a new measurement's noise variance at the candidates and targets (one value on the
        # lattice model; a space-time forecast's varies with its tiles' variance factors)
        noise = np.broadcast_to(np.asarray(lc.noise, dtype=np.float64), (lc.n,))
        self.noise_c, self.noise_t = noise[pb.ops.cells], noise[pb.tops.cells]
        var = lc.variance()
        self.h, self.cT = var[pb.ops.cells], var[pb.tops.cells]
        self.hT = self.cT
        self.scores = np.full(pb.ops.n, -np.inf)
        self.probes = int(probes) if strategy in ("mi", "reduction") else 0
        self._refined: tuple[int, np.ndarray] | None = None  # (cell, C_k e_cell) of refine's
        # pick, for add to reuse
        if self.probes:  # P = C W^½ Z at the candidates, Z random signs over the targets
            rng = np.random.default_rng(seed)
            self._z = rng.choice([-1.0, 1.0], (pb.tops.n, self.probes))
            if strategy == "mi":  # W = diag(1/ρ); "reduction": W = I
                self._z /= np.sqrt(self.cT + self.noise_t)[:, None]
            self._rho0 = self.cT + self.noise_t  # the probes' weights (W = diag(1/ρ) for mi)
            self.P = np.empty((pb.ops.n, self.probes))
            for a in range(0, self.probes, lc.batch):
                z = np.zeros((lc.n, min(lc.batch, self.probes - a)))
                z[pb.tops.cells] = self._z[:, a:a + z.shape[1]]
                self.P[:, a:a + z.shape[1]] = lc.apply(z)[pb.ops.cells]
                del z
        elif strategy in ("mi", "reduction"):  # C(candidates, targets), lc.batch columns a solve
            joint = strategy == "mi" and criterion == "joint"
            self.Xt = np.empty((pb.ops.n, pb.tops.n))
            ct = np.empty((pb.tops.n, pb.tops.n)) if joint else None
            for a in range(0, pb.tops.n, lc.batch):
                cols = lc.columns(pb.tops.cells[a:a + lc.batch])
                self.Xt[:, a:a + cols.shape[1]] = cols[pb.ops.cells]
                if ct is not None:
                    ct[:, a:a + cols.shape[1]] = cols[pb.tops.cells]
                del cols
            if ct is not None:
                r = 0.5 * (ct + ct.T) + np.diag(self.noise_t)
                self.Yt = np.ascontiguousarray(
                    sla.cho_solve(sla.cho_factor(r, lower=True), self.Xt.T).T)

    def score_all(self, active: np.ndarray, *pending: Any) -> np.ndarray:
        if self.strategy == "variance":
            return self.h + self.noise_c
        d = self.h + self.noise_c
        if self.strategy == "reduction":  # Σ_i C_ai² / d_a: exact, or estimated
            sq = np.mean(self.P**2, axis=1) if self.probes else np.sum(self.Xt**2, axis=1)
            return sq / d
        if self.probes:  # ½ Σ_i C_ai² / (ρ_i d_a), estimated (module docstring)
            return 0.5 * np.mean(self.P**2, axis=1) / d
        return super().score_all(active, *pending)

    def refine(self, rank: np.ndarray, costs: np.ndarray | None) -> tuple[int, float] | None:
        """With probed scores: the best of the :data:`REFINE_TOP` highest-ranked candidates
        by their exact score (one solve with that many columns of C_k), so that the probes'
        noise (relative sd up to √(2/m)) does not decide between close candidates. Returns
        (candidate, exact score), or None without probes."""
        if not self.probes:
            return None
        order = np.argsort(-rank, kind="stable")[:REFINE_TOP]
        order = order[np.isfinite(rank[order])]
        full = self.lc.columns(self.pb.ops.cells[order])  # (n, K) over every cell
        cols = full[self.pb.tops.cells]  # (T, K)
        d = self.h[order] + self.noise_c[order]
        if self.strategy == "reduction":  # Σ_i C_ai² / d_a
            exact = np.sum(cols**2, axis=0) / d
        else:  # ½ Σ_i C_ai² / (ρ_i d_a), with the probes' weights
            exact = 0.5 * np.sum(cols**2 / self._rho0[:, None], axis=0) / d
        ranked = exact / costs[order] if costs is not None else exact
        best = int(np.argmax(ranked))
        self._refined = (int(self.pb.ops.cells[order[best]]), full[:, best].copy())
        return int(order[best]), float(exact[best])

    def add(self, a: int, active: np.ndarray) -> dict:
        pb = self.pb
        cell, known = int(pb.ops.cells[a]), self._refined
        self._refined = None  # its column is C_k's: valid for this pick only
        step = self.lc.add(cell, known[1] if known is not None and known[0] == cell else None)
        v, d = step["v"][pb.ops.cells], step["d"]
        u = step["v"][pb.tops.cells]
        info = self._condition(a, u, v, d, float(self.noise_c[a]))
        if self.probes:  # C_k = C_{k−1} − v vᵀ/d, applied to W^½ Z
            self.P -= np.outer(v, (u @ self._z) / d)
        elif self.strategy == "reduction":
            self.Xt -= np.outer(v, u / d)
        return info


# =========================================================================== the active loop
def condition_moments(mean: np.ndarray, cov: np.ndarray, v: np.ndarray, d: float, cell: int,
                      y: float | None) -> None:
    """Condition, in place, a lattice's posterior mean (n,) and neighbour covariances
    (4, n_y, n_x) on a measurement y (None: imputed, the mean stays) at ``cell``, given its
    covariance column v (n,) and d = v_cell + σ² (module docstring)."""
    if y is not None:
        mean += v * ((y - mean[cell]) / d)
    g = v.reshape(cov.shape[1:]) / np.sqrt(d)
    cov[0, :, :-1] -= g[:, :-1] * g[:, 1:]
    cov[1, :-1, :] -= g[:-1] * g[1:]
    cov[2, :-1, :-1] -= g[:-1, :-1] * g[1:, 1:]
    cov[3, :-1, :-1] -= g[1:, :-1] * g[:-1, 1:]


def observation_cells(model: Any, X: ArrayLike, y: ArrayLike | None) -> tuple[np.ndarray,
                                                                             np.ndarray | None]:
    """The checked new observations of a fitted lattice model: (their flat lattice cells,
    their standardised values or None)."""
    check_lattice(model, "variance")
    X = as_points(X, "X (new observations)")
    cells = cells_of(model, X, "new observations")
    ys = None
    if y is not None:
        y = np.asarray(y, dtype=np.float64).ravel()
        if y.shape != (cells.size,) or not np.all(np.isfinite(y)):
            raise InputError(f"y must hold one finite value per new observation ({cells.size}); "
                             f"got shape {y.shape}.")
        ys = model.scaler_.y(y)
    return cells, ys


def add_lattice_observations(model: Any, X: ArrayLike, y: ArrayLike | None = None) -> Any:
    """A copy of a fitted lattice model with observations added, without refitting θ.

    Each observation at a cell (its centre, model units (y, x)) conditions the posterior
    exactly (module docstring): the mean moves by v (y_s − E f_s)/d, the variance by −v²/d and
    the neighbour covariances that bilinear prediction needs by −v_a v_b/d. Without ``y`` only
    the covariance changes (the values are imputed by the predictive mean). Placement on the
    copy starts from the updated posterior; samples need a refit.

    Args:
        model: fitted :class:`~geogp.models.lattice.LatticeRegressor` (whole-lattice
            posterior). X: (N, 2) cell centres. y: (N,) values in data units, or None.

    Returns:
        A shallow copy with updated moments. Cost: one sparse solve per observation.
    """
    cells, ys = observation_cells(model, X, y)
    lc = LatticeCovariance(model)
    ny, nx = model.shape_
    mean = np.array(model.posterior_.mean, dtype=np.float64)
    cov = np.array(model.posterior_.cov, dtype=np.float64).reshape(4, ny, nx)
    for j, cell in enumerate(cells):
        step = lc.add(int(cell))
        condition_moments(mean, cov, step["v"], step["d"], int(cell),
                          None if ys is None else ys[j])
    out = copy.copy(model)
    out.posterior_ = model.posterior_.conditioned(mean, lc.variance(), cov.reshape(4, ny * nx),
                                                  lc.absorbed())
    return out
