"""Robust fits: observations that a cloud mask missed, and other gross errors.

Noise model (``LatticeRegressor(robust=True)``, ``AFSRegressor(robust=True)``): each
observation's error is, with prior probability 1 − π_d, the model's N(0, σ²), and with
probability π_d a gross error N(μ_o, σ_o²); on a raster d is the cell's distance to the
nearest missing cell (1, 2, … , :data:`DISTANCE_CLASSES` or more cells), because masks leak
at their edges; scattered points have one class.

It is fitted by EM, in the form of a loss that enters each model as per-observation weights
(issue #44: on the lattice each step one CHOLMOD factorisation, on AFS one weighted data pass
into the statistics):

* E-step: the responsibility ρ_i that observation i is clean, from its leave-one-out
  (cavity) predictive N(μ_₋ᵢ, v_₋ᵢ), exact for the current Gaussian posterior:
  v_₋ᵢ = 1/(1/v_i − w_i/σ²), μ_₋ᵢ = v_₋ᵢ (m_i/v_i − w_i ỹ_i/σ²). The posterior's own residual
  would not do: at a small σ² the field follows an outlier and hides it.
* M-step: the expected complete-data log-likelihood is Gaussian in f_i with precision
  w_i/σ², w_i = ρ_i + (1 − ρ_i) σ²/σ_o², and target ỹ_i = y_i − (1 − ρ_i) μ_o σ²/(σ_o² w_i):
  θ by weighted REML (:func:`~geogp.models.lattice.gmrf.make_problem`'s ``weights``), and
  π_d, μ_o, σ_o² in closed form.

Clean data give π_d → 0 and weights → 1, the Gaussian fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

__all__ = ["DISTANCE_CLASSES", "Contamination", "gap_distance_class", "cavity"]

# distance classes to the nearest gap: 1, 2, ..., DISTANCE_CLASSES or more cells
DISTANCE_CLASSES = 6
_PI_BOUNDS = (1e-4, 0.5)  # a gross error stays the exception, and never impossible
_OUTLIER_VAR_MIN = 10.0  # σ_o² ≥ 10 σ²: the gross-error component stays the wider one
_CHI2_MEDIAN = 0.454936  # median of χ² with one degree of freedom


def gap_distance_class(observed: np.ndarray) -> np.ndarray:
    """(N,) class 0 … DISTANCE_CLASSES − 1 of each observed cell (row-major order): its
    chessboard distance to the nearest missing cell, minus one, capped."""
    obs = np.asarray(observed, dtype=bool)
    if obs.all():  # no gap anywhere: every cell is far from one
        return np.full(int(obs.sum()), DISTANCE_CLASSES - 1)
    dist = ndimage.distance_transform_cdt(obs, metric="chessboard")
    return np.minimum(dist[obs], DISTANCE_CLASSES) - 1


def cavity(mean: np.ndarray, var: np.ndarray, y: np.ndarray,
           noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-out predictive (μ_₋ᵢ, v_₋ᵢ) of the latent f_i from its posterior N(mean, var)
    under a Gaussian observation y_i with noise variance ``noise`` (per cell)."""
    prec = np.maximum(1.0 / var - 1.0 / noise, 1e-12 / var)  # rounding at data-free cells
    v = 1.0 / prec
    return v * (mean / var - y / noise), v


def _log_normal(r: np.ndarray, var: np.ndarray | float) -> np.ndarray:
    return -0.5 * (np.log(2.0 * np.pi * var) + r * r / var)


@dataclass
class Contamination:
    """The gross-error part of the noise (standardised units) and its EM step.

    Attributes:
        prior: (DISTANCE_CLASSES,) π_d. shift, var: μ_o and σ_o². clean: (N,) ρ_i of the
        last step. weight, target: (N,) w_i and ỹ_i of the last step. steps: steps taken.
    """

    prior: np.ndarray
    shift: float
    var: float
    clean: np.ndarray
    weight: np.ndarray
    target: np.ndarray
    steps: int = 0

    @classmethod
    def start(cls, y: np.ndarray) -> Contamination:
        """Before the first step: 5 % gross errors as wide as the data, unit weights."""
        n = y.size
        return cls(np.full(DISTANCE_CLASSES, 0.05), 0.0, max(float(np.var(y)), 1e-12),
                   np.ones(n), np.ones(n), np.asarray(y, dtype=np.float64).copy())

    def step(self, mean: np.ndarray, var: np.ndarray, y: np.ndarray, noise: float,
             classes: np.ndarray) -> None:
        """One EM step from the posterior (``mean``, ``var`` of f at the observed cells, fitted
        to the current ``weight`` and ``target``) with noise variance σ² = ``noise``, the
        observations ``y`` and their distance ``classes``."""
        mu, v = cavity(mean, var, self.target, noise / self.weight)
        r = y - mu
        pi = self.prior[classes]
        spread = v + noise
        if self.steps == 0:  # the plain fit absorbed the gross errors into too wide a
            # predictive: rescale it to the residuals' median (χ²₁'s is 0.4549) once
            spread = spread * min(1.0, float(np.median(r * r / spread)) / _CHI2_MEDIAN)
        clean = np.log1p(-pi) + _log_normal(r, spread)
        gross = np.log(pi) + _log_normal(r - self.shift, spread + self.var)
        rho = 1.0 / (1.0 + np.exp(np.clip(gross - clean, -700.0, 700.0)))
        q = 1.0 - rho
        counts = np.bincount(classes, minlength=DISTANCE_CLASSES)
        self.prior = np.clip(np.bincount(classes, q, DISTANCE_CLASSES) / np.maximum(counts, 1),
                             *_PI_BOUNDS)
        total = max(float(q.sum()), 1e-12)
        self.shift = float(q @ r) / total
        self.var = max(float(q @ (r - self.shift) ** 2) / total, _OUTLIER_VAR_MIN * noise)
        self.clean = rho
        self.weight = rho + q * noise / self.var
        self.target = y - q * self.shift * noise / (self.var * self.weight)
        self.steps += 1
