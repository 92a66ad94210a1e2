"""Progress bars (tqdm, on stderr) for the stages of a geodata fit; silent when disabled."""

from __future__ import annotations

import sys

from tqdm import tqdm  # not tqdm.auto: no ipywidgets warning in notebooks

__all__ = ["bar", "TrainingBar"]


def bar(desc: str, total: int | None, enabled: bool, unit: str = "it"):
    """A tqdm bar, or a disabled one (same methods, no output) when ``enabled`` is False."""
    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, file=sys.stderr,
                leave=True, dynamic_ncols=True)


class TrainingBar:
    """Statistics, then L-BFGS iterations with the objective, for one fit.

    Use as the estimator's ``progress(iteration, objective)`` callback: the "statistics" bar
    (reading the data once, plus compiling the objective) closes at the first iteration, and the
    "training" bar counts iterations up to ``maxiter``.
    """

    def __init__(self, label: str, maxiter: int, enabled: bool):
        self.label, self.maxiter, self.enabled = label, int(maxiter), enabled
        self._stats = bar(f"{label}statistics + compile", 1, enabled, unit="pass")
        self._train = self._tiles = None

    def __call__(self, iteration: int, objective: float) -> None:
        if self._train is None:
            self._stats.update(1)
            self._stats.close()
            # no total: L-BFGS usually stops long before maxiter, and an ETA computed
            # against maxiter would be wrong by an order of magnitude
            self._train = bar(f"{self.label}training (L-BFGS, at most {self.maxiter} "
                              "iterations; then the posterior)", None, self.enabled,
                              unit="iter")
        self._train.update(iteration - self._train.n)
        self._train.set_postfix(objective=f"{objective:.6g}", refresh=False)

    def tile(self, phase: str, done: int, total: int) -> None:
        """The lattice model's posterior tiles (``done`` of ``total`` in ``phase``): one bar
        over both passes (statistics, then moments), with tqdm's rate and ETA."""
        if self._tiles is None:
            self._tiles = bar(f"{self.label}posterior on {total} tiles (2 passes)", 2 * total,
                              self.enabled, unit="tile")
        self._tiles.update(1)
        self._tiles.set_postfix_str(phase, refresh=False)
        if self._tiles.n >= self._tiles.total:
            self._tiles.close()

    def close(self) -> None:
        if self._tiles is not None:
            self._tiles.close()
        if self._train is None:
            self._stats.update(1)
        self._stats.close()
        if self._train is not None:
            self._train.total = self._train.n
            self._train.refresh()
            self._train.close()
