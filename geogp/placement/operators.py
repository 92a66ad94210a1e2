"""Candidate feature operators and the placement problem (docs/placement.md).

The greedy loop never needs the |V_c| × M matrix Ψ_c itself, only products with it: Ψ_c W,
diag(Ψ_c B Ψ_cᵀ), ‖ψ_c‖², Ψ_cᵀΨ_c and the weighted Gram matrix Ψ_cᵀ diag(ω) Ψ_c. The same
operators serve the target locations T (often the candidates themselves, then one object).
:class:`_DenseOps` keeps Ψ_c for small problems;
:class:`_GridOps` (separable products of 1-D features on grids) and :class:`_PointOps`
(planned type-2 NUFFT at scattered points) evaluate them without it. :class:`Problem` gathers
what the loop needs, built by :func:`afs_problem` for AFS models and :func:`exact_problem`
for the exact GP (explicit features of its posterior covariance on V_c ∪ T).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg as sla

from geogp.exceptions import InputError
from geogp.features import trig
from geogp.features.data import Grid, Points
from geogp.features.fourier import lattice_rows
from geogp.placement.candidates import Candidates
from geogp.placement.posterior import FeaturePosterior, afs_psi

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

DENSE_LIMIT = 2**23  # |V_c|·M below this: candidate features kept as one dense matrix (64 MB)
_BLOCK = 2**24  # elements per block of batched evaluations (128 MB)


# =========================================================================== candidate operators
class _DenseOps:
    """Candidate features kept as one matrix Ψ_c (N, M). Every product is a BLAS call."""

    def __init__(self, Psi):
        self.Psi = np.ascontiguousarray(Psi, dtype=np.float64)
        self.n = self.Psi.shape[0]

    def rows(self, idx) -> np.ndarray:
        return self.Psi[np.asarray(idx)]

    def apply(self, W) -> np.ndarray:
        """Ψ_c W: (N,) for W (M,), (N, B) for W (M, B)."""
        return self.Psi @ W

    def apply_t(self, W) -> np.ndarray:
        """(Ψ_c W)ᵀ, (B, N) C-contiguous, for W (M, B)."""
        return np.asarray(W, dtype=np.float64).T @ self.Psi.T

    def quad(self, B) -> np.ndarray:
        """diag(Ψ_c B Ψ_cᵀ), (N,). Cost O(N M²)."""
        out = np.empty(self.n)
        step = max(1, _BLOCK // max(1, B.shape[0]))
        for s in range(0, self.n, step):
            P = self.Psi[s:s + step]
            out[s:s + step] = np.sum((P @ B) * P, axis=1)
        return out

    def sq_norms(self) -> np.ndarray:
        return np.sum(self.Psi**2, axis=1)

    def gram(self) -> np.ndarray:
        return self.Psi.T @ self.Psi

    def wgram(self, weights) -> np.ndarray:
        """Σ_c ω_c ψ_cψ_cᵀ (M, M). Cost O(N M²)."""
        return (self.Psi * np.asarray(weights, dtype=np.float64)[:, None]).T @ self.Psi


class _FourierOps:
    """Shared parts of the AFS operators: ψ at chosen rows, ‖ψ‖² by separable sums."""

    def __init__(self, ff, sqrt_lam, Xs):
        self.ff, self.sl, self.Xs = ff, np.asarray(sqrt_lam, dtype=np.float64), Xs
        self.n = Xs.shape[0]
        shape = tuple(lattice_rows(k, ff.lattice)[0].size for k in ff.n_freq)  # R_d per axis
        self._lam_tensor = np.zeros(shape)
        np.add.at(self._lam_tensor, tuple(ff.rows.T), self.sl**2)  # λ at each feature's rows

    def rows(self, idx) -> np.ndarray:
        return np.asarray(self.ff(self.Xs[np.asarray(idx)])) * self.sl

    def _weights_tensor(self, W) -> np.ndarray:
        """(B, R_1, ..., R_D) tensor of λ½ ⊙ W placed at each feature's per-dimension rows."""
        T = np.zeros((W.shape[1], *self._lam_tensor.shape))
        T[(slice(None), *self.ff.rows.T)] = (self.sl[:, None] * W).T
        return T

    def sq_norms(self) -> np.ndarray:
        """‖ψ_c‖² = Σ_m λ_m ∏_d b_{d,r_md}(x_d)², chunked. Cost O(N Π_d R_d)."""
        out = np.empty(self.n)
        step = max(1, _BLOCK // self._lam_tensor.size)
        for s in range(0, self.n, step):
            blocks = [b**2 for b in self.ff.per_dim_blocks(self.Xs[s:s + step])]
            acc = np.tensordot(blocks[0], self._lam_tensor, axes=([1], [0]))  # (n, R_2, ...)
            for b in blocks[1:]:
                acc = np.einsum("nr...,nr->n...", acc, b)
            out[s:s + step] = acc
        return out


class _GridOps(_FourierOps):
    """Candidates on a regular grid: linear forms by separable products of 1-D features.

    Σ_m w_m ψ_m(x) = Σ_{r_1..r_D} T[r] ∏_d b_d[x_d, r_d] is contracted one axis at a time:
    O(Π R_d·N_1 + ... + N·R_D) per vector, no N×M matrix.
    """

    def __init__(self, ff, sqrt_lam, saxes, flat):
        shape = tuple(a.size for a in saxes)
        idx = np.unravel_index(flat, shape)
        super().__init__(ff, sqrt_lam,
                         np.stack([a[i] for a, i in zip(saxes, idx, strict=True)], axis=1))
        self.saxes, self.flat, self.shape = saxes, flat, shape
        self.blocks = []
        for d, a in enumerate(saxes):
            Xd = np.zeros((a.size, ff.n_dims))
            Xd[:, d] = a
            self.blocks.append(np.asarray(ff.per_dim_blocks(Xd)[d]))  # (N_d, R_d)

    def apply(self, W) -> np.ndarray:
        W = np.asarray(W, dtype=np.float64)
        if W.ndim == 1:
            return self.apply_t(W[:, None])[0]
        return self.apply_t(W).T

    def apply_t(self, W) -> np.ndarray:
        """(Ψ_c W)ᵀ, (B, N), for W (M, B): the contraction's own layout, no transpose."""
        W = np.asarray(W, dtype=np.float64)
        out = np.empty((W.shape[1], self.n))
        full = self.n == int(np.prod(self.shape))  # every cell: flat is 0..N−1
        step = max(1, _BLOCK // int(np.prod(self.shape)))
        for s in range(0, W.shape[1], step):
            acc = self._weights_tensor(W[:, s:s + step])
            for b in self.blocks:
                acc = np.tensordot(acc, b, axes=([1], [1]))  # contract r_d, append n_d
            acc = acc.reshape(acc.shape[0], -1)
            out[s:s + step] = acc if full else acc[:, self.flat]
        return out

    def _grid_values(self, per_axis, tensor) -> np.ndarray:
        """Σ_r tensor[r_1, ..., r_D] ∏_d per_axis[d][x_d, r_d] at the candidate cells."""
        acc = tensor
        for b in per_axis:
            acc = np.tensordot(acc, b, axes=([0], [1]))  # contract r_d, append n_d
        return acc.ravel()[self.flat]

    def sq_norms(self) -> np.ndarray:
        """‖ψ_c‖² = Σ_m λ_m ∏_d b_d(x_d)² by separable products. Cost O(Π R_d N_1 + ... )."""
        return self._grid_values([b**2 for b in self.blocks], self._lam_tensor)

    def quad(self, B) -> np.ndarray:
        """diag(Ψ_c B Ψ_cᵀ) through products of 1-D feature pairs (D ≤ 2).

        φ_m φ_m' = ∏_d b_d[x_d, r_md] b_d[x_d, r_m'd]: with the unordered pairs p_d = {r_md, r_m'd}
        and T[p_1, p_2] = Σ B'_mm' (B' = Λ½BΛ½), h = Σ_p T[p] ∏_d P_d[x_d, p_d], where
        P_d[x, {r, r'}] = b_d[x, r] b_d[x, r']. Cost O(M² + U² N_1 + U N) with U = R(R+1)/2;
        three or more dimensions use the trigonometric bins of :mod:`geogp.features.trig`.
        """
        Bs = self.sl[:, None] * B * self.sl[None, :]
        if self.ff.n_dims > 2:
            coef = trig.quadratic_form_coefficients(self.ff, Bs)
            values = trig.evaluate_grid(self.ff, list(self.saxes), coef, "quadratic")
            return values.ravel()[self.flat]
        pairs, index = [], 0
        for d, b in enumerate(self.blocks):
            R = b.shape[1]
            iu = np.triu_indices(R)
            table = np.zeros((R, R), dtype=np.int64)
            table[iu] = np.arange(iu[0].size)
            table = np.maximum(table, table.T)  # unordered pair {r, r'} → column
            r = self.ff.rows[:, d]
            pair_d = table[r[:, None], r[None, :]]  # (M, M)
            index = index * iu[0].size + pair_d if d else pair_d
            pairs.append((b[:, iu[0]] * b[:, iu[1]], iu[0].size))  # P_d (N_d, U_d)
        sizes = tuple(u for _, u in pairs)
        T = np.bincount(np.asarray(index).ravel(), weights=Bs.ravel(),
                        minlength=int(np.prod(sizes)))
        return self._grid_values([P for P, _ in pairs], T.reshape(sizes))

    def gram(self) -> np.ndarray:
        values = np.full(self.shape, np.nan, dtype=np.float64)
        values.ravel()[self.flat] = 0.0
        G = np.asarray(self.ff.statistics(Grid(tuple(self.saxes), values)).G)
        return self.sl[:, None] * G * self.sl[None, :]

    def wgram(self, weights) -> np.ndarray:
        """Σ_c ω_c ψ_cψ_cᵀ: quadratic-form bins of the weights on the grid (zero off the cells),
        chunked
        along the first axis, then assembled (:mod:`geogp.features.trig`).

        Cost O(N Σ_d P_d + M²)."""
        full = np.zeros(self.shape)
        full.ravel()[self.flat] = np.asarray(weights, dtype=np.float64)
        C: float | np.ndarray = 0.0
        row = int(np.prod(self.shape[1:]))
        step = max(1, _BLOCK // (4 * max(row, 1)))
        for s in range(0, self.shape[0], step):
            axes = [self.saxes[0][s:s + step], *self.saxes[1:]]
            C = C + trig.grid_bins(self.ff, axes, full[s:s + step], "quadratic")
        G = trig.assemble_gram(self.ff, np.asarray(C))
        return self.sl[:, None] * G * self.sl[None, :]


class _PointOps(_FourierOps):
    """Scattered candidates: one linear form by a planned type-2 NUFFT, batches by dense blocks."""

    def __init__(self, ff, sqrt_lam, Xs):
        super().__init__(ff, sqrt_lam, Xs)
        self._plan = None

    def _nufft(self, w) -> np.ndarray:
        # lazy: the compiled NUFFT library loads only when points need it
        import finufft  # noqa: PLC0415

        ff = self.ff
        if self._plan is None:
            P = trig.bin_sizes(ff, "linear")
            u = (self.Xs - ff.center) / ff.period
            self._plan = finufft.Plan(2, P, eps=1e-14, isign=1, modeord=1)
            self._plan.setpts(*[np.ascontiguousarray(2 * np.pi * u[:, d])
                                for d in range(ff.n_dims)])
            # linear forms carry e^{iπ h·u} (h = 1 on the odd lattice): see geogp.features.trig
            self._phase = np.exp(2j * np.pi * (u @ trig.half_bin_shift(ff)))
        coef = trig.linear_coefficients(ff, self.sl * w)
        return (self._plan.execute(np.ascontiguousarray(coef)) * self._phase).real

    def apply(self, W) -> np.ndarray:
        W = np.asarray(W, dtype=np.float64)
        if W.ndim == 1:
            return self._nufft(W)
        out = np.empty((self.n, W.shape[1]))
        SW = self.sl[:, None] * W
        step = max(1, _BLOCK // (8 * self.ff.n_features))
        for s in range(0, self.n, step):
            out[s:s + step] = np.asarray(self.ff(self.Xs[s:s + step])) @ SW
        return out

    def apply_t(self, W) -> np.ndarray:
        """(Ψ_c W)ᵀ, (B, N), for W (M, B): one planned NUFFT per column, O(N + P^D log P) each
        (a dense block would cost O(N M) per column)."""
        W = np.asarray(W, dtype=np.float64)
        return np.stack([self._nufft(W[:, j]) for j in range(W.shape[1])])

    def quad(self, B) -> np.ndarray:
        coef = trig.quadratic_form_coefficients(self.ff, self.sl[:, None] * B * self.sl[None, :])
        return trig.evaluate_points(self.ff, self.Xs, coef, "quadratic")

    def gram(self) -> np.ndarray:
        G = np.asarray(self.ff.statistics(Points(self.Xs, np.zeros(self.n))).G)
        return self.sl[:, None] * G * self.sl[None, :]

    def wgram(self, weights) -> np.ndarray:
        """Σ_c ω_c ψ_cψ_cᵀ through a type-1 NUFFT of the weights. Cost O(N + P^D log P + M²)."""
        C = trig.points_bins(self.ff, self.Xs, np.asarray(weights, dtype=np.float64), "quadratic")
        G = trig.assemble_gram(self.ff, C)
        return self.sl[:, None] * G * self.sl[None, :]


# =========================================================================== problems
@dataclass
class Problem:
    """Everything the greedy loop needs, in standardised units.

    A_data: (M, M) precision of the whitened weights given the data only (no existing
    sensors: Krause's "rest of V" term excludes them); Ainv: (M, M) inverse precision given the
    data and the existing sensors; ops: candidate features; tops: target features (the same
    object as ``ops`` when the targets are the candidates); resid_c (N,), resid_T (T,):
    k(0) − ‖ψ‖², the part of the prior variance the features do not carry; resid_TT: callable
    giving K_TT − Ψ_TΨ_Tᵀ (the joint criterion only, on a small target set).
    """

    A_data: np.ndarray | Callable[[], np.ndarray] | None  # None: the lattice's cells
    Ainv: np.ndarray | None
    noise: float
    ops: Any  # a feature operator (_DenseOps, _GridOps, _PointOps) or lattice cells (CellOps)
    tops: Any
    resid_c: np.ndarray
    resid_T: np.ndarray
    resid_TT: Callable[[], np.ndarray] | None
    y_scale: float


def is_dense(ops: Any) -> bool:
    """Whether the feature operator ``ops`` holds its features as one dense matrix."""
    return isinstance(ops, _DenseOps)


def _afs_ops(model, locs: Candidates, dense_limit: int, what: str):
    """Feature operator of ``locs``: dense below ``dense_limit`` elements, else grid or points."""
    ff, scaler = model.features_, model.scaler_
    sl = np.asarray(model.posterior_.sqrt_lam, dtype=np.float64)
    Xs = scaler.x(locs.coords)
    try:
        ff.check_inside(Xs, "raise")
    except InputError as err:
        raise type(err)(f"{what}: {err}") from None
    if len(locs) * ff.n_features <= dense_limit:
        return _DenseOps(np.asarray(ff(Xs)) * sl)
    if locs.axes is not None:
        saxes = [(a - m) / s
                 for a, m, s in zip(locs.axes, scaler.x_mean, scaler.x_scale, strict=True)]
        return _GridOps(ff, sl, saxes, locs.flat)
    return _PointOps(ff, sl, Xs)


def afs_problem(model: Any, cands: Candidates, targets: Candidates | None,
                existing: ArrayLike | None,
                dense_limit: int) -> Problem:
    """AFS placement problem; ``targets=None`` means the targets are the candidates."""
    post, scaler = model.posterior_, model.scaler_
    fp = FeaturePosterior.from_model(model)
    A_data = fp._A0  # data only (an array or a callable): Krause's E starts from it
    if existing is not None:
        for psi in afs_psi(model, existing, "existing sensors"):
            fp.add(psi)  # existing sensors: same rank-one updates as suggested sites
    ops = _afs_ops(model, cands, dense_limit, "candidate locations")
    tops = ops if targets is None else _afs_ops(model, targets, dense_limit, "target locations")
    kvar0 = float(post.kvar0)
    resid_c = kvar0 - ops.sq_norms()
    resid_T = resid_c if targets is None else kvar0 - tops.sq_norms()
    Xs_T = scaler.x((cands if targets is None else targets).coords)

    def resid_TT():
        Psi_T = tops.rows(np.arange(tops.n))
        return np.asarray(model.kernel_(Xs_T, Xs_T)) - Psi_T @ Psi_T.T

    return Problem(A_data, fp.Ainv, fp.noise, ops, tops, resid_c, resid_T, resid_TT,
                   float(scaler.y_scale))


_EXACT_MAX = 4000


def exact_problem(model: Any, cands: Candidates, targets: Candidates | None,
                  existing: ArrayLike | None) -> Problem:
    """Exact GP: features of the posterior covariance on V_c ∪ T (∪ existing), C = ΨΨᵀ.

    The posterior given the data is factorised by an eigendecomposition; existing sensors are
    then absorbed by the same rank-one updates as for AFS. ``targets=None``: the targets are
    the candidates (not repeated). Cost O(|V_c ∪ T ∪ E|³).
    """
    same = targets is None
    tgt = Candidates(np.zeros((0, cands.n_dims))) if targets is None else targets
    ex = None if existing is None else np.atleast_2d(np.asarray(existing, dtype=np.float64))
    n_e = 0 if ex is None else len(ex)
    n_u = len(cands) + len(tgt) + n_e
    if n_u > _EXACT_MAX:
        raise InputError(f"the exact GP handles at most {_EXACT_MAX} candidate + target + existing "
                         f"locations (O(N³)); got {n_u}. Use an AFSRegressor, or fewer locations.")
    kern, noise, scaler = model.kernel_, float(model.noise_), model.scaler_
    Xd = np.asarray(model.X_train_)
    parts = [scaler.x(cands.coords), scaler.x(tgt.coords)]
    if ex is not None and n_e:
        parts.append(scaler.x(ex))
    U = np.vstack(parts)
    L = np.linalg.cholesky(np.asarray(kern(Xd, Xd)) + noise * np.eye(Xd.shape[0]))
    V = sla.solve_triangular(L, np.asarray(kern(Xd, U)), lower=True)
    C = np.asarray(kern(U, U)) - V.T @ V  # C_UU = K_UU − K_UD (K_DD + σ²I)⁻¹ K_DU
    C = 0.5 * (C + C.T)
    e, Q = np.linalg.eigh(C)
    keep = e > 1e-12 * max(e.max(), 1e-300)
    Psi = Q[:, keep] * np.sqrt(e[keep])
    resid = np.diag(C) - np.sum(Psi**2, axis=1)
    nc, nt = len(cands), len(tgt)
    r = Psi.shape[1]
    fp = FeaturePosterior(np.ones(r), np.eye(r), np.eye(r), np.zeros(r), noise, 0.0)
    for psi in Psi[nc + nt:]:
        fp.add(psi)
    t0, t1 = (0, nc) if same else (nc, nc + nt)

    def resid_TT():
        return C[t0:t1, t0:t1] - Psi[t0:t1] @ Psi[t0:t1].T

    ops = _DenseOps(Psi[:nc])
    tops = ops if same else _DenseOps(Psi[nc:nc + nt])
    return Problem(np.eye(r), fp.Ainv, noise, ops, tops, resid[:nc], resid[t0:t1], resid_TT,
                   float(scaler.y_scale))
