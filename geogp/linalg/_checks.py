"""Argument checks shared by the dense and CHOLMOD backends (run before any tracing)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from geogp.exceptions import InputError
from geogp.linalg.pattern import SparsePattern

__all__ = ["check_inputs"]


def _as_float64(x: Any, name: str) -> Any:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return jnp.asarray(x, dtype=jnp.float64)
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.itemsize < 8:
        raise InputError(
            f"Expected {name} as float64, got {dtype}. geogp works in double precision "
            "(docs/model.md): cast with .astype(jnp.float64) and keep jax_enable_x64 on."
        )
    if dtype.kind == "c":
        raise InputError(f"Expected real {name}, got {dtype}.")
    if dtype != np.float64:
        return jnp.asarray(x, dtype=jnp.float64)
    return x


def check_inputs(pattern: SparsePattern, values: Any, rhs: Any) -> tuple[Any, Any]:
    """Check types and shapes of ``(values, rhs)`` against the pattern.

    Args:
        pattern: The sparsity pattern.
        values: Values on the pattern, expected shape ``(nnz,)``.
        rhs: Right-hand side, expected shape ``(n,)`` or ``(n, k)``.

    Returns:
        ``(values, rhs)`` as float64 arrays (JAX arrays and tracers pass through).

    Raises:
        InputError: Wrong pattern type, dtype or shape.
    """
    if not isinstance(pattern, SparsePattern):
        raise InputError(
            f"Expected a SparsePattern as first argument, got {type(pattern).__name__}. "
            "Build one with SparsePattern.from_scipy(A)."
        )
    values = _as_float64(values, "values")
    rhs = _as_float64(rhs, "rhs")
    if tuple(values.shape) != (pattern.nnz,):
        raise InputError(
            f"Expected values of shape ({pattern.nnz},) (one per stored lower-triangle entry), "
            f"got {tuple(values.shape)}."
        )
    if rhs.ndim not in (1, 2) or rhs.shape[0] != pattern.n:
        raise InputError(
            f"Expected rhs of shape ({pattern.n},) or ({pattern.n}, k), got {tuple(rhs.shape)}."
        )
    return values, rhs
