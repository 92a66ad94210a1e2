"""Intervals checked on hidden values: the factor by which a model's sds must grow for 95 % of
values hidden in gap-shaped folds to fall inside them, when the folds show it beyond their own
noise (the space-time model's folds, docs/spacetime.md; the robust lattice fit's temperature,
docs/gvi.md)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from geogp.core.folds import gap_folds
from geogp.exceptions import InputError

__all__ = ["interval_scale", "fold_temperature", "Z95", "MIN_HIDDEN", "ERRORS_PER_INDEPENDENT"]

# the standard normal's 97.5 % quantile: a 95 % interval is mean ± Z95 sd
Z95 = 1.959963984540054
# fewer hidden values than this leave the intervals as the model has them
MIN_HIDDEN = 200
# hidden values per independent one (a cloud's errors are correlated): sets the noise of the
# folds' 95 % quantile, which alone would widen a right model's intervals (docs/spacetime.md,
# "Intervals")
ERRORS_PER_INDEPENDENT = 10


def interval_scale(z: np.ndarray) -> float:
    """The factor c ≥ 1 by which the sds must grow for 95 % of the standardised errors ``z``
    (error / predictive sd) of hidden values to fall within ± Z95 c, when the folds show it
    beyond their own noise: the quantile taken is a lower confidence bound of the 95 % one,
    0.95 − 2 √(0.95 · 0.05 / n_eff) with n_eff = n / :data:`ERRORS_PER_INDEPENDENT` (errors
    within one cloud are correlated). 1.0 with fewer than :data:`MIN_HIDDEN` of them."""
    z = np.abs(np.asarray(z, dtype=np.float64).ravel())
    z = z[np.isfinite(z)]
    if z.size < MIN_HIDDEN:
        return 1.0
    n_eff = z.size / ERRORS_PER_INDEPENDENT
    level = 0.95 - 2.0 * np.sqrt(0.95 * 0.05 / n_eff)
    return max(1.0, float(np.quantile(z, level)) / Z95)


def fold_temperature(observed: np.ndarray, n_folds: int,
                     errors: Callable[[np.ndarray], np.ndarray]) -> float:
    """:func:`interval_scale` of the standardised errors ``errors(hidden)`` of the values
    hidden in each of ``n_folds`` gap-shaped folds of the raster ``observed``
    (:func:`~geogp.core.folds.gap_folds`, seed 0): a robust fit's temperature. 1.0 without
    folds, or on a raster with no gap to move."""
    try:
        folds = gap_folds(observed, n_folds, seed=0) if n_folds else []
    except InputError:  # a complete raster: nothing to check on
        return 1.0
    z = [errors(hidden) for hidden in folds]
    return interval_scale(np.concatenate(z)) if z else 1.0
