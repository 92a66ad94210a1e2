"""A model family written the way a new one plugs in (#42 item 1): its model, its family and
its placement posterior in one module, registered by one registry entry
(``tests/test_placement_contract.py``).

The model is a small exact GP with fixed hyperparameters (squared exponential), dense in
everything: simple enough to check against by brute force.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from geogp.families.generic import Family
from geogp.models.base import Prediction
from geogp.placement.contract import Placement, PlacementRequest


class DenseKriging:
    """Simple kriging with a fixed squared-exponential kernel: a test model."""

    def __init__(self, lengthscale: float = 1.0, sd: float = 1.0, noise: float = 0.1) -> None:
        self.lengthscale, self.sd, self.noise = lengthscale, sd, noise

    def kernel(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        d2 = np.sum((A[:, None, :] - B[None, :, :]) ** 2, axis=-1)
        return self.sd**2 * np.exp(-0.5 * d2 / self.lengthscale**2)

    def fit(self, X, y) -> DenseKriging:
        self.X_, self.y_ = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        return self

    def posterior(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """Posterior covariance of f between the points A and B."""
        C = self.kernel(self.X_, self.X_) + self.noise**2 * np.eye(len(self.X_))
        return self.kernel(A, B) - self.kernel(A, self.X_) @ np.linalg.solve(
            C, self.kernel(self.X_, B))

    def predict(self, X) -> Prediction:
        X = np.asarray(X, dtype=float)
        C = self.kernel(self.X_, self.X_) + self.noise**2 * np.eye(len(self.X_))
        mean = self.kernel(X, self.X_) @ np.linalg.solve(C, self.y_)
        var = np.diag(self.posterior(X, X))
        return Prediction(mean, var, var + self.noise**2)


class _DenseGreedy:
    """The greedy state: the posterior covariance over candidates and targets, conditioned
    on each pick by one rank-one downdate ("variance": a new measurement's variance)."""

    lazy = False
    screen = None

    def __init__(self, model: DenseKriging, request: PlacementRequest) -> None:
        cands = request.candidates.coords
        tgts = cands if request.targets is None else request.targets.coords
        self.C = model.posterior(cands, cands)
        self.CT = model.posterior(tgts, cands)
        self.dT = np.diag(model.posterior(tgts, tgts)).copy()
        self.noise = model.noise**2
        self.pb = SimpleNamespace(ops=SimpleNamespace(n=len(cands)),
                                  tops=SimpleNamespace(n=len(tgts)), y_scale=1.0)

    def score_all(self, active: np.ndarray, *_) -> np.ndarray:
        return np.where(active, np.diag(self.C) + self.noise, -np.inf)

    def refine(self, rank, costs):
        return None

    def add(self, a: int, active: np.ndarray) -> dict:
        d = self.C[a, a] + self.noise
        u = self.CT[:, a].copy()
        info = {"cT_before": self.dT.copy(), "u": u, "d": d, "var_latent": self.C[a, a]}
        col = self.C[:, a].copy()
        self.C -= np.outer(col, col) / d
        self.CT -= np.outer(u, col) / d
        self.dT -= u**2 / d
        return info

    def close(self) -> None:
        pass


class DensePlacement(Placement):
    strategies = ("variance",)
    screens_targets = False
    label = "dense kriging"

    @property
    def n_dims(self) -> int:
        return self.model.X_.shape[1]

    def check(self, strategy: str, criterion: str) -> None:
        if not hasattr(self.model, "X_"):
            raise ValueError("not fitted")

    def min_distance(self, coords: np.ndarray, n_sites: int) -> float:
        return 0.0

    def greedy(self, request: PlacementRequest) -> _DenseGreedy:
        return _DenseGreedy(self.model, request)


class DenseKrigingFamily(Family):
    name = "dense-kriging"
    model_class = DenseKriging
    can_place = can_condition = True

    def placement_strategies(self) -> tuple[str, ...]:
        return DensePlacement.strategies

    def placement(self, est: Any) -> DensePlacement:
        return DensePlacement(est)

    def condition(self, est: Any, X, y=None) -> DenseKriging:
        X = np.asarray(X, dtype=float)
        y = est.predict(X).mean if y is None else np.asarray(y, dtype=float)
        return DenseKriging(est.lengthscale, est.sd, est.noise).fit(
            np.concatenate([est.X_, X]), np.concatenate([est.y_, y]))


FAMILY = DenseKrigingFamily()
