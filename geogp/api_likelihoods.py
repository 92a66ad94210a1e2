"""Front end for non-Gaussian likelihoods: ``geogp.fit(da, likelihood=...)`` (docs/svgp.md).

:class:`SVGPGeoRegressor` is a :class:`geogp.api.GeoRegressor` whose estimator is an
:class:`~geogp.models.svgp.SVGPRegressor` (Poisson, Bernoulli or Student-t observations), fitted
on the observed cells with a window that covers the whole raster.
"""

from __future__ import annotations

from geogp.adapters import GridData
from geogp.api import GeoRegressor

__all__ = ["SVGPGeoRegressor"]


class SVGPGeoRegressor(GeoRegressor):
    """``fit(da, likelihood="poisson"|"bernoulli"|"student_t")``: an SVGP (docs/svgp.md)."""

    def __init__(self, likelihood, **kw):
        super().__init__("auto", **kw)
        self.likelihood = likelihood

    def _resolve(self, raster_shape, regular: bool) -> None:  # model="svgp", whatever the data
        self.model_, self.model_reason_ = "svgp", f"likelihood={self.likelihood!r}"

    def _fit_raster(self, g: GridData, covariates=None) -> GeoRegressor:
        self._bounds = [[a.min() for a in g.axes], [a.max() for a in g.axes]]
        return super()._fit_raster(g, covariates)

    def _estimator(self, label: str, overrides: dict | None = None):
        from geogp.models.svgp import SVGPRegressor
        own = {k: v for k, v in (("kernel", self.kernel), ("n_features", self.n_features)) if v}
        return SVGPRegressor(self.likelihood, bounds=getattr(self, "_bounds", None), **own,
                             **{**(self.options or {}), **(overrides or {})}), None
