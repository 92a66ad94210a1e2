"""Sensor placement on a lattice model whose posterior was computed on tiles (issue #29).

A raster too large for one factor of the whole lattice (:mod:`geogp.models.lattice.tiled`)
places its sites tile by tile. Each posterior tile's lattice (its window: core, halo and
margin) has its own posterior covariance at the fitted θ,
:class:`~geogp.placement.lattice.LatticeCovariance` with ``tile``: the whole lattice's inside
the core, to the tiles' error, with the large-scale and trend part included. A candidate is
scored by the tile whose core holds it, over the targets in that tile's window: a new site
changes the covariance only within a few posterior correlation lengths, which the halo
spans, so the criteria of :mod:`geogp.placement.lattice` (variance, first-order marginal mi,
total variance reduction, with random-sign probes and the exact refinement of the best
probed candidates) are the whole lattice's up to that truncation.

The greedy loop is lazy over tiles (Minoux's lazy greedy, with tiles as the unit): a first
pass scores every tile's candidates; a pick conditions its own tile at once, and marks stale
every other tile whose window holds the site. A stale tile's scores are those before the
site, upper bounds of its candidates' (a measurement only lowers variances; for the
reductions, the expected gain of a site shrinks as its neighbours are measured). Before a
pick, the best candidate's tile, if stale, is rebuilt (factorised, the sites in its window
absorbed, probed again), until the best candidate sits in an up-to-date tile. Only one
tile's factor and probes are held at a time.

Cost: the first pass costs one factorisation and 1 + k + p + m solves per tile (m probes);
each pick one solve with :data:`~geogp.placement.lattice.REFINE_TOP` columns, plus a rebuild
of the stale tiles that hold the best candidates (typically the site's neighbours).
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from geogp.core.progress import advance, start_phase
from geogp.exceptions import InputError
from geogp.models.lattice.gmrf import clear_shared_lattice
from geogp.models.lattice.memory import BYTES_PER_FACTOR_ENTRY, factor_bytes, tile_cells
from geogp.models.lattice.state import Added
from geogp.models.lattice.tiled import tile_lattice
from geogp.models.lattice.workers import release_memory
from geogp.placement.greedy import Greedy
from geogp.placement.lattice import (
    REFINE_TOP,
    LatticeCovariance,
    condition_moments,
    observation_cells,
)
from geogp.placement.operators import Problem

if TYPE_CHECKING:  # annotations only
    from geogp.models.lattice.tiled import PosteriorTile

__all__ = ["TiledLatticeGreedy", "tiled_memory_estimate", "add_tiled_observations",
           "model_tiles", "TILED_LOCATION_BYTES"]

# per candidate or target: coordinates, cell, tile, scores, variances, masks, the loop's copies
TILED_LOCATION_BYTES = 160


class _TileCells(NamedTuple):
    """One tile's share of the candidates and targets."""

    cand: np.ndarray  # candidates (indices) in the tile's core
    cand_cells: np.ndarray  # their cells of the tile lattice
    targ: np.ndarray  # targets (indices) in the tile's window
    targ_cells: np.ndarray  # their cells of the tile lattice
    own: np.ndarray  # which of ``targ`` lie in the core (the tile reports their variance)


class _TileState:
    """A built tile: its covariance with the sites in its window absorbed, and its probes."""

    def __init__(self, index: int, lc: LatticeCovariance, cells: _TileCells):
        self.index, self.lc, self.cells = index, lc, cells
        self.z: np.ndarray | None = None  # the probes' signs at the window's targets (T_t, m)
        self.w: np.ndarray | None = None  # their weights W^½ at those targets (T_t,)
        self.p: np.ndarray | None = None  # C_k z at the core's candidates (N_t, m)
        self.rho0: np.ndarray | None = None  # ρ = C_ii + σ² at the targets before the picks


def _local_cell(lattice: tuple[int, int, int, int], nx: int, cell: int) -> int | None:
    """The cell of a tile's lattice (:func:`~geogp.models.lattice.tiled.tile_lattice`) at
    whole-lattice ``cell`` (a whole lattice ``nx`` cells wide), or None outside it."""
    r, c = divmod(int(cell), nx)
    r0, r1, c0, c1 = lattice
    return (r - r0) * (c1 - c0) + c - c0 if r0 <= r < r1 and c0 <= c < c1 else None


def _times_signs(x: np.ndarray, signs: np.ndarray, rows: int = 1 << 16) -> np.ndarray:
    """x @ signs for int8 ``signs`` (T, m), in blocks of rows (no float copy of the whole)."""
    out = np.zeros(signs.shape[1])
    for a in range(0, signs.shape[0], rows):
        out += x[a:a + rows] @ signs[a:a + rows].astype(np.float64)
    return out


def tiled_memory_estimate(model: Any, tiles: list, n_candidates: int, n_targets: int,
                          n_sites: int, probes: int, hold: int = 1) -> float:
    """Bytes of the tiled placement beyond the fitted model (an upper bound): per candidate and
    target :data:`TILED_LOCATION_BYTES`, two lattice-sized index rasters, the peak of building
    a tile (its factorisation, F − S_F, the solves' blocks, the probes and the kept site
    columns) and ``hold`` − 1 more tiles held (one copy of the factor and those arrays)."""
    k = int(model.posterior_.tile_inputs()[1].shape[0])
    biggest = max(tile_cells(t, int(model.margin)) for t in tiles)
    factor = factor_bytes(biggest, model.alpha_, model.mid_factor() is not None)
    arrays = 8.0 * biggest * (k + n_sites + 8) + 9.0 * biggest * probes  # P float64, z int8
    build = factor + arrays + 8.0 * biggest * 64 * 3
    held = factor * 12.0 / BYTES_PER_FACTOR_ENTRY + arrays  # one copy of the factor
    lattice = model.shape_[0] * model.shape_[1]
    return (TILED_LOCATION_BYTES * (n_candidates + n_targets) + 16.0 * lattice + build
            + (max(int(hold), 1) - 1) * held)


class TiledLatticeGreedy(Greedy):
    """The greedy state of :class:`~geogp.placement.greedy.Greedy` on a tiled lattice
    posterior (module docstring). ``ops``/``tops``: the candidates' and targets' cells of the
    whole lattice (``.cells``); ``sites``: whole-lattice cells already measured (existing
    sensors), absorbed by every tile whose window holds them."""

    def __init__(self, model: Any, tiles: list[PosteriorTile], pb: Problem, strategy: str,
                 probes: int, seed: int, sites: list[int], progress: Any = None,
                 hold: int = 1) -> None:
        self.model, self.tiles, self.pb, self.strategy = model, tiles, pb, strategy
        self.criterion, self.lazy, self.lazy_batch, self.screen = "marginal", False, 16, None
        self.probes = int(probes) if strategy in ("mi", "reduction") else 0
        self.seed, self.sites = int(seed), [int(s) for s in sites]
        self._n_initial = len(self.sites)  # measured before the picks
        self._nx = int(model.shape_[1])
        self._windows = [tile_lattice(t, model.margin) for t in tiles]
        self._cand_at = self._index_raster(pb.ops.cells)
        self._targ_at = self._cand_at if pb.tops is pb.ops else self._index_raster(pb.tops.cells)
        self._owner = self._core_owner(pb.ops.cells)
        self.scores = np.full(pb.ops.n, -np.inf)
        self.h = np.zeros(pb.ops.n)  # latent variance at the candidates (their tile's)
        self.cT = np.zeros(pb.tops.n)  # ... at the targets
        self.hT = self.cT
        self.fresh = np.zeros(len(tiles), dtype=bool)  # the tile holds every site in its window
        self.rebuilds = 0
        self.hold = max(int(hold), 1)  # tiles held at once, the most recently used
        self._states: OrderedDict[int, _TileState] = OrderedDict()
        # (candidate, C_k e_cell over the tile) of refine's pick
        self._refined: tuple[int, np.ndarray | None] | None = None
        start_phase(progress, f"placement: scoring {len(tiles)} tiles",
                    [f"tile {i + 1} of {len(tiles)}" for i in range(len(tiles))])
        for i in range(len(tiles)):
            self._build(i)
            advance(progress)
        self.rebuilds = 0

    # ------------------------------------------------------------------ tiles
    def _index_raster(self, cells: np.ndarray) -> np.ndarray:
        """The whole lattice with each location's index at its cell (−1 elsewhere)."""
        ny = int(self.model.shape_[0])
        out = np.full((ny, self._nx), -1, dtype=np.int64)
        out.ravel()[cells] = np.arange(cells.size)
        if np.unique(cells).size != cells.size:
            raise InputError("two candidates (or targets) fall on one lattice cell; the tiled "
                             "lattice placement needs distinct cells.")
        return out

    def _core_owner(self, cells: np.ndarray) -> np.ndarray:
        """The tile whose core holds each cell (the cores form a grid)."""
        r, c = np.divmod(cells, self._nx)
        row_starts = sorted({t.core[0].start for t in self.tiles})
        col_starts = sorted({t.core[1].start for t in self.tiles})
        grid = np.full((len(row_starts), len(col_starts)), -1, dtype=np.int64)
        for i, t in enumerate(self.tiles):
            grid[row_starts.index(t.core[0].start), col_starts.index(t.core[1].start)] = i
        return grid[np.searchsorted(row_starts, r, side="right") - 1,
                    np.searchsorted(col_starts, c, side="right") - 1]

    def _cells(self, i: int) -> _TileCells:
        r0, r1, c0, c1 = self._windows[i]
        (cr, cc), width = self.tiles[i].core, c1 - c0

        def local(at, rows, cols):
            block = at[rows, cols]
            rr, qq = np.nonzero(block >= 0)
            return block[rr, qq], (rr + rows.start - r0) * width + qq + cols.start - c0

        cand, cand_cells = local(self._cand_at, cr, cc)
        targ, targ_cells = local(self._targ_at, slice(r0, r1), slice(c0, c1))
        lr, lc = np.divmod(targ_cells, width)
        own = ((lr + r0 >= cr.start) & (lr + r0 < cr.stop)
               & (lc + c0 >= cc.start) & (lc + c0 < cc.stop))
        return _TileCells(cand, cand_cells, targ, targ_cells, own)

    def _local(self, i: int, cell: int) -> int | None:
        """The tile lattice's cell of whole-lattice ``cell``, or None outside tile i's window."""
        return _local_cell(self._windows[i], self._nx, cell)

    def _build(self, i: int) -> _TileState:
        """Tile i's covariance with the sites in its window absorbed, its probes and the
        scores of its core's candidates; it becomes the held tile."""
        old = self._states.pop(i, None)
        while len(self._states) >= self.hold:  # free the least recently used first
            old = self._states.popitem(last=False)[1]
        if old is not None:
            old.lc.release()
            del old
            release_memory()  # glibc keeps freed heap: without, the resident memory grew
        lc = LatticeCovariance(self.model, self.tiles[i])
        st = _TileState(i, lc, self._cells(i))
        mi = self.strategy == "mi"
        for k, s in enumerate(self.sites):
            if mi and k == self._n_initial:  # its weights: before the picks, as on the whole
                st.rho0 = np.maximum(lc.variance()[st.cells.targ_cells], 0.0) + self.pb.noise
            loc = self._local(i, s)
            if loc is not None:
                lc.add(loc)
        # a site near the window's edge (in the halo) has a column there that the missing data
        # beyond inflate, which can take more than the whole lattice's variance at cells next
        # to it; those are other tiles' cells, whose own tiles report them: clipped at 0 here
        var, cells = np.maximum(lc.variance(), 0.0), st.cells
        if mi and st.rho0 is None:  # no picks yet
            st.rho0 = var[cells.targ_cells] + self.pb.noise
        self.h[cells.cand] = var[cells.cand_cells]
        self.cT[cells.targ[cells.own]] = var[cells.targ_cells[cells.own]]
        if self.probes and cells.cand.size:
            rng = np.random.default_rng([self.seed, i])
            # the probes W^½ z: random signs (kept as int8) times W^½ at the tile's targets,
            # W = diag(1/ρ) for "mi", I for "reduction"
            st.z = rng.choice(np.array([-1, 1], dtype=np.int8), (cells.targ.size, self.probes))
            st.w = (1.0 / np.sqrt(st.rho0) if self.strategy == "mi" and st.rho0 is not None
                    else np.ones(cells.targ.size))
            st.p = np.empty((cells.cand.size, self.probes))
            for a in range(0, self.probes, 64):
                b = min(a + 64, self.probes)
                full = np.zeros((lc.n, b - a))
                full[cells.targ_cells] = st.z[:, a:b] * st.w[:, None]
                st.p[:, a:b] = lc.apply(full)[cells.cand_cells]
                del full
        self._rescore(st)
        self.fresh[i] = True
        self._states[i] = st
        self.rebuilds += 1
        return st

    def _rescore(self, st: _TileState) -> None:
        cells, s2 = st.cells, self.pb.noise
        d = self.h[cells.cand] + s2
        if self.strategy == "variance":
            self.scores[cells.cand] = d
        else:
            sq = np.mean(st.p**2, axis=1) if st.p is not None else np.zeros(cells.cand.size)
            self.scores[cells.cand] = (0.5 if self.strategy == "mi" else 1.0) * sq / d

    def _held(self, i: int) -> _TileState:
        """Tile i up to date: held (and then the most recently used), or built."""
        st = self._states.get(i)
        if st is None or not self.fresh[i]:
            return self._build(i)
        self._states.move_to_end(i)
        return st

    def _absorb(self, st: _TileState, loc: int, v: np.ndarray | None = None) -> dict:
        """Condition a held tile on a site (its tile cell ``loc``; ``v``: its column, if known)
        and rescore its candidates; returns the column and d."""
        cells = st.cells
        step = st.lc.add(loc, v)
        v, d = step["v"], step["d"]
        vc = v[cells.cand_cells]
        self.h[cells.cand] -= vc**2 / d
        if st.p is not None and st.w is not None and st.z is not None:  # C_k = C_{k−1} − v vᵀ/d,
            # applied to the probes
            st.p -= np.outer(vc, _times_signs(v[cells.targ_cells] * st.w, st.z) / d)
        self._rescore(st)
        return step

    def close(self) -> None:
        """Free the held tiles and the shared lattice (their factors) once the picks are made."""
        for st in self._states.values():
            st.lc.release()
        self._states.clear()
        clear_shared_lattice()
        release_memory()

    # ------------------------------------------------------------------ Greedy's protocol
    def score_all(self, active: np.ndarray, *pending: Any) -> np.ndarray:
        return self.scores

    def refine(self, rank: np.ndarray, costs: np.ndarray | None) -> tuple[int, float]:
        """The pick: rebuild the best candidate's tile while it is stale (its scores are upper
        bounds); then, with probes, the best of the :data:`REFINE_TOP` best-probed candidates
        by their exact score over their tiles' targets (their tiles brought up to date)."""
        rank = rank.copy()
        while True:
            best = int(np.argmax(rank))
            i = int(self._owner[best])
            if self.fresh[i]:
                break
            self._rerank(rank, self._held(i).cells.cand, costs)
        if not self.probes:
            self._held(i)
            return best, float(self.scores[best])
        order = np.argsort(-rank, kind="stable")[:REFINE_TOP]
        order = order[np.isfinite(rank[order])]
        winner = (-np.inf, -1, 0.0, None)  # (ranked, candidate, exact score, its column)
        # each tile of the best few, the best candidate's last (it is then held for add)
        for t in list(dict.fromkeys(self._owner[order].tolist()))[::-1]:
            best_here = self._exact_best(int(t), order[self._owner[order] == t], costs)
            if best_here[0] > winner[0]:
                winner = best_here
        _, a, score, column = winner
        self._refined = (a, column)
        return a, score

    def _exact_best(self, t: int, group: np.ndarray, costs: np.ndarray | None) -> tuple:
        """(ranked, candidate, exact score, its column over the tile) of the best of
        ``group``, candidates of tile t, by their exact criterion over the tile's targets."""
        st = self._held(t)
        local = np.array([self._local(t, c) for c in self.pb.ops.cells[group]])
        full = st.lc.columns(local)  # (n_tile, K)
        cols = full[st.cells.targ_cells]
        d = self.h[group] + self.pb.noise
        if self.strategy == "reduction":
            exact = np.sum(cols**2, axis=0) / d
        else:  # the probes' weights, 1/ρ at the tile's targets before the picks
            assert st.rho0 is not None  # set when the tile was built for "mi"
            exact = 0.5 * np.sum(cols**2 / st.rho0[:, None], axis=0) / d
        ranked = exact / costs[group] if costs is not None else exact
        j = int(np.argmax(ranked))
        return float(ranked[j]), int(group[j]), float(exact[j]), full[:, j].copy()

    def _rerank(self, rank: np.ndarray, cand: np.ndarray, costs: np.ndarray | None) -> None:
        """``rank`` of a rebuilt tile's candidates from their new scores (inactive stay −inf)."""
        live = np.isfinite(rank[cand])
        new = self.scores[cand] / (costs[cand] if costs is not None else 1.0)
        rank[cand] = np.where(live, new, -np.inf)

    def add(self, a: int, active: np.ndarray) -> dict:
        """Absorb candidate a in its tile and in the other held tiles whose window holds the
        site; the tiles not held whose window holds it go stale."""
        pb, i = self.pb, int(self._owner[a])
        st, cell = self._held(i), int(pb.ops.cells[a])
        known, self._refined = self._refined, None
        local = self._local(i, cell)
        assert local is not None  # a candidate's own tile holds its cell
        step = self._absorb(st, local,
                            known[1] if known is not None and known[0] == a else None)
        v, d, cells = step["v"], step["d"], st.cells
        u = np.zeros(pb.tops.n)
        u[cells.targ] = v[cells.targ_cells]
        info = {"var_latent": d - pb.noise, "cT_before": self.cT.copy(), "u": u, "d": d}
        self.cT -= u**2 / d
        self.sites.append(cell)
        for j in range(len(self.tiles)):
            loc = self._local(j, cell) if j != i else None
            if loc is None:
                continue
            if j in self._states and self.fresh[j]:  # one solve keeps it up to date
                self._absorb(self._states[j], loc)
            else:
                self.fresh[j] = False
        return info


def model_tiles(model: Any) -> list[PosteriorTile]:
    """The posterior tiles of a fitted lattice model (its raster: the lattice less the margin)."""
    m = int(model.margin)
    return model.plan_posterior_tiles((model.shape_[0] - 2 * m, model.shape_[1] - 2 * m),
                                      model.plan_workers_)


def add_tiled_observations(model: Any, X: Any, y: Any = None) -> Any:
    """:func:`~geogp.placement.lattice.add_lattice_observations` for a posterior computed on
    tiles: each tile whose window holds a new observation is conditioned on the observations
    in its window (those added before first, covariance only: the moments hold them), and
    its core's mean, variance and neighbour covariances are replaced; a tile whose window
    holds none keeps its moments (the new sites lie beyond its halo). Cost: per such tile one
    factorisation, k + p solves and one solve per site in its window."""
    cells, ys = observation_cells(model, X, y)
    post = model.posterior_
    added = post.added  # observations added before these
    before = list(added.sites)
    ny, nx = model.shape_
    mean, var = np.array(post.mean, dtype=np.float64), np.array(post.var, dtype=np.float64)
    cov = np.array(post.cov, dtype=np.float64).reshape(4, ny, nx)
    for tile in model_tiles(model):
        lattice, (cr, cc) = tile_lattice(tile, model.margin), tile.core
        r0, r1, c0, c1 = lattice
        h, w = r1 - r0, c1 - c0
        local = [_local_cell(lattice, nx, cell) for cell in cells]
        new = [(j, loc) for j, loc in enumerate(local) if loc is not None]
        if not new:
            continue
        lc = LatticeCovariance(model, tile)
        for s in before:  # covariance only: the moments hold them already
            loc = _local_cell(lattice, nx, s)
            if loc is not None:
                lc.add(loc)
        window = (slice(r0, r1), slice(c0, c1))
        t_mean = mean.reshape(ny, nx)[window].copy().ravel()
        t_cov = cov[(slice(None), *window)].copy()
        for j, loc in new:
            step = lc.add(loc)
            condition_moments(t_mean, t_cov, step["v"], step["d"], loc,
                              None if ys is None else ys[j])
        core = (slice(cr.start - r0, cr.stop - r0), slice(cc.start - c0, cc.stop - c0))
        mean.reshape(ny, nx)[cr, cc] = t_mean.reshape(h, w)[core]
        var.reshape(ny, nx)[cr, cc] = np.maximum(lc.variance().reshape(h, w)[core], 0.0)
        cov[:, cr, cc] = t_cov[(slice(None), *core)]
    clear_shared_lattice()
    out = copy.copy(model)
    out.posterior_ = post.conditioned(mean, var, cov.reshape(4, ny * nx), Added(
        var0=added.var0, sites=(*before, *(int(c) for c in cells))))
    return out
