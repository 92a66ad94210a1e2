"""What an AFS model's predictions derive from one posterior, computed on first use."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Derived"]


@dataclass(eq=False)
class Derived:
    """Quantities derived from ``posterior`` (the model's ``posterior_`` when made), kept
    while it stays the model's posterior (:meth:`AFSRegressor.derived
    <geogp.models.afs.AFSRegressor.derived>`).

    Attributes:
        posterior: the posterior these belong to.
        trend_parts: (W_H (M, p), Ψ⁻¹ (p, p)) of the trend's variance, or None until needed.
        variance_bins: the matrix-free posterior's variance as quadratic-form bins, or None
            until needed.
    """

    posterior: object
    trend_parts: tuple[np.ndarray, np.ndarray] | None = None
    variance_bins: np.ndarray | None = None
