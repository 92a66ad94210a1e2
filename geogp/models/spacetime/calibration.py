"""Intervals of the space-time model checked on gap-shaped folds of windows spread over the
raster (docs/spacetime.md, intervals).

Real stacks break the model's assumptions in ways θ cannot absorb (heavy-tailed errors at
cloud edges, scales the anomalies lack), and the posterior's intervals are then too narrow
exactly where the gaps are. The fit therefore hides, in windows spread over the raster,
whole patches of observed cells that another date had under cloud (:func:`stack_gap_folds`),
predicts them at the fitted θ, and widens every interval by the factor that makes 95 % of
those hidden values fall inside, when the folds show it beyond their own noise
(:func:`interval_scale`; never narrower than the model's own). The whole of the other
date's clouds is moved, not a part of it: real gaps come as heavily clouded dates, where a
date keeps little of its own data, and those are the hardest values to predict.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from geogp.core.calibration import ERRORS_PER_INDEPENDENT, MIN_HIDDEN, Z95, interval_scale
from geogp.exceptions import InputError

__all__ = ["stack_gap_folds", "interval_scale", "Z95", "MIN_HIDDEN", "ERRORS_PER_INDEPENDENT"]

def stack_gap_folds(observed: np.ndarray, n_folds: int = 3, *, fraction: float = 0.15,
                    seed: int = 0) -> np.ndarray:
    """(n_folds, T, ny, nx) held-out masks of a series: on each date, whole patches of the
    cells that another date (drawn at random) had under cloud, until about ``fraction`` of the
    date's observed cells (1: all of them, the other date's whole cloud mask).

    Raises:
        InputError: too few dates, or no date has cloud another date lacks.
    """
    obs = np.asarray(observed, dtype=bool)
    if obs.ndim != 3 or obs.shape[0] < 2:
        raise InputError("stack folds need a stack of at least two dates (time, y, x).")
    if not (0 < fraction <= 1) or int(n_folds) < 1:
        raise InputError(f"n_folds must be ≥ 1 and fraction in (0, 1]; got {n_folds}, "
                         f"{fraction}.")
    rng = np.random.default_rng(seed)
    t = obs.shape[0]
    folds = np.zeros((int(n_folds), *obs.shape), dtype=bool)
    for f in range(int(n_folds)):
        for k in range(t):
            other = (k + 1 + int(rng.integers(t - 1))) % t
            labels, n = ndimage.label(obs[k] & ~obs[other], structure=np.ones((3, 3)))
            target = fraction * obs[k].sum()
            for lab in rng.permutation(n) + 1:
                if folds[f, k].sum() >= target:
                    break
                folds[f, k] |= labels == lab
    if not folds.any():
        raise InputError("no date of the stack has clouds where another date is clear, so "
                         "there are no cloud shapes to move; pass folds= as a boolean array.")
    return folds
