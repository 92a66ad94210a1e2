"""Covariance columns of a space-time posterior at one date, tile by tile: what sensor placement
at the next date needs (:mod:`geogp.placement.spacetime`, docs/spacetime.md).

With θ fixed, the latent field at one date t* over the raster's cells has the posterior
covariance C = G C₀ G: C₀ the universal-kriging covariance of the model given the whole stack
(:class:`~geogp.models.spacetime.gmrf.DateCovariance`, the stack with t* added, unobserved) and
G = diag(g), g² the widening of each cell's variances (its tile's REML factor times the folds'
factor), which a new measurement's noise shares: σ_s² = g_s² σ². A column C e_s is computed
in the posterior tile whose core holds s (one solve with that tile's factor, zero beyond its
window: the tiles' own approximation), so that its diagonal is the forecast's variance.
Measurements at sites s_1, …, s_k condition C as on the lattice model (Woodbury):
C_k = C − Σ_j v_j v_jᵀ/d_j, v_j = C_{j−1} e_{s_j}, d_j = (v_j)_{s_j} + σ_{s_j}².
Where the model has large scales, their latent variance at each cell is added to C's diagonal
(independent from cell to cell: a site reduces it where it stands).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from geogp.linalg.sites import SiteConditioned
from geogp.models.spacetime.gmrf import DateCovariance, make_problem
from geogp.models.spacetime.large import Upsampler
from geogp.models.spacetime.regressor import (
    BYTES_PER_WINDOW_UNKNOWN,
    SpaceTimeForecast,
    Window,
    _observations,
    windows,
)

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["ForecastCovariance", "HOLD_TILES", "forecast_memory"]

# tiles whose factors are held at once (a pick's best candidates and its neighbours)
HOLD_TILES = 4


def forecast_memory(forecast: SpaceTimeForecast, n_sites: int, n_probes: int,
                    n_locations: int) -> float:
    """Bytes :class:`ForecastCovariance` and a greedy over it need (an upper bound): the held
    tiles' factors (each builds its window with the date added), a column per site, the
    probes' products and 400 bytes per candidate or target."""
    model = forecast.model
    t, ny, nx = model.shape_
    side = model.tile_
    unknowns = min(side, ny) * min(side, nx) * (t + 2) + t + 1
    n = ny * nx
    return (HOLD_TILES * BYTES_PER_WINDOW_UNKNOWN * unknowns + 8.0 * n * (n_sites + 6)
            + 8.0 * n_locations * n_probes + 400.0 * n_locations)


class ForecastCovariance(SiteConditioned):
    """The posterior covariance of the latent field at the date of ``forecast`` over the
    raster's cells (flat, row-major), conditioned on sites added one by one (module
    docstring). Standardised units (data units over the model's scale). The interface of
    :class:`~geogp.placement.lattice.LatticeCovariance`, which the lattice greedy uses.

    Attributes:
        n: cells. shape: (n_y, n_x). noise: (n,) a new measurement's noise variance at each
            cell. sites: the cells absorbed so far, in order.
    """

    def __init__(self, forecast: SpaceTimeForecast) -> None:
        model = forecast.model
        ny, nx = model.shape_[1:]
        self.shape, self.n = (ny, nx), ny * nx
        self.cells_word = "raster"
        # right-hand sides per product: a pass over the tiles factorises each one again, so
        # the greedy's 128 probes go in one pass
        self.batch = 128
        self._params, self._model = model.params_, model
        self._times = np.union1d(model.times_, [forecast.time])
        self._step = int(np.searchsorted(self._times, forecast.time))
        self._tiles = windows((ny, nx), model.tile_, model.halo_)
        self._tile_of = np.empty((ny, nx), dtype=np.int64)
        for i, w in enumerate(self._tiles):
            self._tile_of[w.cy0:w.cy1, w.cx0:w.cx1] = i
        scale = model.scale_
        latent = np.asarray(forecast.sd_latent, dtype=np.float64).ravel() / scale
        observed = np.asarray(forecast.sd_observed, dtype=np.float64).ravel() / scale
        self.noise = np.maximum(observed**2 - latent**2, 0.0)
        self._g = np.sqrt(self.noise / math.exp(2.0 * model.params_["log_noise"]))
        self._var0 = latent**2
        # the large scales' variance (docs/spacetime.md, "Large scales") enters as each cell's
        # own: a site reduces it where it stands, not across the block it shares
        self._large = np.zeros(self.n)
        if model.coarse_ is not None:
            _, sd = model._large_moments(np.array([forecast.time]))
            self._large = Upsampler((ny, nx), model.block_).up(sd[0]).ravel() ** 2
        self._held: OrderedDict[int, tuple[DateCovariance, int]] = OrderedDict()
        self._v = np.zeros((0, self.n))
        self._d = np.zeros(0)
        self.sites: list[int] = []

    # ------------------------------------------------------------------ tiles
    def _window_cells(self, i: int) -> np.ndarray:
        """The raster's flat cells of tile ``i``'s window, row-major."""
        w = self._tiles[i]
        rows, cols = np.mgrid[w.y0:w.y1, w.x0:w.x1]
        return (rows * self.shape[1] + cols).ravel()

    def _tile(self, i: int) -> DateCovariance:
        """Tile ``i``'s covariance at the date, its factor held in a pattern slot of its own
        (beyond :data:`HOLD_TILES`, the least recently used tile's slot is refactorised: the
        slot keeps its symbolic analysis, which a release would drop)."""
        if i in self._held:
            self._held.move_to_end(i)
            return self._held[i][0]
        free = set(range(HOLD_TILES)) - {slot for _, slot in self._held.values()}
        if not free:
            _, (_, slot) = self._held.popitem(last=False)
            free = {slot}
        slot = min(free)
        model, w = self._model, self._tiles[i]
        block = model.dated_block(self._times, w)  # this window only, the date added
        cells, steps, y = _observations(block, Window.over(block.shape))
        problem = make_problem(w.shape, model.h_, self._times, cells, steps, y,
                               np.ones((y.size, 1)), model.solver_, slot)
        cov = DateCovariance(self._params, problem, self._step)
        self._held[i] = (cov, slot)
        return cov

    def release(self) -> None:
        """Free the held tiles' factors."""
        while self._held:
            self._held.popitem()[1][0].release()

    # ------------------------------------------------------------------ the covariance
    def prior_columns(self, cells: ArrayLike) -> np.ndarray:
        """C[:, cells] (n, len(cells)) given the stack only: one solve per tile they lie in."""
        cells = np.array([self._check_cell(c) for c in np.atleast_1d(cells)], dtype=np.int64)
        out = np.zeros((self.n, cells.size))
        tiles = self._tile_of.ravel()[cells]
        for i in np.unique(tiles):
            which = np.flatnonzero(tiles == i)
            window = self._window_cells(int(i))
            local = np.searchsorted(window, cells[which])
            e = np.zeros((window.size, which.size))
            e[local, np.arange(which.size)] = 1.0
            out[np.ix_(window, which)] = self._tile(int(i)).apply(e)
        out *= self._g[:, None] * self._g[cells][None, :]
        out[cells, np.arange(cells.size)] += self._large[cells]
        return out

    def apply(self, x: np.ndarray) -> np.ndarray:
        """C_k x for x (n, m): each tile's core from one solve over its window."""
        x = np.asarray(x, dtype=np.float64).reshape(self.n, -1)
        gx = x * self._g[:, None]
        out = np.empty_like(gx)
        for i, w in enumerate(self._tiles):
            window = self._window_cells(i)
            y = self._tile(i).apply(gx[window]).reshape(*w.shape, -1)
            core = y[w.cy0 - w.y0:w.cy1 - w.y0, w.cx0 - w.x0:w.cx1 - w.x0]
            rows, cols = np.mgrid[w.cy0:w.cy1, w.cx0:w.cx1]
            out[(rows * self.shape[1] + cols).ravel()] = core.reshape(-1, gx.shape[1])
        out *= self._g[:, None]
        out += self._large[:, None] * x
        if self._d.size:
            out -= self._v.T @ ((self._v @ x) / self._d[:, None])
        return out
