"""The SVGP family (:class:`~geogp.models.svgp.SVGPRegressor`, non-Gaussian likelihoods): the
front end builds it from ``likelihood=`` (:mod:`geogp.api_likelihoods`), fits it on points (a
raster's observed cells) and predicts at points; no samples, evidence or file format."""

from __future__ import annotations

from geogp.families.generic import Family
from geogp.models.svgp import SVGPRegressor

__all__ = ["SVGPFamily", "FAMILY"]


class SVGPFamily(Family):
    """:class:`~geogp.models.base.Estimator` of :class:`~geogp.models.svgp.SVGPRegressor`."""

    name = "svgp"
    model_class = SVGPRegressor

    def hyperparameters(self, est) -> dict:
        return {}


FAMILY = SVGPFamily()
