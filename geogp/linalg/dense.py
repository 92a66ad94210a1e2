"""Dense reference for the sparse log-determinant and solve (docs/sparse_vjp.md (contract,
backends)).

Same contract as :func:`geogp.linalg.cholmod.logdet_and_solve`, computed by densifying ``B``
and calling ``jnp.linalg.cholesky``. Pure JAX: derivatives come from autodiff, so it is the
independent oracle for every sparse test (STYLE.md guideline 2) and the fallback when
scikit-sparse is not installed. A matrix that is not positive definite gives NaN.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from geogp.linalg._checks import check_inputs
from geogp.linalg.pattern import SparsePattern

__all__ = ["logdet_and_solve", "to_dense"]


def to_dense(pattern: SparsePattern, values: Any) -> jax.Array:
    """Dense symmetric ``B = tril + trilᵀ − diag`` from values on the pattern (docs/sparse_vjp.md,
    convention (a)).

    Args:
        pattern: Sparsity pattern (lower triangle with diagonal).
        values: Values, shape ``(nnz,)``.

    Returns:
        ``B``, shape ``(n, n)``.

    Cost: ``O(n²)`` memory.
    """
    values = jnp.asarray(values, dtype=jnp.float64)
    low = jnp.zeros((pattern.n, pattern.n), dtype=values.dtype)
    low = low.at[pattern.rows, pattern.cols].add(values)
    return low + low.T - jnp.diag(jnp.diagonal(low))


def logdet_and_solve(pattern: SparsePattern, values: Any, rhs: Any) -> tuple[jax.Array, jax.Array]:
    """``(log|B|, B⁻¹ b)`` by dense Cholesky: the reference implementation (docs/sparse_vjp.md,
    contract).

    Args:
        pattern: Sparsity pattern of ``B`` (lower triangle with diagonal).
        values: Values of ``B`` on the pattern, convention (a) of docs/sparse_vjp.md (adjoint),
            float64, shape ``(nnz,)``.
        rhs: Right-hand side ``b``, shape ``(n,)`` or ``(n, k)``.

    Returns:
        ``(logdet, solution)``: a scalar and ``B⁻¹ b`` with the shape of ``rhs``. NaN when
        ``B`` is not positive definite.

    Cost: ``O(n³)`` time and ``O(n²)`` memory: for tests and small problems only.
    """
    values, rhs = check_inputs(pattern, values, rhs)
    chol = jnp.linalg.cholesky(to_dense(pattern, values))  # B = C Cᵀ
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))  # log|B| = 2 Σ log C_ii
    solution = jsl.cho_solve((chol, True), rhs)  # B⁻¹ b
    return logdet, solution
