"""Polynomial mean functions m(x) = h(x)ᵀβ for the AFS model (issue 9).

The model becomes y = h(x)ᵀβ + f(x) + ε. β is learnt jointly with θ by L-BFGS, starting from the
ordinary least-squares fit. The data enter only through three more statistics, read once with
the others (:mod:`geogp.features.fourier_statistics`):

    F = Φ H  (M, p),     HH = Hᵀ H  (p, p),     Hy = Hᵀ y  (p,)

so that the residual statistics are r_β = r − Fβ and yᵀy_β = yᵀy − 2βᵀHy + βᵀHHβ
(:func:`geogp.features.fourier_statistics.residual_stats`). h is a monomial basis in the
standardised coordinates: ``"constant"`` (1), ``"linear"`` (1, x_d), ``"quadratic"``
(1, x_d, x_d x_e).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from geogp.exceptions import InputError

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.features.fourier_statistics import SufficientStats

__all__ = ["DEGREES", "monomial_powers", "basis", "basis_grid", "ols",
           "check_trend_identifiable",
           "standardised_covariates"]

DEGREES = {None: -1, "zero": -1, "none": -1, "constant": 0, "linear": 1, "quadratic": 2}


def monomial_powers(mean: str | None, n_dims: int) -> np.ndarray | None:
    """Exponents (p, D) of the monomials of total degree ≤ the mean's degree, or None."""
    if mean not in DEGREES:
        raise InputError(
            f"mean must be one of {sorted(k for k in DEGREES if k)} or None; got {mean!r}.")
    degree = DEGREES[mean]
    if degree < 0:
        return None
    powers = [p for p in itertools.product(range(degree + 1), repeat=n_dims) if sum(p) <= degree]
    powers.sort(key=lambda p: (sum(p), tuple(-q for q in p)))
    return np.array(powers, dtype=np.int64)


def basis(X: np.ndarray, powers: np.ndarray) -> np.ndarray:
    """H (N, p): h_j(x) = ∏_d x_d^{powers[j, d]} at X (N, D)."""
    return np.prod(X[:, None, :] ** powers[None, :, :], axis=2)


def basis_grid(axes: list, powers: np.ndarray, j: int) -> np.ndarray:
    """h_j on the tensor grid ``axes``: (N_1, ..., N_D), as an outer product of axis powers."""
    out = np.asarray(axes[0]) ** powers[j, 0]
    for d in range(1, len(axes)):
        out = np.multiply.outer(out, np.asarray(axes[d]) ** powers[j, d])
    return out


def ols(stats: SufficientStats) -> np.ndarray:
    """Least-squares β = (HᵀH)⁻¹Hᵀy from the statistics (the starting point of the fit)."""
    HH = np.asarray(stats.HH)
    try:
        return np.linalg.solve(HH, np.asarray(stats.Hy))
    except np.linalg.LinAlgError as err:
        raise InputError("the mean-function basis is degenerate on these data (e.g. all "
                         "observations on a line); use a lower-degree mean.") from err


def standardised_covariates(covariates: ArrayLike, obs: np.ndarray,
                            margin: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Covariate rasters as trend columns: (z, mean, scale), with z (k, n_y + 2m, n_x + 2m)
    the covariates z-scored over the observed cells ``obs`` and extended into a margin of
    ``margin`` cells by their edge values; (None, None, None) without covariates. Refuses
    non-real dtypes, wrong shapes, missing cells and covariates constant over the data."""
    if covariates is None:
        return None, None, None
    c = np.asarray(covariates)
    if c.dtype == bool or not np.issubdtype(c.dtype, np.number) or np.iscomplexobj(c):
        raise InputError(f"covariates must be real numbers; got dtype {c.dtype}.")
    c = c.astype(np.float64)
    if c.ndim == 2:
        c = c[None]
    if c.ndim != 3 or c.shape[1:] != obs.shape:
        raise InputError(f"covariates must have shape (k, {obs.shape[0]}, {obs.shape[1]}) "
                         f"(the raster's cells); got {c.shape}.")
    for i, ci in enumerate(c):
        bad = int((~np.isfinite(ci)).sum())
        if bad:
            raise InputError(f"covariate {i + 1} has {bad} missing or infinite cell(s); the "
                             "model needs every covariate at every cell: fill them first.")
    mean = c[:, obs].mean(axis=1)
    scale = c[:, obs].std(axis=1)
    flat = scale <= 1e-12 * np.maximum(np.abs(mean), 1.0)
    if flat.any():
        raise InputError(f"covariate(s) {list(np.flatnonzero(flat) + 1)} are constant over "
                         "the observed cells: they cannot be told apart from the mean.")
    z = (c - mean[:, None, None]) / scale[:, None, None]
    return np.pad(z, ((0, 0), (margin, margin), (margin, margin)), mode="edge"), mean, scale


def check_trend_identifiable(X: np.ndarray, n_covariates: int) -> None:
    """Refuse trend columns ``X`` (N, p) at the observed cells, the last ``n_covariates`` of
    them covariates, that are (nearly) linearly dependent: their coefficients, which have a
    flat prior, are then not identified and the likelihood is not finite. Names the
    covariates that the other columns reproduce (R² > 1 − 10⁻¹⁰)."""
    if X.shape[1] == 0:
        return
    scale = np.sqrt(np.mean(X**2, axis=0))
    sv = np.linalg.svd(X / np.where(scale > 0, scale, 1.0), compute_uv=False)
    if sv[-1] > 1e-8 * sv[0]:
        return
    p = X.shape[1]
    named = []
    for j in range(p - n_covariates, p):
        others = np.delete(X, j, axis=1)
        coef, *_ = np.linalg.lstsq(others, X[:, j], rcond=None)
        resid = X[:, j] - others @ coef
        if resid @ resid <= 1e-10 * np.sum((X[:, j] - X[:, j].mean()) ** 2):
            named.append(j - (p - n_covariates) + 1)
    which = (f"covariate(s) {named} can be written with the other trend columns (the mean's "
             "polynomial in the coordinates, or the other covariates)" if named else
             "the trend's columns are linearly dependent over the observed cells")
    raise InputError(f"{which}: their coefficients are not identified. Drop them, or use a "
                     "lower-order mean (mean='constant').")
