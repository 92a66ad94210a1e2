"""The SVGP family (:class:`~geogp.models.svgp.SVGPRegressor`, non-Gaussian likelihoods): the
front end builds it from ``GeoRegressor(likelihood=...)`` (:mod:`geogp.api`), fits it on points
(a raster's observed cells) and predicts at points; no samples, evidence or file format."""

from __future__ import annotations

from geogp.families.generic import Family
from geogp.models.svgp import SVGPRegressor

__all__ = ["SVGPFamily", "FAMILY"]


class SVGPFamily(Family):
    """:class:`~geogp.models.base.Estimator` of :class:`~geogp.models.svgp.SVGPRegressor`."""

    name = "svgp"
    model_class = SVGPRegressor

    def make(self, options: dict | None = None, *, kernel=None, n_features=None,
             progress=None):
        """An unfitted SVGP. ``options``: the model's keywords (the front end's
        ``likelihood`` and ``bounds``, then the user's); ``kernel`` and ``n_features`` only
        when given: otherwise the model's own defaults, not the front end's AFS ones."""
        own = {k: v for k, v in (("kernel", kernel), ("n_features", n_features)) if v}
        return SVGPRegressor(**own, **{"progress": progress, **(options or {})})

    def hyperparameters(self, est) -> dict:
        return {}


FAMILY = SVGPFamily()
