"""The SVGP family (:class:`~geogp.models.svgp.SVGPRegressor`, non-Gaussian likelihoods): the
front end builds it from ``GeoRegressor(likelihood=...)`` (:mod:`geogp.api`), fits it on points
(a raster's observed cells) and predicts at points; no samples, evidence or file format."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from geogp.families.generic import Family
from geogp.models.svgp.regressor import SVGPRegressor

if TYPE_CHECKING:  # annotations only
    from geogp.kernels import Kernel

__all__ = ["SVGPFamily", "FAMILY"]


class SVGPFamily(Family[SVGPRegressor]):
    """The family of :class:`~geogp.models.svgp.SVGPRegressor`."""

    name = "svgp"
    model_class = SVGPRegressor

    def make(self, options: dict | None = None, *, kernel: str | Kernel | None = None,
             n_features: int | str | None = None,
             progress: Callable[[int, float], object] | None = None) -> Any:
        """An unfitted SVGP. ``options``: the model's keywords (the front end's
        ``likelihood`` and ``bounds``, then the user's); ``kernel`` and ``n_features`` only
        when given: otherwise the model's own defaults, not the front end's AFS ones."""
        own = {k: v for k, v in (("kernel", kernel), ("n_features", n_features)) if v}
        return SVGPRegressor(**own, **{"progress": progress, **(options or {})})

    def hyperparameters(self, est: SVGPRegressor) -> dict:
        return {}


FAMILY = SVGPFamily()
