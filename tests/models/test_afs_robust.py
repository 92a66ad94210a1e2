"""Robust AFS (issue #44): the gross-error EM of :mod:`geogp.core.robust` on AFS's weighted
statistics. At fixed θ every step equals an independent dense implementation (the feature
model's heteroscedastic posterior in explicit feature space, the same E- and M-steps); with θ
learnt, gross errors are found and their damage undone; plain fits keep their behaviour."""

from __future__ import annotations

import numpy as np
import pytest

import geogp
from geogp.core.robust import Contamination, gap_distance_class
from geogp.exceptions import InputError
from geogp.models.afs import AFSRegressor, fitting
from geogp.models.afs.fitting import ROBUST_STEPS


def _field(X):
    return np.sin(3.0 * X[:, 0]) + np.cos(2.0 * X[:, 1])


def _points(rng, n=400, frac=0.06, shift=4.0):
    X = rng.uniform(-1.0, 1.0, (n, 2))
    f = _field(X)
    y = f + 0.3 * rng.standard_normal(n)
    bad = rng.random(n) < frac
    y[bad] -= shift + rng.uniform(0.0, 2.0, bad.sum())
    return X, f, y, bad


def _dense_em(model: AFSRegressor, Xs: np.ndarray, ys: np.ndarray, classes: np.ndarray):
    """The same EM with the feature model's posterior by dense algebra (standardised units):
    Σ_u = (Λ⁻¹ + ΦᵀWΦ/σ²)⁻¹, mean Φ Σ_u ΦᵀWỹ/σ², latent variance k(0) − φᵀΛφ + φᵀΣ_uφ."""
    ff, k, noise = model.features_, model.kernel_, model.noise_
    lam = np.exp(np.asarray(ff.log_lambda(k)))
    Phi = np.asarray(ff(Xs))
    kvar0 = float(k.variance_at_zero)
    w, target = np.ones(ys.size), ys.copy()

    def moments():
        cov_u = np.linalg.inv(np.diag(1.0 / lam) + Phi.T @ (w[:, None] / noise * Phi))
        mean = Phi @ (cov_u @ (Phi.T @ (w * target))) / noise
        var = kvar0 - (Phi**2) @ lam + np.einsum("nm,mk,nk->n", Phi, cov_u, Phi)
        return mean, var

    em = Contamination.start(ys)
    for _ in range(ROBUST_STEPS):
        em.step(*moments(), ys, noise, classes)
        w, target = em.weight, em.target
    return em, moments()[0]


@pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")  # a coarse, fixed θ
def test_at_fixed_theta_the_em_equals_a_dense_implementation_on_points(rng):
    X, _, y, _ = _points(rng, n=250)
    kw = {"n_freq": (9, 9), "optimize": False, "lengthscale": 0.3, "noise": 0.05,
          "stats_method": "dense"}
    est = AFSRegressor(robust=True, **kw).fit(X, y)
    Xs, ys = est.scaler_.x(X), est.scaler_.y(y)
    em, mean = _dense_em(est, Xs, ys, np.zeros(y.size, dtype=np.int64))
    np.testing.assert_allclose(est.obs_weight_, em.weight, rtol=1e-8, atol=1e-10)
    got = est.predict(X).mean
    np.testing.assert_allclose(got, est.scaler_.y_mean + est.scaler_.y_scale * mean,
                               rtol=1e-8, atol=1e-8)
    np.testing.assert_array_equal(est.observation_weight(X), est.obs_weight_)
    assert np.isnan(est.observation_weight(X[:3] + 1e-3)).all()  # no observation there


@pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")  # a coarse, fixed θ
def test_at_fixed_theta_the_em_equals_a_dense_implementation_on_a_raster(rng, monkeypatch):
    monkeypatch.setattr(fitting, "ROBUST_TEMPER_FOLDS", 0)  # the dense EM is not tempered
    ay, ax = np.linspace(-1.0, 1.0, 21), np.linspace(-1.0, 1.0, 24)
    Y, Xg = np.meshgrid(ay, ax, indexing="ij")
    pts = np.column_stack([Y.ravel(), Xg.ravel()])
    v = (_field(pts) + 0.1 * rng.standard_normal(pts.shape[0])).reshape(Y.shape)
    v[5:10, 6:12] = np.nan  # a cloud, with cold cells at its edge
    v[4, 6:12] -= 5.0
    v[rng.random(v.shape) < 0.1] = np.nan
    obs = np.isfinite(v)
    kw = {"n_freq": (9, 9), "optimize": False, "lengthscale": 0.3, "noise": 0.05}
    est = AFSRegressor(robust=True, **kw).fit_grid([ay, ax], v)
    Xs = est.scaler_.x(np.column_stack([Y[obs], Xg[obs]]))
    em, mean = _dense_em(est, Xs, est.scaler_.y(v[obs]), gap_distance_class(obs))
    np.testing.assert_allclose(est.obs_weight_, em.weight, rtol=1e-8, atol=1e-10)
    grid = est.predict_grid([ay, ax]).mean
    np.testing.assert_allclose(grid[obs], est.scaler_.y_mean + est.scaler_.y_scale * mean,
                               rtol=1e-8, atol=1e-8)
    weights = est.observation_weight(np.column_stack([Y.ravel(), Xg.ravel()])).reshape(v.shape)
    np.testing.assert_array_equal(weights[obs], est.obs_weight_)
    assert np.isnan(weights[~obs]).all()


def test_a_learnt_robust_fit_finds_the_gross_errors_and_undoes_their_damage(rng):
    X, _, y, bad = _points(rng, n=600)
    Xt = rng.uniform(-0.9, 0.9, (300, 2))
    kw = {"n_features": 1000, "stats_method": "dense"}
    plain = AFSRegressor(**kw).fit(X, y)
    robust = AFSRegressor(robust=True, **kw).fit(X, y)
    clean = AFSRegressor(**kw).fit(X[~bad], y[~bad])

    def rmse(model):
        return float(np.sqrt(np.mean((model.predict(Xt).mean - _field(Xt)) ** 2)))

    flagged = robust.obs_weight_ < 0.5
    assert flagged[bad].mean() >= 0.9 and flagged[~bad].mean() <= 0.02
    assert robust.gross_errors()["flagged"] == int(flagged.sum())
    assert rmse(robust) <= 1.1 * rmse(clean) < 0.6 * rmse(plain), (
        rmse(robust), rmse(clean), rmse(plain))
    assert robust.gross_errors()["shift"] < -3.0  # the errors' mean, data units


def test_plain_fits_have_no_weights_and_robust_refusals_are_one_line(rng):
    X, _, y, _ = _points(rng, n=120)
    plain = AFSRegressor(n_features=300, stats_method="dense").fit(X, y)
    for call in (lambda: plain.observation_weight(X), plain.gross_errors):
        with pytest.raises(InputError, match="robust=True"):
            call()
    ay, ax = np.linspace(0.0, 1.0, 12), np.linspace(0.0, 1.0, 13)
    full = np.add.outer(np.sin(ay), np.cos(ax))
    with pytest.raises(InputError, match="grid_mode='exact'"):
        AFSRegressor(robust=True, grid_mode="diagonal", n_freq=(4, 4)).fit_grid([ay, ax], full)


# the front end's default kernel sum on a small raster warns of its approximation, robust or
# not (checked on the clean raster); the plumbing is what is tested here
@pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")
def test_the_front_end_maps_a_robust_afs_fits_weights(rng, tmp_path):
    ay, ax = 1000.0 - 100.0 * np.arange(24), 100.0 * np.arange(26)
    Y, Xg = np.meshgrid(ay, ax, indexing="ij")
    v = np.sin(Y / 600.0) + np.cos(Xg / 500.0) + 0.2 * rng.standard_normal(Y.shape)
    v[8:14, 9:16] = np.nan
    v[7, 9:16] -= 6.0
    import xarray as xr

    da = xr.DataArray(v, dims=("y", "x"), coords={"y": ay, "x": ax}).rio.write_crs(32633)
    model = geogp.fit(da, model="afs", robust=True)
    weight = model.observation_weight()
    assert weight.dims == ("y", "x") and np.isnan(weight.values[~np.isfinite(v)]).all()
    assert weight.values[7, 9:16].max() < 0.5 < float(np.nanmedian(weight.values))
    # a model file keeps the weighted statistics and posterior (the same predictions), not
    # the weights
    model.save(tmp_path / "m.npz")
    again = geogp.load_model(tmp_path / "m.npz")
    np.testing.assert_allclose(again.predict()["std"].values, model.predict()["std"].values,
                               rtol=1e-10)
    with pytest.raises(InputError, match="robust=True"):
        again.observation_weight()


def _clouded_raster(rng, n=40):
    """A rough random field (40 random waves of wavelength ~1) under three clouds, noise 0.1."""
    ay = ax = np.linspace(-1.0, 1.0, n)
    Y, Xg = np.meshgrid(ay, ax, indexing="ij")
    omega, phase = 6.0 * rng.standard_normal((40, 2)), rng.uniform(0, 2 * np.pi, 40)
    f = np.sqrt(2.0 / 40) * np.cos(Y[..., None] * omega[:, 0] + Xg[..., None] * omega[:, 1]
                                   + phase).sum(axis=-1)
    v = f + 0.1 * rng.standard_normal(f.shape)
    for y0, x0 in ((5, 6), (22, 25), (28, 4)):  # clouds, whose shapes the folds move
        v[y0:y0 + 8, x0:x0 + 9] = np.nan
    return [ay, ax], f, v


@pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")  # a fixed θ
def test_tempering_scales_every_variance_and_keeps_the_mean(rng):
    axes, _, v = _clouded_raster(rng)
    est = AFSRegressor(n_freq=(11, 11), optimize=False, lengthscale=0.4, noise=0.01,
                       stats_method="dense").fit_grid(axes, v)
    before = est.predict_grid(axes)
    est._temper(1.7)
    est._set_posterior()
    after = est.predict_grid(axes)
    np.testing.assert_allclose(after.mean, before.mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(after.var_latent / before.var_latent, 1.7**2, rtol=1e-9)
    np.testing.assert_allclose(after.var_observed / before.var_observed, 1.7**2, rtol=1e-9)
    assert est.temperature_ == 1.7


@pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")
def test_robust_raster_predictive_is_tempered_on_gap_folds_where_its_sds_are_too_small(
        rng, monkeypatch):
    """θ fixed with the signal's variance 0.2² of the field's: the gaps' intervals cover
    about half of the truth; the gap-shaped folds find a temperature well above 1, and the
    coverage comes back most of the way (the folds' small clouds are easier than the
    raster's large ones). Scattered points are not tempered."""
    axes, f, v = _clouded_raster(rng)
    gaps = ~np.isfinite(v)

    def fit(folds):
        monkeypatch.setattr(fitting, "ROBUST_TEMPER_FOLDS", folds)
        kw = {"n_freq": (21, 21), "optimize": False, "lengthscale": 0.3, "variance": 0.04,
              "noise": 0.01}
        return AFSRegressor(robust=True, **kw).fit_grid(axes, v)

    def coverage(p):
        return np.mean(np.abs(p.mean - f)[gaps] < 1.96 * np.sqrt(p.var_latent[gaps]))

    narrow, plain = fit(2), fit(0)
    t = narrow.gross_errors()["temperature"]
    assert plain.gross_errors()["temperature"] == 1.0
    assert 1.5 <= t <= 3.0, t
    a, b = narrow.predict_grid(axes), plain.predict_grid(axes)
    assert coverage(b) < 0.65 and coverage(a) > 0.75, (coverage(b), coverage(a))  # 0.54, 0.77
    X, _, y, _ = _points(rng, n=200)
    pts = AFSRegressor(robust=True, n_freq=(9, 9), optimize=False, lengthscale=0.3,
                       noise=0.05).fit(X, y)
    assert pts.gross_errors()["temperature"] == 1.0
