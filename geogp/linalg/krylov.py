"""Matrix-free SPD solves and log-determinants: batched conjugate gradients and Lanczos quadrature.

:func:`cg` solves A X = B for all columns of B at once (one batched product A·P per iteration),
and records the CG step sizes, from which the Lanczos tridiagonal T of each column follows
(Saad, *Iterative Methods*, §6.7.3; the "mBCG" of Gardner et al. 2018):

    T_00 = 1/α_0,   T_jj = 1/α_j + β_{j−1}/α_{j−1},   T_{j,j+1} = √β_j / α_j.

:func:`lanczos_quadrature` turns T into the Gauss-quadrature estimate zᵀ f(A) z ≈ ‖z‖² e₁ᵀ f(T) e₁,
and with random probes z into stochastic Lanczos quadrature (SLQ) for tr f(A), e.g. log|A|
(Ubaru, Chen & Saad 2017). Everything is JAX, jit-compatible, and *not* differentiated: callers
stop gradients and provide their own derivative estimates (see
:mod:`geogp.models.collapsed_iterative`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["CGResult", "cg", "lanczos_tridiagonal", "lanczos_quadrature"]


class CGResult(NamedTuple):
    """Solutions and Krylov information of :func:`cg`.

    Attributes:
        x: (M, B) solutions.
        n_iter: (B,) iterations each column needed (= maxiter if it did not converge).
        residual: (B,) final relative residual ‖b − A x‖/‖b‖.
        alpha, beta: (L, B) the first L CG coefficients of each column (0 after convergence).
    """

    x: jnp.ndarray
    n_iter: jnp.ndarray
    residual: jnp.ndarray
    alpha: jnp.ndarray
    beta: jnp.ndarray


def cg(matvec: Callable, B: jax.Array, *, tol: float = 1e-8, maxiter: int = 1000,
       n_lanczos: int = 0) -> CGResult:
    """Solve A X = B (A symmetric positive definite, given as ``matvec``) column-wise by CG.

    Args:
        matvec: X (M, B) ↦ A X (M, B), a JAX function.
        B: (M, B) right-hand sides (no zero column unless it is all that is asked).
        tol: stop a column when ‖r‖ ≤ tol ‖b‖. maxiter: iteration cap (all columns).
        n_lanczos: how many CG coefficients to keep per column for :func:`lanczos_tridiagonal`.

    Cost: (iterations) × one batched product + O(M B) per iteration. Converged columns are
    frozen (their updates are masked), so every column gets its own exact CG iterates.
    """
    B = jnp.asarray(B)
    bnorm = jnp.linalg.norm(B, axis=0)
    safe = jnp.where(bnorm > 0, bnorm, 1.0)
    L = max(int(n_lanczos), 1)
    n_cols = B.shape[1]
    init = dict(k=jnp.asarray(0), x=jnp.zeros_like(B), r=B, p=B, rr=jnp.sum(B * B, axis=0),
                active=bnorm > 0, n_iter=jnp.zeros(n_cols, dtype=jnp.int32),
                alpha=jnp.zeros((L, n_cols)), beta=jnp.zeros((L, n_cols)))

    def cond(s):
        return (s["k"] < maxiter) & jnp.any(s["active"])

    def body(s):
        Ap = matvec(s["p"])
        pAp = jnp.sum(s["p"] * Ap, axis=0)
        act = s["active"]
        alpha = jnp.where(act, s["rr"] / jnp.where(act, pAp, 1.0), 0.0)
        x = s["x"] + alpha * s["p"]
        r = s["r"] - alpha * Ap
        rr_new = jnp.sum(r * r, axis=0)
        beta = jnp.where(act, rr_new / jnp.where(act, s["rr"], 1.0), 0.0)
        p = jnp.where(act, r + beta * s["p"], s["p"])
        done = jnp.sqrt(rr_new) <= tol * safe
        k = s["k"]
        row = jnp.minimum(k, L - 1)
        keep = act & (k < L)
        new = dict(
            k=k + 1, x=x, r=jnp.where(act, r, s["r"]), p=p, rr=jnp.where(act, rr_new, s["rr"]),
            active=act & ~done, n_iter=s["n_iter"] + act.astype(jnp.int32),
            alpha=s["alpha"].at[row].set(jnp.where(keep, alpha, s["alpha"][row])),
            beta=s["beta"].at[row].set(jnp.where(keep, beta, s["beta"][row])),
        )
        return new

    out = jax.lax.while_loop(cond, body, init)
    res = jnp.sqrt(out["rr"]) / safe
    return CGResult(out["x"], out["n_iter"], res, out["alpha"], out["beta"])


def lanczos_tridiagonal(alpha: jax.Array, beta: jax.Array, n_iter: jax.Array) -> jax.Array:
    """Lanczos matrices T (B, L, L) from CG coefficients (L, B) and iteration counts (B,).

    Rows beyond a column's iteration count are padded with an identity block decoupled from
    the rest, which leaves e₁ᵀ f(T) e₁ unchanged.
    """
    L = alpha.shape[0]
    j = jnp.arange(L)[:, None]
    used = j < jnp.minimum(n_iter, L)[None, :]  # (L, B)
    a = jnp.where(used, alpha, 1.0)
    b = jnp.where(used, beta, 0.0)
    prev = jnp.concatenate([jnp.zeros((1, a.shape[1])), b[:-1] / a[:-1]], axis=0)
    diag = jnp.where(used, 1.0 / a + prev, 1.0)
    link = used[1:] & used[:-1]  # T_{j,j+1} exists only inside the used block
    off = jnp.where(link, jnp.sqrt(jnp.maximum(b[:-1], 0.0)) / a[:-1], 0.0)
    T = (jax.vmap(jnp.diag)(diag.T) + jax.vmap(lambda o: jnp.diag(o, 1))(off.T)
         + jax.vmap(lambda o: jnp.diag(o, -1))(off.T))
    return T


def lanczos_quadrature(T: jax.Array, fn: Callable) -> jax.Array:
    """e₁ᵀ f(T) e₁ for each T (B, L, L): Σ_i (first eigenvector component)² f(eigenvalue).

    Multiply by ‖z‖² to estimate zᵀ f(A) z for the probe z that generated T. Cost O(B L³).
    """
    evals, evecs = jnp.linalg.eigh(T)
    w = evecs[:, 0, :] ** 2
    return jnp.sum(w * fn(jnp.maximum(evals, 1e-300)), axis=1)
