"""The wavelet model: a multiresolution variational GP with sparse statistics (docs/wavelets.md).

Modules: :mod:`~geogp.models.wavelet.regressor` (:class:`WaveletRegressor`), :mod:`~.prior`
(the coefficient variances λ(θ)), :mod:`~.bound` (the collapsed bound and the posterior).
"""

from geogp.models.wavelet.bound import (
    WaveletPosterior,
    WaveletProblem,
    collapsed_bound,
    make_problem,
    posterior,
)
from geogp.models.wavelet.regressor import WaveletRegressor

__all__ = [
    "WaveletProblem",
    "WaveletPosterior",
    "make_problem",
    "collapsed_bound",
    "posterior",
    "WaveletRegressor",
]
