"""The marginal ``"mi"`` criterion over a large target set, by bounds and exact re-ranking.

The marginal gain of measuring at candidate a is a sum over the targets i ∈ T,

    F(a) = −½ Σ_i log(1 − z_ai),    z_ai = g_ai² / (s_a ρ_i),

with g_ai = ψ_iᵀA⁻¹ψ_a (the posterior covariance the measurement removes), s_a = σ² + h_a,
h_a = ψ_aᵀA⁻¹ψ_a, and ρ_i = C_ii + σ² (docs/placement.md). Keeping every g_ai costs |T| × |V_c|
numbers; a thinned target set is cheaper but wrong in a particular way: with a short
posterior correlation a site next to a kept target scores far above an equally good site
between targets, so the picks lock onto the target lattice (issue #17). This module evaluates
F over *all* targets and still returns the exact greedy argmax:

1. An upper bound for every candidate. f(z) = −½ log(1 − z) is convex with f(0) = 0, so
   f(z)/z grows with z and f(z) ≤ z f(Z)/Z for z ≤ Z. By Cauchy–Schwarz g_ai² ≤ h_a h_i, so
   z_ai ≤ Z_a = (h_a/s_a) max_i(h_i/ρ_i). Hence

       F(a) ≤ U(a) = f(Z_a)/Z_a · q_a / s_a,   q_a = Σ_i ω_i g_ai² = ψ_aᵀ B ψ_a,

   with weights ω_i ≥ 1/ρ_i and B = A⁻¹ (Σ_i ω_i ψ_iψ_iᵀ) A⁻¹. The q_a of all candidates are
   one quadratic form over the candidates (``ops.quad(B)``; separable products on grids).
2. Exact F for candidates in decreasing order of U, in batches: each is one linear form
   ψ(x)ᵀ(A⁻¹ψ_a) over the targets (``tops.apply``) and a sum of |T| logarithms. Once the best
   exact value reaches the largest bound left, no other candidate can beat it: the pick is the
   exact argmax over all targets (ties: lowest index, as the plain loop). A cap on the number
   of exact evaluations per step keeps the cost bounded; then the certified relative gap
   (largest bound left − best)/best is recorded.

Updates after a pick (w = A⁻¹ψ_a, d = s_a, b = Bψ_a, all before the update):
A⁻¹ ← A⁻¹ − wwᵀ/d turns B into B − (wbᵀ + bwᵀ)/d + (ψ_aᵀb) wwᵀ/d² (O(M²)); ρ_i and h_i
decrease by u_i²/d with u = Ψ_T w (one linear form over the targets). The weights are upper
bounds with a slack η: they start at (1 + η)/ρ_i, and a target whose 1/ρ_i has grown past its
weight (only near the new site) is raised to (1 + η)/ρ_i, adding R Rᵀ to B with
R = A⁻¹ Ψ_Sᵀ diag(√δ) over those targets S.

Cost per step: one quadratic form over the candidates, O(M² (1 + |S|)), and e + |T| per
exact evaluation (e: one linear form over the targets). Memory O(M² + |T| + batch·|T|).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numba
import numpy as np

from geogp.placement.posterior import rank1

if TYPE_CHECKING:  # annotations only
    from geogp.placement.operators import Problem

_Z_MAX = 1.0 - 1e-15
_SLACK = 0.02  # η: weights are at most 2 % above 1/ρ_i
_BATCH = 32  # exact evaluations per batch (fewer on large target sets: _BATCH_BYTES)
_BATCH_BYTES = 64 * 2**20
_ROUND = 1e-9  # relative margin on the bounds for rounding (quadratic forms, updates)


def batch_bytes(n_targets: int) -> float:
    """Bytes of one batch of exact evaluations over ``n_targets`` targets (memory estimates)."""
    return min(_BATCH_BYTES, 8.0 * _BATCH * n_targets)


@numba.njit(parallel=True, cache=True)
def _marginal_sums(Vt, inv_rho, inv_s, out):  # pragma: no cover (numba)
    """out_j = −½ Σ_i log(1 − min(Vt_ji² inv_rho_i inv_s_j, Z_MAX)) for Vt (B, T)."""
    b, t = Vt.shape
    for j in numba.prange(b):
        acc = 0.0
        sj = inv_s[j]
        for i in range(t):
            x = Vt[j, i]
            z = min(x * x * inv_rho[i] * sj, _Z_MAX)
            acc += math.log1p(-z)
        out[j] = -0.5 * acc


def _f_over_z(Z) -> np.ndarray:
    """f(Z)/Z with f(z) = −½ log(1 − z); the limit ½ at Z = 0."""
    Z = np.minimum(np.maximum(Z, 0.0), _Z_MAX)
    out = np.full(Z.shape, 0.5)
    pos = Z > 1e-12
    out[pos] = -0.5 * np.log1p(-Z[pos]) / Z[pos]
    return out


class Screen:
    """Exact greedy argmax of the marginal criterion over all targets, by bounds (see module).

    Holds B (M, M) and the target weights ω (T,). h_T and C_T,ii (T,) belong to the owner
    (:class:`geogp.placement.greedy.Greedy`), which updates them in place before
    :meth:`update`; ρ_T = C_T,ii + σ².
    """

    def __init__(self, pb: Problem, Ainv: np.ndarray, hT: np.ndarray, cT: np.ndarray,
                 max_evals: int) -> None:
        self.pb, self.max_evals = pb, int(max_evals)
        self.hT, self.cT = hT, cT  # arrays owned and updated in place by Greedy
        self.omega = (1.0 + _SLACK) / self.rho
        G = pb.tops.wgram(self.omega)
        self.B = Ainv @ G @ Ainv
        self.B = 0.5 * (self.B + self.B.T)
        self.n_evals: list[int] = []
        self.gaps: list[float] = []
        # exact evaluations per batch: a batch holds a (batch × |T|) matrix; keep it ≤ 64 MiB
        self.batch = int(np.clip(_BATCH_BYTES // (8 * max(pb.tops.n, 1)), 1, _BATCH))

    @property
    def rho(self) -> np.ndarray:
        """ρ_i = C_ii + σ², bounded away from 0 (AFS's k − ‖ψ‖² can make C_ii slightly < 0)."""
        return np.maximum(self.cT + self.pb.noise, 1e-300)

    # ------------------------------------------------------------------ selection
    def bounds(self, h: np.ndarray) -> np.ndarray:
        """U(a) ≥ F(a) for every candidate, from the current B, h_c, h_T and ρ_T."""
        s = self.pb.noise + h
        q = np.maximum(self.pb.ops.quad(self.B), 0.0)
        m = float(np.max(np.maximum(self.hT, 0.0) / self.rho))
        U = _f_over_z(np.maximum(h, 0.0) / s * m) * q / s
        return U * (1.0 + _ROUND) + _ROUND * float(U.max(initial=0.0))

    def exact(self, idx: np.ndarray, Ainv: np.ndarray, h: np.ndarray) -> np.ndarray:
        """F(a) over all targets for the candidates ``idx``. Cost |idx| (e + |T|)."""
        idx = np.asarray(idx, dtype=np.int64)
        W = Ainv @ self.pb.ops.rows(idx).T  # (M, B): A⁻¹ψ_a
        Vt = self.pb.tops.apply_t(W)  # (B, T): g_ai for the batch
        out = np.empty(idx.size)
        _marginal_sums(Vt, 1.0 / self.rho, 1.0 / (self.pb.noise + h[idx]), out)
        return out

    def select(self, active: np.ndarray, costs: np.ndarray | None, Ainv: np.ndarray,
               h: np.ndarray) -> tuple[int | None, float | None]:
        """(pick, its score) or (None, None) when no candidate is allowed. Ranks score/cost."""
        U = self.bounds(h)
        rank_u = U / costs if costs is not None else U
        cand = np.flatnonzero(active)
        if cand.size == 0:
            return None, None
        order = cand[np.lexsort((cand, -rank_u[cand]))]  # decreasing bound, then index
        best, best_score, best_rank, done = None, None, -np.inf, 0
        while done < order.size and done < self.max_evals:
            batch = order[done:done + self.batch]
            F = self.exact(batch, Ainv, h)
            rank = F / costs[batch] if costs is not None else F
            for a, r, f in zip(batch, rank, F, strict=True):
                if r > best_rank or (r == best_rank and a < best):
                    best, best_score, best_rank = int(a), float(f), float(r)
            done += batch.size
            if done >= order.size or rank_u[order[done]] < best_rank:
                break
        left = rank_u[order[done]] if done < order.size else -np.inf
        gap = 0.0  # certified: no bound left reaches the best exact value
        if left >= best_rank:  # stopped by the cap: the certified relative gap
            gap = (left - best_rank) / max(abs(best_rank), 1e-300)
        self.n_evals.append(done)
        self.gaps.append(gap)
        return best, best_score

    # ------------------------------------------------------------------ updates
    def update(self, psi: np.ndarray, w: np.ndarray, d: float, Ainv_new: np.ndarray) -> None:
        """After a pick: B for the new A⁻¹, then raise the weights that 1/ρ has passed.

        Call after the owner has updated A⁻¹ (→ ``Ainv_new``), ρ_T and h_T; ``psi``, ``w``
        and ``d`` are ψ_a, A⁻¹ψ_a and σ² + ψ_aᵀA⁻¹ψ_a taken before that update.
        """
        b = self.B @ psi
        c = float(psi @ b)
        rank1(self.B, w, (c / d**2) * w - b / d, 1.0)  # B ← B − (wbᵀ + bwᵀ)/d + c wwᵀ/d²
        rank1(self.B, b, w, -1.0 / d)
        inv = 1.0 / self.rho
        S = np.flatnonzero(inv > self.omega)
        if S.size:
            new = (1.0 + _SLACK) * inv[S]
            delta = new - self.omega[S]
            self.omega[S] = new
            for s0 in range(0, S.size, 512):
                sl = slice(s0, s0 + 512)
                R = Ainv_new @ (self.pb.tops.rows(S[sl]) * np.sqrt(delta[sl])[:, None]).T
                self.B += R @ R.T

    def summary(self) -> dict:
        return {"exact_evaluations": list(self.n_evals), "criterion_gap": max(self.gaps or [0.0])}
