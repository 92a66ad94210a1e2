"""The optimal q(v) of the SVGP at fixed hyperparameters, by Newton / natural-gradient steps.

Stochastic Adam (and L-BFGS stopped by an iteration cap) moves the variational mean m and
covariance S = LLᵀ slowly in the directions that the data hardly constrain, above all the
combinations of features that live inside a large gap: there the gradient of −ELBO/N is only
the prior's pull m/N, and Adam's per-coordinate step, scaled by the minibatch noise of the
well-determined directions, leaves them where the early transients put them. The map then
shows whatever the optimiser's path left in the gap (docs/svgp.md, "Optimisation").

At fixed θ the ELBO's optimum over q satisfies (Opper & Archambeau 2009; natural gradient with
unit step, Khan & Lin 2017), with g_μ, g_v the derivatives of E_q[log p(y_n | f_n)] in the
marginal mean and variance and W = −2 diag(g_v) (= −∂²E/∂μ², Price's theorem):

    S⁻¹ = I + ΨᵀWΨ,    m = Ψᵀg_μ,    Σ_n g_μ,n = 0 (b learnt),

reached by Newton steps on (m, b), whose Hessian is [[I + ΨᵀWΨ, ΨᵀW1], [1ᵀWΨ, 1ᵀW1]], with
S⁻¹ moved to I + ΨᵀWΨ at the same time (the natural-gradient step).

For log-concave likelihoods (Gaussian, Poisson, Bernoulli) W ≥ 0 and the ELBO is concave in
(m, L): a few full-data passes reach the optimum. Each step is checked against the ELBO and
halved if it does not improve it. Cost per pass O(N M²) in chunks, memory O(chunk·M + M²).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterable

    from numpy.typing import ArrayLike

    from geogp.models.svgp.likelihoods import Likelihood

__all__ = ["optimal_q", "LOG_CONCAVE"]

LOG_CONCAVE = ("gaussian", "poisson", "bernoulli")


@functools.lru_cache(maxsize=32)
def _pass_fn(lik):
    """Per chunk: Σ E_q[log p], Ψᵀg_μ, Σ g_μ, ΨᵀWΨ, ΨᵀW1, Σ W (W = −2 g_v ≥ 0)."""
    def one(Psi, y, offset, m, L, b, k0, params):
        mu = Psi @ m + b
        var = k0 - jnp.sum(Psi**2, axis=1) + jnp.sum((Psi @ L) ** 2, axis=1)

        def total(mu_, var_):
            return jnp.sum(lik.expected_log_lik(y, mu_, var_, params, offset))

        E, (g_mu, g_v) = jax.value_and_grad(total, argnums=(0, 1))(mu, var)
        W = jnp.maximum(-2.0 * g_v, 0.0)
        PW = Psi * W[:, None]
        return E, Psi.T @ g_mu, jnp.sum(g_mu), PW.T @ Psi, jnp.sum(PW, axis=0), jnp.sum(W)
    return jax.jit(one)


def _kl(m, L):
    return 0.5 * (np.sum(L**2) + m @ m - m.size - 2.0 * np.sum(np.log(np.diag(L))))


def optimal_q(psi_chunks: Callable[[], Iterable[tuple[np.ndarray, slice]]], y: np.ndarray,
              offset: np.ndarray, m: ArrayLike, L: ArrayLike, b: float, k0: float, lik: Likelihood,
              params: dict, *, learn_mean: bool = True,
              maxiter: int = 50, rtol: float = 1e-12,
              progress: Callable[[int, float], object] | None = None,
              ) -> tuple[np.ndarray, np.ndarray, float, float, int]:
    """Maximise the ELBO over q(v) = N(m, LLᵀ) (and the constant mean b when ``learn_mean``)
    at fixed θ and likelihood parameters.

    Args:
        psi_chunks: callable returning an iterable of (Ψ chunk (B, M), slice) over the data.
        y, offset: observations (standardised for real-valued likelihoods) and offsets (N,).
        m, L, b: the starting point. k0: k(0). lik, params: the likelihood and its parameters.
        maxiter: full-data passes at most; stops when the ELBO gains less than
            ``rtol``·|ELBO| and the Newton step is below 1e-7.
        progress: optional ``progress(iteration, -elbo)``.

    Returns:
        (m, L, b, elbo, n_passes).
    """
    m, L, b = np.asarray(m, np.float64), np.asarray(L, np.float64), float(b)
    M = m.size
    fn = _pass_fn(lik)

    def stats(m_, L_, b_):
        acc = [0.0, np.zeros(M), 0.0, np.zeros((M, M)), np.zeros(M), 0.0]
        for Psi, sl in psi_chunks():
            out = fn(jnp.asarray(Psi), jnp.asarray(y[sl]), jnp.asarray(offset[sl]),
                     jnp.asarray(m_), jnp.asarray(L_), b_, k0, params)
            for i, o in enumerate(out):
                acc[i] = acc[i] + np.asarray(o)
        return float(acc[0]) - _kl(m_, L_), acc

    elbo, acc = stats(m, L, b)
    n = 1
    for it in range(maxiter):
        _, G, gb, A, c, d = acc
        H = np.eye(M) + A
        if learn_mean:
            H = np.block([[H, c[:, None]], [c[None, :], np.array([[d]])]])
            grad = np.concatenate([G - m, [gb]])
        else:
            grad = G - m
        step = np.linalg.solve(H, grad)
        # S⁻¹ of the fixed point; the current S⁻¹ from L (interpolated in natural parameters)
        P_new = np.eye(M) + A
        Li = np.linalg.solve(L, np.eye(M))
        P_old = Li.T @ Li
        rho, accepted = 1.0, False
        while rho > 1e-4:
            P = (1 - rho) * P_old + rho * P_new
            C = np.linalg.cholesky(P)           # P = CCᵀ, S = C⁻ᵀC⁻¹
            Cinv = np.linalg.solve(C, np.eye(M))
            _Q, R = np.linalg.qr(Cinv)           # C⁻ᵀ = RᵀQᵀ: a lower-triangular factor of S
            L_try = (R * np.sign(np.diag(R))[:, None]).T
            m_try = m + rho * step[:M]
            b_try = b + rho * step[M] if learn_mean else b
            e_try, acc_try = stats(m_try, L_try, b_try)
            n += 1
            if e_try >= elbo - 1e-12 * abs(elbo):
                accepted = True
                break
            rho *= 0.5
        if not accepted:
            break
        gain = e_try - elbo
        m, L, b, elbo, acc = m_try, L_try, b_try, e_try, acc_try
        if progress is not None:
            progress(it + 1, -elbo)
        if gain <= rtol * abs(elbo) and np.max(np.abs(step)) * rho < 1e-7:
            break
    return m, L, b, elbo, n
