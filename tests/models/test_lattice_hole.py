"""The lattice model's oscillating operator (``hole_effect``, #41 item 1): the precision
c (κ⁴ + 2bκ²L + L²), b = cos πθ = 1 − u, against dense algebra written independently, its
continuum covariance, and the fit that chooses it on periodic fields."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.integrate
import scipy.special
import xarray as xr

import geogp
from geogp.exceptions import InputError
from geogp.linalg import HAVE_CHOLMOD
from geogp.models import lattice as lm
from tests.models.test_lattice import (
    BACKENDS,
    _assert_gradient_matches_central_differences,
    _data,
    _params,
    _prior_covariance_from_centre,
    _problem_and_reference,
    dense_laplacian,
    dense_reml,
)

H = (1.0, 0.7)


def variance_factor(u: float) -> float:
    """∫₀^∞ dt / (t² + 2(1 − u)t + 1) by quadrature: the marginal variance relative to α = 2."""
    return scipy.integrate.quad(lambda t: 1.0 / (t * t + 2.0 * (1.0 - u) * t + 1.0), 0.0,
                                np.inf, epsabs=1e-13, epsrel=1e-13)[0]


def dense_hole_precision(shape, h, rho, sd, u):
    """c (κ⁴ I + 2(1 − u) κ² L + L²), κ² = 8/ρ², c = A h(u) / (4π κ² s²)."""
    lap = dense_laplacian(shape, h)
    k2 = 8.0 / rho**2
    c = h[0] * h[1] * variance_factor(u) / (4.0 * math.pi * k2 * sd**2)
    return c * (k2**2 * np.eye(lap.shape[0]) + 2.0 * (1.0 - u) * k2 * lap + lap @ lap)


def _hole(theta: dict, u: float) -> dict:
    return dict(theta, hole=np.float64(u))


@pytest.mark.parametrize("backend", BACKENDS)
def test_hole_lml_and_log_det_equal_dense_algebra(rng, backend):
    prob, cells, y, X, shape = _problem_and_reference(rng, 2, 3, backend, H)
    for rho, sd, ns, u in [(3.0, 1.2, 0.3, 0.4), (1.5, 0.7, 0.05, 1.9), (4.0, 1.0, 0.2, 1e-4),
                           (2.0, 0.9, 0.1, 1.0)]:
        theta = _hole(_params(rho, sd, ns), u)
        Q = dense_hole_precision(shape, H, rho, sd, u)
        got = float(lm.log_marginal_likelihood(theta, prob))
        assert got == pytest.approx(dense_reml(Q, cells, y, X, ns**2), rel=1e-10, abs=1e-10)
        _, logdet_q, _, _ = lm.precision(theta, prob)
        assert float(logdet_q) == pytest.approx(np.linalg.slogdet(Q)[1], rel=1e-11)


def test_hole_zero_is_alpha2_and_the_series_meets_the_closed_form(rng):
    prob, *_ = _problem_and_reference(rng, 2, 1, "dense", H)
    theta = _params(2.5, 0.8, 0.1)
    plain = float(lm.log_marginal_likelihood(theta, prob))
    assert float(lm.log_marginal_likelihood(_hole(theta, 0.0), prob)) == pytest.approx(
        plain, rel=1e-13)
    # either side of the switch between the series and arccos (u = 1e-3)
    below = float(lm.log_marginal_likelihood(_hole(theta, 1e-3 - 1e-9), prob))
    above = float(lm.log_marginal_likelihood(_hole(theta, 1e-3 + 1e-9), prob))
    assert below == pytest.approx(above, rel=1e-9)


@pytest.mark.skipif(not HAVE_CHOLMOD, reason="needs CHOLMOD")
@pytest.mark.parametrize("u", [0.0, 1.2])
def test_hole_gradient_matches_finite_differences(rng, u):
    prob, *_ = _problem_and_reference(rng, 2, 3, "cholmod", H)
    _assert_gradient_matches_central_differences(_hole(_params(2.0, 0.9, 0.2), u), prob)


def test_hole_prior_covariance_is_the_damped_oscillation():
    """Away from the boundary the covariance of (κ⁴ − 2bκ²Δ + Δ²) g = W is
    −s² · 2 Im K₀(κ e^{iφ/2} r) / φ, φ = πθ (partial fractions of its spectrum). Tolerance
    (stated): variance within 3 %, correlation within 0.02 for r = 1..50 cells, at ρ = 24
    cells and b = −0.8 (κh ≈ 0.12, as in the Matérn checks of test_lattice.py)."""
    n1, rho, sd, u = 161, 24.0, 1.3, 1.8
    col = _prior_covariance_from_centre(n1, _hole(_params(rho, sd, 1.0), u))
    assert col[0] == pytest.approx(sd**2, rel=0.03)
    kappa, phi = math.sqrt(8.0) / rho, math.acos(1.0 - u)
    r = np.arange(1, 51)
    want = -2.0 * np.imag(scipy.special.kv(0, kappa * np.exp(0.5j * phi) * r)) / phi
    np.testing.assert_allclose(col[1:51] / col[0], want, atol=0.02)
    assert want.min() < -0.1  # a hole effect indeed: negative correlation at half a wave


def _periodic(n=96, period=16, gap=36, seed=3):
    """A sum of two waves on n × n cells of 100 m (noise 0.1), 10 % scattered gaps and a square
    gap of ``gap`` cells at the centre; returns (DataArray, latent field, gap mask)."""
    rng = np.random.default_rng(seed)
    axis = np.arange(n) * 100.0
    yy, xx = np.meshgrid(axis, axis, indexing="ij")
    f = np.sin(2 * np.pi * xx / (period * 100.0) + 1.0) + np.cos(2 * np.pi * yy / (period * 100.0))
    z = f + 0.1 * rng.standard_normal(f.shape)
    hole = np.zeros(f.shape, bool)
    lo = (n - gap) // 2
    hole[lo:lo + gap, lo:lo + gap] = True
    values = np.where(hole | (rng.random(f.shape) < 0.1), np.nan, z)
    da = xr.DataArray(values, dims=("y", "x"), coords={"y": axis, "x": axis})
    return da.rio.write_crs(32633), f, z, hole


@pytest.fixture(scope="module")
def periodic_fit():
    da, f, z, hole = _periodic()
    return geogp.fit(da), da, f, z, hole


def test_auto_takes_the_oscillating_covariance_on_a_periodic_field(periodic_fit):
    """The front end's defaults on a periodic field with a gap over two periods wide: the
    oscillating operator wins, its spectral peak is the field's wavelength (within 10 %), and
    in the gap it beats predicting the mean (#41 item 1's acceptance), its intervals covering
    at least 0.85 of the hidden noisy values (the issue's 0.85–0.99 on its 200 × 200 family:
    tests/reliability/test_large_gaps_*.py; here the mean is so close that the noise alone
    makes the interval cover 0.99)."""
    model, da, f, z, hole = periodic_fit
    est = model.estimators_[0]
    assert est.hole_ and est.alpha_ == 2
    table = model.hyperparameters()
    assert table["wavelength"].iloc[0] == pytest.approx(1600.0, rel=0.1)
    assert "wavelength 1.6" in model.summary()
    pred = model.predict(like=da)
    mean, std = pred["mean"].values[hole], pred["std"].values[hole]
    assert np.sqrt(np.mean((mean - f[hole]) ** 2)) <= np.sqrt(np.mean(f[hole] ** 2))
    assert np.mean(np.abs(z[hole] - mean) <= 1.96 * std) >= 0.85


def test_the_oscillating_model_round_trips_through_a_model_file(periodic_fit, tmp_path):
    model, da, *_ = periodic_fit
    path = tmp_path / "m.npz"
    model.save(path)
    back = geogp.load_model(path)
    assert back.estimators_[0].hole_
    a, b = model.predict(like=da), back.predict(like=da)
    np.testing.assert_allclose(b["mean"].values, a["mean"].values, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(b["std"].values, a["std"].values, rtol=1e-9, atol=1e-12)
    assert back.summary().splitlines()[1].split("; fit in")[0] == (
        model.summary().splitlines()[1].split("; fit in")[0])


def test_auto_keeps_matern_on_a_smooth_field_that_is_not_periodic():
    """Gaussian bumps of random sign (lengthscale 10 cells) on 64 × 64 cells: smooth, so the
    defaults try both α = 3 and the oscillation, and there is no spectral peak to find, so
    Matérn ν = 2 is kept (as on 4 seeds of 96 × 96 cells measured, where the two choices' gap
    scores were then the same)."""
    rng = np.random.default_rng(0)
    n = 64
    yy, xx = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    f = sum(rng.normal() * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 200.0)
            for cy, cx in rng.uniform(-10, n + 10, (12, 2)))
    v = np.where(rng.random(f.shape) < 0.1, np.nan, f + 0.05 * rng.standard_normal(f.shape))
    axis = np.arange(n) * 100.0
    da = xr.DataArray(v, dims=("y", "x"), coords={"y": axis, "x": axis}).rio.write_crs(32633)
    est = geogp.fit(da).estimators_[0]
    assert not est.hole_ and est.alpha_ == 3
    assert lm.gmrf.PARAM_HOLE not in est.params_


def test_hole_effect_settings_are_checked():
    v = np.ones((6, 6))
    v[0, 0] = 2.0
    axes = [np.arange(6.0), np.arange(6.0)]
    with pytest.raises(InputError, match="hole_effect must be True, False or 'auto'"):
        lm.LatticeRegressor(2, hole_effect="yes").fit_grid(axes, v)
    with pytest.raises(InputError, match="hole_effect=True needs alpha=2"):
        lm.LatticeRegressor(3, hole_effect=True).fit_grid(axes, v)
    with pytest.raises(InputError, match="hole_effect=True needs alpha=2"):
        lm.LatticeRegressor(2, hole_effect=True, second_range=True).fit_grid(axes, v)


def test_forced_hole_effect_fits_within_its_bounds_and_its_likelihood_is_exact(rng):
    obs, v = _data(rng, shape=(12, 13))
    m = 2
    est = lm.LatticeRegressor(2, margin=m, fit_cells=None, hole_effect=True, maxiter=30)
    est.fit_grid([np.arange(12.0), np.arange(13.0)], v)
    p = {k: float(x) for k, x in est.params_.items()}
    assert est.hole_ and 0.0 <= p["hole"] <= lm.gmrf.HOLE_MAX
    shape = (12 + 2 * m, 13 + 2 * m)
    Q = dense_hole_precision(shape, (1.0, 1.0), math.exp(p["log_range"]), math.exp(p["log_sd"]),
                             p["hole"])
    r, c = np.nonzero(obs)
    want = dense_reml(Q, (r + m) * shape[1] + c + m, est.scaler_.y(v[obs]),
                      est._trend(r + m, c + m), math.exp(2 * p["log_noise"]))
    assert est.log_likelihood_ == pytest.approx(want, abs=1e-6)
