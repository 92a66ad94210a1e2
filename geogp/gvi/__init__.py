"""Generalised variational inference (GVI, #44): an objective ``loss(q, data) +
divergence(q, prior)`` in place of the negative ELBO's likelihood and KL (docs/gvi.md).

:mod:`geogp.gvi.losses`: expected losses of Gaussian observations under a Gaussian q(f)
(the negative log-likelihood, whose sum with the KL is the negative ELBO; the β- and
γ-divergence scoring rules, robust to outliers; a Huber loss). :mod:`geogp.gvi.divergences`:
divergences between Gaussians (KL, squared 2-Wasserstein, Bhattacharyya, squared Hellinger,
Rényi-α, the squared L2 distance of the densities) and their projected (pGVI) forms, summed
over one-dimensional marginals.
"""

from geogp.gvi.divergences import DIVERGENCES, divergence, projected
from geogp.gvi.losses import LOSSES, expected_loss

__all__ = ["DIVERGENCES", "LOSSES", "divergence", "expected_loss", "projected"]
