"""G = ΦΦᵀ as a matrix-free operator: one FFT correlation over the frequency-bin lattice.

The dense route (:func:`geogp.features.trig.assemble_gram`) costs O(M²) memory and its Cholesky
O(M³) per optimiser step, which stops at M ≈ 10⁴. But G is structured: with every feature a sum
of 2^D exponentials (:mod:`geogp.features.trig`),

    (G v)_m = Σ_t c_{m,t} b(t∘n_m),      b(j) = Σ_k a(k) C(k + j),
    a(k) = Σ_{m,s: s∘n_m = k} v_m c_{m,s},

where C(J) = Σ_n w_n e^{2πi J·u_n} are the quadratic-form bins read from the data once.
``a`` lives on the
(half-)integer lattice of signed frequencies, ``b`` is its cyclic cross-correlation with C, so
one matrix-vector product is a scatter of 2^D·M values, a forward and an inverse FFT of the
lattice (Q_d ≈ 4K_d points per axis, Π Q_d ≈ 5 M in 2-D with the ellipsoidal mask) and a
gather: O(M log M) time and O(M) memory (docs/matrix_free.md, Gram operator; the thesis's
block-Toeplitz remark, here for any window and any missing-data pattern).

The correlation is exact, not an approximation: every needed sum κ + ι of lattice indices has
a distinct residue modulo Q_d ≥ P_d (the bin count), so the cyclic product has no wrap-around.
Tests compare ``matvec`` with the dense assembly to 1e-10.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
import scipy.fft

from geogp.features.trig import (
    assemble_gram,
    assemble_gram_diagonal,
    bin_sizes,
    embed_bins,
    kind_factor,
)

if TYPE_CHECKING:  # annotations only: the feature set's module imports this one (statistics)
    from numpy.typing import ArrayLike

    from geogp.features.fourier import FourierFeatures

__all__ = ["GramOperator", "operator_bytes", "lowest_frequencies", "subset"]


def _offset(ff: FourierFeatures) -> float:
    """Shift that makes signed numerators s∘n integers: −½ on the odd lattice, 0 on the full."""
    return -0.5 if ff.lattice == "odd" else 0.0


def _sign_terms(ff: FourierFeatures, Q):
    """Per sign vector s ∈ {±1}^D: (c_{m,s} (M,), flat index of κ = s∘n_m − offset mod Q)."""
    ofs = _offset(ff)
    coefs, index = [], []
    for s in itertools.product((1, -1), repeat=ff.n_dims):
        coef = np.ones(ff.n_features, dtype=np.complex128)
        flat = np.zeros(ff.n_features, dtype=np.int64)
        for d in range(ff.n_dims):
            coef *= kind_factor(ff.kinds[:, d], s[d])
            kappa = np.rint(s[d] * ff.numerators[:, d] - ofs).astype(np.int64)
            flat = flat * Q[d] + np.mod(kappa, Q[d])
        coefs.append(coef)
        index.append(flat)
    return np.stack(coefs), np.stack(index)


def lowest_frequencies(ff: FourierFeatures, n: int) -> np.ndarray:
    """Indices of the ``n`` features with the smallest |z| (stable order), sorted."""
    order = np.argsort(np.linalg.norm(ff.frequencies, axis=1), kind="stable")
    return np.sort(order[:n])


def subset(ff: FourierFeatures, rows: np.ndarray) -> FourierFeatures:
    """The features ``rows`` of ``ff`` as a FourierFeatures (same window and lattice)."""
    return dataclasses.replace(ff, rows=ff.rows[rows], numerators=ff.numerators[rows],
                               kinds=ff.kinds[rows])


def _lattice_size(ff: FourierFeatures) -> tuple:
    return tuple(scipy.fft.next_fast_len(int(p)) for p in bin_sizes(ff, "quadratic"))


def operator_bytes(ff: FourierFeatures, n_rhs: int = 1) -> float:
    """Working memory of one batched product with ``n_rhs`` right-hand sides (bytes, estimate).

    The FFT of C (16 B per lattice point) plus about three complex lattice arrays per
    right-hand side (scatter, transform, gather).
    """
    lattice = float(np.prod(_lattice_size(ff)))
    return 16.0 * lattice * (1 + 3 * n_rhs) + 16.0 * ff.n_features * (2**ff.n_dims) * 2


@jax.tree_util.register_pytree_node_class
class GramOperator:
    """Matrix-free G = ΦΦᵀ (M × M, symmetric PSD) for one feature set and one data set.

    Build with :meth:`from_bins` (quadratic-form bins C of the data, see
    :func:`geogp.features.trig.grid_bins`
    and :func:`~geogp.features.trig.points_bins`). Pytree: can be passed through ``jax.jit``.

    Attributes:
        chat: (Q_1, ..., Q_D) complex FFT of the shifted bins (scaled: see :meth:`matvec`).
        coef: (2^D, M) complex c_{m,s}; index: (2^D, M) int flat lattice index of s∘n_m.
        diag: (M,) G_mm.
        low: (M₀,) indices of the M₀ lowest-frequency features, or None.
        G_low: (M₀, M₀) their dense block of G (for the two-level preconditioner of
            :mod:`geogp.models.collapsed_iterative`), or None.
    """

    def __init__(self, chat: jax.Array, coef: jax.Array, index: jax.Array, diag: jax.Array,
                 low: jax.Array | None = None, G_low: jax.Array | None = None) -> None:
        self.chat, self.coef, self.index, self.diag = chat, coef, index, diag
        self.low, self.G_low = low, G_low

    def tree_flatten(self) -> tuple[tuple, None]:
        return (self.chat, self.coef, self.index, self.diag, self.low, self.G_low), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: tuple) -> GramOperator:
        return cls(*children)

    @classmethod
    def from_bins(cls, ff: FourierFeatures, C: np.ndarray, n_dense: int = 0) -> GramOperator:
        """Operator from the quadratic-form bins C (shape ``bin_sizes(ff, 'quadratic')``, FFT
        order).

        ``n_dense`` > 0 also keeps the dense block of G over the ``n_dense`` lowest-frequency
        features (where λ, hence the ill-conditioning of A, is largest).
        Cost O(Π Q_d log Π Q_d + M 4^D + n_dense² 2^{2D}) once.
        """
        C = np.asarray(C, dtype=np.complex128)
        P = C.shape
        if P != bin_sizes(ff, "quadratic"):
            raise ValueError(f"quadratic-form bins of shape {P} do not match the features "
                             f"({bin_sizes(ff, 'quadratic')}).")
        Q = _lattice_size(ff)
        # Cq(J') = C(J' + 2·offset): bin J of C goes to J' = J − 2·offset
        Cq = embed_bins(C, Q, shift=round(-2 * _offset(ff)))
        chat = np.fft.fftn(Cq) * float(np.prod(Q))
        coef, index = _sign_terms(ff, Q)
        low = G_low = None
        if n_dense > 0:  # n_dense ≥ M: the "block" is all of G (then CG needs one step)
            low = lowest_frequencies(ff, min(int(n_dense), ff.n_features))
            G_low = jnp.asarray(assemble_gram(subset(ff, low), C))
            low = jnp.asarray(low, dtype=jnp.int32)
        return cls(jnp.asarray(chat), jnp.asarray(coef), jnp.asarray(index, dtype=jnp.int32),
                   jnp.asarray(assemble_gram_diagonal(ff, C)), low, G_low)

    @property
    def shape(self) -> tuple:
        M = int(self.diag.shape[0])
        return (M, M)

    def matvec(self, v: ArrayLike) -> jax.Array:
        """G v for v of shape (M,) or (M, B). O(B·Π Q_d log Π Q_d).

        b = Π Q_d · ifft(Ĉ ⊙ ifft(a)) is the cyclic cross-correlation Σ_κ a(κ) Cq(κ + ι).
        """
        Q = self.chat.shape
        squeeze = v.ndim == 1
        V = v[:, None] if squeeze else v
        B = V.shape[1]
        vals = (self.coef[:, :, None] * V[None, :, :]).reshape(-1, B)
        a = jnp.zeros((int(np.prod(Q)), B), dtype=jnp.complex128).at[self.index.ravel()].add(vals)
        axes = tuple(range(len(Q)))
        a = jnp.fft.ifftn(a.reshape((*Q, B)), axes=axes)
        b = jnp.fft.ifftn(a * self.chat[..., None], axes=axes).reshape(-1, B)
        out = jnp.sum(self.coef[:, :, None] * b[self.index], axis=0).real
        return out[:, 0] if squeeze else out

    def __matmul__(self, v):
        return self.matvec(v)

    def dense(self) -> np.ndarray:
        """The (M, M) matrix, column by column (tests and small M only)."""
        return np.asarray(self.matvec(jnp.eye(self.shape[0])))
