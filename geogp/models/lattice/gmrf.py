"""Operators, data and exact likelihood of the lattice SPDE/GMRF model
(:mod:`geogp.models.lattice`).

The precision Q(θ) = c (κ²I + L)^α on a fixed pattern, log|Q| in closed form from the Neumann
Laplacian's eigenvalues, and the REML log marginal likelihood by one sparse Cholesky of
B = Q + PᵀP/σ² (formulas in :mod:`geogp.models.lattice.regressor`'s docstring).

Multi-resolution model (``LatticeRegressor(large_scale=...)``): y = Φu + Xβ + Pg + ε with m
large-scale Fourier features Φ (:func:`fourier_features` of :func:`low_frequencies`) and
u ~ N(0, Λ), Λ = diag λ(ℓ_L, s_L) (:func:`spectral_weights`), β flat. With F = [Φ, X],
d = (√λ, 1) and the coefficients w = (Λ^{-1/2}u, β) (prior precision D = diag(I, 0)):

    M = [y, F]ᵀ Σ_g⁻¹ [y, F]  by the same Woodbury solve (1 + m + p right-hand sides; Σ_g as above)
    A = diag(d) M_FF diag(d) + D,   ŵ = A⁻¹ diag(d) M_Fy
    log p(y) = −½ [log|Σ_g| + M_yy − (d M_Fy)ᵀ ŵ + log|A| + (N − p) log 2π]

(= the REML density of Σ = Σ_g + ΦΛΦᵀ by the determinant lemma; θ_L enters only the small dense
part, so its gradient needs no extra sparse work). Posterior: w | y ~ N(ŵ, A⁻¹) and g | w, y has
mean B⁻¹Pᵀ(y − F diag(d) w)/σ² and covariance B⁻¹, so at cells a, b, with
r_c = diag(d)(f_c − (B⁻¹PᵀF)_c/σ²):  E f_c = (B⁻¹Pᵀy)_c/σ² + r_cᵀŵ,
Cov(f_a, f_b) = (B⁻¹)_ab + r_aᵀ A⁻¹ r_b — exact, no approximation of the cross terms.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from geogp import linalg
from geogp.exceptions import InputError
from geogp.linalg import SparsePattern
from geogp.linalg.solvers import Solver
from geogp.models.lattice.mid import band, mid_cross, mid_lattice
from geogp.models.lattice.varying import VARYING_PARAMS, VaryingBasis

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["ALPHAS", "BACKENDS", "PARAMS", "PARAMS_LARGE", "PARAMS_MID", "PARAM_RATIO",
           "laplacian_eigenvalues",
           "PARAM_SCALE", "RANGE_MAX_EXTENTS", "log_range_cap",
           "KERNELS_LARGE",
           "LatticeProblem",
           "laplacian", "make_problem", "precision", "spectral_weights", "low_frequencies",
           "fourier_features",
           "log_marginal_likelihood", "sparse_statistics", "sparse_system",
           "statistics_from_solve", "dense_likelihood", "clear_shared_lattice",
           "LARGE_SCALE_LOSSES"]

ALPHAS = (1, 2, 3)
BACKENDS = ("auto", "cholmod", "dense")
PARAMS = ("log_range", "log_sd", "log_noise")
PARAMS_LARGE = ("log_range_large", "log_sd_large")
PARAM_RATIO = "log_ratio"  # two-range operator, κ₂/κ₁ = 1 + e^t (second_range=True)
PARAM_HOLE = "hole"  # oscillating operator, cos(πθ) = 1 − u (hole_effect=True)
HOLE_MAX = 1.99  # u's upper bound: cos(πθ) ≥ −0.99, a spectral peak of finite height
PARAMS_MID = ("log_range_mid", "log_sd_mid")  # the mid-scale level (mid_scale=r)
PARAM_SCALE = "log_scale"  # stage 2: Σ_g + σ²I multiplied by e^t (see dense_likelihood)
KERNELS_LARGE = ("matern12", "matern32", "matern52", "se")
# fitted ranges and lengthscales stay below this many extents of the lattice they are fitted on:
# beyond, a field is its intrinsic limit, not identified, and the likelihood loses its digits
RANGE_MAX_EXTENTS = 10.0


def log_range_cap(shape: tuple[int, int], h: ArrayLike) -> float:
    """log of :data:`RANGE_MAX_EXTENTS` times the extent (longest side, lattice units) of a
    lattice of ``shape`` cells sized ``h``: the upper bound of every fitted log range."""
    return math.log(RANGE_MAX_EXTENTS * max(n * hh for n, hh in zip(shape, h, strict=True)))


# --------------------------------------------------------------------------- operators
def _second_difference(n: int) -> sp.csr_matrix:
    """Neumann 1-D −d²: tridiag(−1, 2, −1) with 1 in the corners (zero matrix if n = 1)."""
    if n == 1:
        return sp.csr_matrix((1, 1))
    main = np.full(n, 2.0)
    main[[0, -1]] = 1.0
    off = -np.ones(n - 1)
    return sp.diags([off, main, off], [-1, 0, 1], format="csr")


def _neumann_eigenvalues(n: int) -> np.ndarray:
    """Eigenvalues 4 sin²(πk/2n), k = 0..n−1, of :func:`_second_difference`."""
    return 4.0 * np.sin(np.pi * np.arange(n) / (2.0 * n)) ** 2


def laplacian(shape: tuple[int, int], h: tuple[float, float]) -> sp.csc_matrix:
    """L = −Δ (5-point, Neumann) on a row-major ``shape`` lattice with cell sizes ``h``."""
    ny, nx = shape
    return sp.csc_matrix(sp.kron(_second_difference(ny) / h[0] ** 2, sp.eye(nx))
                         + sp.kron(sp.eye(ny), _second_difference(nx) / h[1] ** 2))


def laplacian_eigenvalues(shape: tuple[int, int], h: tuple[float, float]) -> np.ndarray:
    """(n,) eigenvalues of :func:`laplacian` (row-major), for log|Q| in closed form."""
    return np.add.outer(_neumann_eigenvalues(shape[0]) / h[0] ** 2,
                        _neumann_eigenvalues(shape[1]) / h[1] ** 2).ravel()


def _structure(shape: tuple[int, int], alpha: int) -> sp.csc_matrix:
    """Sparsity of Q: the 9-point stencil (α = 1; the diagonal neighbours are explicit zeros,
    kept for the covariances of bilinear prediction), the 13-point one (α = 2) or the
    25-point one (α = 3)."""
    ny, nx = shape
    ty = abs(_second_difference(ny)) + sp.eye(ny) if ny > 1 else sp.eye(1)
    tx = abs(_second_difference(nx)) + sp.eye(nx) if nx > 1 else sp.eye(1)
    nine = sp.csc_matrix(sp.kron(ty, tx))
    if alpha == 1:
        return nine
    five = abs(laplacian(shape, (1.0, 1.0))) + sp.eye(ny * nx)
    power = five
    for _ in range(alpha - 1):
        power = power @ five
    return sp.csc_matrix(power + nine)


def _coefficients(params, alpha: int, area: float):
    """(κ², c, σ²) from the log parameters (ρ and s in the lattice's length unit).

    For α ≥ 2 (Matérn ν = α − 1 in 2-D) κ = √(8ν)/ρ and c = A / (4πν κ^{2ν} s²), so that s² is
    the continuum marginal variance Γ(ν) / (Γ(α) 4π κ^{2ν}) of (κ² − Δ)^{α/2} g = W / √A."""
    rho = jnp.exp(params["log_range"])
    var = jnp.exp(2.0 * params["log_sd"])
    noise = jnp.exp(2.0 * params["log_noise"])
    if alpha >= 2:
        nu = alpha - 1
        kappa2 = 8.0 * nu / rho**2
        c = area / (4.0 * math.pi * nu * kappa2**nu * var)
    else:
        kappa2 = 4.0 / rho**2
        c = area * jnp.log1p(32.0 / (area * kappa2)) / (4.0 * math.pi * var)
    return kappa2, c, noise


def spectral_weights(params: dict, freq2: jax.Array | None, dw: float, kernel: str) -> jax.Array:
    """Prior variances λ_m of the large-scale Fourier coefficients (one per cos/sin column).

    λ_m = 2 s_L² p(ω_m) Δω, with p the 2-D spectral density of the isotropic kernel (lengthscale
    ℓ_L, normalised to a probability density: Matérn ν: ν κ^{2ν} / π (κ² + |ω|²)^{−ν−1},
    κ = √(2ν)/ℓ; SE: ℓ²/2π exp(−ℓ²|ω|²/2)); the factor 2 counts ω and −ω (half-plane grid), so
    Σ_m λ_m cos(ω_m·(x − x')) is the Riemann sum of s_L² k(x − x').
    """
    ell = jnp.exp(params["log_range_large"])
    var = jnp.exp(2.0 * params["log_sd_large"])
    if kernel == "se":
        dens = ell**2 / (2.0 * math.pi) * jnp.exp(-0.5 * ell**2 * freq2)
    else:
        nu = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}[kernel]
        k2 = 2.0 * nu / ell**2
        dens = nu * k2**nu / math.pi * (k2 + freq2) ** (-nu - 1.0)
    return 2.0 * var * dens * dw


def low_frequencies(shape: tuple[int, int], h: ArrayLike, count: int,
                    window: float) -> tuple[np.ndarray, float]:
    """The ``count`` lowest nonzero angular frequencies ω = 2π(j/L_y, k/L_x) of the half-plane
    (k > 0, or k = 0 and j > 0), L = window × lattice extent; returns ((count, 2), Δω)."""
    lw = [window * n * hh for n, hh in zip(shape, h, strict=True)]
    dw = 4 * math.pi**2 / (lw[0] * lw[1])
    if count <= 0:
        return np.zeros((0, 2)), dw
    r = 3 * math.isqrt(count) + 3
    j, i = np.meshgrid(np.arange(-r, r + 1), np.arange(0, r + 1), indexing="ij")
    keep = (i > 0) | ((i == 0) & (j > 0))
    om = 2 * np.pi * np.stack([j[keep] / lw[0], i[keep] / lw[1]], axis=1)
    order = np.lexsort((om[:, 1], om[:, 0], np.sum(om**2, axis=1)))
    return om[order[:count]], dw


def fourier_features(py: np.ndarray, px: np.ndarray, freq: np.ndarray) -> np.ndarray:
    """[cos(ω·x), sin(ω·x)] (N, 2m) at positions (py, px) for frequencies ``freq`` (m, 2)."""
    ph = np.outer(py, freq[:, 0]) + np.outer(px, freq[:, 1])
    return np.concatenate([np.cos(ph), np.sin(ph)], axis=1)


# --------------------------------------------------------------------------- the problem
@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True, eq=False)
class LatticeProblem:
    """Everything the likelihood needs besides θ, for one lattice (a JAX pytree).

    Attributes:
        pattern: ``SparsePattern`` of B (lower triangle, CSC order). solve: its
            :class:`~geogp.linalg.solvers.Solver`. alpha: 1, 2 or 3. area: h_y h_x. n_obs: N.
            n_trend: p.
        e_i, e_l, e_l2: (nnz,) I, L and L² on the pattern (e_l3: L³, α = 3 only).
        e_obs: (nnz,) PᵀP on the pattern.
        eig: (n,) Laplacian eigenvalues λ_kl (for log|Q|). ptw: (n, 1 + p) Pᵀ[y, X].
        wtw: (1 + p, 1 + p) [y, X]ᵀ[y, X]. n_feat: the first n_feat columns of X are
        large-scale Fourier features (Gaussian prior, :func:`spectral_weights`; the rest have
        a flat prior), with |ω|² in freq2 (n_feat,), cell dw of the frequency grid and
        ``kernel`` their spectral density.
        e_i_mid, e_l_mid, e_l2_mid, eig_mid: the mid-scale level's I, L, L² on the pattern and
        its Laplacian eigenvalues (empty without that level; with it, B, ``e_obs`` and ``ptw``
        are over the joint unknowns (g_fine, g_mid) and the observations see g_fine + Π g_mid).
        area_mid: the coarse cell area.
        weight: (n,) each lattice cell's observation weight w (noise variance σ²/w; 0 where
            unobserved), empty for unit weights; ``e_obs``, ``ptw`` and ``wtw`` carry it.
        log_weight: Σ log w over the observed cells (a constant of log|Σ_g|).
        varying: the :class:`~geogp.models.lattice.varying.VaryingBasis` of a range and sd
            that vary over the raster (None: stationary), with its 1-D B-spline values on this
            lattice's rows and columns ``vary_y``, ``vary_x`` (tuples per level), and the
            pattern of K + L (``kl_pattern``; L on it: ``e_l_kl``) for
            log|Q| (:mod:`geogp.models.lattice.varying`).
    """

    pattern: object = field(repr=False)
    solve: object = field(repr=False)
    alpha: int
    area: float
    n_obs: int
    n_trend: int
    e_i: np.ndarray = field(repr=False)
    e_l: np.ndarray = field(repr=False)
    e_l2: np.ndarray = field(repr=False)
    e_obs: np.ndarray = field(repr=False)
    eig: np.ndarray = field(repr=False)
    ptw: np.ndarray = field(repr=False)
    wtw: np.ndarray = field(repr=False)
    freq2: np.ndarray = field(repr=False)
    n_feat: int = 0
    dw: float = 0.0
    kernel: str = "matern32"
    e_i_mid: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    e_l_mid: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    e_l2_mid: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    eig_mid: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    area_mid: float = 0.0
    e_l3: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    weight: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    log_weight: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(()))
    varying: VaryingBasis | None = None
    vary_y: tuple = field(repr=False, default=())
    vary_x: tuple = field(repr=False, default=())
    kl_pattern: object = field(repr=False, default=None)
    e_l_kl: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))

    def tree_flatten(self) -> tuple[tuple, tuple]:
        leaves = (self.e_i, self.e_l, self.e_l2, self.e_obs, self.eig, self.ptw, self.wtw,
                  self.freq2, self.e_i_mid, self.e_l_mid, self.e_l2_mid, self.eig_mid,
                  self.e_l3, self.weight, self.log_weight, self.vary_y, self.vary_x,
                  self.e_l_kl)
        return leaves, (self.pattern, self.solve, self.alpha, self.area, self.n_obs,
                        self.n_trend, self.n_feat, self.dw, self.kernel, self.area_mid,
                        self.varying, self.kl_pattern)

    @classmethod
    def tree_unflatten(cls, aux: tuple, leaves: tuple) -> LatticeProblem:
        # the fields in declaration order, interleaved as tree_flatten split them
        return cls(*aux[:6], *leaves[:8], *aux[6:9], *leaves[8:12], aux[9], *leaves[12:15],  # type: ignore[call-arg]
                   aux[10], *leaves[15:17], aux[11], *leaves[17:])

    @property
    def has_mid(self) -> bool:
        """Whether the problem has the mid-scale level."""
        return self.eig_mid.shape[0] > 0


def _load_solver(backend: str, ordering: str) -> Solver:
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {BACKENDS}; got {backend!r}.")
    if backend == "dense" or (backend == "auto" and not linalg.HAVE_CHOLMOD):
        return Solver("dense")
    if not linalg.HAVE_CHOLMOD:
        raise InputError("backend='cholmod' needs scikit-sparse (CHOLMOD), which is not "
                         "installed; install it or use backend='dense' (small lattices only).")
    return Solver("cholmod", ordering)


def make_problem(shape: tuple[int, int], h: ArrayLike, alpha: int, cells: np.ndarray,
                 y: np.ndarray, X: np.ndarray,
                 backend: str = "auto", ordering: str = "nesdis",
                 features: np.ndarray | None = None, freq2: jax.Array | None = None,
                 dw: float = 0.0, kernel: str = "matern32", mid_scale: int | None = None,
                 neighbours: bool = True, share: bool = False,
                 weights: np.ndarray | None = None,
                 varying: tuple[VaryingBasis, int, int] | None = None) -> LatticeProblem:
    """Fix the lattice, its pattern and the data for :func:`log_marginal_likelihood`.

    Args:
        shape: (n_y, n_x) lattice (margin included). h: (h_y, h_x) cell sizes.
        alpha: 1, 2 or 3. cells: (N,) distinct flat (row-major) indices of the observed cells.
        y: (N,) observations. X: (N, p) trend features (p may be 0).
        backend: ``"cholmod"``, ``"dense"`` (reference, small lattices) or ``"auto"``.
        ordering: CHOLMOD fill-reducing ordering (nested dissection suits lattices).
        features: (N, m) large-scale features Φ at the cells (None: none), with |ω|² per
            column ``freq2`` (m,), frequency-grid cell ``dw`` and spectral density ``kernel``
            (:data:`KERNELS_LARGE`); u ~ N(0, diag λ(θ_L)) (:func:`spectral_weights`).
        mid_scale: None, or the coarsening factor r ≥ 2 of a second, mid-scale α = 2 field on
            a lattice r times coarser (:func:`mid_lattice`), added to the fine one.
        neighbours: with the mid-scale level, keep the pattern entries that the posterior's
            neighbour covariances need (:func:`~geogp.models.lattice.mid.mid_cross`); False keeps
            only those of B (a sparser factor, enough for the likelihood: the fitting tiles).
        share: reuse the previous call's pattern (and with it its CHOLMOD analysis and
            factor) when the lattice is the same; for problems solved one after another
            (the posterior's tiles), never for problems used together (the fitting tiles).
        weights: (N,) positive observation weights w (None: all 1): observation i has noise
            variance σ²/w_i, so B = Q + PᵀWP/σ² and Pᵀ W [y, F] (robust fits' reweighting).
        varying: (basis, row, col): a range and sd varying over the raster by ``basis``
            (:class:`~geogp.models.lattice.varying.VaryingBasis`; α = 2 only), with the
            lattice's first cell at raster position (row, col) (e.g. −margin, −margin).

    Cost: O(nnz(Q)) here; the CHOLMOD analysis happens on the first evaluation.
    """
    if alpha not in ALPHAS:
        raise InputError(f"alpha must be one of {ALPHAS}; got {alpha!r}.")
    if kernel not in KERNELS_LARGE:
        raise InputError(f"large_scale_kernel must be one of {KERNELS_LARGE}; got {kernel!r}.")
    shape = (int(shape[0]), int(shape[1]))
    key = (shape, tuple(float(v) for v in h), int(alpha), mid_scale, bool(neighbours))
    if share and _SHARED.get("key") == key:
        parts = _SHARED["parts"]
    else:
        parts = _lattice_parts(shape, h, int(alpha), mid_scale, neighbours)
        if share:  # one entry: the posterior's tiles of one shape run one after another
            _SHARED.update(key=key, parts=parts)
    pattern, pi, n = parts["pattern"], parts["pi"], shape[0] * shape[1]
    features = np.zeros((len(cells), 0)) if features is None else np.asarray(features)
    freq2 = np.zeros(0) if freq2 is None else np.asarray(freq2, dtype=np.float64)
    w = np.ones(len(cells)) if weights is None else _check_weights(weights, len(cells))
    obs = np.zeros(n)
    obs[cells] = w
    W = np.column_stack([y, features, X])
    del features
    ptw = np.zeros((n + (0 if pi is None else pi.shape[1]), W.shape[1]))
    ptw[cells] = W if weights is None else W * w[:, None]
    if pi is None:
        e_obs = pattern.values_from_scipy(sp.diags(obs, format="csc"))
    else:  # observations see g_fine + Π g_mid: A = [P, PΠ], AᵀWA on the joint pattern
        a = sp.diags(np.sqrt(obs)) @ sp.hstack([sp.eye(n), pi], format="csr")
        e_obs = pattern.values_from_scipy(sp.csc_matrix(a.T @ a))
        ptw[n:] = pi.T @ ptw[:n]
    weighted = {} if weights is None else dict(weight=obs,
                                                log_weight=np.asarray(np.sum(np.log(w))))
    if varying is not None:
        weighted.update(_varying_parts(shape, h, int(alpha), *varying))
    return LatticeProblem(
        pattern, _load_solver(backend, ordering), int(alpha), float(h[0] * h[1]),
        len(cells), int(X.shape[1]), parts["e_i"], parts["e_l"], parts["e_l2"], e_obs,
        parts["eig"], ptw, W.T @ (W if weights is None else W * w[:, None]), freq2,
        int(W.shape[1] - 1 - X.shape[1]), float(dw), kernel, **parts["mid"],
        e_l3=parts["e_l3"], **weighted)


def _check_weights(weights, n: int) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64).ravel()
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise InputError(f"weights must be {n} finite positive numbers, one per observed cell.")
    return w


def _varying_parts(shape, h, alpha: int, basis: VaryingBasis, row: int, col: int) -> dict:
    """The problem's fields for a varying range and sd (see :class:`LatticeProblem`)."""
    if alpha != 2:
        raise InputError(f"a varying range and sd need alpha=2; got alpha={alpha}.")
    by, bx = basis.matrices(row + np.arange(shape[0]), col + np.arange(shape[1]))
    n = shape[0] * shape[1]
    lap = laplacian(shape, h)
    kl = SparsePattern.from_scipy(sp.csc_matrix(abs(lap) + sp.eye(n)))
    return dict(varying=basis, vary_y=by, vary_x=bx, kl_pattern=kl,
                e_l_kl=kl.values_from_scipy(lap))


# make_problem(share=True): the last lattice's data-free parts (pattern, operators), so that
# the posterior's tiles of one shape share the pattern and its CHOLMOD symbolic analysis
_SHARED: dict = {}


def clear_shared_lattice() -> None:
    """Forget :func:`make_problem`'s shared lattice and free the factor its pattern holds (a
    posterior's sampler may keep the pattern: it factorises again when next used)."""
    parts = _SHARED.get("parts")
    if parts is not None:
        parts["pattern"].release_factors()
    _SHARED.clear()


def _lattice_parts(shape, h, alpha: int, mid_scale, neighbours: bool) -> dict:
    """The parts of :func:`make_problem` that depend on the lattice only, not on the data:
    the pattern of B, I, L, L² on it, the Laplacian's eigenvalues, the mid-scale level's
    operators and map Π."""
    n = shape[0] * shape[1]
    lap = laplacian(shape, h)
    structure = _structure(shape, alpha)
    pi = None
    if mid_scale is not None:
        coarse, pi = mid_lattice(shape, int(mid_scale))
        nc = coarse[0] * coarse[1]
        width = 2 if neighbours else 1
        cross = mid_cross(shape, int(mid_scale), coarse) if neighbours else pi
        coarse_block = sp.kron(band(coarse[0], width), band(coarse[1], width))
        coarse_block = coarse_block + abs(_structure(coarse, 2))
        structure = sp.bmat([[structure, cross], [cross.T, coarse_block]], format="csc")

    def fine(a):  # a fine-lattice matrix as a block of the joint one
        return a if pi is None else sp.block_diag((a, sp.csc_matrix((nc, nc))), format="csc")

    def mid(a):  # a coarse-lattice matrix as a block of the joint one
        return sp.block_diag((sp.csc_matrix((n, n)), a), format="csc")

    pattern = SparsePattern.from_scipy(structure)
    lap2 = sp.csc_matrix(lap @ lap)
    e_l2 = (pattern.values_from_scipy(fine(lap2)) if alpha >= 2 else np.zeros(pattern.nnz))
    e_l3 = (pattern.values_from_scipy(fine(sp.csc_matrix(lap2 @ lap))) if alpha == 3
            else np.zeros(0))
    eig = laplacian_eigenvalues(shape, h)
    mid_parts = {}
    if pi is not None:
        r = int(mid_scale)
        hm = (r * h[0], r * h[1])
        lap_m = laplacian(coarse, hm)
        mid_parts = dict(
            e_i_mid=pattern.values_from_scipy(mid(sp.eye(nc, format="csc"))),
            e_l_mid=pattern.values_from_scipy(mid(lap_m)),
            e_l2_mid=pattern.values_from_scipy(mid(sp.csc_matrix(lap_m @ lap_m))),
            eig_mid=laplacian_eigenvalues(coarse, hm),
            area_mid=float(hm[0] * hm[1]))
    return dict(pattern=pattern, pi=pi, eig=eig, e_l2=e_l2, e_l3=e_l3, mid=mid_parts,
                e_i=pattern.values_from_scipy(fine(sp.eye(n, format="csc"))),
                e_l=pattern.values_from_scipy(fine(lap)))


def _product_coefficients(params, area: float):
    """(κ₁², κ₂², c) of the two-range operator (κ₁² + L)(κ₂² + L), κ₂ = κ₁(1 + e^t).

    c makes s² the continuum marginal variance: ∫ dω / ((κ₁² + |ω|²)(κ₂² + |ω|²)) / (2π)²
    = log(κ₂²/κ₁²) / (4π (κ₂² − κ₁²)), which tends to 1/(4πκ²) (α = 2) as κ₂ → κ₁.
    """
    rho = jnp.exp(params["log_range"])
    var = jnp.exp(2.0 * params["log_sd"])
    k1 = 8.0 / rho**2
    u = (1.0 + jnp.exp(params["log_ratio"])) ** 2 - 1.0  # κ₂²/κ₁² − 1 > 0
    k2 = k1 * (1.0 + u)
    c = area * jnp.log1p(u) / (4.0 * math.pi * k1 * u * var)
    return k1, k2, c


def _hole_factor(u):
    """h = ∫₀^∞ dt / (t² + 2(1 − u)t + 1) = θπ / sin(θπ) with cos(θπ) = 1 − u, u ∈ [0, 2):
    the oscillating operator's marginal variance relative to α = 2's (1 + u/3 + 2u²/15 near
    0, where arccos's derivative is infinite)."""
    small = u < 1e-3
    safe = jnp.where(small, 0.5, u)
    exact = jnp.arccos(1.0 - safe) / jnp.sqrt(safe * (2.0 - safe))
    return jnp.where(small, 1.0 + u / 3.0 + 2.0 * u**2 / 15.0, exact)


def _hole_coefficients(params, area: float):
    """(κ², b, c, σ²) of the oscillating operator c (κ⁴ + 2bκ² L + L²), b = cos(πθ) = 1 − u
    (Lindgren, Rue & Lindström 2011, §3.3): α = 2 at u = 0, a hole-effect (damped
    oscillating) covariance for u > 0 whose spectrum peaks at |ω|² = −bκ² once b < 0. c is
    α = 2's times :func:`_hole_factor`, so that s² stays the continuum marginal variance
    h(u) / (4πκ²c)."""
    kappa2, c, noise = _coefficients(params, 2, area)
    u = params[PARAM_HOLE]
    return kappa2, 1.0 - u, c * _hole_factor(u), noise


def precision(params: dict, problem: LatticeProblem) -> tuple[jax.Array, ...]:
    """(Q on the pattern, log|Q|, κ², σ²) at θ (standardised units).

    With ``log_ratio`` in ``params`` (α = 2 only) Q = c (κ₁² + L)(κ₂² + L) with two ranges
    (:func:`_product_coefficients`); otherwise c (κ² + L)^α.
    """
    if (VARYING_PARAMS[0] in params) != (problem.varying is not None):
        raise InputError("the parameters and the lattice problem disagree on a varying range "
                         "and sd.")
    if problem.varying is not None:
        return _varying_precision(params, problem)
    if "log_ratio" in params:
        if problem.alpha != 2:
            raise InputError("the two-range operator (second_range=True) needs alpha=2.")
        k1, k2, c = _product_coefficients(params, problem.area)
        noise = jnp.exp(2.0 * params["log_noise"])
        q = c * (k1 * k2 * problem.e_i + (k1 + k2) * problem.e_l + problem.e_l2)
        logdet_q = problem.eig.shape[0] * jnp.log(c) + jnp.sum(
            jnp.log(k1 + problem.eig) + jnp.log(k2 + problem.eig))
        q, logdet_q = _add_mid(params, problem, q, logdet_q)
        return q, logdet_q, k1, noise
    if PARAM_HOLE in params:
        if problem.alpha != 2:
            raise InputError("the oscillating operator (hole_effect=True) needs alpha=2.")
        kappa2, b, c, noise = _hole_coefficients(params, problem.area)
        q = c * (kappa2**2 * problem.e_i + 2.0 * b * kappa2 * problem.e_l + problem.e_l2)
        logdet_q = problem.eig.shape[0] * jnp.log(c) + jnp.sum(
            jnp.log(kappa2**2 + 2.0 * b * kappa2 * problem.eig + problem.eig**2))
        q, logdet_q = _add_mid(params, problem, q, logdet_q)
        return q, logdet_q, kappa2, noise
    kappa2, c, noise = _coefficients(params, problem.alpha, problem.area)
    if problem.alpha == 3:
        q = c * (kappa2**3 * problem.e_i + 3.0 * kappa2**2 * problem.e_l
                 + 3.0 * kappa2 * problem.e_l2 + problem.e_l3)
    elif problem.alpha == 2:
        q = c * (kappa2**2 * problem.e_i + 2.0 * kappa2 * problem.e_l + problem.e_l2)
    else:
        q = c * (kappa2 * problem.e_i + problem.e_l)
    logdet_q = problem.eig.shape[0] * jnp.log(c) + problem.alpha * jnp.sum(
        jnp.log(kappa2 + problem.eig))
    q, logdet_q = _add_mid(params, problem, q, logdet_q)
    return q, logdet_q, kappa2, noise


def _varying_precision(params: dict, problem: LatticeProblem) -> tuple[jax.Array, ...]:
    """:func:`precision` with Q = D (K + L)² D, K = diag κ²(s), D = diag √c(s)
    (:mod:`geogp.models.lattice.varying`); log|Q| = Σ log c + 2 log|K + L| by one sparse
    Cholesky of K + L. The returned κ² is the mean over the cells."""
    if problem.alpha != 2 or "log_ratio" in params:
        raise InputError("a varying range and sd need alpha=2 without a second range.")
    basis = problem.varying
    log_rho = params["log_range"] + basis.field(params[VARYING_PARAMS[0]], problem.vary_y,
                                                problem.vary_x)
    log_sd = params["log_sd"] + basis.field(params[VARYING_PARAMS[1]], problem.vary_y,
                                            problem.vary_x)
    kappa2 = 8.0 * jnp.exp(-2.0 * log_rho)
    log_c = math.log(problem.area / (4.0 * math.pi)) - jnp.log(kappa2) - 2.0 * log_sd
    pad = problem.pattern.n - kappa2.shape[0]  # the mid-scale level's unknowns, if any
    k2 = jnp.concatenate([kappa2, jnp.zeros(pad)])
    d = jnp.concatenate([jnp.exp(0.5 * log_c), jnp.zeros(pad)])
    r, c = problem.pattern.rows, problem.pattern.cols
    q = d[r] * d[c] * (k2[r] ** 2 * problem.e_i + (k2[r] + k2[c]) * problem.e_l
                       + problem.e_l2)
    logdet_kl, _ = problem.solve(problem.kl_pattern,
                                 _diagonal_values(problem, kappa2) + problem.e_l_kl,
                                 jnp.zeros((kappa2.shape[0], 1)))
    logdet_q = jnp.sum(log_c) + 2.0 * logdet_kl
    noise = jnp.exp(2.0 * params["log_noise"])
    q, logdet_q = _add_mid(params, problem, q, logdet_q)
    return q, logdet_q, jnp.mean(kappa2), noise


def _diagonal_values(problem: LatticeProblem, diag: jax.Array) -> jax.Array:
    """A diagonal matrix diag(``diag``) as values on ``kl_pattern``."""
    return jnp.zeros(problem.kl_pattern.nnz).at[problem.kl_pattern.diag_index].set(diag)


def _add_mid(params, problem: LatticeProblem, q, logdet_q):
    """Add the mid-scale level's block c_m (κ_m² + L_m)² (Matérn ν = 1, its own range and sd)."""
    has = "log_range_mid" in params
    if has != problem.has_mid:
        raise InputError("the parameters and the lattice problem disagree on the mid-scale "
                         f"level (parameters: {'with' if has else 'without'} it).")
    if not has:
        return q, logdet_q
    k2, c, _ = _coefficients({"log_range": params["log_range_mid"],
                              "log_sd": params["log_sd_mid"], "log_noise": 0.0},
                             2, problem.area_mid)
    q = q + c * (k2**2 * problem.e_i_mid + 2.0 * k2 * problem.e_l_mid + problem.e_l2_mid)
    logdet_q = logdet_q + problem.eig_mid.shape[0] * jnp.log(c) + 2.0 * jnp.sum(
        jnp.log(k2 + problem.eig_mid))
    return q, logdet_q


def sparse_statistics(params: dict, problem: LatticeProblem) -> tuple[jax.Array, ...]:
    """The sparse half of the likelihood at the local θ (range, sd, noise).

    Returns (log|Σ_g|, M, S, B values) with Σ_g = PQ⁻¹Pᵀ + σ²I, M = [y, F]ᵀ Σ_g⁻¹ [y, F] and
    S = B⁻¹Pᵀ[y, F]/σ² (n, 1 + m + p). Cost: one sparse Cholesky of B and 1 + m + p solves.
    """
    b_vals, rhs, logdet_q, noise = sparse_system(params, problem)
    logdet_b, s = problem.solve(problem.pattern, b_vals, rhs)
    return (*statistics_from_solve(problem, logdet_b, s, rhs, logdet_q, noise), s, b_vals)


def sparse_system(params: dict, problem: LatticeProblem) -> tuple[jax.Array, ...]:
    """(B values, right-hand sides Pᵀ[y, F]/σ², log|Q|, σ²) at θ: what B's solve needs."""
    q, logdet_q, _, noise = precision(params, problem)
    return q + problem.e_obs / noise, problem.ptw / noise, logdet_q, noise


def statistics_from_solve(problem: LatticeProblem, logdet_b: jax.Array, s: jax.Array,
                          rhs: jax.Array, logdet_q: jax.Array,
                          noise: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(log|Σ_g|, M) from B's (log|B|, S = B⁻¹ rhs) (:func:`sparse_statistics`)."""
    m = problem.wtw / noise - rhs.T @ s
    return logdet_b - logdet_q + problem.n_obs * jnp.log(noise) - problem.log_weight, m


def dense_likelihood(params: dict, m: jax.Array, logdet_sigma: jax.Array, n_obs: int,
                     freq2: jax.Array | None, dw: float, kernel: str) -> tuple[jax.Array, ...]:
    """The small dense half: β (flat prior) and the large-scale u integrated out of M.

    ``m`` is the (1 + k + p)² matrix of :func:`sparse_statistics` with k = len(freq2) large-scale
    columns first. Only the large-scale parameters enter here besides M, so fitting them at a
    fixed local θ costs no sparse work. Returns (log p(y), ŵ, A, d).

    With ``params["log_scale"]`` = t, the local part Σ_g = PQ⁻¹Pᵀ + σ²I is multiplied by
    c = e^t (marginal and noise variance alike): M becomes M/c and log|Σ_g| gains N log c, so
    this overall scale is also learnt without sparse work.
    """
    if PARAM_SCALE in params:
        m = m * jnp.exp(-params[PARAM_SCALE])
        logdet_sigma = logdet_sigma + n_obs * params[PARAM_SCALE]
    k = freq2.shape[0]
    p = m.shape[0] - 1 - k
    d = jnp.ones(p)
    if k:
        d = jnp.concatenate([jnp.sqrt(spectral_weights(params, freq2, dw, kernel)), d])
    a = d[:, None] * m[1:, 1:] * d[None, :] + jnp.diag(jnp.concatenate([jnp.ones(k),
                                                                         jnp.zeros(p)]))
    b = d * m[1:, 0]
    quad = m[0, 0]
    logdet_a = 0.0
    w = jnp.zeros(p + k)
    if p + k:
        chol = jnp.linalg.cholesky(a)
        w = jax.scipy.linalg.cho_solve((chol, True), b)
        quad = quad - b @ w
        logdet_a = 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))
    ll = -0.5 * (logdet_sigma + quad + logdet_a + (n_obs - p) * math.log(2.0 * math.pi))
    return ll, w, a, d


@jax.jit
def _evaluate(params, problem: LatticeProblem):
    logdet_sigma, m, s, b_vals = sparse_statistics(params, problem)
    ll, w, a, d = dense_likelihood(params, m, logdet_sigma, problem.n_obs, problem.freq2,
                                   problem.dw, problem.kernel)
    return ll, s, w, a, b_vals, d


def log_marginal_likelihood(params: dict, problem: LatticeProblem) -> jax.Array:
    """Exact REML log marginal likelihood log p(y | θ) with β integrated (flat prior).

    Differentiable in ``params`` (dict of ``log_range``, ``log_sd``, ``log_noise``, in the
    lattice's units and standardised y; plus ``log_range_large``, ``log_sd_large`` when the
    problem has large-scale features: then Σ = PQ⁻¹Pᵀ + ΦΛΦᵀ + σ²I, u integrated exactly). Cost: one
    sparse Cholesky of B; the gradient adds a solve and a selected inversion.
    """
    return _evaluate(params, problem)[0]


def _large_scale_loss(params, m, logdet_sigma, n_obs, freq2, dw, kernel):
    """−log p(y)/N as a function of the large-scale parameters, M and log|Σ_g| held fixed."""
    return -dense_likelihood(params, m, logdet_sigma, n_obs, freq2, dw, kernel)[0] / n_obs


# one function object per kernel, so that the optimiser's compiled cache is reused
LARGE_SCALE_LOSSES = {k: functools.partial(_large_scale_loss, kernel=k) for k in KERNELS_LARGE}
