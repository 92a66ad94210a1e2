"""Scores pooled over folds, each fold weighted by its hidden cells (for the fold benchmarks)."""

from __future__ import annotations

import math


class Pooled:
    """RMSE, CRPS and 95 % coverage of several methods, pooled over folds."""

    def __init__(self) -> None:
        self.acc: dict[str, list[float]] = {}

    def add(self, method: str, scores: dict, n: int, wall: float) -> None:
        """One fold's ``scores`` (``geogp.metrics.evaluate``) on ``n`` hidden cells."""
        acc = self.acc.setdefault(method, [0.0, 0.0, 0.0, 0, 0.0])
        acc[0] += scores["rmse"] ** 2 * n
        acc[1] += scores["crps"] * n
        acc[2] += scores["coverage95"] * n
        acc[3] += n
        acc[4] += wall

    def print(self, folds: int, width: int = 13, what: str = "folds") -> None:
        print(f"pooled over the {what}:")
        for method, (se, crps, cov, n, wall) in self.acc.items():
            print(f"  {method:{width}s} RMSE {math.sqrt(se / n):.3f}  CRPS {crps / n:.3f}  "
                  f"cov95 {cov / n:.3f}  {wall / folds:6.1f} s per {what[:-1]}")
