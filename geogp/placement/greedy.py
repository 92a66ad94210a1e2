"""Greedy site selection: the state and loop behind :func:`~geogp.placement.suggest_sites`.

:class:`Greedy` maintains, by rank-one updates, A⁻¹, the candidate vector h_c = ψ_cᵀA⁻¹ψ_c,
the target diagonal C_T,ii and, per strategy, X = Ψ_Tᵀ A⁻¹ Ψ_c (``"mi"`` on a target set small
enough for that |T| × |V_c| matrix; also Y = (C_T + σ²I)⁻¹X for the joint criterion), the
bounds of :mod:`geogp.placement.screen` (marginal ``"mi"`` on a larger target set: every
target counts, no thinning) or E⁻¹ and q_c = ψ_cᵀE⁻¹ψ_c (``"krause"``); the numba passes
update X (and Y) and score all candidates in one sweep. :func:`run_greedy` is the greedy loop with
its constraints (exclusions, minimum distance, cost and budget) and :func:`_lazy_pop` the
lazy-greedy heap for Krause's submodular gain. The criteria and their costs are described in
:mod:`geogp.placement`; :func:`geogp.placement.suggest.suggest_sites` checks the arguments and
builds the problem.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numba
import numpy as np
import scipy.linalg as sla

from geogp.exceptions import NotPositiveDefiniteError
from geogp.placement.candidates import near_mask
from geogp.placement.operators import Problem
from geogp.placement.posterior import inverse_from_cholesky, rank1
from geogp.placement.screen import Screen

_Z_MAX = 1.0 - 1e-15  # squared correlations are < 1; clip rounding overshoot before log1p


# =========================================================================== numba kernels
@numba.njit(parallel=True, cache=True)
def _marginal_pass(Xt, u, v, inv_d, inv_rho, inv_s, active, out):  # pragma: no cover (numba)
    """Xt (N, T) ← Xt − v uᵀ/d; out_c = −½ Σ_i log(1 − Xt_ci² / (ρ_i s_c)) for active c."""
    n, t = Xt.shape
    for c in numba.prange(n):
        if not active[c]:
            continue
        vc = v[c] * inv_d
        sc = inv_s[c]
        acc = 0.0
        for i in range(t):
            x = Xt[c, i] - vc * u[i]
            Xt[c, i] = x
            z = min(x * x * inv_rho[i] * sc, _Z_MAX)
            acc += math.log1p(-z)
        out[c] = -0.5 * acc


@numba.njit(parallel=True, cache=True)
def _joint_pass(Xt, Yt, u, v, inv_d, p, inv_e, yu, inv_s, active, out):  # pragma: no cover
    """Xt ← Xt − v uᵀ/d; Yt ← Yt + (Yt u − v) pᵀ/e; out_c = −½ log(1 − Σ_i Xt_ci Yt_ci / s_c)."""
    n, t = Xt.shape
    for c in numba.prange(n):
        if not active[c]:
            continue
        a = v[c] * inv_d
        b = (yu[c] - v[c]) * inv_e
        q = 0.0
        for i in range(t):
            x = Xt[c, i] - a * u[i]
            y = Yt[c, i] + b * p[i]
            Xt[c, i] = x
            Yt[c, i] = y
            q += x * y
        out[c] = -0.5 * math.log1p(-min(max(q * inv_s[c], 0.0), _Z_MAX))


# =========================================================================== greedy loop
class Greedy:
    """State of one greedy run: the maintained matrices and vectors of docs/placement.md."""

    # a new measurement's noise variance at each candidate and target where it varies
    # (a space-time forecast's); None: the problem's one σ²
    noise_c: np.ndarray | None = None
    noise_t: np.ndarray | None = None

    def __init__(self, pb: Problem, strategy: str, criterion: str, lazy: bool, lazy_batch: int,
                 taken: Sequence[int] = (), screened: bool = False,
                 max_evaluations: int = 1024) -> None:
        self.pb, self.strategy, self.criterion = pb, strategy, criterion
        self.lazy = lazy and strategy == "krause"
        self.lazy_batch = lazy_batch
        s2 = pb.noise
        if pb.Ainv is None:
            raise TypeError("the feature greedy needs the problem's A⁻¹ (a lattice problem has "
                            "none: it places through LatticeGreedy).")
        self.Ainv = pb.Ainv.copy()
        self._pending: tuple = ()  # the last update's vectors, for the next mi pass
        self.h = pb.ops.quad(self.Ainv)  # h_c = ψ_cᵀA⁻¹ψ_c
        self.hT = self.h.copy() if pb.tops is pb.ops else pb.tops.quad(self.Ainv)  # h at T
        self.cT = pb.resid_T + self.hT  # diag C_T
        self.scores = np.full(pb.ops.n, -np.inf)
        self.screen = None
        if strategy == "mi" and screened:
            self.screen = Screen(pb, self.Ainv, self.hT, self.cT, max_evaluations)
        elif strategy == "mi":
            Psi_T = pb.tops.rows(np.arange(pb.tops.n))  # (T, M): a small target set here
            W_T = self.Ainv @ Psi_T.T  # (M, T)
            self.Xt = np.ascontiguousarray(pb.ops.apply(W_T))  # Xᵀ = Ψ_c A⁻¹ Ψ_T, (N, T)
            if criterion == "joint":
                if pb.resid_TT is None:
                    raise TypeError("the joint criterion needs the problem's K_TT − Ψ_TΨ_Tᵀ.")
                R = pb.resid_TT() + Psi_T @ W_T + s2 * np.eye(Psi_T.shape[0])  # C_T + σ²I
                try:
                    cho = sla.cho_factor(0.5 * (R + R.T), lower=True)
                except np.linalg.LinAlgError as err:
                    raise NotPositiveDefiniteError(
                        "the joint criterion needs C_T + σ²I positive definite, and it is not "
                        "here: with AFS, k − k̂ (the features' residual) need not be positive "
                        "semi-definite (aliasing, docs/bound.md). Use criterion='marginal' (the "
                        "default, docs/placement.md), fewer/more spread targets, or more features."
                    ) from err
                self.Yt = np.ascontiguousarray(sla.cho_solve(cho, self.Xt.T).T)  # (R⁻¹X)ᵀ
        if strategy == "krause":
            # E = A_data + σ⁻² Σ_{c ∈ V∖A} ψ_cψ_cᵀ; existing sensors belong to A (not to V∖A)
            G = pb.ops.gram()
            if len(taken):
                P = pb.ops.rows(list(taken))
                G = G - P.T @ P
            A_data = pb.A_data() if callable(pb.A_data) else pb.A_data
            E = A_data + G / s2
            self.Einv = inverse_from_cholesky(np.linalg.cholesky(0.5 * (E + E.T)))
            self.q = pb.ops.quad(self.Einv)  # q_c = ψ_cᵀE⁻¹ψ_c

    # ------------------------------------------------------------------ scores
    def score_all(self, active: np.ndarray, u: np.ndarray | None = None,
                  v: np.ndarray | None = None, d: float | None = None, p: np.ndarray | None = None,
                  e: float | None = None, yu: np.ndarray | None = None) -> np.ndarray:
        """Scores of all active candidates (after the update of the last step, if given)."""
        n = self.pb.ops.n
        s2 = self.pb.noise if self.noise_c is None else self.noise_c  # at the candidates
        if self.strategy == "variance":
            return self.pb.resid_c + self.h + s2
        if self.strategy == "krause":
            return self._krause_gain(self.h, self.q)
        inv_s = 1.0 / (s2 + self.h)
        T = self.Xt.shape[1]
        if u is None or v is None or d is None:  # first pass: no update
            u, v, d = np.zeros(T), np.zeros(n), 1.0
        if p is None or e is None or yu is None:  # the marginal criterion, or the first pass
            p, e, yu = np.zeros(T), 1.0, np.zeros(n)
        if self.criterion == "marginal":
            inv_rho = 1.0 / (self.cT + (self.pb.noise if self.noise_t is None else self.noise_t))
            _marginal_pass(self.Xt, u, v, 1.0 / d, inv_rho, inv_s, active, self.scores)
        else:
            _joint_pass(self.Xt, self.Yt, u, v, 1.0 / d, p, 1.0 / e, yu, inv_s, active,
                        self.scores)
        return self.scores

    def refine(self, rank: np.ndarray, costs: np.ndarray | None) -> tuple[int, float] | None:
        """(candidate, score) to take instead of the best of ``rank``, where the scores are
        estimates that a subclass can recompute exactly for the best few; None here (the
        scores are exact)."""
        return None

    def close(self) -> None:
        """Free what the state holds beyond its arrays once the picks are made (nothing
        here; the tiled lattice placement's factors)."""

    def _krause_gain(self, h, q) -> np.ndarray:
        """δ = ½ log(σ²_{a|A}/σ²_{a|Ā}) with σ²_{a|A} = σ² + h, σ²_{a|Ā} = σ⁴/(σ² − q)."""
        s2 = self.pb.noise
        rest = np.maximum(s2 - q, s2 * 1e-300)
        return 0.5 * (np.log1p(h / s2) + np.log(rest / s2))

    def fresh_gains(self, idx: Sequence[int] | np.ndarray) -> np.ndarray:
        """Krause gains of candidates idx recomputed from the current A⁻¹, E⁻¹. Cost O(|idx| M²)."""
        P = self.pb.ops.rows(idx)
        h = np.sum((P @ self.Ainv) * P, axis=1)
        q = np.sum((P @ self.Einv) * P, axis=1)
        return self._krause_gain(h, q)

    # ------------------------------------------------------------------ update
    def _condition(self, a: int, u: np.ndarray, v: np.ndarray, d: float,
                   noise: float | None = None) -> dict:
        """Condition the target and candidate variances on site a, given its covariances u
        with the targets, v with the candidates and d = C_aa + σ² (``noise``: σ² at a, by
        default the problem's), and queue the mi pass (for the subclasses whose posterior
        gives those columns directly)."""
        s2 = self.pb.noise if noise is None else noise
        info = {"var_latent": d - s2, "cT_before": self.cT.copy(), "u": u, "d": d}
        self.cT = self.cT - u**2 / d
        self.h = self.h - v**2 / d
        self.hT = self.cT
        if self.strategy == "mi":
            self._pending = (u, v, d)
            if self.criterion == "joint":
                p = self.Yt[a].copy()  # p = (C_T + σ²I)⁻¹ u
                e = d - u @ p
                self._pending = (u, v, d, p, e, self.Yt @ u)
        return info

    def add(self, a: int, active: np.ndarray) -> dict:
        """Absorb candidate a: rank-one updates of every maintained quantity (docs/placement.md)."""
        pb, s2 = self.pb, self.pb.noise
        psi = pb.ops.rows([a])[0]
        w = self.Ainv @ psi  # w = A⁻¹ψ_a
        d = s2 + psi @ w  # d = s_a = σ² + ψ_aᵀA⁻¹ψ_a
        v = None if self.lazy else pb.ops.apply(w)  # v_c = ψ_cᵀ A⁻¹ ψ_a
        u = v if v is not None and pb.tops is pb.ops else pb.tops.apply(w)  # u = Ψ_T A⁻¹ψ_a
        info = {"var_latent": pb.resid_c[a] + d - s2, "cT_before": self.cT.copy(), "u": u, "d": d}
        rank1(self.Ainv, w, w, -1.0 / d)
        self.cT -= u**2 / d  # C_T,ii ← C_T,ii − u_i²/d (in place: the screen reads it)
        self.hT -= u**2 / d
        if self.screen is not None:
            self.screen.update(psi, w, d, self.Ainv)
        if self.lazy:
            z = self.Einv @ psi
            rank1(self.Einv, z, z, 1.0 / (s2 - psi @ z))  # E⁻¹ ← E⁻¹ + zzᵀ/(σ² − q_a)
            return info
        assert v is not None  # computed whenever the greedy is not lazy
        self.h -= v**2 / d
        if self.strategy == "krause":
            z = self.Einv @ psi
            e = s2 - psi @ z
            wz = pb.ops.apply(z)
            rank1(self.Einv, z, z, 1.0 / e)
            self.q += wz**2 / e
        elif self.strategy == "mi":
            self._pending = (u, v, d)
            if self.criterion == "joint":
                p = self.Yt[a].copy()  # p = (C_T + σ²I)⁻¹ u
                e = d - u @ p
                yu = self.Yt @ u
                self._pending = (u, v, d, p, e, yu)
        return info


def run_greedy(g: Greedy, n: int, active: np.ndarray, costs: np.ndarray | None,
               budget: float | None, min_distance: float, coords: np.ndarray) -> tuple[list, str]:
    """The greedy loop; returns (records, why it stopped: 'n', 'budget' or 'no candidate left')."""
    active = active.copy()
    remaining = budget
    picks = []
    heap, stamp = None, None
    if g.lazy:
        gains = g.score_all(active)
        rank = gains / costs if costs is not None else gains
        heap = [(-float(rank[c]), int(c)) for c in np.flatnonzero(active)]
        heapq.heapify(heap)
        stamp = np.zeros(g.pb.ops.n, dtype=np.int64)
        fresh_gain = gains.copy()
    elif g.screen is None:
        scores = g.score_all(active)
    for step in range(n):
        if g.screen is not None:  # marginal mi over a large target set: bounds + exact values
            a, score = g.screen.select(active, costs, g.Ainv, g.h)
            if a is None or score is None:
                break
        elif g.lazy:
            a = _lazy_pop(g, heap, stamp, step, active, costs, fresh_gain)
            if a is None:
                break
            score = fresh_gain[a]
        else:
            rank = scores / costs if costs is not None else scores
            rank = np.where(active & np.isfinite(rank), rank, -np.inf)
            if not active.any() or not np.isfinite(rank.max()):
                break
            a = int(np.argmax(rank))  # ties: lowest index
            score = float(scores[a])
            refined = g.refine(rank, costs)  # estimated scores: the best few recomputed
            if refined is not None:
                a, score = refined
        info = g.add(a, active)
        before = np.sqrt(np.maximum(info["cT_before"], 0.0))
        after = np.sqrt(np.maximum(info["cT_before"] - info["u"] ** 2 / info["d"], 0.0))
        picks.append({"index": a, "score": float(score), "var_latent": float(info["var_latent"]),
                      "std_reduction": float(np.mean(before - after)),
                      "mean_std_after": float(np.mean(after))})
        active[a] = False
        if min_distance > 0:
            active &= ~near_mask(coords, coords[a], min_distance)
        if costs is not None and budget is not None and remaining is not None:
            remaining -= costs[a]
            active &= costs <= remaining + 1e-12 * max(1.0, abs(budget))
        if step + 1 < n and not g.lazy and g.screen is None:
            scores = g.score_all(active, *getattr(g, "_pending", ()))
    if len(picks) == n:
        return picks, "n"
    if costs is not None and budget is not None:
        return picks, "budget exhausted"
    return picks, "no candidate left"


def _lazy_pop(g: Greedy, heap, stamp, step, active, costs, fresh_gain):
    """Lazy greedy (Minoux; Krause et al. 2008): re-evaluate stale tops in batches until the top
    of the heap is fresh. Returns the chosen candidate or None."""
    while heap:
        _, c = heap[0]
        if not active[c]:
            heapq.heappop(heap)
            continue
        if stamp[c] == step:
            heapq.heappop(heap)
            return c
        batch: list[int] = []
        while heap and len(batch) < g.lazy_batch:
            _, c = heap[0]
            if not active[c]:
                heapq.heappop(heap)
                continue
            if stamp[c] == step:
                break
            heapq.heappop(heap)
            batch.append(c)
        gains = g.fresh_gains(batch)
        for c, gain in zip(batch, gains, strict=True):
            stamp[c] = step
            fresh_gain[c] = gain
            r = gain / costs[c] if costs is not None else gain
            heapq.heappush(heap, (-float(r), c))
    return None
