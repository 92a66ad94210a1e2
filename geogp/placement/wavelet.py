"""Sensor placement with wavelet models: sparse posterior, rank-one updates (docs/placement.md).

A fitted :class:`~geogp.models.wavelet.WaveletRegressor` has sparse features: ψ(x) = Λ^{1/2}φ(x)
touches K basis functions, and the whitened posterior precision of the weights is (A_a sparse,
as in models/wavelet/regressor.py)

    A = blockdiag(A_a, I),    A_a = I + σ⁻² Λ_a^{1/2} G Λ_a^{1/2},

over the M_a active features (data in their support) and the pruned ones (no data: prior).
The latent posterior covariance is C(x, x') = ψ(x)ᵀA⁻¹ψ(x') (the finite prior is the model,
so no residual). Measuring at s adds σ⁻²ψ_sψ_sᵀ to A; with the chosen (and existing) sites
s_1..s_k absorbed in order,

    w_j = A_{j−1}⁻¹ψ_{s_j} = A⁻¹ψ_{s_j} − Σ_{i<j} w_i (w_iᵀψ_{s_j})/d_i,   d_j = σ² + ψ_{s_j}ᵀw_j,
    A_k⁻¹ x = A⁻¹x − Σ_j w_j (w_jᵀx)/d_j                                   (Woodbury, k ≤ n)

so each site costs one solve with A_a (the model's CHOLMOD factor; a dense Cholesky of A_a when
the backend is dense or M_a ≤ 4,096) and O(k·F) more; no M × M inverse is formed. Variances
and covariances at the candidates and targets follow the posterior's own prediction route
(solves with the sparse factor, in chunks), then rank-one updates
var_t ← var_t − (ψ_tᵀw)²/d per site.

Krause's criterion (``"krause"``, Krause et al. 2008) also needs the precision given the data
and every candidate not yet chosen, E = blockdiag(A_a, I) + σ⁻² Σ_{c ∈ V∖A} ψ_cψ_cᵀ (existing
sensors belong to A, not to V∖A), and q_c = ψ_cᵀE⁻¹ψ_c; choosing a removes σ⁻²ψ_aψ_aᵀ from E,
so E⁻¹ ← E⁻¹ + zzᵀ/(σ² − q_a) with z = E⁻¹ψ_a and q_c ← q_c + (ψ_cᵀz)²/(σ² − q_a). E is held
densely over the F columns (O(F²) memory, counted by the estimate): it couples every feature
that two candidates share, which on a raster is nearly all of them.

:class:`SparseFeaturePosterior` holds that state; :func:`wavelet_greedy` builds the greedy
state of :mod:`geogp.placement.greedy` for ``"variance"`` and ``"mi"`` (marginal and joint);
:func:`wavelet_memory_estimate` is the bound checked before anything is allocated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from geogp import linalg
from geogp.exceptions import InputError, MemoryEstimateError, NotPositiveDefiniteError
from geogp.placement.candidates import (
    MIN_DISTANCE_FRACTION,
    Candidates,
    grid_axes,
    packing_distance,
)
from geogp.placement.contract import Placement, PlacementRequest
from geogp.placement.greedy import Greedy
from geogp.placement.operators import Problem
from geogp.placement.posterior import rank1

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

_SOLVE_ENTRIES = 2**21  # entries of one dense (F, chunk) block of right-hand sides
_LOCATION_BYTES = 400  # per candidate/target: coordinates, variances, scores, masks
_NONZERO_BYTES = 48  # per nonzero of a sparse feature matrix: COO + CSR + evaluation temps
# up to this many active features the solves use one dense Cholesky of A_a (LAPACK solves with
# many right-hand sides run at BLAS-3 speed; CHOLMOD's sparse solves are several times slower
# when the factor is nearly dense, as on small 2-D bases); above it, the model's sparse factor
_DENSE_SOLVE_MAX = 4096


def _check_wavelet(model) -> None:
    if not all(hasattr(model, a) for a in ("posterior_", "basis_", "scaler_", "params_")):
        raise InputError("expected a fitted WaveletRegressor; call fit() or fit_grid() first.")


def check_wavelet(model: Any, strategy: str) -> None:
    """Refuse an unfitted wavelet model, or a strategy it does not support."""
    _check_wavelet(model)
    if strategy not in ("variance", "mi", "krause"):
        raise InputError(f"strategy {strategy!r} is not available for wavelet models; use "
                         "'variance', 'mi' or 'krause'.")


def _uses_cholmod(problem) -> bool:
    return problem.solve.backend == "cholmod"


def _sparse_solves(problem, dense_max: int | None = None) -> bool:
    """Whether solves go through the model's CHOLMOD factor (else one dense Cholesky of A_a)."""
    limit = _DENSE_SOLVE_MAX if dense_max is None else int(dense_max)
    return _uses_cholmod(problem) and problem.stats.n_active > limit


# =========================================================================== the posterior
class SparseFeaturePosterior:
    """Whitened wavelet posterior with rank-one updates from the chosen sites (module docstring).

    Features live in a reduced space of F columns: the M_a active features (in the model's
    order) first, then the pruned features that registered locations touch (prior block I).

    Attributes:
        noise: σ² (standardised). n_active: M_a. n_columns: F.
        W: (F, k) solve vectors w_j of the absorbed sites; d: (k,) their d_j.
    """

    def __init__(self, model: Any, dense_max: int | None = None) -> None:
        _check_wavelet(model)
        post = model.posterior_
        problem = post.problem
        self.basis = model.basis_
        self.noise = float(model.params_["noise"])
        self.n_active = int(problem.stats.n_active)
        self._log_amp = float(np.log(float(model.params_["amplitude"])))
        self._log_coeffs = tuple(np.asarray(c, dtype=np.float64) for c in post.log_coeffs)
        self._pos = np.asarray(problem.stats.position, dtype=np.int64).copy()  # flat → column
        self.n_columns = self.n_active
        self._W = np.zeros((self.n_active, 0))
        self._d = np.zeros(0)
        a_vals = np.asarray(post.a_vals, dtype=np.float64)
        self._problem, self._a_vals = problem, a_vals
        if _sparse_solves(problem, dense_max):
            state = linalg.analyze(problem.pattern)  # the model's analysis (cached on P)

            def solve(rhs):
                _, out = state.host_forward(a_vals, rhs)  # refactorises only if A changed
                if not np.all(np.isfinite(out)):
                    raise NotPositiveDefiniteError("the wavelet posterior precision A is not "
                                                   "positive definite (CHOLMOD).")
                return out
        else:  # dense backend, or few features: one dense Cholesky of A_a, kept
            cho = sla.cho_factor(self.data_precision(), lower=True, overwrite_a=True,
                                 check_finite=False)  # F = M_a columns so far: A_a itself

            def solve(rhs):
                return sla.cho_solve(cho, rhs, check_finite=False)
        self._solve_active = solve

    # ------------------------------------------------------------------ features
    def features(self, Xs: ArrayLike, what: str = "locations") -> sp.csr_matrix:
        """Sparse ψ = Λ^{1/2}φ at Xs (N, D) standardised, as CSR (N, F); registers new pruned
        features (the stored solve vectors get zero rows: the prior block is I). Cost O(N·K)."""
        Xs = np.asarray(Xs, dtype=np.float64)
        try:
            rows, vals = self.basis.local_features(Xs)
        except InputError as err:
            raise type(err)(f"{what}: {err}") from None
        idx = self.basis.unravel(rows)
        log_lam = self._log_amp + sum(c[i] for c, i in zip(self._log_coeffs, idx, strict=True))
        psi = np.exp(0.5 * log_lam) * vals
        keep = vals != 0.0
        new = np.unique(rows[keep][self._pos[rows[keep]] < 0])
        if new.size:
            self._pos[new] = self.n_columns + np.arange(new.size)
            self.n_columns += int(new.size)
            self._W = np.vstack([self._W, np.zeros((new.size, self._W.shape[1]))])
        indptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))])
        out = sp.csr_matrix((psi[keep], self._pos[rows[keep]], indptr),
                            shape=(Xs.shape[0], self.n_columns))
        out.sum_duplicates()
        return out

    def _fit(self, P: sp.csr_matrix) -> sp.csr_matrix:
        """P widened to the current F columns (features registered after P was built)."""
        if P.shape[1] == self.n_columns:
            return P
        return sp.csr_matrix((P.data, P.indices, P.indptr), shape=(P.shape[0], self.n_columns))

    # ------------------------------------------------------------------ solves
    def solve_prior(self, R: np.ndarray) -> np.ndarray:
        """A⁻¹R for R (F,) or (F, B) dense, at the model's data only (no absorbed sites)."""
        R = np.asarray(R, dtype=np.float64)
        out = np.array(R, copy=True)
        if self.n_active:
            out[: self.n_active] = self._solve_active(np.ascontiguousarray(R[: self.n_active]))
        return out

    def solve(self, R: np.ndarray) -> np.ndarray:
        """A_k⁻¹R = A⁻¹R − W diag(1/d) WᵀR (Woodbury with the k absorbed sites)."""
        out = self.solve_prior(R)
        if self._d.size:
            out -= self._W @ ((self._W.T @ R).T / self._d).T
        return out

    def add(self, psi: sp.spmatrix | np.ndarray) -> tuple[np.ndarray, float]:
        """Absorb one measurement with features ψ (a (1, F) sparse row or (F,) vector).

        Returns (w, d), w = A⁻¹ψ and d = σ² + ψᵀw before the update. Cost: one sparse solve.
        """
        psi = (sp.csr_matrix(psi).toarray().ravel() if sp.issparse(psi)
               else np.asarray(psi, dtype=np.float64))
        if psi.size < self.n_columns:
            psi = np.concatenate([psi, np.zeros(self.n_columns - psi.size)])
        w = self.solve(psi)
        d = self.noise + float(psi @ w)
        self._W = np.column_stack([self._W, w])
        self._d = np.append(self._d, d)
        return w, d

    @property
    def W(self) -> np.ndarray:
        return self._W

    @property
    def d(self) -> np.ndarray:
        return self._d

    def _blocks(self, P: sp.csr_matrix, width: int = 1):
        """Column blocks of Pᵀ (F, B), dense, B chosen so that one block, and its product
        with ``width`` rows, holds ≤ 2^21 entries (or one column)."""
        P = self._fit(P)
        step = max(1, _SOLVE_ENTRIES // max(self.n_columns, width, 1))
        PT = P.T.tocsc()
        for s in range(0, P.shape[0], step):
            yield s, PT[:, s:s + step].toarray()

    def data_precision(self) -> np.ndarray:
        """Dense (F, F) blockdiag(A_a, I): the whitened precision given the model's data only
        (no absorbed sites). Cost O(F²) memory."""
        low = self._problem.pattern.to_scipy_lower(self._a_vals).tocoo()
        out = np.eye(self.n_columns)  # scattered in place: no second dense array
        out[low.row, low.col] = low.data
        out[low.col, low.row] = low.data
        return out

    def var_latent(self, P: sp.csr_matrix) -> np.ndarray:
        """Latent variance ψᵀA_k⁻¹ψ at the rows of P (N, F). Cost: N/B solves of B columns."""
        out = np.empty(P.shape[0])
        for s, R in self._blocks(P):
            out[s:s + R.shape[1]] = np.sum(R * self.solve(R), axis=0)
        return out

    def covariance(self, P: sp.csr_matrix, Q: sp.csr_matrix) -> np.ndarray:
        """C = P A_k⁻¹ Qᵀ, (N_P, N_Q) dense. Cost: N_Q/B solves, sparse products."""
        P = self._fit(P)
        out = np.empty((P.shape[0], Q.shape[0]))
        for s, R in self._blocks(Q, P.shape[0]):
            out[:, s:s + R.shape[1]] = P @ self.solve(R)
        return out


# =========================================================================== greedy state
class _SparseOps:
    """Candidate (or target) features as a sparse CSR matrix; ``n`` locations."""

    def __init__(self, post: SparseFeaturePosterior, P: sp.csr_matrix):
        self.post, self._P = post, P
        self.n = P.shape[0]

    @property
    def P(self) -> sp.csr_matrix:
        self._P = self.post._fit(self._P)
        return self._P

    def apply(self, w) -> np.ndarray:
        return self.P @ w

    def rows(self, idx):
        return self.P[np.asarray(idx)]


class _GridOps:
    """Candidate features on cells of a raster, applied per axis and never formed.

    The wavelet prior is separable (docs/wavelets.md, predicting a raster): ψ at cell (i, j)
    is s u_a(y_i) v_b(x_j) for feature (a, b), so Ψw over the whole grid is s U W Vᵀ with W
    the (M_y × M_x) reshape of w. Memory O(n_y K_y + n_x K_x) instead of the N·K nonzeros of
    :class:`_SparseOps` (2.6·10⁸ on the satellite grid).
    """

    def __init__(self, post: SparseFeaturePosterior, model, locs: Candidates):
        sc = model.scaler_
        self.post, self.model, self.n, self.flat = post, model, len(locs), locs.flat
        self.coords_std = sc.x(locs.coords)
        self.axes_std = [(np.asarray(a, dtype=np.float64) - m) / s
                         for a, m, s in zip(grid_axes(locs), sc.x_mean, sc.x_scale, strict=True)]
        (u, _), (v, _) = model.posterior_.axis_values(self.axes_std)
        self.U, self.V = u * np.exp(0.5 * post._log_amp), v

    def rows(self, idx):
        return self.post.features(self.coords_std[np.asarray(idx)], "candidate locations")

    def apply(self, w) -> np.ndarray:
        """Ψ w at the locations: (n,) for w (F,), (n, T) for w (F, T)."""
        w = np.asarray(w, dtype=np.float64)
        vec = w.ndim == 1
        w2 = w[:, None] if vec else w
        pos = self.post._pos
        reg = np.flatnonzero(pos >= 0)
        full = np.zeros((pos.size, w2.shape[1]))
        ok = pos[reg] < w2.shape[0]
        full[reg[ok]] = w2[pos[reg[ok]]]  # unregistered features: A = I, ψ = 0, w = 0
        my, mx = self.U.shape[1], self.V.shape[1]
        out = np.empty((self.n, w2.shape[1]))
        for t in range(w2.shape[1]):
            grid = self.U @ (self.V @ full[:, t].reshape(my, mx).T).T  # (n_y, n_x)
            out[:, t] = np.asarray(grid).ravel()[self.flat]
        return out[:, 0] if vec else out

    def var_latent(self) -> np.ndarray:
        """ψᵀA_k⁻¹ψ at the locations: the model's separable variance, less the absorbed
        sites' rank-one terms (Woodbury)."""
        _, var = self.model.posterior_.predict_grid(self.axes_std)
        h = np.asarray(var).ravel()[self.flat]
        post = self.post
        for j in range(post.d.size):
            h = h - self.apply(post.W[:, j]) ** 2 / post.d[j]
        return h

    def covariance(self, tops) -> np.ndarray:
        """Ψ A_k⁻¹ Ψ_Tᵀ (n, T) for sparse target features ``tops``."""
        return self.apply(self.post.solve(tops.P.T.toarray()))


def _box_inside(model, locs: Candidates) -> bool:
    """Whether the whole grid of ``locs`` lies in the model's window (the per-axis route
    evaluates every row and column; masked-out cells outside the window would not matter
    to the sparse route, which then takes over)."""
    sc = model.scaler_
    lo = sc.x(np.array([[a.min() for a in grid_axes(locs)]]))[0]
    hi = sc.x(np.array([[a.max() for a in grid_axes(locs)]]))[0]
    win = model.basis_.window
    return bool(np.all(lo >= win[:, 0]) and np.all(hi <= win[:, 1]))


def _var_latent(post: SparseFeaturePosterior, ops) -> np.ndarray:
    return ops.var_latent() if isinstance(ops, _GridOps) else post.var_latent(ops.P)


class _WaveletGreedy(Greedy):
    """The greedy state of :class:`~geogp.placement.greedy.Greedy` on the sparse posterior.

    Scores (``score_all``) are the AFS ones with h_c = C_cc and no feature residual; the
    updates use the solve vectors of :class:`SparseFeaturePosterior` instead of a dense A⁻¹.
    """

    def __init__(self, pb: Problem, post: SparseFeaturePosterior, strategy: str,
                 criterion: str, taken=()):
        self.pb, self.post, self.strategy, self.criterion = pb, post, strategy, criterion
        self.lazy, self.lazy_batch, self.screen = False, 16, None
        same = pb.tops is pb.ops
        self.h = _var_latent(post, pb.ops)  # h_c = C_cc
        self.cT = self.h.copy() if same else _var_latent(post, pb.tops)  # diag C_T
        self.hT = self.cT
        self.scores = np.full(pb.ops.n, -np.inf)
        if strategy == "krause":
            self._krause_init(taken)
        if strategy == "mi":
            self.Xt = np.ascontiguousarray(  # (N, T)
                pb.ops.covariance(pb.tops) if isinstance(pb.ops, _GridOps)
                else post.covariance(pb.ops.P, pb.tops.P))
            if criterion == "joint":
                CT = self.Xt if same else post.covariance(pb.tops.P, pb.tops.P)
                R = CT + pb.noise * np.eye(pb.tops.n)
                cho = sla.cho_factor(0.5 * (R + R.T), lower=True)
                self.Yt = np.ascontiguousarray(sla.cho_solve(cho, self.Xt.T).T)

    def _krause_init(self, taken) -> None:
        """E⁻¹ (dense, F × F) and q_c = ψ_cᵀE⁻¹ψ_c at every candidate (module docstring)."""
        P = self.pb.ops.P  # (N, F) CSR: the candidates' features
        rest = np.ones(P.shape[0], dtype=bool)
        rest[list(taken)] = False  # existing sensors at candidates belong to A, not to V∖A
        Pr = P[np.flatnonzero(rest)]
        # in place, as the memory estimate counts: E, its factor in E's memory (E is symmetric,
        # so its transpose is the Fortran-ordered view LAPACK overwrites), then E⁻¹ in the
        # memory of the identity it is solved against
        E = self.post.data_precision()
        G = (Pr.T @ Pr).tocoo()  # unique entries: a fancy-indexed += adds each once
        E[G.row, G.col] += G.data / self.pb.noise
        del G
        f = E.shape[0]
        try:
            L = sla.cholesky(E.T, lower=True, overwrite_a=True, check_finite=False)
        except np.linalg.LinAlgError as err:  # E ⪰ I in exact arithmetic
            raise NotPositiveDefiniteError("Krause's precision E given the data and the "
                                           "candidates is not positive definite.") from err
        del E
        ident = np.zeros((f, f), order="F")
        ident.flat[:: f + 1] = 1.0
        Einv = sla.cho_solve((L, True), ident, overwrite_b=True, check_finite=False)
        del L, ident
        self.Einv = Einv.T  # symmetric: the C-ordered view, for in-place rank-one updates
        self.q = np.empty(P.shape[0])
        step = max(1, _SOLVE_ENTRIES // max(f, 1))
        for s in range(0, P.shape[0], step):
            rows = P[s:s + step]
            self.q[s:s + rows.shape[0]] = np.asarray(
                rows.multiply(rows @ self.Einv).sum(axis=1)).ravel()

    def add(self, a: int, active) -> dict:
        pb = self.pb
        if self.strategy == "krause":  # a leaves V∖A: E⁻¹ ← E⁻¹ + zzᵀ/e (module docstring)
            psi = pb.ops.rows([a]).toarray().ravel()
            z = self.Einv @ psi
            e = pb.noise - float(psi @ z)
            self.q += pb.ops.apply(z) ** 2 / e
            rank1(self.Einv, z, z, 1.0 / e)
        w, d = self.post.add(pb.ops.rows([a]))
        v = pb.ops.apply(w)  # v_c = C(c, a)
        u = v if pb.tops is pb.ops else pb.tops.apply(w)  # u_i = C(t_i, a)
        return self._condition(a, u, v, d)


# =========================================================================== problem
def wavelet_memory_estimate(n_candidates: int, n_targets: int, model: Any, *, n_sites: int,
                            same: bool = True, strategy: str = "mi",
                            criterion: str = "marginal", grid: bool = False) -> float:
    """Bytes the wavelet placement needs beyond the fitted model (an upper bound).

    Sparse features at the candidates and targets (K nonzeros each), the position map of the
    M basis functions, the solve vectors (F ≤ M_a + K·locations columns, one per site and
    existing sensor), the dense right-hand-side blocks of the solves, a dense A_a and its
    Cholesky factor when the model's backend is dense, and for ``"mi"`` the |V_c| × |T|
    covariance (twice, and |T| × |T| matrices, for ``"joint"``). With ``grid`` (candidates on
    a raster, :class:`_GridOps`) the candidates hold no features: instead the model's dense
    A⁻¹ over all M features (its separable predictor) and one grid of values per column.
    """
    basis, problem = model.basis_, model.problem_
    k, m, ma = basis.max_local, basis.n_features, problem.stats.n_active
    locations = n_candidates + (0 if same else n_targets)
    featured = (0 if same else n_targets) + n_sites if grid else locations
    f = min(m, ma + k * featured)
    out = (float(_LOCATION_BYTES) * locations + float(_NONZERO_BYTES) * k * featured
           + 8.0 * m + 8.0 * f * (n_sites + 2)
           # solve blocks: R, A⁻¹R, R∘A⁻¹R and the solver's copies
           + 6 * 8.0 * max(_SOLVE_ENTRIES, f, n_candidates, n_targets))
    if not _sparse_solves(problem):
        out += 2 * 8.0 * ma * ma
    if grid:
        out += 3 * 8.0 * m * m + 8.0 * m * max(n_targets, 1) + 16.0 * n_candidates
    if strategy == "krause":  # E (in place: then its factor), E⁻¹, the identity it overwrites,
        out += 4 * 8.0 * f * f  # and the data precision's dense active block while E is built
    if strategy == "mi":
        joint = criterion == "joint"
        out += 8.0 * n_candidates * n_targets * (2 if joint else 1)
        out += 3 * 8.0 * n_targets**2 if joint else 0.0
    return out


def wavelet_min_distance(model: Any, coords: np.ndarray) -> float:
    """Default minimum distance: ¼ of the shortest effective lengthscale of the model
    (:meth:`~geogp.models.wavelet.WaveletRegressor.effective_lengthscale`) over ``coords``
    (at most 4,096 of them, evenly spaced), in input units."""
    coords = np.asarray(coords, dtype=np.float64)
    step = max(1, coords.shape[0] // 4096)
    ell = np.asarray(model.effective_lengthscale(coords[::step]))
    return MIN_DISTANCE_FRACTION * float(ell.min()) if ell.size else 0.0


def wavelet_greedy(model: Any, cands: Candidates, targets: Candidates | None,
                   existing: ArrayLike | None,
                   strategy: str, criterion: str, n_sites: int, max_memory: float,
                   taken: Sequence[int] = ()) -> _WaveletGreedy:
    """The greedy state for a wavelet model (``targets=None``: the candidates), after
    :func:`check_wavelet` (as :func:`~geogp.placement.suggest.suggest_sites` calls it).

    Refuses (:class:`~geogp.exceptions.MemoryEstimateError`) before allocating above
    ``max_memory``. Existing sensors are absorbed first by the same rank-one updates;
    ``taken`` lists the candidates they sit on (outside Krause's V∖A).
    """
    n_t = len(cands) if targets is None else len(targets)
    n_e = 0 if existing is None else len(np.asarray(existing))
    # a raster's candidates are applied per axis (never formed) when the model's separable
    # predictor applies and no |V| × |V| covariance is needed (separate targets, or variance)
    grid = (cands.axes is not None and model.posterior_.grid_ready() and strategy != "krause"
            and (targets is not None or strategy == "variance") and _box_inside(model, cands))
    needed = wavelet_memory_estimate(len(cands), n_t, model, n_sites=n_sites + n_e,
                                     same=targets is None, strategy=strategy,
                                     criterion=criterion, grid=grid)
    if needed > max_memory:
        raise MemoryEstimateError(
            f"wavelet placement over {len(cands)} candidates and {n_t} targets "
            f"({model.basis_.n_features} basis functions, {model.basis_.max_local} per point)",
            needed, max_memory, "Use fewer candidates (a coarser grid, a mask or exclude=), "
            "fewer targets, or raise max_memory.")
    sc = model.scaler_
    post = SparseFeaturePosterior(model)
    ops = (_GridOps(post, model, cands) if grid else
           _SparseOps(post, post.features(sc.x(cands.coords), "candidate locations")))
    tops = ops if targets is None else _SparseOps(
        post, post.features(sc.x(targets.coords), "target locations"))
    if n_e:
        for row in post.features(sc.x(np.asarray(existing)), "existing sensors"):
            post.add(row)
    zc = np.zeros(ops.n)
    pb = Problem(None, None, post.noise, ops, tops, zc, zc if tops is ops else np.zeros(tops.n),
                 None, float(sc.y_scale))
    return _WaveletGreedy(pb, post, strategy, criterion, taken)


class WaveletPlacement(Placement):
    """The wavelet model's sparse posterior, rank-one updates by solves; a large target set
    is thinned (its marginal criterion has no bounds route here)."""

    strategies = ("variance", "mi", "krause")
    screens_targets = False
    label = "wavelet_basis"

    @property
    def n_dims(self) -> int:
        return int(self.model.basis_.n_dims)

    def check(self, strategy: str, criterion: str) -> None:
        check_wavelet(self.model, strategy)

    def min_distance(self, coords: np.ndarray, n_sites: int) -> float:
        return min(wavelet_min_distance(self.model, coords), packing_distance(coords, n_sites))

    def greedy(self, request: PlacementRequest) -> Greedy:
        return wavelet_greedy(self.model, request.candidates, request.targets, request.existing,
                              request.strategy, request.criterion, request.n_sites,
                              request.max_memory, request.taken)
