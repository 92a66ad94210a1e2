"""Sensor placement at one date of a space-time model (issue #43, docs/placement.md): where to
measure at the next date, from the forecast posterior.

The fitted stack's posterior with that date added (:class:`~geogp.models.spacetime.
SpaceTimeForecast`: θ, the tiles' variance factors and the folds' factor are the fit's, no
refit) gives the cells' variances there; :class:`~geogp.models.spacetime.forecast.
ForecastCovariance` gives its covariance columns tile by tile, and the lattice model's greedy
(:class:`~geogp.placement.lattice.LatticeGreedy`) runs on them with the same strategies and
criteria: ``"variance"``, ``"mi"`` and ``"reduction"``, a large target set through random
probes. A cell's noise variance is its tiles' widening of σ², as the forecast's intervals.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from geogp.exceptions import InputError, MemoryEstimateError
from geogp.models.spacetime.forecast import ForecastCovariance, forecast_memory
from geogp.models.spacetime.regressor import SpaceTimeForecast, cell_indices
from geogp.placement.candidates import MIN_DISTANCE_FRACTION, packing_distance
from geogp.placement.contract import Placement, PlacementRequest
from geogp.placement.greedy import Greedy
from geogp.placement.lattice import PROBES, CellOps, LatticeGreedy
from geogp.placement.operators import Problem

__all__ = ["SpaceTimePlacement", "forecast_cells"]


def forecast_cells(forecast: SpaceTimeForecast, coords: np.ndarray, what: str) -> np.ndarray:
    """Flat cells (row-major) of ``coords`` (N, 2) (y, x model units): the fitted raster's
    cell centres, or a clear error."""
    coords = np.asarray(coords, dtype=np.float64)
    axes = forecast.model.axes_
    try:
        iy = cell_indices(axes[0], coords[:, 0], "raise")
        ix = cell_indices(axes[1], coords[:, 1], "raise")
    except InputError:
        raise InputError(f"{what}: the space-time model places sites on its raster's cells; "
                         "these include locations that are not cell centres (use "
                         "Candidates.grid of the raster's coordinates).") from None
    return iy * axes[1].size + ix


class SpaceTimePlacement(Placement):
    """A space-time model's posterior at one date (a :class:`SpaceTimeForecast`): one solve
    per site with its tile's factor; a large target set is kept through random probes."""

    strategies = ("variance", "mi", "reduction")
    label = "spacetime"

    def __init__(self, model: SpaceTimeForecast) -> None:
        super().__init__(model)

    @property
    def n_dims(self) -> int:
        return 2

    def check(self, strategy: str, criterion: str) -> None:
        if strategy not in self.strategies:
            raise InputError(f"strategy {strategy!r} is not available for the space-time "
                             "model; use 'variance', 'mi' or 'reduction'.")

    def min_distance(self, coords: np.ndarray, n_sites: int) -> float:
        """¼ of the anomalies' range, at most half the spacing of ``n_sites`` spread evenly
        over the candidates whose latent variance at the date exceeds a measurement's noise
        (all of them if fewer than ``n_sites`` do), as on the lattice model."""
        fc = self.model
        model = fc.model
        cells = forecast_cells(fc, coords, "candidates")
        latent = np.asarray(fc.sd_latent).ravel()[cells]
        noise = np.sqrt(np.maximum(np.asarray(fc.sd_observed).ravel()[cells] ** 2
                                   - latent**2, 0.0))
        uncertain = latent > noise
        pool = coords[uncertain] if uncertain.sum() >= max(int(n_sites), 2) else coords
        anomaly_range = math.exp(model.params_["log_range"]) * model.unit_
        return min(MIN_DISTANCE_FRACTION * anomaly_range, packing_distance(pool, n_sites))

    def greedy(self, request: PlacementRequest) -> Greedy:
        fc = self.model
        n_t = len(request.candidates) if request.targets is None else len(request.targets)
        n_e = 0 if request.existing is None else len(request.existing)
        probes = PROBES if request.screened else 0
        explicit = 0 if probes or request.strategy == "variance" else n_t
        needed = forecast_memory(fc, request.n_sites + n_e, probes + explicit,
                                 len(request.candidates) + n_t)
        if needed > request.max_memory:
            ny, nx = fc.model.shape_[1:]
            raise MemoryEstimateError(
                f"space-time placement over {len(request.candidates)} candidates and {n_t} "
                f"targets on {ny} × {nx} cells", needed, request.max_memory,
                "Use fewer candidates or targets, or raise max_memory.",
                cli_hint="Exclude candidates (--exclude MASK.tif), or raise --max-memory GIB "
                "if the machine has the memory.")
        ops = CellOps(forecast_cells(fc, request.candidates.coords, "candidates"))
        tops = ops if request.targets is None else CellOps(
            forecast_cells(fc, request.targets.coords, "targets"))
        cov = ForecastCovariance(fc)
        try:  # the held tiles' factors are freed by the greedy's close(), or here
            if request.existing is not None:  # sensors that will measure at the date too
                for cell in forecast_cells(fc, request.existing, "existing sensors"):
                    cov.add(int(cell))
            zc = np.zeros(ops.n)
            noise = (math.exp(2.0 * fc.model.params_["log_noise"])
                     * fc.model.interval_scale_**2)
            pb = Problem(None, None, noise, ops, tops, zc,
                         zc if tops is ops else np.zeros(tops.n), None, float(fc.model.scale_))
            return _ForecastGreedy(pb, cov, request.strategy, request.criterion, probes,
                                   request.seed)
        except BaseException:
            cov.release()
            raise


class _ForecastGreedy(LatticeGreedy):
    """The lattice greedy on a forecast's covariance; frees the held tiles' factors at the
    end."""

    lc: Any

    def close(self) -> None:
        self.lc.release()
