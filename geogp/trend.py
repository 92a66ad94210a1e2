"""Polynomial mean functions m(x) = h(x)ᵀβ for the AFS model (issue 9).

The model becomes y = h(x)ᵀβ + f(x) + ε. β is learnt jointly with θ by L-BFGS, starting from the
ordinary least-squares fit. The data enter only through three more statistics, read once with
the others (:mod:`geogp.features.fourier_statistics`):

    F = Φ H  (M, p),     HH = Hᵀ H  (p, p),     Hy = Hᵀ y  (p,)

so that the residual statistics are r_β = r − Fβ and yᵀy_β = yᵀy − 2βᵀHy + βᵀHHβ
(:func:`residual_stats`). h is a monomial basis in the standardised coordinates:
``"constant"`` (1), ``"linear"`` (1, x_d), ``"quadratic"`` (1, x_d, x_d x_e).
"""

from __future__ import annotations

import itertools

import numpy as np

from geogp.exceptions import InputError

__all__ = ["DEGREES", "monomial_powers", "basis", "basis_grid", "residual_stats", "ols"]

DEGREES = {None: -1, "zero": -1, "none": -1, "constant": 0, "linear": 1, "quadratic": 2}


def monomial_powers(mean, n_dims: int) -> np.ndarray | None:
    """Exponents (p, D) of the monomials of total degree ≤ the mean's degree, or None."""
    if mean not in DEGREES:
        raise InputError(f"mean must be one of {sorted(k for k in DEGREES if k)} or None; got {mean!r}.")
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


def residual_stats(stats, beta):
    """Statistics of y − Hβ: r − Fβ and yᵀy − 2βᵀHy + βᵀHHβ (differentiable in β)."""
    from geogp.features.fourier_statistics import SufficientStats

    r = stats.r - stats.F @ beta
    yy = stats.yy - 2.0 * beta @ stats.Hy + beta @ (stats.HH @ beta)
    return SufficientStats(stats.G, r, yy, stats.n, stats.diagonal)


def ols(stats) -> np.ndarray:
    """Least-squares β = (HᵀH)⁻¹Hᵀy from the statistics (the starting point of the fit)."""
    HH = np.asarray(stats.HH)
    try:
        return np.linalg.solve(HH, np.asarray(stats.Hy))
    except np.linalg.LinAlgError as err:
        raise InputError("the mean-function basis is degenerate on these data (e.g. all "
                         "observations on a line); use a lower-degree mean.") from err

