"""Independent references for the SVGP (tests/models/test_svgp*.py): Gaussian VI of the
weight-space model f = Ψv + b, v ~ N(0, I), by scipy BFGS with hand-written gradients and 60-point
quadrature; Laplace in weight space; Laplace of the exact GP (dense kernel, Newton iterations,
Rasmussen & Williams 2006, algorithms 3.1 and 3.2) for Poisson counts with a log link."""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.optimize as so
import scipy.special as sps


def ref_vi(Psi, y, k0, kind, b0):
    """Gaussian VI of f = Ψv + b, v ~ N(0, I), in numpy: BFGS with hand-written gradients."""
    _N, M = Psi.shape
    tril = np.tril_indices(M)
    x60, w60 = np.polynomial.hermite_e.hermegauss(60)
    w60 = w60 / np.sqrt(2 * np.pi)

    def unpack(z):
        Lr = np.zeros((M, M))
        Lr[tril] = z[M:-1]
        L = np.tril(Lr, -1) + np.diag(np.exp(np.diag(Lr)))
        return z[:M], L, z[-1]

    def fun(z):
        m, L, b = unpack(z)
        mu = Psi @ m + b
        PL = Psi @ L
        v = k0 - np.sum(Psi**2, 1) + np.sum(PL**2, 1)
        if kind == "poisson":
            r = np.exp(mu + v / 2)
            E = np.sum(y * mu - r - sps.gammaln(y + 1))
            g_mu, g_v = y - r, -r / 2
        else:  # probit: E[log Φ(s f)], derivatives by Bonnet/Price with 60-point quadrature
            s = 2 * y - 1
            fq = mu[:, None] + np.sqrt(v)[:, None] * x60
            z_ = s[:, None] * fq
            R = np.exp(-0.5 * z_**2 - 0.5 * np.log(2 * np.pi) - sps.log_ndtr(z_))
            E = np.sum(sps.log_ndtr(z_) @ w60)
            g_mu = (s[:, None] * R) @ w60
            g_v = 0.5 * ((-R * (z_ + R)) @ w60)
        kl = 0.5 * (np.sum(L**2) + m @ m - M - 2 * np.sum(np.log(np.diag(L))))
        gm = Psi.T @ g_mu - m
        gL = 2 * (Psi.T * g_v) @ PL - (L - np.diag(1 / np.diag(L)))
        gL = np.tril(gL)
        gL[np.diag_indices(M)] *= np.diag(L)
        return -(E - kl), -np.concatenate([gm, gL[tril], [g_mu.sum()]])

    z0 = np.concatenate([np.zeros(M), np.zeros(len(tril[0])), [b0]])
    res = so.minimize(fun, z0, jac=True, method="BFGS", options={"gtol": 1e-9, "maxiter": 5000})
    m, L, b = unpack(res.x)
    return m, L, b, -res.fun


def laplace_weights(Psi, y, b):
    """Laplace approximation of Poisson f = Ψv + b: Newton on v, covariance (I + ΨᵀWΨ)⁻¹."""
    v = np.zeros(Psi.shape[1])
    for _ in range(50):
        r = np.exp(Psi @ v + b)
        H = np.eye(v.size) + (Psi.T * r) @ Psi
        v = v + np.linalg.solve(H, Psi.T @ (y - r) - v)
    r = np.exp(Psi @ v + b)
    return v, np.linalg.inv(np.eye(v.size) + (Psi.T * r) @ Psi)


def laplace_exact_gp(K, y, Ks, kss, b):
    """Laplace approximation of y ~ Poisson(exp(f + b)), f ~ GP(0, k), on the exact kernel:
    K (N, N) at the data, Ks (N*, N), kss (N*,) = k(x*, x*). Returns the latent mean and
    variance at the N* points."""
    f = np.zeros(y.size)
    for _ in range(100):
        W = np.exp(f + b)
        sW = np.sqrt(W)
        C = np.linalg.cholesky(np.eye(y.size) + sW[:, None] * K * sW[None, :])
        r = W * f + (y - W)
        a = r - sW * sla.cho_solve((C, True), sW * (K @ r))
        f_new = K @ a
        done = np.max(np.abs(f_new - f)) < 1e-11
        f = f_new
        if done:
            break
    W = np.exp(f + b)
    sW = np.sqrt(W)
    C = np.linalg.cholesky(np.eye(y.size) + sW[:, None] * K * sW[None, :])
    V = sla.solve_triangular(C, sW[:, None] * Ks.T, lower=True)
    return Ks @ (y - W) + b, kss - np.sum(V**2, axis=0)
