"""Greedy site selection: :func:`suggest_sites` and its loop (docs/placement.md).

:class:`_Greedy` maintains, by rank-one updates, A⁻¹, the candidate vector h_c = ψ_cᵀA⁻¹ψ_c,
the target diagonal C_T,ii and, per strategy, X = Ψ_Tᵀ A⁻¹ Ψ_c (``"mi"``; also
Y = (C_T + σ²I)⁻¹X for the joint criterion) or E⁻¹ and q_c = ψ_cᵀE⁻¹ψ_c (``"krause"``); the
numba passes update X (and Y) and score all candidates in one sweep. :func:`_run` is the greedy
loop with its constraints (exclusions, minimum distance, cost and budget) and
:func:`_lazy_pop` the lazy-greedy heap for Krause's submodular gain. The criteria and their
costs are described in :mod:`geogp.placement`.
"""

from __future__ import annotations

import heapq
import math
import warnings

import numba
import numpy as np
import pandas as pd
import scipy.linalg as sla

from geogp._validation import as_points
from geogp.exceptions import InputError, NotPositiveDefiniteError
from geogp.placement.candidates import _as_candidates, _at_candidates, _exclusion, _near
from geogp.placement.operators import (
    _DENSE_LIMIT,
    _afs_problem,
    _DenseOps,
    _exact_problem,
    _Problem,
)
from geogp.placement.posterior import _check_afs, _inverse_from_cholesky, _rank1

STRATEGIES = ("variance", "mi", "krause")
CRITERIA = ("marginal", "joint")
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
class _Greedy:
    """State of one greedy run: the maintained matrices and vectors of docs/placement.md."""

    def __init__(self, pb: _Problem, strategy: str, criterion: str, lazy: bool, lazy_batch: int,
                 taken=()):
        self.pb, self.strategy, self.criterion = pb, strategy, criterion
        self.lazy = lazy and strategy == "krause"
        self.lazy_batch = lazy_batch
        s2 = pb.noise
        self.Ainv = pb.Ainv.copy()
        Psi_T = pb.Psi_T
        W_T = self.Ainv @ Psi_T.T  # (M, T)
        self.cT = pb.resid_T + np.sum(Psi_T * W_T.T, axis=1)  # diag C_T
        self.h = pb.ops.quad(self.Ainv)  # h_c = ψ_cᵀA⁻¹ψ_c
        self.scores = np.full(pb.ops.n, -np.inf)
        if strategy == "mi":
            self.Xt = np.ascontiguousarray(pb.ops.apply(W_T))  # Xᵀ = Ψ_c A⁻¹ Ψ_T, (N, T)
            if criterion == "joint":
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
            self.Einv = _inverse_from_cholesky(np.linalg.cholesky(0.5 * (E + E.T)))
            self.q = pb.ops.quad(self.Einv)  # q_c = ψ_cᵀE⁻¹ψ_c

    # ------------------------------------------------------------------ scores
    def score_all(self, active, u=None, v=None, d=None, p=None, e=None, yu=None) -> np.ndarray:
        """Scores of all active candidates (after the update of the last step, if given)."""
        s2, n = self.pb.noise, self.pb.ops.n
        if self.strategy == "variance":
            return self.pb.resid_c + self.h + s2
        if self.strategy == "krause":
            return self._krause_gain(self.h, self.q)
        inv_s = 1.0 / (s2 + self.h)
        T = self.Xt.shape[1]
        if u is None:  # first pass: no update
            u, v, d = np.zeros(T), np.zeros(n), 1.0
            p, e, yu = np.zeros(T), 1.0, np.zeros(n)
        if self.criterion == "marginal":
            inv_rho = 1.0 / (self.cT + s2)
            _marginal_pass(self.Xt, u, v, 1.0 / d, inv_rho, inv_s, active, self.scores)
        else:
            _joint_pass(self.Xt, self.Yt, u, v, 1.0 / d, p, 1.0 / e, yu, inv_s, active,
                        self.scores)
        return self.scores

    def _krause_gain(self, h, q) -> np.ndarray:
        """δ = ½ log(σ²_{a|A}/σ²_{a|Ā}) with σ²_{a|A} = σ² + h, σ²_{a|Ā} = σ⁴/(σ² − q)."""
        s2 = self.pb.noise
        rest = np.maximum(s2 - q, s2 * 1e-300)
        return 0.5 * (np.log1p(h / s2) + np.log(rest / s2))

    def fresh_gains(self, idx) -> np.ndarray:
        """Krause gains of candidates idx recomputed from the current A⁻¹, E⁻¹. Cost O(|idx| M²)."""
        P = self.pb.ops.rows(idx)
        h = np.sum((P @ self.Ainv) * P, axis=1)
        q = np.sum((P @ self.Einv) * P, axis=1)
        return self._krause_gain(h, q)

    # ------------------------------------------------------------------ update
    def add(self, a: int, active) -> dict:
        """Absorb candidate a: rank-one updates of every maintained quantity (docs/placement.md)."""
        pb, s2 = self.pb, self.pb.noise
        psi = pb.ops.rows([a])[0]
        w = self.Ainv @ psi  # w = A⁻¹ψ_a
        d = s2 + psi @ w  # d = s_a = σ² + ψ_aᵀA⁻¹ψ_a
        u = pb.Psi_T @ w  # u = g = Ψ_Tᵀ A⁻¹ ψ_a
        info = {"var_latent": pb.resid_c[a] + d - s2, "cT_before": self.cT.copy(), "u": u, "d": d}
        _rank1(self.Ainv, w, w, -1.0 / d)
        self.cT -= u**2 / d  # C_T,ii ← C_T,ii − u_i²/d
        if self.lazy:
            z = self.Einv @ psi
            _rank1(self.Einv, z, z, 1.0 / (s2 - psi @ z))  # E⁻¹ ← E⁻¹ + zzᵀ/(σ² − q_a)
            return info
        v = pb.ops.apply(w)  # v_c = ψ_cᵀ A⁻¹ ψ_a
        self.h -= v**2 / d
        if self.strategy == "krause":
            z = self.Einv @ psi
            e = s2 - psi @ z
            wz = pb.ops.apply(z)
            _rank1(self.Einv, z, z, 1.0 / e)
            self.q += wz**2 / e
        elif self.strategy == "mi":
            self._pending = (u, v, d)
            if self.criterion == "joint":
                p = self.Yt[a].copy()  # p = (C_T + σ²I)⁻¹ u
                e = d - u @ p
                yu = self.Yt @ u
                self._pending = (u, v, d, p, e, yu)
        return info


def _check_n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n (number of sites) must be a positive integer; got {n!r}.")
    return int(n)


def _check_vector(values, n: int, name: str, positive: bool) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise InputError(f"{name} must be a scalar or have one value per candidate ({n}); "
                         f"got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)) or (positive and np.any(arr <= 0)):
        raise InputError(f"{name} must be finite{' and > 0' if positive else ''} for every "
                         "candidate.")
    return arr


def _default_names(d: int) -> tuple:
    return ("x", "y", "z")[:d] if d <= 3 else tuple(f"x{i}" for i in range(d))


def suggest_sites(model, candidates, n: int, *, strategy: str = "mi", criterion: str = "marginal",
                  targets=None, existing=None, exclude=None, min_distance: float = 0.0,
                  cost=None, budget: float | None = None, max_targets: int = 1000,
                  max_bytes: float = 2**28, lazy: bool | None = None, names=None, seed: int = 0,
                  dense_limit: int = _DENSE_LIMIT) -> pd.DataFrame:
    """Suggest the next ``n`` measurement sites by greedy selection (docs/placement.md).

    Args:
        model: a fitted :class:`~geogp.models.afs.AFSRegressor` or
            :class:`~geogp.models.exact.ExactGP` (hyperparameters are kept fixed).
        candidates: :class:`Candidates` (e.g. ``Candidates.grid(axes, mask)``), or an (N, D)
            array / DataFrame of points, in the model's input units and column order.
        n: number of sites k (fewer are returned when the budget or the minimum distance
            leaves no feasible candidate).
        strategy: ``"mi"`` (thesis log-determinant criterion, default), ``"variance"`` or
            ``"krause"`` (mutual information with V = the candidates, lazy greedy).
        criterion: for ``"mi"``: ``"marginal"`` (default; sum of per-target terms) or
            ``"joint"`` (log-determinant over all targets).
        targets: where the predictions should improve, (N_T, D) points or :class:`Candidates`;
            default the candidates. Thinned to ``max_targets`` (and, for ``"mi"``, to at most
            ``max_bytes`` for the |T| × |V_c| matrix); the result's ``attrs`` say so.
        existing: (N_e, D) existing sensors, absorbed first by the same rank-one updates. For
            ``"krause"``, those that sit on a candidate are part of the selected set A (so a
            batch of q equals q calls that each pass the previous picks as existing).
        exclude: boolean mask, True = not allowed: one value per candidate, or the grid's
            shape for grid candidates.
        min_distance: minimum distance (input units) between chosen sites, and from existing
            sensors.
        cost: per-candidate cost (scalar or (N,)); candidates are ranked by score/cost.
        budget: total cost allowed (default unlimited; with no ``cost`` each site costs 1).
        max_targets, max_bytes: target thinning limits (see ``targets``).
        lazy: lazy-greedy evaluation for ``"krause"`` (same picks). Each lazy re-evaluation
            costs O(M²) while a full update of all gains costs one or two linear forms over the
            candidates, so the default (None) is lazy only for small, dense problems and plain
            updates on grids and large point sets.
        names: coordinate column names (default ``x``, ``y``, ``z``).
        seed: random thinning of scattered targets.
        dense_limit: |V_c|·M below which candidate features are stored densely.

    Returns:
        DataFrame, one row per site in selection order: ``order`` (1..k), ``index`` (row of
        the candidate), coordinates, ``score`` (variance of a new measurement in the data's
        units² for ``"variance"``, else nats), ``std_before`` (latent predictive std at the
        site before it is added, data units), ``std_reduction`` (mean over targets of the
        latent std reduction due to this site), ``mean_std_after`` (mean target std after
        it), and ``cost``/``cumulative_cost`` when costs or a budget are given. ``attrs`` holds
        strategy, criterion, n_targets, targets_thinned, n_candidates, stopped (why fewer).

    Raises:
        InputError: bad arguments (unknown strategy, n < 1 or above the number of allowed
            candidates, NaN coordinates, shapes, locations outside the model's window...).

    Cost: set-up O(M³) for A⁻¹ (and E⁻¹ for ``"krause"``), one quadratic form over the
    candidates, and for ``"mi"`` |T| linear forms (the |T| × |V_c| matrix X, O(|T|³) more for
    ``"joint"``); per step O(M² + |V_c|(e + |T|)) for ``"mi"``, O(M² + |V_c| e) for
    ``"variance"`` and plain ``"krause"``, O(M² + b M²) for lazy ``"krause"`` (e: one linear
    form over the candidates; b: re-evaluations). Memory O(M² + |T||V_c|).
    """
    n = _check_n(n)
    if strategy not in STRATEGIES:
        raise InputError(f"strategy must be one of {list(STRATEGIES)}; got {strategy!r}.")
    if criterion not in CRITERIA:
        raise InputError(f"criterion must be one of {list(CRITERIA)}; got {criterion!r}.")
    cands = _as_candidates(candidates, "candidates")
    exact = hasattr(model, "X_train_") and not hasattr(model, "features_")
    if not exact:
        _check_afs(model)
        n_dims = model.features_.n_dims
    else:
        n_dims = int(np.shape(model.X_train_)[1])
    if cands.n_dims != n_dims:
        raise InputError(f"candidates have {cands.n_dims} coordinate columns but the model was "
                         f"fitted on {n_dims}; use the model's input columns, in the same order.")
    N = len(cands)
    if existing is not None:
        existing = as_points(existing, "existing sensors")
        if existing.shape[1] != n_dims:
            raise InputError(f"existing sensors have {existing.shape[1]} columns; expected "
                             f"{n_dims}.")
    min_distance = float(min_distance)
    if not np.isfinite(min_distance) or min_distance < 0:
        raise InputError(f"min_distance must be finite and ≥ 0; got {min_distance!r}.")
    costs = None if cost is None else _check_vector(cost, N, "cost", positive=True)
    if budget is not None:
        budget = float(budget)
        if not np.isfinite(budget) or budget <= 0:
            raise InputError(f"budget must be finite and > 0; got {budget!r}.")
        if costs is None:
            costs = np.ones(N)
    active = ~_exclusion(exclude, cands)
    if existing is not None and min_distance > 0:
        for pt in existing:
            active &= ~_near(cands.coords, pt, min_distance)
    if n > int(active.sum()):
        raise InputError(f"n = {n} sites requested but only {int(active.sum())} of {N} candidates "
                         "are allowed (after exclusions and the distance to existing sensors); "
                         "ask for fewer sites or allow more candidates.")
    if costs is not None and budget is not None:
        active &= costs <= budget
    lazy_batch = 16
    # targets: default the candidates; thinned to the limits
    tgt = cands if targets is None else _as_candidates(targets, "targets")
    if tgt.n_dims != n_dims:
        raise InputError(f"targets have {tgt.n_dims} columns; expected {n_dims}.")
    limit = int(max_targets)
    if strategy == "mi":
        per = 8 * N * (2 if criterion == "joint" else 1)
        limit = min(limit, max(1, int(max_bytes // per)))
    tgt, thinned = tgt.thin(limit, seed)

    if exact:
        pb = _exact_problem(model, cands, tgt, existing)
    else:
        pb = _afs_problem(model, cands, tgt, existing, dense_limit)
    taken = _at_candidates(existing, cands.coords) if existing is not None else []
    if lazy is None:
        lazy = isinstance(pb.ops, _DenseOps)
    g = _Greedy(pb, strategy, criterion, bool(lazy), lazy_batch, taken)
    picks, stopped = _run(g, n, active, costs, budget, min_distance, cands.coords)

    ys = pb.y_scale
    names = tuple(names) if names is not None else _default_names(n_dims)
    if len(names) != n_dims:
        raise InputError(f"names must give {n_dims} column names; got {names!r}.")
    idx = np.array([p["index"] for p in picks], dtype=np.int64)
    data = {"order": np.arange(1, len(picks) + 1), "index": idx}
    for j, name in enumerate(names):
        data[name] = cands.coords[idx, j] if len(picks) else np.array([])
    score_scale = ys**2 if strategy == "variance" else 1.0
    data["score"] = np.array([p["score"] * score_scale for p in picks])
    data["std_before"] = np.array([math.sqrt(max(p["var_latent"], 0.0)) * ys for p in picks])
    data["std_reduction"] = np.array([p["std_reduction"] * ys for p in picks])
    data["mean_std_after"] = np.array([p["mean_std_after"] * ys for p in picks])
    if costs is not None:
        c = costs[idx] if len(picks) else np.array([])
        data["cost"] = c
        data["cumulative_cost"] = np.cumsum(c)
    df = pd.DataFrame(data)
    df.attrs.update({"strategy": strategy, "criterion": criterion if strategy == "mi" else None,
                     "n_candidates": N, "n_targets": len(tgt), "targets_thinned": thinned,
                     "stopped": stopped, "coord_names": list(names),
                     "model": "exact" if exact else "afs"})
    if stopped != "n":
        warnings.warn(f"only {len(picks)} of {n} sites could be placed ({stopped}).", stacklevel=2)
    return df


def _run(g: _Greedy, n: int, active, costs, budget, min_distance, coords):
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
    else:
        scores = g.score_all(active)
    for step in range(n):
        if g.lazy:
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
        info = g.add(a, active)
        before = np.sqrt(np.maximum(info["cT_before"], 0.0))
        after = np.sqrt(np.maximum(info["cT_before"] - info["u"] ** 2 / info["d"], 0.0))
        picks.append({"index": a, "score": float(score), "var_latent": float(info["var_latent"]),
                      "std_reduction": float(np.mean(before - after)),
                      "mean_std_after": float(np.mean(after))})
        active[a] = False
        if min_distance > 0:
            active &= ~_near(coords, coords[a], min_distance)
        if costs is not None and remaining is not None:
            remaining -= costs[a]
            active &= costs <= remaining + 1e-12 * max(1.0, abs(budget))
        if step + 1 < n and not g.lazy:
            scores = g.score_all(active, *getattr(g, "_pending", ()))
    if len(picks) == n:
        return picks, "n"
    if costs is not None and budget is not None:
        return picks, "budget exhausted"
    return picks, "no candidate left"


def _lazy_pop(g: _Greedy, heap, stamp, step, active, costs, fresh_gain):
    """Lazy greedy (Minoux; Krause et al. 2008): re-evaluate stale tops in batches until the top
    of the heap is fresh. Returns the chosen candidate or None."""
    while heap:
        neg, c = heap[0]
        if not active[c]:
            heapq.heappop(heap)
            continue
        if stamp[c] == step:
            heapq.heappop(heap)
            return c
        batch = []
        while heap and len(batch) < g.lazy_batch:
            neg, c = heap[0]
            if not active[c]:
                heapq.heappop(heap)
                continue
            if stamp[c] == step:
                break
            heapq.heappop(heap)
            batch.append(c)
        gains = g.fresh_gains(batch)
        for c, gain in zip(batch, gains):
            stamp[c] = step
            fresh_gain[c] = gain
            r = gain / costs[c] if costs is not None else gain
            heapq.heappush(heap, (-float(r), c))
    return None
