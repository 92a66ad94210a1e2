"""Scores of Gaussian predictive distributions (docs/crossvalidation.md, scores), on the data's
original scale.

For observations y_n with predictive mean μ_n and predictive sd s_n (of a new observation:
s² = var_f + σ², i.e. the ``std`` of a prediction):

    RMSE = √(mean (y − μ)²)                 MAE = mean |y − μ|
    NLPD = mean [½ log(2π s²) + (y − μ)²/(2 s²)]
    CRPS = mean s [z(2Φ(z) − 1) + 2φ(z) − 1/√π],   z = (y − μ)/s   (Gneiting & Raftery 2007)
    IS_α = mean [(u − l) + (2/α)(l − y)·1{y < l} + (2/α)(y − u)·1{y > u}],  l, u = μ ∓ z_{1−α/2} s
    coverage = mean 1{l ≤ y ≤ u}

Arrays of any shape are flattened; cells where y, μ or s is NaN (missing truth, or no
prediction) are left out, and an error is raised when none is left.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import norm

from geogp.exceptions import InputError

if TYPE_CHECKING:  # annotations only
    import pandas as pd
    from numpy.typing import ArrayLike

__all__ = ["rmse", "mae", "nlpd", "crps_gaussian", "interval_score", "coverage", "evaluate",
           "DISTANCE_BINS", "distance_labels", "evaluate_by_distance", "reliability",
           "clustered_standard_error"]


def _pairs(y, mean, std=None):
    arrays = [np.asarray(a, dtype=np.float64).ravel() for a in
              ((y, mean) if std is None else (y, mean, std))]
    if len({a.size for a in arrays}) != 1:
        raise InputError(f"arrays must have the same number of values; got sizes "
                         f"{[a.size for a in arrays]}.")
    keep = np.logical_and.reduce([np.isfinite(a) for a in arrays])
    if not keep.any():
        raise InputError("no cell has finite values for all of y, mean (and std); "
                         "nothing to score.")
    out = [a[keep] for a in arrays]
    if std is not None and np.any(out[2] <= 0):
        raise InputError("predictive standard deviations must be > 0.")
    return out


def rmse(y: ArrayLike, mean: ArrayLike) -> float:
    """Root mean squared error √(mean (y − μ)²)."""
    y, m = _pairs(y, mean)
    return float(np.sqrt(np.mean((y - m) ** 2)))


def mae(y: ArrayLike, mean: ArrayLike) -> float:
    """Mean absolute error mean |y − μ|."""
    y, m = _pairs(y, mean)
    return float(np.mean(np.abs(y - m)))


def nlpd(y: ArrayLike, mean: ArrayLike, std: ArrayLike) -> float:
    """Negative log predictive density of Gaussian marginals, mean ½ log(2πs²) + (y − μ)²/(2s²)."""
    y, m, s = _pairs(y, mean, std)
    return float(np.mean(0.5 * np.log(2 * math.pi * s**2) + (y - m) ** 2 / (2 * s**2)))


def crps_gaussian(y: ArrayLike, mean: ArrayLike, std: ArrayLike) -> float:
    """Continuous ranked probability score of N(μ, s²), closed form (lower is better).

    CRPS = ∫ (F(t) − 1{t ≥ y})² dt = s [z(2Φ(z) − 1) + 2φ(z) − 1/√π], z = (y − μ)/s.
    """
    y, m, s = _pairs(y, mean, std)
    z = (y - m) / s
    crps = s * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / math.sqrt(math.pi))
    return float(np.mean(crps))


def _bounds(mean, std, alpha):
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be in (0, 1); got {alpha}.")
    q = norm.ppf(1 - alpha / 2)  # 1.959964 for α = 0.05
    return mean - q * std, mean + q * std


def interval_score(y: ArrayLike, mean: ArrayLike, std: ArrayLike,
                   alpha: float = 0.05) -> float:
    """Interval score of the central (1 − α) interval (Gneiting & Raftery 2007; lower is better)."""
    y, m, s = _pairs(y, mean, std)
    lo, hi = _bounds(m, s, alpha)
    return float(np.mean((hi - lo) + (2 / alpha) * (lo - y) * (y < lo)
                         + (2 / alpha) * (y - hi) * (y > hi)))


def coverage(y: ArrayLike, mean: ArrayLike, std: ArrayLike, level: float = 0.95) -> float:
    """Fraction of y inside the central ``level`` predictive interval (ideal: ``level``)."""
    y, m, s = _pairs(y, mean, std)
    lo, hi = _bounds(m, s, 1 - level)
    return float(np.mean((lo <= y) & (y <= hi)))


def clustered_standard_error(values: ArrayLike, clusters: ArrayLike) -> float:
    """Standard error of ``mean(values)`` when values in one cluster may be correlated.

    The cluster-robust (sandwich) estimate with G clusters and the usual G/(G − 1) factor:
    SE² = G/(G − 1) · Σ_g [Σ_{i∈g} (v_i − v̄)]² / n². With one value per cluster it is the
    sample SE √(Σ (v_i − v̄)² / (n(n − 1))). Cross-validation uses it with the cells of one
    held-out gap as a cluster: their errors share the gap's geometry, so n cells are worth far
    fewer independent draws. NaN with fewer than 2 clusters.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    _, g = np.unique(np.asarray(clusters).ravel(), return_inverse=True)
    if g.size != v.size:
        raise InputError("values and clusters must have the same number of entries.")
    n_g = int(g.max()) + 1 if g.size else 0
    if n_g < 2:
        return float("nan")
    sums = np.bincount(g, weights=v - v.mean(), minlength=n_g)
    return float(np.sqrt(n_g / (n_g - 1) * np.sum(sums**2)) / v.size)


def evaluate(y: ArrayLike, mean: ArrayLike, std: ArrayLike) -> dict:
    """All scores at once: rmse, mae, nlpd, crps, is95, coverage95, n."""
    n = _pairs(y, mean, std)[0].size
    return {"rmse": rmse(y, mean), "mae": mae(y, mean), "nlpd": nlpd(y, mean, std),
            "crps": crps_gaussian(y, mean, std), "is95": interval_score(y, mean, std, 0.05),
            "coverage95": coverage(y, mean, std, 0.95), "n": int(n)}


# distance strata (cells to the nearest observed cell): ≤ 1, 1–3, 3–10, > 10
DISTANCE_BINS = (1.0, 3.0, 10.0)


def distance_labels(bins: Sequence[float] = DISTANCE_BINS) -> list[str]:
    """Names of the strata cut at ``bins``: ['≤ 1', '1–3', '3–10', '> 10'] by default."""
    b = [f"{v:g}" for v in bins]
    return [f"≤ {b[0]}"] + [f"{lo}–{hi}" for lo, hi in itertools.pairwise(b)] + [f"> {b[-1]}"]


def evaluate_by_distance(y: ArrayLike, mean: ArrayLike, std: ArrayLike, distance: ArrayLike,
                         bins: Sequence[float] = DISTANCE_BINS,
                         clusters: ArrayLike | None = None) -> pd.DataFrame:
    """:func:`evaluate` per distance stratum (and ``all``), as a pandas DataFrame.

    ``distance`` is, per scored cell, its distance to the nearest observed (training) cell;
    stratum i holds bins[i-1] < d ≤ bins[i]. Strata with no cell get NaN scores and n = 0.
    Columns: rmse, mae, nlpd, crps, is95, coverage95, n, plus ``std_mean`` (mean predictive
    sd) and ``std_ratio`` (RMSE over the root mean predictive variance: 1 when the intervals
    are as wide as the errors, above 1 when they are too narrow). With ``clusters`` (a label
    per cell, e.g. its held-out gap), ``coverage95_se`` is the coverage's clustered standard
    error (:func:`clustered_standard_error`).
    """
    # lazy: the scores need numpy and scipy only, the table pandas
    import pandas as pd  # noqa: PLC0415

    y, mean, std, d = (np.asarray(a, dtype=np.float64).ravel() for a in (y, mean, std, distance))
    if not (y.size == mean.size == std.size == d.size):
        raise InputError("y, mean, std and distance must have the same number of values.")
    groups = None if clusters is None else np.asarray(clusters).ravel()
    if groups is not None and groups.size != y.size:
        raise InputError("clusters must have one label per value of y.")
    edges = np.concatenate([[-np.inf], np.asarray(bins, dtype=np.float64), [np.inf]])
    names = distance_labels(bins)
    rows = {}
    for i, name in enumerate([*names, "all"]):
        sel = np.ones(d.size, bool) if name == "all" else (d > edges[i]) & (d <= edges[i + 1])
        ok = sel & np.isfinite(y) & np.isfinite(mean) & np.isfinite(std)
        if not ok.any():
            rows[name] = {"n": 0}
            continue
        row = evaluate(y[ok], mean[ok], std[ok])
        row["std_mean"] = float(np.mean(std[ok]))
        row["std_ratio"] = row["rmse"] / float(np.sqrt(np.mean(std[ok] ** 2)))
        if groups is not None:
            lo, hi = _bounds(mean[ok], std[ok], 0.05)
            row["coverage95_se"] = clustered_standard_error((lo <= y[ok]) & (y[ok] <= hi),
                                                            groups[ok])
        rows[name] = row
    cols = ["n", "rmse", "mae", "crps", "is95", "coverage95", "nlpd", "std_mean", "std_ratio"]
    cols += [] if groups is None else ["coverage95_se"]
    table = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=cols)
    table["n"] = table["n"].fillna(0).astype(np.int64)
    return table


def reliability(y: ArrayLike, mean: ArrayLike, std: ArrayLike,
                levels: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95,
                                           0.99)) -> np.ndarray:
    """Empirical coverage of the central predictive intervals at each nominal ``level``.

    Returns an array of the same length as ``levels`` (a calibrated model gives the levels
    themselves): the reliability diagram of Gaussian predictive distributions.
    """
    y, m, s = _pairs(y, mean, std)
    z = np.abs(y - m) / s
    return np.array([float(np.mean(z <= norm.ppf(0.5 + lv / 2))) for lv in levels])
