"""Fourier-domain algebra of AFS features: statistics and predictions without an N×M matrix.

Every real AFS feature is a sum of 2^D complex exponentials (docs/afs.md (features and mask), eqs
3.83–3.87):

    φ_m(x) = Σ_{s∈{±1}^D} c_{m,s} exp(2πi Σ_d s_d n_{m,d} u_d),     u_d = (x_d − c_d)/T_d,

with n = z·T the frequency numerator (half-integer on the odd lattice, integer on the full one)
and c_{m,s} = ∏_d a(kind_{m,d}, s_d), a(cos, ±) = 1/√2, a(sin, ±) = ∓i/√2, a(const, ±) = ½.
Products φ_m φ_{m'} are therefore exponentials at the *integer* bins J = s∘n_m + s'∘n_{m'}, and
φ_m alone at the bins j = s∘n_m − h/2 times exp(iπ h·u) (h = 1 on the odd lattice, else 0).
Consequently

- ``G = ΦΦᵀ`` is assembled from C(J) = Σ_n w_n e^{2πi J·u_n} (:func:`assemble_gram`),
- ``r = Φy`` from L(j) = Σ_n y_n e^{iπ h·u_n} e^{2πi j·u_n} (:func:`assemble_linear`),

and conversely any quadratic form Σ Q_{mm'} φ_m(x)φ_{m'}(x) (a predictive variance) or linear
form Σ w_m φ_m(x) (a predictive mean) is a short trigonometric polynomial whose coefficients are
scattered from Q or w (:func:`quadratic_form_coefficients`, :func:`linear_coefficients`) and
evaluated at
many points at once (:func:`evaluate_grid`, :func:`evaluate_points`).

The transforms between weights on the data and the bins are separable DFT products on regular
grids (cost O(N·P) with P ≈ 4K bins per axis, any grid spacing, any window) and type-1/type-2
non-uniform FFTs (finufft) at scattered points (≈ O(N + P^D log P)). Bin arrays are indexed
by J mod P_d, the FFT ordering.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np
import scipy.fft

if TYPE_CHECKING:  # annotations only: the feature set's module imports this one
    from geogp.features.fourier import FourierFeatures

__all__ = [
    "COS",
    "SIN",
    "CONST",
    "bin_sizes",
    "kind_factor",
    "half_bin_shift",
    "assemble_gram",
    "assemble_linear",
    "quadratic_form_coefficients",
    "linear_coefficients",
    "assemble_gram_diagonal",
    "diagonal_quadratic_form_coefficients",
    "embed_bins",
    "product_coefficients",
    "grid_bins",
    "points_bins",
    "evaluate_grid",
    "evaluate_points",
]

# kind codes of a feature's factor per dimension: a(cos, ±), a(sin, ±), a(const, ±) above
COS, SIN, CONST = 0, 1, 2
_NUFFT_EPS = 1e-14


def half_bin_shift(ff: FourierFeatures) -> np.ndarray:
    """h_d/2: the half-bin offset of the linear bins (½ on the odd lattice, 0 on the full)."""
    return np.full(ff.n_dims, 0.5 if ff.lattice == "odd" else 0.0)


def bin_sizes(ff: FourierFeatures, kind: str) -> tuple:
    """Bin-array shape (P_d per dimension) for ``kind`` = 'quadratic' (G, variances) or 'linear'."""
    nmax = ff.numerators.max(axis=0)
    if kind == "quadratic":
        return tuple(int(2 * round(2 * n) + 1) for n in nmax)  # |J| ≤ 2 n_max
    return tuple(int(2 * np.ceil(n) + 1) for n in nmax)  # |j| ≤ n_max + ½


def kind_factor(kind: np.ndarray, s: int) -> np.ndarray:
    """a(kind, s) for an array of kinds (see module docstring)."""
    out = np.full(kind.shape, 0.5, dtype=np.complex128)
    out[kind == COS] = 1 / np.sqrt(2)
    out[kind == SIN] = -1j * s / np.sqrt(2)
    return out


def _half_sign_combos(D: int):
    """(s, s') pairs with s_0 = +1: one of each conjugate pair (s, s') ↔ (−s, −s')."""
    signs = list(itertools.product((1, -1), repeat=D))
    return [(s, t) for s in signs if s[0] == 1 for t in signs]


def _flat_index(J_list, P) -> np.ndarray:
    flat = np.zeros(np.shape(J_list[0]), dtype=np.int64)
    for J, p in zip(J_list, P, strict=True):
        flat = flat * p + np.mod(J, p)
    return flat


def _quadratic_terms(ff: FourierFeatures, P):
    """Yield (c_{m,s} c_{m',s'} (M, M), flat bin index of s∘n_m + s'∘n_{m'} (M, M)) for the
    conjugate-pair representatives (s, s'); the other half of the sum is the complex conjugate.
    """
    n = np.rint(2 * ff.numerators).astype(np.int64)  # 2n: integers, J = (s·2n + s'·2n')/2
    M = ff.n_features
    for s, t in _half_sign_combos(ff.n_dims):
        coef = np.ones((M, M), dtype=np.complex128)
        J = []
        for d in range(ff.n_dims):
            coef *= (kind_factor(ff.kinds[:, d], s[d])[:, None]
                     * kind_factor(ff.kinds[:, d], t[d])[None, :])
            J.append((s[d] * n[:, d][:, None] + t[d] * n[:, d][None, :]) // 2)
        yield coef, _flat_index(J, P)


def _linear_terms(ff: FourierFeatures, P):
    """Yield (c_{m,s} (M,), flat bin index of s∘n_m − h/2 (M,)) for s with s_0 = +1."""
    h = half_bin_shift(ff)
    for s in itertools.product((1, -1), repeat=ff.n_dims):
        if s[0] != 1:
            continue
        coef = np.ones(ff.n_features, dtype=np.complex128)
        J = []
        for d in range(ff.n_dims):
            coef *= kind_factor(ff.kinds[:, d], s[d])
            J.append(np.rint(s[d] * ff.numerators[:, d] - h[d]).astype(np.int64))
        yield coef, _flat_index(J, P)


def _scatter(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Σ of complex ``values`` into ``size`` bins at ``index``."""
    index, values = index.ravel(), values.ravel()
    return (np.bincount(index, weights=values.real, minlength=size)
            + 1j * np.bincount(index, weights=values.imag, minlength=size))


def assemble_gram(ff: FourierFeatures, C: np.ndarray) -> np.ndarray:
    """G_{mm'} = Σ_n w_n φ_m(x_n) φ_{m'}(x_n) from the quadratic-form bins C (shape
    :func:`bin_sizes` 'quadratic').

    Cost O(M² 2^{2D−1}) time, O(M²) memory. Returns a symmetric (M, M) float64 array.
    """
    Cf = C.ravel()
    G = np.zeros((ff.n_features,) * 2)
    for coef, idx in _quadratic_terms(ff, C.shape):
        G += 2 * np.real(coef * Cf[idx])
    return 0.5 * (G + G.T)


def assemble_linear(ff: FourierFeatures, L: np.ndarray) -> np.ndarray:
    """r_m = Σ_n y_n φ_m(x_n) from the linear bins L (shape :func:`bin_sizes` 'linear').

    Cost O(M 2^D)."""
    Lf = L.ravel()
    r = np.zeros(ff.n_features)
    for coef, idx in _linear_terms(ff, L.shape):
        r += 2 * np.real(coef * Lf[idx])
    return r


def quadratic_form_coefficients(ff: FourierFeatures, Q: np.ndarray) -> np.ndarray:
    """Bins A with Σ_{mm'} Q_{mm'} φ_m(x)φ_{m'}(x) = Re Σ_J A(J) e^{2πi J·u(x)}; adjoint of
    assemble_gram.

    Args:
        Q: (M, M) real matrix (symmetric in practice). Cost O(M² 2^{2D−1}).
    """
    P = bin_sizes(ff, "quadratic")
    size = int(np.prod(P))
    A = np.zeros(size, dtype=np.complex128)
    for coef, idx in _quadratic_terms(ff, P):
        A += 2 * _scatter(idx, coef * Q, size)
    return A.reshape(P)


def _diagonal_quadratic_terms(ff: FourierFeatures, P):
    """The diagonal m = m' of :func:`_quadratic_terms` in O(M 2^{2D−1}): (c_{m,s} c_{m,t} (M,),
    flat bin index of s∘n_m + t∘n_m (M,)) for the conjugate-pair representatives (s, t)."""
    n2 = np.rint(2 * ff.numerators).astype(np.int64)
    for s, t in _half_sign_combos(ff.n_dims):
        coef = np.ones(ff.n_features, dtype=np.complex128)
        J = []
        for d in range(ff.n_dims):
            coef *= kind_factor(ff.kinds[:, d], s[d]) * kind_factor(ff.kinds[:, d], t[d])
            J.append((s[d] * n2[:, d] + t[d] * n2[:, d]) // 2)
        yield coef, _flat_index(J, P)


def assemble_gram_diagonal(ff: FourierFeatures, C: np.ndarray) -> np.ndarray:
    """G_mm = Σ_n w_n φ_m(x_n)² from the quadratic-form bins C in O(M 2^{2D−1}) (no M×M array)."""
    Cf = C.ravel()
    out = np.zeros(ff.n_features)
    for coef, idx in _diagonal_quadratic_terms(ff, C.shape):
        out += 2 * np.real(coef * Cf[idx])
    return out


def diagonal_quadratic_form_coefficients(ff: FourierFeatures, q: np.ndarray) -> np.ndarray:
    """:func:`quadratic_form_coefficients` of diag(q) in O(M 2^{2D−1}): bins of Σ_m q_m φ_m(x)²; the
    adjoint of :func:`assemble_gram_diagonal`."""
    P = bin_sizes(ff, "quadratic")
    size = int(np.prod(P))
    q = np.asarray(q, dtype=np.float64)
    A = np.zeros(size, dtype=np.complex128)
    for coef, idx in _diagonal_quadratic_terms(ff, P):
        A += 2 * _scatter(idx, coef * q, size)
    return A.reshape(P)


def embed_bins(B: np.ndarray, shape: tuple, shift: int = 0) -> np.ndarray:
    """FFT-ordered bins B (integer bin J at index J mod P_d) placed at bins J + shift of a
    cyclic array of ``shape`` (Q_d ≥ P_d), also FFT-ordered."""
    out = np.zeros(shape, dtype=np.complex128)
    out[np.ix_(*[np.mod(_bin_values(p) + shift, q)
                 for p, q in zip(B.shape, shape, strict=True)])] = B
    return out


def linear_coefficients(ff: FourierFeatures, w: np.ndarray) -> np.ndarray:
    """Bins B with Σ_m w_m φ_m(x) = Re[e^{iπ h·u} Σ_j B(j) e^{2πi j·u}]; adjoint of
    assemble_linear."""
    P = bin_sizes(ff, "linear")
    size = int(np.prod(P))
    B = np.zeros(size, dtype=np.complex128)
    w = np.asarray(w, dtype=np.float64)
    for coef, idx in _linear_terms(ff, P):
        B += 2 * _scatter(idx, coef * w, size)
    return B.reshape(P)


def product_coefficients(ff: FourierFeatures, B1: np.ndarray, B2: np.ndarray) -> np.ndarray:
    """Quadratic-form bins A of the product of two linear forms: evaluate(A, 'quadratic') =
    f₁·f₂ pointwise.

    With f_k(x) = Re[e^{iπh·u} Σ_j B_k(j) e^{2πij·u}] (:func:`linear_coefficients`) and
    Re a · Re b = ½ Re(ab) + ½ Re(a b̄):  A(J) = ½ (B₁ ∗ B₂)(J − h) + ½ (B₁ ⋆ B₂)(J), a
    convolution and a cross-correlation computed by FFT. B1, B2: (..., P_1, ..., P_D) linear
    bins, leading batch axes are summed over (e.g. posterior samples). Cost O(S Π L_d log L_d),
    L_d ≈ 2P_d, instead of evaluating each form on every output point.
    """
    D = ff.n_dims
    Pl = bin_sizes(ff, "linear")
    Pq = bin_sizes(ff, "quadratic")
    B1 = np.asarray(B1, dtype=np.complex128).reshape((-1, *Pl))
    B2 = np.asarray(B2, dtype=np.complex128).reshape((-1, *Pl))
    L = tuple(scipy.fft.next_fast_len(2 * p + 2) for p in Pl)
    axes = tuple(range(1, D + 1))

    def embed(B, flip=False):
        out = np.zeros((B.shape[0], *L), dtype=np.complex128)
        idx = []
        for d in range(D):
            j = _bin_values(Pl[d])
            idx.append(np.mod(-j if flip else j, L[d]))
        out[(slice(None), *np.ix_(*idx))] = np.conj(B) if flip else B
        return scipy.fft.fftn(out, axes=axes)

    F1 = embed(B1)
    conv = scipy.fft.ifftn(F1 * embed(B2), axes=axes).sum(axis=0)
    corr = scipy.fft.ifftn(F1 * embed(B2, flip=True), axes=axes).sum(axis=0)
    h = np.rint(2 * half_bin_shift(ff)).astype(int)
    gather_conv, gather_corr = [], []
    for d in range(D):
        J = _bin_values(Pq[d])
        gather_conv.append(np.mod(J - h[d], L[d]))
        gather_corr.append(np.mod(J, L[d]))
    return 0.5 * (conv[np.ix_(*gather_conv)] + corr[np.ix_(*gather_corr)])


# ---------------------------------------------------------------------- transforms
def _bin_values(p: int) -> np.ndarray:
    """Integer bin J stored at each index 0..p−1 of an FFT-ordered axis."""
    idx = np.arange(p)
    return np.where(idx <= p // 2, idx, idx - p)


def _axis_matrix(ff: FourierFeatures, d: int, coords: np.ndarray, p: int, kind: str) -> np.ndarray:
    """E_d (N_d, p): e^{2πi J u} (times e^{iπ h u} for 'linear') at the axis coordinates."""
    u = (np.asarray(coords, dtype=np.float64) - ff.center[d]) / ff.period[d]
    E = np.exp(2j * np.pi * u[:, None] * _bin_values(p)[None, :])
    if kind == "linear":
        E *= np.exp(1j * np.pi * 2 * half_bin_shift(ff)[d] * u)[:, None]
    return E


def grid_bins(ff: FourierFeatures, axes: list, weights: np.ndarray, kind: str) -> np.ndarray:
    """Bins Σ_n w_n e^{2πi J·u_n} (× e^{iπh·u_n} for 'linear') over a regular tensor grid.

    Args:
        axes: D coordinate vectors (N_d,) of the grid axes (any spacing).
        weights: (N_1, ..., N_D) weights (0 at missing cells: the mask, or mask·y).
        kind: 'quadratic' (for G) or 'linear' (for r).

    Cost: O(N Σ_d P_d) complex multiply-adds as D dense products; memory O(N + Π P_d).
    """
    P = bin_sizes(ff, kind)
    out = np.asarray(weights, dtype=np.complex128)
    for d in range(ff.n_dims):
        E = _axis_matrix(ff, d, axes[d], P[d], kind)
        out = np.tensordot(out, E, axes=([0], [0]))  # contracted axis moves to the end
    return out


def evaluate_grid(ff: FourierFeatures, axes: list, coef: np.ndarray, kind: str) -> np.ndarray:
    """Re Σ_J coef(J) e^{2πi J·u} (× e^{iπh·u} for 'linear') on the tensor grid ``axes``.

    Returns (N_1, ..., N_D) float64. Cost O(Π P_d N_1 + ... + N P_D): separable products.
    """
    out = np.asarray(coef, dtype=np.complex128)
    for d in range(ff.n_dims):
        E = _axis_matrix(ff, d, axes[d], coef.shape[d], kind)
        out = np.tensordot(out, E, axes=([0], [1]))  # (..., N_d) appended at the end
    return out.real


def _finufft(ff: FourierFeatures, X: np.ndarray):
    # lazy: the compiled NUFFT library loads only when points need it
    import finufft  # noqa: PLC0415

    u = (X - ff.center) / ff.period  # in [−½, ½] inside the window
    return finufft, [2 * np.pi * u[:, d] for d in range(ff.n_dims)], u


def points_bins(ff: FourierFeatures, X: np.ndarray, weights: np.ndarray, kind: str,
                method: str = "nufft") -> np.ndarray:
    """Bins Σ_n w_n e^{2πi J·u_n} (× e^{iπh·u_n} for 'linear') at scattered points X (N, D).

    ``method='nufft'`` uses a type-1 NUFFT (finufft, eps 1e-14): O(N + Π P_d log P_d).
    ``method='direct'`` sums exponentials in chunks: O(N Π P_d), the reference.
    """
    P = bin_sizes(ff, kind)
    w = np.asarray(weights, dtype=np.complex128)
    if kind == "linear":
        u = (X - ff.center) / ff.period
        w = w * np.exp(1j * np.pi * 2 * (u @ half_bin_shift(ff)))
    if method == "direct":
        out = np.zeros(P, dtype=np.complex128)
        for start in range(0, X.shape[0], 4096):
            sl = slice(start, start + 4096)
            prod = w[sl]
            u = (X[sl] - ff.center) / ff.period
            Es = [np.exp(2j * np.pi * u[:, d:d + 1] * _bin_values(P[d])[None, :])
                  for d in range(ff.n_dims)]
            sub = "".join("abc"[d] for d in range(ff.n_dims))
            expr = "n," + ",".join("n" + c for c in sub) + "->" + sub
            out += np.einsum(expr, prod, *Es)
        return out
    finufft, t, _ = _finufft(ff, X)
    fn = {1: finufft.nufft1d1, 2: finufft.nufft2d1, 3: finufft.nufft3d1}[ff.n_dims]
    # isign=+1: Σ_n c_n e^{+i k t_n}; modeord=1: FFT ordering, i.e. index = J mod P
    return fn(*t, w, P, eps=_NUFFT_EPS, isign=1, modeord=1)


def evaluate_points(ff: FourierFeatures, X: np.ndarray, coef: np.ndarray, kind: str) -> np.ndarray:
    """Re Σ_J coef(J) e^{2πi J·u} (× e^{iπh·u} for 'linear') at scattered points X (N, D).

    Type-2 NUFFT (finufft): O(N + Π P_d log P_d).
    """
    finufft, t, u = _finufft(ff, X)
    fn = {1: finufft.nufft1d2, 2: finufft.nufft2d2, 3: finufft.nufft3d2}[ff.n_dims]
    vals = fn(*t, np.ascontiguousarray(coef, dtype=np.complex128), eps=_NUFFT_EPS, isign=1,
              modeord=1)
    if kind == "linear":
        vals = vals * np.exp(1j * np.pi * 2 * (u @ half_bin_shift(ff)))
    return vals.real
