"""Placement on the models whose posterior is a finite set of features: AFS (its Fourier
features) and the exact GP (features of its posterior covariance over the sites). Both run
the greedy of :mod:`geogp.placement.greedy` over a :class:`~geogp.placement.operators.Problem`
(docs/placement.md)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, ClassVar

import jax.numpy as jnp
import numpy as np

from geogp.core.trend import basis
from geogp.core.validation import as_points
from geogp.exceptions import InputError, MemoryEstimateError
from geogp.features.data import Points
from geogp.models.base import check_fitted
from geogp.placement.candidates import auto_min_distance, packing_distance
from geogp.placement.contract import Placement, PlacementRequest
from geogp.placement.greedy import Greedy
from geogp.placement.operators import afs_problem, exact_problem, is_dense
from geogp.placement.posterior import FeaturePosterior, afs_psi, check_afs
from geogp.placement.screen import batch_bytes

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.placement.operators import Problem

__all__ = ["AFSPlacement", "ExactPlacement", "memory_estimate", "FEATURE_STRATEGIES",
           "condition_afs"]

FEATURE_STRATEGIES = ("variance", "mi", "krause")

# per candidate or target location: coordinates, quadratic forms, scores, masks, the grid
# transforms' temporaries (an upper bound of the measured peak: tests/reliability)
_LOCATION_BYTES = 400
# candidates re-evaluated per lazy step of "krause"
_LAZY_BATCH = 16


def memory_estimate(n_candidates: int, n_targets: int, n_features: int, *, same: bool = True,
                    dense: bool = False, strategy: str = "mi", criterion: str = "marginal",
                    matrix_targets: int = 0, screened: bool = False) -> float:
    """Bytes a feature-model placement needs beyond its inputs (an upper bound, checked by
    tests).

    ``same``: the targets are the candidates; ``dense``: the candidate (and target) features
    are stored as matrices; ``matrix_targets``: targets in the explicit |T| × |V_c| matrix of
    the ``"mi"`` criterion (0 on the bounds route, ``screened``, whose batch is capped).
    """
    locations = n_candidates + (0 if same else n_targets)
    out = float(_LOCATION_BYTES) * locations + 8.0 * 8 * n_features**2  # A⁻¹, B, E⁻¹, work
    if dense:  # the feature matrix and the temporaries of its evaluation
        out += 4 * 8.0 * n_features * locations
    if strategy == "mi" and screened:  # a batch of exact evaluations and its f(z) values
        out += 2.0 * batch_bytes(n_targets)
    elif strategy == "mi":
        joint = criterion == "joint"
        out += 8.0 * n_candidates * matrix_targets * (2 if joint else 1)
        out += (8.0 * 3 * matrix_targets**2 + 8.0 * n_features * matrix_targets) if joint else 0
    return out


class _FeaturePlacement(Placement):
    """The greedy over a feature problem, after the memory estimate."""

    strategies = FEATURE_STRATEGIES

    def _n_features(self, request: PlacementRequest) -> int:
        raise NotImplementedError

    def _problem(self, request: PlacementRequest) -> Problem:
        raise NotImplementedError

    def _dense(self, request: PlacementRequest, n_features: int) -> bool:
        return len(request.candidates) * n_features <= request.dense_limit

    def min_distance(self, coords: np.ndarray, n_sites: int) -> float:
        return min(auto_min_distance(self.model), packing_distance(coords, n_sites))

    def greedy(self, request: PlacementRequest) -> Greedy:
        n = len(request.candidates)
        n_t = n if request.targets is None else len(request.targets)
        n_feat = self._n_features(request)
        needed = memory_estimate(
            n, n_t, n_feat, same=request.targets is None, dense=self._dense(request, n_feat),
            strategy=request.strategy, criterion=request.criterion, screened=request.screened,
            matrix_targets=0 if request.screened else n_t)
        if needed > request.max_memory:
            raise MemoryEstimateError(
                f"placement over {n} candidates and {n_t} targets ({n_feat} features)", needed,
                request.max_memory, "Use fewer candidates (a coarser grid, a mask or "
                "exclude=), fewer targets, or raise max_memory.",
                cli_hint="Exclude candidates (--exclude MASK.tif), lower --max-targets or "
                "--features, or raise --max-memory GIB.")
        pb = self._problem(request)
        lazy = is_dense(pb.ops) if request.lazy is None else request.lazy
        return Greedy(pb, request.strategy, request.criterion, bool(lazy), _LAZY_BATCH,
                      request.taken, request.screened, request.max_evaluations)


class AFSPlacement(_FeaturePlacement):
    """AFS: the whitened M × M posterior of its Fourier features."""

    label: ClassVar[str] = "afs"

    @property
    def n_dims(self) -> int:
        return int(self.model.features_.n_dims)

    def check(self, strategy: str, criterion: str) -> None:
        check_afs(self.model)

    def _n_features(self, request: PlacementRequest) -> int:
        return int(self.model.features_.n_features)

    def _problem(self, request: PlacementRequest) -> Problem:
        return afs_problem(self.model, request.candidates, request.targets, request.existing,
                           request.dense_limit)


class ExactPlacement(_FeaturePlacement):
    """The exact GP: features of its posterior covariance over sites, targets and sensors;
    explicit targets beyond ``max_targets`` are thinned (its cost is cubic in them)."""

    label: ClassVar[str] = "exact"
    thins_explicit_targets: ClassVar[bool] = True

    @property
    def n_dims(self) -> int:
        return int(np.shape(self.model.X_train_)[1])

    def check(self, strategy: str, criterion: str) -> None:
        check_fitted(self.model, "X_train_")

    def _n_features(self, request: PlacementRequest) -> int:
        n_t = 0 if request.targets is None else len(request.targets)
        n_e = 0 if request.existing is None else len(request.existing)
        return len(request.candidates) + n_t + n_e

    def _dense(self, request: PlacementRequest, n_features: int) -> bool:
        return True

    def _problem(self, request: PlacementRequest) -> Problem:
        return exact_problem(self.model, request.candidates, request.targets, request.existing)


def condition_afs(model: Any, X: ArrayLike, y: ArrayLike | None = None) -> Any:
    """A copy of a fitted AFS model with observations added, without refitting.

    Hyperparameters, features, standardisation and mean function are kept; the posterior is
    updated by one rank-one step per point (docs/placement.md) and the statistics by the points'
    φφᵀ and φy. Without ``y`` the values are imputed by the predictive mean: only the
    covariance changes (the mean stays the same).

    Args:
        model: fitted :class:`~geogp.models.afs.AFSRegressor`.
        X: (N, D) locations in the model's input units. y: (N,) values or None.

    Returns:
        A shallow copy with updated ``posterior_`` and ``stats_``. Cost O(M³ + N M²).
    """
    check_afs(model)
    X = as_points(X, "X (new observations)")
    Psi = afs_psi(model, X, "new observations")
    sc = model.scaler_
    fp = FeaturePosterior.from_model(model)
    trend = np.zeros(X.shape[0])
    if getattr(model, "beta_", None) is not None:
        trend = basis(sc.x(X), model.powers_) @ model.beta_
    if y is not None:
        y = np.asarray(y, dtype=np.float64).ravel()
        if y.shape != (X.shape[0],) or not np.all(np.isfinite(y)):
            raise InputError(f"y must hold {X.shape[0]} finite values; got shape {y.shape}.")
        ys = sc.y(y)
    else:
        ys = np.zeros(X.shape[0])  # predictive means (standardised), point by point below
    for n in range(X.shape[0]):
        if y is None:
            ys[n] = Psi[n] @ (fp.Ainv @ fp.t) + trend[n]
        fp.add(Psi[n], ys[n] - trend[n])
    stats = model.stats_
    if stats.diagonal:
        stats = stats.with_data(jnp.diag(jnp.asarray(stats.G)), stats.r, stats.F,
                                diagonal=False)
    out = copy.copy(model)
    out.stats_ = stats + model.features_.statistics(
        Points(sc.x(X), ys), method="dense", powers=getattr(model, "powers_", None))
    out.posterior_ = fp.posterior()
    return out
