"""Numerical Fourier and Hankel transforms under the convention of docs/model.md.

S(ξ) = ∫ k(r) e^{−i2π ξ·r} dr and k(r) = ∫ S(ξ) e^{+i2π ξ·r} dξ. For even functions the 1-D
transform is a cosine transform and the isotropic 2-D transform a Hankel transform of order 0,
in both directions with the same formula:

    1-D:  F(t) = 2 ∫₀^∞ f(s) cos(2π t s) ds
    2-D:  F(t) = 2π ∫₀^∞ f(s) J₀(2π t s) s ds

These references use scipy's adaptive quadrature (QUADPACK; QAWF for the cosine-weighted
Fourier integral on [0, ∞)) and vectorised Gauss–Legendre panels between the zeros of J₀, with
Euler averaging of the alternating panel sums for slowly decaying integrands (the Matérn tails).
"""

from __future__ import annotations

import numpy as np
import scipy.integrate
import scipy.special

_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(24)


def cosine_transform_1d(f, t: float, upper: float = np.inf) -> float:
    """2∫₀^upper f(s) cos(2π t s) ds by adaptive quadrature with the cosine-weighted rule.

    ``upper = inf`` uses QUADPACK's QAWF (Fourier integrals of algebraically decaying f, the
    Matérn spectral tails); pass a finite ``upper`` beyond which f is negligible for
    exponentially or faster decaying f (QAWO), where QAWF's cycle extrapolation breaks down.
    """
    kw = {"epsabs": 1e-14, "limit": 500}
    if t == 0:
        val, _ = scipy.integrate.quad(f, 0, upper, epsrel=1e-11, **kw)
    elif np.isinf(upper):
        # QAWF: epsabs is shared out over the cycles; a tighter request only raises warnings
        val, _ = scipy.integrate.quad(f, 0, upper, weight="cos", wvar=2 * np.pi * t, limlst=200,
                                      epsabs=1e-12, limit=500)
    else:
        val, _ = scipy.integrate.quad(f, 0, upper, weight="cos", wvar=2 * np.pi * t,
                                      epsrel=1e-11, **kw)
    return 2.0 * val


def integral_2d_radial(f) -> float:
    """2π∫₀^∞ f(s) s ds: the integral over R² of an isotropic function (adaptive quadrature)."""
    val, _ = scipy.integrate.quad(lambda s: f(s) * s, 0, np.inf, epsabs=1e-15, epsrel=1e-13,
                                  limit=500)
    return 2 * np.pi * val


def _euler_average(partial_sums: np.ndarray, rounds: int) -> float:
    """Repeated pairwise averaging of the last partial sums of an alternating series."""
    s = np.asarray(partial_sums, dtype=np.float64)
    for _ in range(rounds):
        s = 0.5 * (s[1:] + s[:-1])
    return float(s[-1])


def hankel_2d(f, t: float, *, n_panels: int = 400, split: int = 4,
              scale: float | None = None) -> float:
    """2π∫₀^∞ f(s) J₀(2π t s) s ds for t > 0.

    The half-line is cut at the zeros of J₀(2π t s); each interval is split into ``split``
    sub-panels (more where ``scale``, the width of f's structure, is small against the zero
    spacing) and integrated with 24-point Gauss–Legendre, all at once in numpy. The panel
    contributions alternate in sign; their partial sums are Euler-averaged, which removes the
    tail beyond the last panel to high order for algebraically decaying f.
    """
    zeros = scipy.special.jn_zeros(0, n_panels) / (2 * np.pi * t)
    edges = np.concatenate([[0.0], zeros])
    if scale is not None:  # resolve f on its own scale inside the first, wide panels
        per = np.maximum(split, np.ceil(np.diff(edges) / scale * 4).astype(int))
    else:
        per = np.full(n_panels, split)
    # sub-panel edges, and the panel each sub-panel belongs to
    sub_edges = [np.linspace(edges[i], edges[i + 1], per[i] + 1) for i in range(n_panels)]
    a = np.concatenate([e[:-1] for e in sub_edges])
    b = np.concatenate([e[1:] for e in sub_edges])
    owner = np.repeat(np.arange(n_panels), per)
    half = 0.5 * (b - a)
    s = (0.5 * (a + b))[:, None] + half[:, None] * _GL_NODES[None, :]
    vals = f(s) * scipy.special.j0(2 * np.pi * t * s) * s
    sub = half * (vals @ _GL_WEIGHTS)
    panels = np.bincount(owner, weights=sub, minlength=n_panels)
    return 2 * np.pi * _euler_average(np.cumsum(panels)[-40:], rounds=30)


def riemann_2d_cos(kgrid: np.ndarray, grid: np.ndarray, h: float, xi) -> float:
    """h² Σ_{r on grid²} k(r) cos(2π ξ·r) for a kernel k that is even in each coordinate.

    ``kgrid[i, j] = k(grid[i], grid[j])``. Evenness in r₁ kills the sin·sin part of
    cos(2π(ξ₁r₁ + ξ₂r₂)), leaving h² c₁ᵀ K c₂ with c_d = cos(2π ξ_d grid).
    """
    c1 = np.cos(2 * np.pi * xi[0] * grid)
    c2 = np.cos(2 * np.pi * xi[1] * grid)
    return float(h * h * (c1 @ kgrid @ c2))
