"""The active loop on a fitted :class:`~geogp.api.GeoRegressor`, in the user's CRS and units:
:meth:`~PlacementMixin.suggest_sites` (where to measure next, on the raster's cells) and
:meth:`~PlacementMixin.add_observations` (a new model conditioned on what was measured, the
hyperparameters kept). Both go through the model family's placement contract
(:mod:`geogp.placement.contract`)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from geogp.exceptions import InputError
from geogp.families import family
from geogp.placement.candidates import Candidates, nearest_cells
from geogp.placement.observe import add_observations
from geogp.placement.suggest import suggest_sites

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["PlacementMixin"]

_SCORES = ["score", "std_before", "std_reduction", "mean_std_after"]


class PlacementMixin:
    """:meth:`suggest_sites` and :meth:`add_observations` of :class:`~geogp.api.GeoRegressor`."""

    def _one_raster(self, what: str):
        """(the estimator, the target grid, its model-coordinate axes) of a model fitted on
        one 2-D raster (or points with ``grid=``)."""
        self._check_fitted()
        if len(self.estimators_) != 1:
            raise InputError(f"{what} works on a model of one 2-D raster; this one has "
                             f"{len(self.estimators_)} slices along {self.extra_dim_!r}. "
                             "Fit one slice (da.isel(...)).")
        if self.target_ is None:
            raise InputError(f"{what} places on the model's grid; this model was fitted on "
                             "points without grid=.")
        fam = family(self.model_)
        if not fam.can_place:
            raise InputError(f"{what} is not available for model={self.model_!r}.")
        target = self.target_
        return self.estimators_[0], target, list(self.spec_.to_model(target.y, target.x))

    def suggest_sites(self, n: int, *, strategy: str = "auto", exclude: ArrayLike | None = None,
                      min_distance: float | str = "auto", max_targets: int = 1000,
                      max_memory: float = 4 * 2**30, **options: Any) -> pd.DataFrame:
        """Where to measure next: ``n`` cells of the model's raster, chosen greedily.

        Args:
            n: number of sites.
            strategy: ``"auto"`` (the family's default: total variance reduction on the
                lattice model, the log-determinant ``"mi"`` elsewhere), ``"variance"``,
                ``"mi"``, ``"reduction"`` (lattice) or ``"krause"`` (afs, wavelet).
            exclude: boolean (y, x) mask of the raster, True = not allowed.
            min_distance: between sites, in model units (the CRS's; ``"auto"``: the model's).
            max_targets, max_memory: as :func:`geogp.placement.suggest_sites`; further
            ``options`` go there too.

        Returns:
            DataFrame in selection order: ``order``, ``x``, ``y`` (cell centres in the
            raster's CRS), ``score``, ``std_before``, ``std_reduction``, ``mean_std_after``
            (data units); ``attrs`` as :func:`geogp.placement.suggest_sites`, with ``crs``.
        """
        est, target, axes = self._one_raster("suggest_sites")
        if strategy == "auto":
            strategy = family(self.model_).placement_strategy
        if exclude is not None:
            exclude = np.asarray(exclude, dtype=bool)
            if exclude.shape != (len(target.y), len(target.x)):
                raise InputError(f"exclude must be a (y, x) mask of shape "
                                 f"{(len(target.y), len(target.x))}; got {exclude.shape}.")
        sites = suggest_sites(est, Candidates.grid(axes), n, strategy=strategy, exclude=exclude,
                              min_distance=min_distance, max_targets=max_targets,
                              max_memory=max_memory, names=("y_model", "x_model"), **options)
        iy, ix = np.unravel_index(sites["index"].to_numpy(), (len(target.y), len(target.x)))
        out = pd.DataFrame({"order": sites["order"].to_numpy(), "x": target.x[ix],
                            "y": target.y[iy], **{c: sites[c].to_numpy() for c in _SCORES}})
        out.attrs = {**sites.attrs, "coord_names": ["x", "y"], "crs": self.spec_.crs_wkt}
        return out

    def add_observations(self, points: pd.DataFrame, *, x: str = "x", y: str = "y",
                         value: str = "value") -> Any:
        """A new fitted model conditioned on measurements, without refitting: the
        hyperparameters are kept, the posterior updated exactly. This model is unchanged.

        Args:
            points: a table with columns ``x``, ``y`` (in the raster's CRS) and ``value``
                (data units), e.g. :meth:`suggest_sites`' rows with the measured values. A
                point is taken at its nearest cell of the raster, and must lie on it.

        Returns:
            A new model of the same kind (:meth:`predict`, :meth:`suggest_sites`...).
        """
        est, target, axes = self._one_raster("add_observations")
        if not family(self.model_).can_condition:
            raise InputError(f"add_observations is not available for model={self.model_!r}; "
                             "refit with the new data.")
        if not isinstance(points, pd.DataFrame):
            raise InputError(f"points must be a DataFrame with columns {x!r}, {y!r} and "
                             f"{value!r}; got {type(points).__name__}.")
        missing = [c for c in (x, y, value) if c not in points.columns]
        if missing:
            raise InputError(f"points lack the column(s) {missing}; they have "
                             f"{list(points.columns)}.")
        try:
            pts = points[[x, y, value]].to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(f"points' {x!r}, {y!r} and {value!r} must be numbers.") from None
        if len(pts) == 0 or not np.all(np.isfinite(pts)):
            raise InputError("points must hold at least one row of finite x, y and value.")
        rows, cols = nearest_cells(pts[:, 0], pts[:, 1], target.y, target.x, "a point")
        X = np.stack([axes[0][rows], axes[1][cols]], axis=1)
        out = copy.copy(self)
        out.estimators_ = [add_observations(est, X, pts[:, 2])]
        return out
