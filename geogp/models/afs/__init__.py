"""The AFS model: a variational GP on approximate Fourier features (docs/afs.md, docs/bound.md).

Modules: :mod:`~geogp.models.afs.regressor` (:class:`AFSRegressor`), :mod:`~.fitting` (its fit
procedure: adaptive window, refits), :mod:`~.grid` (regular grids), :mod:`~.policy` (feature
count, solver choice and memory), :mod:`~.objectives` (the fitted losses),
:mod:`~.diagnostics` (window and truncation checks), :mod:`~.predict` (predictions),
:mod:`~.sampling` (posterior samples), :mod:`~.trend` (the mean function's posterior).
"""

from geogp.models.afs.grid import grid_axes_info
from geogp.models.afs.policy import auto_features
from geogp.models.afs.regressor import AFSRegressor

__all__ = ["AFSRegressor", "grid_axes_info", "auto_features"]
