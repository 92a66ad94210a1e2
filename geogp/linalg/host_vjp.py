"""The JAX side of the host-factorisation backends (docs/sparse_vjp.md): a custom-VJP operation
``(values, rhs) ↦ (log|B|, B⁻¹b)`` whose forward and backward passes run on the host through
``jax.pure_callback``, and the per-entry cotangent of the values on the pattern.

The host logic is an object with ``host_forward`` and ``host_backward``
(:class:`HostFactorization`): :class:`~geogp.linalg.cholmod.CholmodFactorization` (CHOLMOD)
and :class:`~geogp.linalg.lapack.DenseFactorization` (LAPACK). The reverse rule, storage
convention (a) of docs/sparse_vjp.md (adjoint), is :func:`values_cotangent`.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from geogp.linalg.pattern import SparsePattern

__all__ = ["HostFactorization", "build_op", "values_cotangent"]


class HostFactorization(Protocol):
    """The host side of the operation: ``(log|B|, B⁻¹b)`` and its cotangents, on numpy arrays
    (NaN, never an exception, when ``B`` is not positive definite)."""

    def host_forward(self, values: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(log|B|, B⁻¹b)``: a 0-d array and an array shaped like ``rhs``."""
        ...

    def host_backward(self, values: np.ndarray, solution: np.ndarray, g_logdet: np.ndarray,
                      g_solution: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cotangents ``(values̄, b̄)`` (:func:`values_cotangent`)."""
        ...


def values_cotangent(
    pattern: SparsePattern,
    g_logdet: float,
    zpattern: np.ndarray | None,
    g_rhs: np.ndarray,
    solution: np.ndarray,
) -> np.ndarray:
    """Per-entry cotangent of ``values`` (docs/sparse_vjp.md (adjoint), convention (a)).

    ``(i, j)``, ``i > j``: ``2 δ̄ Z_ij − Σ_k (b̄_ik γ_jk + b̄_jk γ_ik)``; diagonal: half of it.

    Args:
        pattern: The pattern.
        g_logdet: ``δ̄``.
        zpattern: ``B⁻¹`` on the pattern, shape ``(nnz,)``; None when ``δ̄ = 0``.
        g_rhs: ``b̄``, shape ``(n,)`` or ``(n, k)``.
        solution: ``γ``, same shape.

    Returns:
        float64, shape ``(nnz,)``.

    Cost: ``O(nnz · k)``.
    """
    r, c = pattern.rows, pattern.cols
    b2 = g_rhs.reshape(pattern.n, -1)
    s2 = solution.reshape(pattern.n, -1)
    out = -(np.einsum("ek,ek->e", b2[r], s2[c]) + np.einsum("ek,ek->e", b2[c], s2[r]))
    if zpattern is not None:
        out += 2.0 * g_logdet * zpattern
    out[pattern.diag_index] *= 0.5
    return out


def build_op(state: HostFactorization) -> Any:
    """The custom-VJP operation ``op(values, rhs) -> (logdet, solution)`` of ``state``: both
    passes are host callbacks (``vmap_method="sequential"``), differentiable in reverse mode."""
    f64 = jnp.float64

    def forward(values: jax.Array, rhs: jax.Array) -> tuple[jax.Array, jax.Array]:
        shapes = (jax.ShapeDtypeStruct((), f64), jax.ShapeDtypeStruct(rhs.shape, f64))
        return jax.pure_callback(state.host_forward, shapes, values, rhs, vmap_method="sequential")

    @jax.custom_vjp
    def op(values: jax.Array, rhs: jax.Array) -> tuple[jax.Array, jax.Array]:
        return forward(values, rhs)

    def op_fwd(values: jax.Array, rhs: jax.Array) -> Any:
        logdet, solution = forward(values, rhs)
        return (logdet, solution), (values, solution)

    def op_bwd(residuals: Any, cotangents: Any) -> tuple[jax.Array, jax.Array]:
        values, solution = residuals
        g_logdet, g_solution = cotangents
        shapes = (
            jax.ShapeDtypeStruct(values.shape, f64),
            jax.ShapeDtypeStruct(solution.shape, f64),
        )
        return jax.pure_callback(
            state.host_backward,
            shapes,
            values,
            solution,
            jnp.asarray(g_logdet, f64),
            jnp.asarray(g_solution, f64),
            vmap_method="sequential",
        )

    op.defvjp(op_fwd, op_bwd)
    return op
