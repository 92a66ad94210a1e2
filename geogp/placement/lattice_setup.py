"""The greedy state of a placement on the lattice model: the whole lattice's
(:class:`~geogp.placement.lattice.LatticeGreedy`) or, where the posterior was computed on tiles,
tile by tile (:class:`~geogp.placement.lattice_tiled.TiledLatticeGreedy`), after the memory
check of either."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from geogp.exceptions import MemoryEstimateError
from geogp.placement.contract import Placement, PlacementRequest
from geogp.placement.greedy import Greedy
from geogp.placement.lattice import (
    PROBES,
    CellOps,
    LatticeCovariance,
    LatticeGreedy,
    add_lattice_observations,
    cells_of,
    check_lattice,
    lattice_memory_estimate,
    lattice_min_distance,
)
from geogp.placement.lattice_tiled import (
    TiledLatticeGreedy,
    add_tiled_observations,
    model_tiles,
    tiled_memory_estimate,
)
from geogp.placement.operators import Problem

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.placement.candidates import Candidates

__all__ = ["lattice_greedy", "condition_lattice", "LatticePlacement", "HOLD_TILES"]

# tiles a tiled placement holds at once: the best candidates of a pick and the site's
# neighbours (a site conditions the held tiles whose window holds it by one solve each)
HOLD_TILES = 4


def lattice_greedy(model: Any, cands: Candidates, targets: Candidates | None,
                   existing: ArrayLike | None, strategy: str, criterion: str,
                   n_sites: int, max_memory: float, probes: int = 0,
                   seed: int = 0) -> Greedy:
    """The greedy state for a lattice model (``targets=None``: the candidates), after
    :func:`check_lattice`. Candidates and targets are cell centres of the raster; existing
    sensors are absorbed at their nearest cells first. A posterior computed on tiles places
    tile by tile (:mod:`geogp.placement.lattice_tiled`, always with probes). Refuses
    (:class:`~geogp.exceptions.MemoryEstimateError`) before allocating above ``max_memory``."""
    n_t = len(cands) if targets is None else len(targets)
    n_e = 0 if existing is None else len(np.asarray(existing))
    tiles = model_tiles(model) if getattr(model, "posterior_tiles_", 1) > 1 else None
    if tiles is None:
        needed = lattice_memory_estimate(model, len(cands), probes or n_t, n_sites + n_e,
                                         strategy, criterion)
    else:  # as many tiles held at once as the limit allows, up to HOLD_TILES
        hold = next((h for h in range(min(HOLD_TILES, len(tiles)), 1, -1)
                     if tiled_memory_estimate(model, tiles, len(cands), n_t, n_sites + n_e,
                                              PROBES, h) <= max_memory), 1)
        needed = tiled_memory_estimate(model, tiles, len(cands), n_t, n_sites + n_e, PROBES,
                                       hold)
    if needed > max_memory:
        raise MemoryEstimateError(
            f"lattice placement over {len(cands)} candidates and {n_t} targets on "
            f"{model.shape_[0]} × {model.shape_[1]} cells", needed, max_memory,
            "Use fewer candidates or targets, or raise max_memory.",
            cli_hint="Exclude candidates (--exclude MASK.tif), or raise --max-memory GIB if "
            "the machine has the memory.")
    ops = CellOps(cells_of(model, cands.coords, "candidates"))
    tops = ops if targets is None else CellOps(cells_of(model, targets.coords, "targets"))
    zc = np.zeros(ops.n)
    noise = float(model.noise_var_)
    pb = Problem(None, None, noise, ops, tops, zc, zc if tops is ops else np.zeros(tops.n),
                 None, float(model.scaler_.y_scale))
    sites = ([] if not n_e else
             [int(c) for c in cells_of(model, np.asarray(existing, dtype=np.float64),
                                       "existing sensors", exact=False)])
    if tiles is not None:  # probes over a tile's window's targets, however many they are
        before = [int(c) for c in model.posterior_.added.sites]  # added since the fit
        return TiledLatticeGreedy(model, tiles, pb, strategy, PROBES, seed, before + sites,
                                  getattr(model, "progress", None), hold)
    lc = LatticeCovariance(model)
    for cell in sites:
        lc.add(cell)
    return LatticeGreedy(pb, lc, strategy, criterion, probes, seed)


class LatticePlacement(Placement):
    """The lattice model's GMRF posterior: one solve per site, on the whole lattice or tile by
    tile; a large target set is kept through random probes of the criterion."""

    strategies = ("variance", "mi", "reduction")
    label = "lattice"

    @property
    def n_dims(self) -> int:
        return 2

    def check(self, strategy: str, criterion: str) -> None:
        check_lattice(self.model, strategy, criterion)

    def min_distance(self, coords: np.ndarray, n_sites: int) -> float:
        return lattice_min_distance(self.model, coords, n_sites)  # counts uncertain cells only

    def greedy(self, request: PlacementRequest) -> Greedy:
        return lattice_greedy(self.model, request.candidates, request.targets, request.existing,
                              request.strategy, request.criterion, request.n_sites,
                              request.max_memory, probes=PROBES if request.screened else 0,
                              seed=request.seed)


def condition_lattice(model: Any, X: ArrayLike, y: ArrayLike | None = None) -> Any:
    """A copy of a fitted lattice model conditioned on observations at cell centres, θ kept:
    on the whole lattice (:func:`~geogp.placement.lattice.add_lattice_observations`) or tile
    by tile (:func:`~geogp.placement.lattice_tiled.add_tiled_observations`)."""
    if getattr(model, "posterior_tiles_", 1) > 1:  # unfitted: the whole-lattice check says so
        return add_tiled_observations(model, X, y)
    return add_lattice_observations(model, X, y)
