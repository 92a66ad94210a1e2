"""The exact Gaussian process (dense Cholesky), for small data: :mod:`~.regressor` (the
model), :mod:`~.family` (its family adapter)."""

from geogp.models.exact.regressor import ExactGP, log_marginal_likelihood, predict

__all__ = ["ExactGP", "log_marginal_likelihood", "predict"]
