"""Issue #32, hardening round 2, item 3 (prediction far from the data): the trend's posterior
variance is part of ``std`` (universal kriging), and predictions far outside the data warn."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.linalg as sla
import xarray as xr

import geogp
from geogp.cli import main
from geogp.core.trend import basis
from geogp.exceptions import ExtrapolationWarning
from geogp.features.afs_dft import log_lambda as _log_lambda
from geogp.models.afs import AFSRegressor


def _points(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, size=(n, 2))
    y = 20 + np.sin(5 * X[:, 0]) + 2 * X[:, 1] + 0.1 * rng.standard_normal(n)
    return X, y


@pytest.fixture(scope="module")
def afs():
    """A linear-trend AFS model on 80 points in the unit square, its window 9 wide."""
    X, y = _points()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = AFSRegressor("matern32", n_features=64, mean="linear", margin=4.0, alias_tol=None,
                         maxiter=200).fit(X, y)
    return m, X, y


def _universal_kriging(model, X, y, Xt):
    """Dense universal kriging in standardised units under the model's own prior
    C = ΦΛΦᵀ + σ²I (N × N): GLS β, mean and latent variance
    k** − k*ᵀC⁻¹k* + (h − HᵀC⁻¹k*)ᵀ(HᵀC⁻¹H)⁻¹(h − HᵀC⁻¹k*)."""
    sc = model.scaler_
    Xs, ys, Ts = sc.x(X), sc.y(y), sc.x(Xt)
    lam = np.exp(np.asarray(_log_lambda(model.features_, model.kernel_)))
    P, Pt = np.asarray(model.features_(Xs)), np.asarray(model.features_(Ts))
    H, Ht = basis(Xs, model.powers_), basis(Ts, model.powers_)
    cf = sla.cho_factor(P @ (lam[:, None] * P.T) + model.noise_ * np.eye(len(ys)), lower=True)
    Ks = P @ (lam[:, None] * Pt.T)  # (N, N*)
    psi = H.T @ sla.cho_solve(cf, H)
    beta = np.linalg.solve(psi, H.T @ sla.cho_solve(cf, ys))
    mean = Ht @ beta + Ks.T @ sla.cho_solve(cf, ys - H @ beta)
    u = Ht.T - H.T @ sla.cho_solve(cf, Ks)  # (p, N*)
    var = (model.kernel_.variance_at_zero - np.sum(Ks * sla.cho_solve(cf, Ks), axis=0)
           + np.sum(u * np.linalg.solve(psi, u), axis=0))
    return beta, np.linalg.inv(psi), mean, var


def test_issue32_extrapolation_std_includes_trend_variance(afs):
    """Inside the data and 3 extents away, AFS's latent variance is the dense universal-
    kriging variance (to 1e-8), and β is the GLS estimate well within its standard error.
    Before the fix the far variance was the prior's, a fraction of the trend's."""
    model, X, y = afs
    Xt = np.array([[0.5, 0.5], [0.1, 0.9], [4.0, 4.0], [-3.0, 0.5], [0.5, 4.0]])
    beta, cov_beta, mean, var = _universal_kriging(model, X, y, Xt)
    se = np.sqrt(np.diag(cov_beta))
    assert np.all(np.abs(model.beta_ - beta) < 0.01 * se)
    pred = model.predict(Xt)
    ys2 = model.scaler_.y_scale**2
    np.testing.assert_allclose(pred.var_latent, ys2 * var, rtol=1e-8)
    sd_mean = np.sqrt(pred.var_latent)
    assert np.all(np.abs(pred.mean - (model.scaler_.y_mean + model.scaler_.y_scale * mean))
                  < 0.01 * sd_mean)
    prior = ys2 * model.kernel_.variance_at_zero
    assert pred.var_latent[2:].min() > 3 * prior  # far: the trend's variance dominates
    # the grid route (separable transforms) gives the same variance as the point route
    axes = [np.array([0.5, 4.0]), np.array([0.5, 4.0])]
    g = model.predict_grid(axes)
    p = model.predict(np.array([[0.5, 0.5], [0.5, 4.0], [4.0, 0.5], [4.0, 4.0]]))
    np.testing.assert_allclose(g.var_latent.ravel(), p.var_latent, rtol=1e-9)


def test_issue32_extrapolation_samples_carry_trend_variance(afs):
    """Samples draw β with the field: far away their variance is several times the prior's,
    and it is predict()'s latent variance less the features' truncation k(0) − φᵀΛφ (within
    Monte-Carlo error)."""
    model, _, _ = afs
    Xt = np.array([[4.0, 4.0], [0.5, 0.5]])
    s = model.sample(Xt, 4000, seed=1)
    pred = model.predict(Xt)
    lam = np.exp(np.asarray(_log_lambda(model.features_, model.kernel_)))
    Phi = np.asarray(model.features_(model.scaler_.x(Xt)))
    want = pred.var_latent - model.scaler_.y_scale**2 * (model.kernel_.variance_at_zero
                                                         - Phi**2 @ lam)
    assert np.all(np.abs(s.var(axis=0) / want - 1) < 5 * np.sqrt(2 / 4000))
    assert s[:, 0].var() > 3 * model.scaler_.y_scale**2 * model.kernel_.variance_at_zero


@pytest.mark.slow  # about 12 s: compiling the matrix-free bound and posterior
def test_issue32_extrapolation_iterative_solver_matches_dense():
    """The matrix-free route's trend variance (CG solves) equals the dense route's at the
    same θ."""
    from geogp.models.afs.trend import trend_variance_points

    X, y = _points(120, seed=2)
    kw = dict(kernel="matern32", n_features=100, mean="linear", margin=2.0, optimize=False,
              lengthscale=0.3, noise=0.05, alias_tol=None, dense_block=20, n_samples=2, n_probes=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        md = AFSRegressor(solver="dense", **kw).fit(X, y)
        mi = AFSRegressor(solver="iterative", **kw).fit(X, y)
    assert mi.stats_.matrix_free
    Ts = md.scaler_.x(np.array([[0.5, 0.5], [2.5, 2.5], [-1.5, 0.2]]))
    a, b = trend_variance_points(md, Ts), trend_variance_points(mi, Ts)
    assert a[1] > 0.5  # the far points' trend variance is not negligible
    np.testing.assert_allclose(b, a, rtol=1e-4)


def _table(n=60, seed=3):
    rng = np.random.default_rng(seed)
    x, y = 5e5 + rng.uniform(0, 5e4, n), 5e6 + rng.uniform(0, 5e4, n)
    v = 20 + np.sin(x / 1e4) + (x - 5.25e5) / 2.5e4 + 0.1 * rng.standard_normal(n)
    return pd.DataFrame({"x": x, "y": y, "value": v})


def _grid(x0, y0, step=5e3, ny=4, nx=5):
    return xr.DataArray(np.full((ny, nx), np.nan), dims=("y", "x"),
                        coords={"y": y0 - step * np.arange(ny),
                                "x": x0 + step * np.arange(nx)}).rio.write_crs(32633)


FAST = dict(n_features=64, maxiter=30, alias_tol=None)


def test_issue32_extrapolation_warns_far_from_the_data():
    """The issue's case: points spanning 50 km, a grid 4,000 km east. The fit warns at
    predict, naming the distance in km and the data's span; std there exceeds the data's
    spread several times. A grid over the data does not warn."""
    tab = _table()
    far = _grid(4.5e6, 5.04e6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", geogp.exceptions.ApproximationWarning)
        model = geogp.fit(tab, crs=32633, grid=far, **FAST)
        with pytest.warns(ExtrapolationWarning, match=r"up to 3,9\d\d km outside the data, "
                          r"which span 4\d\.\d+ km"):
            pred = model.predict()
        assert float(pred["std"].min()) > 5 * tab["value"].std()
        near = _grid(5.05e5, 5.04e6)
        warnings.simplefilter("error", ExtrapolationWarning)
        model.predict(like=near)
        model.predict(x=[5.1e5], y=[5.01e6], points=True)
        with pytest.raises(ExtrapolationWarning, match="outside the data"):
            model.predict(x=[4.5e6], y=[5.01e6], points=True)


# the geogp command prints its warnings on stderr, where the test reads them: shown, not raised
@pytest.mark.filterwarnings("default::UserWarning")
def test_issue32_extrapolation_cli_warns(tmp_path, capsys):
    """``geogp fit points.csv --like far.tif`` prints the warning as one line."""
    csv, like = tmp_path / "p.csv", tmp_path / "far.tif"
    _table().to_csv(csv, index=False)
    _grid(4.5e6, 5.04e6).rename("g").rio.to_raster(like)
    assert main(["fit", str(csv), "--crs", "EPSG:32633", "--like", str(like), "--out",
                 str(tmp_path / "o.tif"), "--features", "64", "--maxiter", "30", "-q"]) == 0
    err = capsys.readouterr().err
    assert "geogp: warning: prediction locations lie up to 3,9" in err, err
