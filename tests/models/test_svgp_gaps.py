"""The SVGP's q at fixed θ is the ELBO's optimum, and the rate inside a gap is the posterior's
(issue #31 item 4: a hot spot in a gap, a summary of NaNs, a silent fit).

References, independent of the code under test: Gaussian VI of the weight-space model by scipy
BFGS with hand-written gradients (tests/_reference/svgp_vi.py), and the Laplace approximation of
the exact GP (dense Matérn-3/2 kernel of tests/_reference/kernels_np.py, Newton iterations).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sps
import xarray as xr

import geogp
from geogp.core.kernels import Matern32
from geogp.models.svgp.regressor import SVGPRegressor

from _reference import kernels_np
from _reference.svgp_vi import laplace_exact_gp, ref_vi


def _psi(model, X):
    ff, k = model.features_, model.kernel_
    return ff(model.scaler_.x(X)) * np.exp(0.5 * np.asarray(ff.log_lambda(k)))


@pytest.mark.parametrize("kind", ["poisson", "bernoulli"])
def test_exact_q_is_the_optimum_after_a_short_adam_run(kind):
    """50 minibatch Adam steps leave q far from the optimum; exact_q moves it there."""
    rng = np.random.default_rng(11)
    X = rng.uniform(0, 10, (150, 2))
    f = np.sin(0.6 * X[:, 0]) + 0.5 * np.cos(0.4 * X[:, 1])
    y = rng.poisson(np.exp(1 + f)).astype(float) if kind == "poisson" else \
        (rng.uniform(size=f.size) < sps.ndtr(2 * f)).astype(float)
    k = Matern32(lengthscale=[0.7, 0.7], variance=1.0)
    kw = dict(n_features=24, learn_hyperparameters=False, batch_size=30, maxiter=50)
    raw = SVGPRegressor(kind, k, exact_q=False, **kw).fit(X, y)
    model = SVGPRegressor(kind, k, **kw).fit(X, y)
    Psi = _psi(model, X)
    m, L, b, e_ref = ref_vi(Psi, y, float(k.variance_at_zero), kind, 0.0)
    assert raw.elbo_ < e_ref - 1.0  # Adam alone: more than a nat short
    assert abs(model.elbo_ - e_ref) <= 1e-7 * abs(e_ref)
    assert model.q_passes_ >= 2
    np.testing.assert_allclose(model.q_mean_, m, atol=1e-5)
    np.testing.assert_allclose(model.q_chol_ @ model.q_chol_.T, L @ L.T, atol=1e-5)
    assert model.mean_ == pytest.approx(b, abs=1e-5)


@pytest.fixture(scope="module")
def gap_fit():
    """A 24 × 30 Poisson raster with a 10 × 12 gap, fitted at fixed θ by minibatch Adam
    through the front end (with progress bars, captured)."""
    rng = np.random.default_rng(4)
    ny, nx = 24, 30
    Y, Xg = np.meshgrid(np.arange(ny, dtype=float), np.arange(nx, dtype=float), indexing="ij")
    f = 0.5 * np.sin(Xg / 4.0 + 1) + 0.4 * np.cos(Y / 3.5) + np.log(2.0)
    z = rng.poisson(np.exp(f)).astype(float)
    gap = np.zeros((ny, nx), bool)
    gap[7:17, 9:21] = True
    z[gap] = np.nan
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": 5.5e6 - 1e3 * np.arange(ny),
                                                  "x": 5e5 + 1e3 * np.arange(nx)})
    da = da.rio.write_crs(32633)
    k = Matern32(lengthscale=0.4, variance=0.4)
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        model = geogp.fit(da, likelihood="poisson", kernel=k, n_features=400, progress=True,
                          learn_hyperparameters=False, batch_size=64, maxiter=150)
        pred = model.predict()
    return da, gap, model, pred, err.getvalue()


def test_gap_rate_matches_exact_gp_laplace(gap_fit):
    da, gap, model, pred, _ = gap_fit
    est = model.estimators_[0]
    yy, xx = np.meshgrid(da.y.values, da.x.values, indexing="ij")
    Xs = est.scaler_.x(np.stack([yy.ravel(), xx.ravel()], 1))
    obs = np.isfinite(da.values.ravel())
    K = kernels_np.gram("matern32", Xs[obs], Xs[obs], 0.4, 0.4)
    Ks = kernels_np.gram("matern32", Xs, Xs[obs], 0.4, 0.4)
    mu, var = laplace_exact_gp(K, da.values.ravel()[obs], Ks, np.full(Xs.shape[0], 0.4),
                               est.mean_)
    ref = np.exp(mu + var / 2).reshape(da.shape)  # E[rate] under the Laplace posterior
    rate = pred["mean"].values
    rel = np.abs(rate / ref - 1)[gap]
    # VI and Laplace are different approximations (VI's E[rate] lies a few % apart from
    # Laplace's here, evenly over the gap), and the prior here is AFS's: measured 4.0 % at
    # most, 3.3 % on average
    assert rel.max() < 0.06 and rel.mean() < 0.045
    lat = pred["std_latent"].values[gap]
    np.testing.assert_allclose(lat, np.sqrt(var.reshape(da.shape)[gap]), rtol=0.05)


def test_summary_reports_the_models_own_hyperparameters(gap_fit):
    da, _, model, _, _ = gap_fit
    text = model.summary()
    assert "nan" not in text.lower()
    assert "no noise term" in text and "noise sd" not in text
    table = model.hyperparameters()
    assert "noise_sd" not in table.columns and not table.isna().any().any()
    # θ was fixed: the signal sd is √0.4 (log rate), the lengthscale 0.4 standardised units
    obs = np.isfinite(da.values)
    yy, xx = np.meshgrid(da.y.values, da.x.values, indexing="ij")
    row = table.iloc[0]
    assert row["signal_sd"] == pytest.approx(np.sqrt(0.4), rel=1e-12)
    assert row["lengthscale_y"] == pytest.approx(0.4 * yy[obs].std(), rel=1e-9)
    assert row["lengthscale_x"] == pytest.approx(0.4 * xx[obs].std(), rel=1e-9)
    assert f"sd {np.sqrt(0.4):.4g}" in text and "150 Adam steps on minibatches of 64" in text


def test_gaussian_and_student_t_summaries():
    rng = np.random.default_rng(2)
    z = rng.normal(3.0, 2.0, (12, 14))
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": 1e3 * np.arange(12.0),
                                                  "x": 1e3 * np.arange(14.0)}).rio.write_crs(32633)
    kw = dict(n_features=16, maxiter=5, learn_hyperparameters=False)
    g = geogp.fit(da, likelihood="student_t", **kw)
    row = g.hyperparameters().iloc[0]
    assert row["t_dof"] == 4.0 and row["t_scale"] == pytest.approx(0.5 * z.std(), rel=1e-9)
    assert "nan" not in g.summary().lower() and "Student-t noise" in g.summary()


def test_progress_shows_each_phase(gap_fit):
    *_, err = gap_fit
    assert "training (Adam, 150 steps on minibatches of 64 of 600 points)" in err
    assert "150/150" in err
    assert "optimal q at these hyperparameters" in err
    assert "ELBO on all the data" in err


def test_exact_q_must_be_a_bool():
    from geogp.exceptions import InputError
    X = np.random.default_rng(0).uniform(size=(20, 2))
    with pytest.raises(InputError, match="exact_q must be True or False"):
        SVGPRegressor("poisson", exact_q="yes", maxiter=2).fit(X, np.ones(20))
