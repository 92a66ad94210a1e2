"""Small, named argument checks run before any tracing (STYLE.md guideline 6).

Each raises :class:`geogp.exceptions.InputError` (a ``ValueError``) whose message says what was
expected, what arrived, and how to fix it.
"""

from __future__ import annotations

import warnings

import numpy as np

from geogp.exceptions import InputError

__all__ = ["as_points", "as_targets", "check_positive", "check_same_length"]


def _as_float64(a, name: str) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
        raise InputError(f"{name} must be numeric; got an array of dtype {a.dtype}.")
    if np.issubdtype(a.dtype, np.floating) and a.dtype != np.float64:
        warnings.warn(
            f"{name} has dtype {a.dtype}; geogp works in float64 and upcasts it.",
            stacklevel=3,
        )
    return a.astype(np.float64, copy=False)


def as_points(X, name: str = "X", *, max_dims: int = 3) -> np.ndarray:
    """Return ``X`` as a finite float64 array of shape (N, D) with N ≥ 1 and 1 ≤ D ≤ max_dims."""
    X = _as_float64(X, name)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise InputError(
            f"{name} must have shape (N, D) (one row per point); got ndim={X.ndim} with shape "
            f"{X.shape}. Reshape with X.reshape(-1, D)."
        )
    if X.shape[0] == 0:
        raise InputError(f"{name} is empty (0 points); at least one observation is needed.")
    if not 1 <= X.shape[1] <= max_dims:
        raise InputError(f"{name} must have 1 to {max_dims} columns (dimensions); got {X.shape[1]}.")
    bad = ~np.isfinite(X)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1))
        raise InputError(
            f"{name} contains {bad.sum()} NaN/inf value(s) (first at row {rows[0]}); input "
            "coordinates must be finite. Drop those rows first."
        )
    return X


def as_targets(y, name: str = "y") -> np.ndarray:
    """Return ``y`` as a finite float64 vector of shape (N,) with N ≥ 1."""
    y = _as_float64(y, name)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise InputError(f"{name} must be a vector of shape (N,); got shape {y.shape}.")
    if y.size == 0:
        raise InputError(f"{name} is empty (0 values); at least one observation is needed.")
    bad = ~np.isfinite(y)
    if bad.any():
        raise InputError(
            f"{name} contains {bad.sum()} NaN/inf value(s) (first at index {np.flatnonzero(bad)[0]}); "
            "mark missing cells by dropping them (the xarray adapters treat NaN as missing)."
        )
    return y


def check_same_length(X: np.ndarray, y: np.ndarray, xname: str = "X", yname: str = "y") -> None:
    """Raise unless ``X`` (N, D) and ``y`` (N,) have the same number of rows."""
    if X.shape[0] != y.shape[0]:
        raise InputError(
            f"{xname} has {X.shape[0]} rows but {yname} has {y.shape[0]} values; they must match."
        )


def check_positive(value, name: str) -> np.ndarray:
    """Return ``value`` as float64 after checking it is finite and strictly positive."""
    v = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise InputError(f"{name} must be finite and > 0; got {value!r}.")
    return v
