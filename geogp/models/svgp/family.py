"""The SVGP family (:class:`~geogp.models.svgp.SVGPRegressor`, non-Gaussian likelihoods): the
front end builds it from ``GeoRegressor(likelihood=...)`` (:mod:`geogp.frontend.api`), fits it on
points (a raster's observed cells) and predicts at points; no samples, evidence or file format."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from geogp.core.formatting import duration_range
from geogp.exceptions import GeogpError
from geogp.families.generic import Family
from geogp.models.svgp.regressor import TYPICAL_LBFGS_ITERATIONS, SVGPRegressor

if TYPE_CHECKING:  # annotations only
    from geogp.core.kernels import Kernel

__all__ = ["SVGPFamily", "FAMILY"]


class SVGPFamily(Family[SVGPRegressor]):
    """The family of :class:`~geogp.models.svgp.SVGPRegressor`."""

    name = "svgp"
    model_class = SVGPRegressor
    estimates_cost = True

    def make(self, options: dict | None = None, *, kernel: str | Kernel | None = None,
             n_features: int | str | None = None,
             progress: Callable[[int, float], object] | None = None) -> Any:
        """An unfitted SVGP. ``options``: the model's keywords (the front end's
        ``likelihood`` and ``bounds``, then the user's); ``kernel`` and ``n_features`` only
        when given: otherwise the model's own defaults, not the front end's AFS ones."""
        own: dict[str, Any] = {k: v for k, v in (("kernel", kernel), ("n_features", n_features))
                               if v}
        return SVGPRegressor(**own, **{"progress": progress, **(options or {})})

    def hyperparameters(self, est: SVGPRegressor) -> dict:
        return {}

    def announce_cost(self, est: SVGPRegressor, raster_shape: tuple) -> None:
        """Before an SVGP fit of a raster with progress bars: its optimiser and time."""
        ny, nx = raster_shape
        try:
            cost = est.cost_estimate(ny * nx)  # at most every cell is observed
        except (GeogpError, ValueError, TypeError):  # bad settings: the fit says what is wrong
            return
        lik = getattr(est.likelihood, "name", est.likelihood)
        head = f"svgp ({lik} likelihood) on {ny} × {nx} cells, {est.n_features} features: "
        if cost["optimizer"] == "lbfgs":
            typical = min(TYPICAL_LBFGS_ITERATIONS, cost["steps"])
            usual = duration_range(cost["setup_s"] + typical * cost["step_s"])
            body = (f"L-BFGS until the ELBO levels off, typically ~{typical} iterations "
                    f"(roughly {usual}), at most "
                    f"{cost['steps']} (roughly "
                    f"{duration_range(cost['setup_s'] + cost['steps'] * cost['step_s'])})")
        else:
            body = (f"{cost['steps']} Adam steps on minibatches of {cost['batch']}, roughly "
                    f"{duration_range(cost['setup_s'] + cost['steps'] * cost['step_s'])}")
        print(head + body + " (the 2-core reference rate, then this machine's load)",
              file=sys.stderr, flush=True)


FAMILY = SVGPFamily()
