"""The sparse variational GP for non-Gaussian likelihoods: :mod:`~.regressor` (the model),
:mod:`~.elbo` (its ELBO), :mod:`~.newton` (its optimal q), :mod:`~.likelihoods`,
:mod:`~.family` (its family adapter)."""

from geogp.models.svgp.regressor import SVGPPrediction, SVGPRegressor

__all__ = ["SVGPRegressor", "SVGPPrediction"]
