"""The ``.geogp`` accessor on xarray objects: translate, then delegate to :mod:`geogp.frontend.api`.

Importing :mod:`geogp` registers it (STYLE.md guideline 10, as rioxarray's ``.rio``):

    >>> import numpy as np, xarray as xr, geogp
    >>> da = xr.DataArray(np.random.default_rng(0).normal(size=(12, 15)), dims=("y", "x"),
    ...                   coords={"y": np.arange(12.0), "x": np.arange(15.0)}).rio.write_crs(3857)
    >>> model = da.geogp.fit(n_features=32, maxiter=5)
    >>> model.predict()["std"].dims
    ('y', 'x')

The accessor never modifies the object it is attached to; it returns new objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import xarray as xr

if TYPE_CHECKING:
    from geogp.frontend.api import GeoRegressor

__all__ = ["GeogpDataArrayAccessor", "GeogpDatasetAccessor"]


class _Base:
    def __init__(self, obj: xr.DataArray | xr.Dataset) -> None:
        self._obj = obj

    def fit(self, model: str = "auto", **kwargs: Any) -> GeoRegressor:
        """Fit a Gaussian process to this raster: ``geogp.fit(obj, model, **kwargs)``.

        Keyword arguments are those of :func:`geogp.frontend.api.fit` (``kernel``, ``n_features``,
        ``share_hyperparameters``, ``var`` for Datasets, model options such as ``maxiter``).
        """
        # lazy: importing xarray imports this module (geogp.frontend.registration), which must not
        # load JAX and the models, nor re-enter geogp.frontend.api while geogp.frontend.api imports
        # xarray
        from geogp.frontend.api import fit  # noqa: PLC0415

        return fit(self._obj, model, **kwargs)

    def fill(self, model: str = "auto", *, quantiles: Sequence[float] | None = None,
             **kwargs: Any) -> xr.Dataset:
        """Fit, then predict on this raster's own grid: the gap-filled ``xr.Dataset``
        (``mean``, ``std``, ``std_latent``; ``quantiles`` when asked)."""
        return self.fit(model, **kwargs).predict(quantiles=quantiles)


@xr.register_dataarray_accessor("geogp")
class GeogpDataArrayAccessor(_Base):
    """``da.geogp.fit(...)`` and ``da.geogp.fill(...)`` for a raster DataArray."""


@xr.register_dataset_accessor("geogp")
class GeogpDatasetAccessor(_Base):
    """``ds.geogp.fit(var=..., ...)`` and ``ds.geogp.fill(var=..., ...)`` for a Dataset."""
