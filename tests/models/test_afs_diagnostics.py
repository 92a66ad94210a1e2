"""AFS diagnostics (docs/afs.md, aliasing and truncation): each value against its closed form
or an independent computation, and the warnings on cases built to fail and on benign ones."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import geogp
from geogp.exceptions import ApproximationWarning
from geogp.features.fourier import FourierFeatures
from geogp.models.afs import AFSRegressor
from geogp.models.afs.diagnostics import (
    ALIAS_WARN,
    TRUNCATION_WARN,
    alias_error,
    decay_distance,
    diagnostics,
    warn_if_poor,
)


def _data(seed, N=150, D=1, ell=0.3, noise=0.1, kern=geogp.SquaredExponential):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (N, D))
    K = np.asarray(kern(lengthscale=np.full(D, ell))(X, X)) + noise * np.eye(N)
    return X, np.linalg.cholesky(K) @ rng.normal(size=N)


def _no_approximation_warning(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ApproximationWarning)
        return fit()


def test_decay_distance_matches_closed_forms():
    """k(r e_d) = tol·k(0) at r = ℓ_d√(2 ln 1/tol) (SE) and ℓ_d ln(1/tol) (Matérn-1/2); the grid
    answer never undershoots and is within one step (r_max/2048); r_max when never reached."""
    ell, tol, r_max = np.array([0.3, 0.7]), 0.01, np.array([4.0, 4.0])
    for kern, want in ((geogp.SquaredExponential(ell), ell * np.sqrt(2 * np.log(1 / tol))),
                       (geogp.Matern12(ell, variance=2.5), ell * np.log(1 / tol))):
        got = decay_distance(kern, tol, r_max)
        assert np.all(got >= want - 1e-12) and np.all(got <= want + r_max / 2048 + 1e-12)
    np.testing.assert_array_equal(decay_distance(geogp.Matern12([50.0, 50.0]), tol, r_max), r_max)


def test_diagnostics_match_their_definitions():
    """On an SE model in 2-D (fixed θ): alias = max_d k((W_d − W_xd)e_d)/k(0) and alias_self =
    max_d k(W_d e_d)/k(0) in closed form; truncation = 1 − Σλ/k(0) = t/(N k(0)) with t the
    trace diagnostic from the data (every φ(x)ᵀΛφ(x) = Σλ); truncation_to_noise = t/(Nσ²);
    spectral_edge = S at the top kept frequency per axis over S(0); full lattice: the alias
    sits at 2W."""
    X, y = _data(0, N=120, D=2, ell=0.4)
    ell, var, noise = np.array([0.35, 0.5]), 1.7, 0.2
    m = AFSRegressor(geogp.SquaredExponential(ell, var), noise=noise, optimize=False,
                     n_features=150)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        m.fit(X, y)
    d, ff = m.diagnostics_, m.features_
    Xs = m.scaler_.x(X)
    gap = ff.width - np.ptp(Xs, axis=0)
    np.testing.assert_allclose(d["alias"], np.max(np.exp(-gap**2 / (2 * ell**2))), rtol=1e-12)
    np.testing.assert_allclose(d["alias_self"], np.max(np.exp(-ff.width**2 / (2 * ell**2))),
                               rtol=1e-12)
    lam = np.exp(np.asarray(ff.log_lambda(m.kernel_)))
    Phi = ff(Xs)
    np.testing.assert_allclose(Phi**2 @ lam, lam.sum(), rtol=1e-10)  # φ(x)ᵀΛφ(x) = Σλ
    t = m.trace_diagnostic()
    np.testing.assert_allclose(d["truncation"], 1 - lam.sum() / var, rtol=1e-10)
    np.testing.assert_allclose(d["truncation"], t / (X.shape[0] * var), rtol=1e-8)
    np.testing.assert_allclose(d["truncation_to_noise"], t / (X.shape[0] * noise), rtol=1e-8)
    top = (np.array(ff.n_freq) - 0.5) / ff.width  # odd lattice: z = (k + ½)/W
    np.testing.assert_allclose(d["spectral_edge"],
                               np.max(np.exp(-2 * np.pi**2 * (ell * top) ** 2)), rtol=1e-10)
    np.testing.assert_allclose(d["lengthscale_ratio"], np.max(ell / ff.width), rtol=1e-12)
    assert d["part_share"] == 1.0 and d["n_features"] == ff.n_features
    k, W, Wx = geogp.Matern32([0.6]), np.array([3.0]), np.array([2.5])
    np.testing.assert_allclose(alias_error(k, W, Wx, "full"), float(k.evaluate(np.array([3.5]))),
                               rtol=1e-12)
    np.testing.assert_allclose(alias_error(k, W, Wx, "odd"), float(k.evaluate(np.array([0.5]))),
                               rtol=1e-12)


def test_aliasing_warning_fires_on_the_thesis_window_and_not_on_the_default():
    """SE with ℓ about a third of the data's extent: W = W_x/0.95 leaves the farthest points
    correlated with their alias (warned, with the number and the fix); the default window
    does not warn."""
    X, y = _data(1)
    narrow = AFSRegressor("se", n_features=200, alias_tol=None)
    with pytest.warns(ApproximationWarning, match=r"aliasing: .* Widen the window") as rec:
        narrow.fit(X, y)
    assert narrow.diagnostics_["alias"] > ALIAS_WARN
    assert f"{narrow.diagnostics_['alias']:.3g}" in str(rec[0].message)
    wide = _no_approximation_warning(lambda: AFSRegressor("se", n_features=200).fit(X, y))
    assert wide.diagnostics_["alias"] < ALIAS_WARN


def test_truncation_warning_fires_with_too_few_features_and_not_with_enough():
    """Matérn-1/2 with 12 features misses a large share of its variance (warned: "increase
    n_features"); SE with 200 features on the same data misses none (no warning)."""
    X, y = _data(2, kern=geogp.Matern12)
    few = AFSRegressor("matern12", n_features=12)
    with pytest.warns(ApproximationWarning, match=r"truncation: the 12 features .* Increase "
                                                  r"n_features"):
        few.fit(X, y)
    assert few.diagnostics_["truncation_to_noise"] > TRUNCATION_WARN
    np.testing.assert_allclose(few.diagnostics_["truncation_to_noise"],
                               few.trace_diagnostic() / (X.shape[0] * few.noise_), rtol=1e-8)
    enough = _no_approximation_warning(lambda: AFSRegressor("se", n_features=200).fit(X, y))
    assert enough.diagnostics_["truncation_to_noise"] < 1e-8


def test_lengthscale_and_collapsed_part_warnings():
    """warn_if_poor on diagnostics built to fail each check, and silence on good ones."""
    ff = FourierFeatures.build([0.0], [4.0], 40)
    extent = np.array([3.0])
    good = diagnostics(ff, geogp.SquaredExponential([0.1]), 0.1, extent)
    assert warn_if_poor(good) == []
    long = diagnostics(ff, geogp.SquaredExponential([2.0]), 0.1, extent)
    assert long["lengthscale_ratio"] == pytest.approx(0.5)
    with pytest.warns(ApproximationWarning, match="lengthscale is 0.5 of the window"):
        warn_if_poor(long)
    gone = geogp.SquaredExponential([0.1]) + geogp.Matern12([0.05], variance=1e-6)
    d = diagnostics(ff, gone, 0.1, extent)
    assert d["part_share"] == pytest.approx(1e-6 / (1 + 1e-6))
    with pytest.warns(ApproximationWarning, match="collapsed"):
        warn_if_poor(d)
