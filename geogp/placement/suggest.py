""":func:`suggest_sites`: argument checks, targets and constraints, the problem, the result table.

The greedy state and loop are in :mod:`geogp.placement.greedy`; how the marginal ``"mi"``
criterion is evaluated over a large target set in :mod:`geogp.placement.screen`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from geogp.core.validation import as_points
from geogp.exceptions import InputError, PlacementWarning
from geogp.families import family_of
from geogp.placement.candidates import (
    as_candidates,
    at_candidates,
    exclusion_mask,
    near_mask,
)
from geogp.placement.contract import Placement, PlacementRequest
from geogp.placement.greedy import run_greedy
from geogp.placement.operators import DENSE_LIMIT

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.placement.candidates import Candidates

STRATEGIES = ("variance", "mi", "krause", "reduction")
CRITERIA = ("marginal", "joint")


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


def _check_count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"{name} must be a positive integer; got {value!r}.")
    return int(value)


def _min_distance(value, placement: Placement, coords, n_sites: int) -> tuple[float, bool]:
    """(minimum distance, whether it is the default: the model's own
    (:meth:`~geogp.placement.contract.Placement.min_distance`))."""
    if isinstance(value, str):
        if value != "auto":
            raise InputError(f"min_distance must be a number ≥ 0 or 'auto'; got {value!r}.")
        return placement.min_distance(coords, n_sites), True
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InputError(f"min_distance must be a number ≥ 0 or 'auto'; got {value!r}.") from None
    if not np.isfinite(out) or out < 0:
        raise InputError(f"min_distance must be finite and ≥ 0; got {value!r}.")
    return out, False


def _default_names(d: int) -> tuple:
    return ("x", "y", "z")[:d] if d <= 3 else tuple(f"x{i}" for i in range(d))


def suggest_sites(model: Any, candidates: Candidates | ArrayLike | pd.DataFrame, n: int, *,
                  strategy: str = "mi", criterion: str = "marginal",
                  targets: Candidates | ArrayLike | pd.DataFrame | None = None,
                  existing: ArrayLike | None = None, exclude: ArrayLike | None = None,
                  min_distance: float | str = "auto",
                  cost: ArrayLike | None = None, budget: float | None = None,
                  max_targets: int = 1000,
                  max_bytes: float = 2**28, max_evaluations: int = 1024,
                  lazy: bool | None = None, names: Sequence[str] | None = None, seed: int = 0,
                  dense_limit: int = DENSE_LIMIT, max_memory: float = 4 * 2**30
                  ) -> pd.DataFrame:
    """Suggest the next ``n`` measurement sites by greedy selection (docs/placement.md).

    Args:
        model: a fitted :class:`~geogp.models.afs.AFSRegressor`,
            :class:`~geogp.models.exact.ExactGP` or
            :class:`~geogp.models.wavelet.WaveletRegressor` (sparse posterior, strategies
            "variance", "mi" and "krause":
            :mod:`geogp.placement.wavelet`) or
            :class:`~geogp.models.lattice.LatticeRegressor` fitted with its whole-lattice
            posterior (``"variance"``, ``"mi"`` and ``"reduction"``, candidates and targets at
            cell centres:
            :mod:`geogp.placement.lattice`); hyperparameters are kept fixed.
        candidates: :class:`Candidates` (e.g. ``Candidates.grid(axes, mask)``), or an (N, D)
            array / DataFrame of points, in the model's input units and column order.
        n: number of sites k (fewer are returned when the budget or the minimum distance
            leaves no feasible candidate).
        strategy: ``"mi"`` (thesis log-determinant criterion, default), ``"variance"``,
            ``"krause"`` (mutual information with V = the candidates, lazy greedy) or, on the
            lattice model, ``"reduction"`` (total variance reduction over the targets).
        criterion: for ``"mi"``: ``"marginal"`` (default; sum of per-target terms) or
            ``"joint"`` (log-determinant over all targets).
        targets: where the predictions should improve, (N_T, D) points or :class:`Candidates`;
            default the candidates. Every target counts: up to ``max_targets`` (and
            ``max_bytes`` for the |T| × |V_c| matrix) the ``"mi"`` scores are kept for all
            candidates; above, the marginal criterion is evaluated exactly over all targets for
            the candidates that its upper bounds cannot rule out (:mod:`geogp.placement.screen`)
            and only the joint criterion (a |T| × |T| determinant) is computed on a
            stratified random subset (:meth:`Candidates.thin`; ``attrs['targets_thinned']``).
            With the exact GP, explicit targets beyond ``max_targets`` are thinned likewise;
            with a wavelet model the marginal criterion is thinned as the joint one.
        existing: (N_e, D) existing sensors, absorbed first by the same rank-one updates. For
            ``"krause"``, those that sit on a candidate are part of the selected set A (so a
            batch of q equals q calls that each pass the previous picks as existing).
        exclude: boolean mask, True = not allowed: one value per candidate, or the grid's
            shape for grid candidates.
        min_distance: minimum distance (input units) between chosen sites, and from existing
            sensors. ``"auto"`` (default): ¼ of the model's shortest lengthscale
            (:func:`~geogp.placement.candidates.auto_min_distance`), at most half the
            spacing of ``n`` sites spread evenly over the candidates
            (:func:`~geogp.placement.candidates.packing_distance`); 0 allows neighbours.
        cost: per-candidate cost (scalar or (N,)); candidates are ranked by score/cost.
        budget: total cost allowed (default unlimited; with no ``cost`` each site costs 1).
        max_targets: size limit of the explicit target matrix, in targets (see ``targets``).
        max_bytes: size limit of the explicit target matrix, in bytes (see ``targets``).
        max_evaluations: for the marginal criterion over a large target set, the most exact
            evaluations per step; a pick that the bounds could not certify within them is the
            best one evaluated, and ``attrs['criterion_gap']`` bounds its relative shortfall.
        lazy: lazy-greedy evaluation for ``"krause"`` (same picks). Each lazy re-evaluation
            costs O(M²) while a full update of all gains costs one or two linear forms over the
            candidates, so the default (None) is lazy only for small, dense problems and plain
            updates on grids and large point sets.
        names: coordinate column names (default ``x``, ``y``, ``z``).
        seed: random thinning of the targets (joint criterion, exact GP).
        dense_limit: |V_c|·M below which candidate (and target) features are stored densely.
        max_memory: refuse (:class:`~geogp.exceptions.MemoryEstimateError`, with the
            model's own estimate) before allocating more than this many bytes.

    Returns:
        DataFrame, one row per site in selection order: ``order`` (1..k), ``index`` (row of
        the candidate), coordinates, ``score`` (variance of a new measurement in the data's
        units² for ``"variance"``, else nats), ``std_before`` (latent predictive std at the
        site before it is added, data units), ``std_reduction`` (mean over targets of the
        latent std reduction due to this site), ``mean_std_after`` (mean target std after
        it), and ``cost``/``cumulative_cost`` when costs or a budget are given. ``attrs`` holds
        strategy, criterion, n_targets, targets_thinned, n_candidates, min_distance (and
        min_distance_auto), criterion_gap (0: every pick is the exact greedy argmax over the
        targets), exact_evaluations (per step, bounds route only, else None), stopped (why
        fewer).

    Raises:
        InputError: bad arguments (unknown strategy, n < 1 or above the number of allowed
            candidates, NaN coordinates, shapes, locations outside the model's window...).

    Cost: set-up O(M³) for A⁻¹ (and E⁻¹ for ``"krause"``), one quadratic form over the
    candidates and one over the targets, and for ``"mi"`` |T| linear forms (the |T| × |V_c|
    matrix X, O(|T|³) more for ``"joint"``) or, on a large target set, one weighted Gram matrix
    over the targets and O(M³); per step O(M² + |V_c|(e + |T|)) for ``"mi"`` with X, one
    quadratic form over the candidates and k_s (e_T + |T|) for the bounds route (k_s exact
    evaluations), O(M² + |V_c| e) for ``"variance"`` and plain ``"krause"``, O(M² + b M²) for
    lazy ``"krause"`` (e, e_T: one linear form over the candidates, the targets; b:
    re-evaluations), plus e_T for the target columns. Memory O(M² + |T||V_c|) with X, else
    O(M² + |V_c| + |T|).
    """
    n = _check_n(n)
    if strategy not in STRATEGIES:
        raise InputError(f"strategy must be one of {list(STRATEGIES)}; got {strategy!r}.")
    if criterion not in CRITERIA:
        raise InputError(f"criterion must be one of {list(CRITERIA)}; got {criterion!r}.")
    max_targets = _check_count(max_targets, "max_targets")
    max_evaluations = _check_count(max_evaluations, "max_evaluations")
    cands = as_candidates(candidates, "candidates")
    if not family_of(model).can_place:
        raise InputError(f"sensor placement needs a fitted afs, exact, lattice or wavelet "
                         f"model; got a {type(model).__name__}.")
    placement = family_of(model).placement(model)
    if strategy not in placement.strategies:
        raise InputError(f"strategy {strategy!r} is not available for the {placement.label} "
                         f"model; use {', '.join(repr(s) for s in placement.strategies)}.")
    placement.check(strategy, criterion)
    n_dims = placement.n_dims
    if cands.n_dims != n_dims:
        raise InputError(f"candidates have {cands.n_dims} coordinate columns but the model was "
                         f"fitted on {n_dims}; use the model's input columns, in the same order.")
    N = len(cands)
    if existing is not None:
        existing = as_points(existing, "existing sensors")
        if existing.shape[1] != n_dims:
            raise InputError(f"existing sensors have {existing.shape[1]} columns; expected "
                             f"{n_dims}.")
    min_distance, auto = _min_distance(min_distance, placement, cands.coords, n)
    costs = None if cost is None else _check_vector(cost, N, "cost", positive=True)
    if budget is not None:
        budget = float(budget)
        if not np.isfinite(budget) or budget <= 0:
            raise InputError(f"budget must be finite and > 0; got {budget!r}.")
        if costs is None:
            costs = np.ones(N)
    active = ~exclusion_mask(exclude, cands)
    if existing is not None and min_distance > 0:
        for pt in existing:
            active &= ~near_mask(cands.coords, pt, min_distance)
    if n > int(active.sum()):
        raise InputError(f"n = {n} sites requested but only {int(active.sum())} of {N} candidates "
                         "are allowed (after exclusions and the distance to existing sensors); "
                         "ask for fewer sites or allow more candidates.")
    if costs is not None and budget is not None:
        active &= costs <= budget

    # targets: None = the candidates themselves (one feature operator for both)
    tgt = None if targets is None else as_candidates(targets, "targets")
    if tgt is not None and tgt.n_dims != n_dims:
        raise InputError(f"targets have {tgt.n_dims} columns; expected {n_dims}.")
    n_t = N if tgt is None else len(tgt)
    thinned = screened = False
    if strategy in ("mi", "reduction"):
        per = 8 * N * (2 if criterion == "joint" and strategy == "mi" else 1)
        limit = min(max_targets, max(1, int(max_bytes // per)))
        if n_t > limit and (criterion == "marginal" or strategy == "reduction") and (
                placement.screens_targets):
            # all targets: bounds + exact values (AFS, geogp.placement.screen), or random
            # probes of the first-order criterion (lattice, geogp.placement.lattice)
            screened = True
        elif n_t > limit:
            tgt, thinned = (cands if tgt is None else tgt).thin(limit, seed)
    if (placement.thins_explicit_targets and tgt is not None and not thinned
            and len(tgt) > max_targets):
        tgt, thinned = tgt.thin(max_targets, seed)

    # existing sensors on candidates: part of the chosen set A (Krause's V∖A leaves them out)
    taken = at_candidates(existing, cands.coords) if existing is not None else []
    g = placement.greedy(PlacementRequest(
        cands, tgt, existing, tuple(int(t) for t in taken), strategy, criterion, n, screened,
        max_memory, lazy, dense_limit, max_evaluations, seed))
    pb = g.pb
    try:
        picks, stopped = run_greedy(g, n, active, costs, budget, min_distance, cands.coords)
    finally:
        g.close()

    ys = pb.y_scale
    names = tuple(names) if names is not None else _default_names(n_dims)
    if len(names) != n_dims:
        raise InputError(f"names must give {n_dims} column names; got {names!r}.")
    idx = np.array([p["index"] for p in picks], dtype=np.int64)
    data = {"order": np.arange(1, len(picks) + 1), "index": idx}
    for j, name in enumerate(names):
        data[name] = cands.coords[idx, j] if len(picks) else np.array([])
    score_scale = ys**2 if strategy in ("variance", "reduction") else 1.0
    data["score"] = np.array([p["score"] * score_scale for p in picks])
    data["std_before"] = np.array([math.sqrt(max(p["var_latent"], 0.0)) * ys for p in picks])
    data["std_reduction"] = np.array([p["std_reduction"] * ys for p in picks])
    data["mean_std_after"] = np.array([p["mean_std_after"] * ys for p in picks])
    if costs is not None:
        c = costs[idx] if len(picks) else np.array([])
        data["cost"] = c
        data["cumulative_cost"] = np.cumsum(c)
    df = pd.DataFrame(data)
    screen = g.screen.summary() if g.screen is not None else {}
    df.attrs.update({"strategy": strategy, "criterion": criterion if strategy == "mi" else None,
                     "n_candidates": N, "n_targets": pb.tops.n, "targets_thinned": thinned,
                     "min_distance": min_distance, "min_distance_auto": auto,
                     "criterion_gap": screen.get("criterion_gap", 0.0),
                     "exact_evaluations": screen.get("exact_evaluations"),
                     "stopped": stopped, "coord_names": list(names),
                     "model": placement.label})
    if stopped != "n":
        warnings.warn(f"only {len(picks)} of {n} sites could be placed ({stopped}).",
                      PlacementWarning, stacklevel=2)
    return df
