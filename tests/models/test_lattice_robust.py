"""Robust fits of the lattice model (issue #44, item 2): per-cell weights in the sparse
machinery, the EM of the gross-error noise model, and what it buys on contaminated rasters.

References: dense Gaussian algebra with per-observation noise σ²/w_i (REML and universal
kriging), finite differences, leave-one-out by deleting the observation, the whole-lattice
posterior for the tiled one, and the same field without contamination.
"""

from __future__ import annotations

import copy

import jax
import numpy as np
import pytest
import xarray as xr
from scipy import ndimage

import geogp
from geogp.core.robust import DISTANCE_CLASSES, cavity, gap_distance_class
from geogp.exceptions import InputError
from geogp.linalg import HAVE_CHOLMOD
from geogp.models import lattice as lm
from tests.models.test_lattice import (
    BACKENDS,
    _data,
    _params,
    dense_precision,
    mid_covariance,
)

pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.GeographicCoordinatesWarning")


def dense_weighted_reml(K, cells, y, X, noise):
    """REML of y = Xβ + g_c + ε, ε_i ~ N(0, noise_i), β flat, with the prior covariance K."""
    C = K[np.ix_(cells, cells)] + np.diag(noise)
    Ci = np.linalg.inv(C)
    beta = np.linalg.solve(X.T @ Ci @ X, X.T @ Ci @ y)
    r = y - X @ beta
    p = X.shape[1]
    return -0.5 * (np.linalg.slogdet(C)[1] + r @ Ci @ r + (len(y) - p) * np.log(2 * np.pi)
                   + np.linalg.slogdet(X.T @ Ci @ X)[1])


def _weighted_problem(rng, backend, mid=None):
    obs, v = _data(rng)
    m = 2
    shape = (obs.shape[0] + 2 * m, obs.shape[1] + 2 * m)
    r, c = np.nonzero(obs)
    cells = (r + m) * shape[1] + c + m
    y = v[obs]
    X = np.column_stack([np.ones_like(y), r / 4.0])
    w = rng.uniform(0.05, 1.5, y.size)
    prob = lm.make_problem(shape, (1.0, 0.7), 2, cells, y, X, backend=backend, weights=w,
                           mid_scale=mid)
    return prob, shape, cells, y, X, w


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mid", [None, 2])
def test_weighted_likelihood_equals_dense_heteroscedastic_reml(rng, backend, mid):
    prob, shape, cells, y, X, w = _weighted_problem(rng, backend, mid)
    for rho, sd, ns in [(3.0, 1.2, 0.3), (1.5, 0.7, 0.05)]:
        params = _params(rho, sd, ns)
        if mid is None:
            K = np.linalg.inv(dense_precision(shape, (1.0, 0.7), 2, rho, sd))
        else:
            params = {**params, "log_range_mid": np.log(6.0), "log_sd_mid": np.log(0.7)}
            K = mid_covariance(shape, (1.0, 0.7), 2, rho, sd, mid, 6.0, 0.7)
        got = float(lm.log_marginal_likelihood(params, prob))
        assert got == pytest.approx(dense_weighted_reml(K, cells, y, X, ns**2 / w), rel=1e-10)


@pytest.mark.skipif(not HAVE_CHOLMOD, reason="needs CHOLMOD")
def test_weighted_likelihood_gradient_matches_finite_differences(rng):
    prob, *_ = _weighted_problem(rng, "cholmod")
    theta = _params(2.0, 0.9, 0.2)
    grad = jax.grad(lm.log_marginal_likelihood)(theta, prob)
    eps = 1e-5
    for k, v in theta.items():
        up = float(lm.log_marginal_likelihood(dict(theta, **{k: v + eps}), prob))
        dn = float(lm.log_marginal_likelihood(dict(theta, **{k: v - eps}), prob))
        assert float(grad[k]) == pytest.approx((up - dn) / (2 * eps), rel=1e-5, abs=1e-7), k


def test_bad_weights_are_refused(rng):
    obs, v = _data(rng)
    cells = np.flatnonzero(obs)
    y = v[obs]
    for bad in (np.zeros(y.size), np.full(y.size, np.nan), np.ones(y.size + 1)):
        with pytest.raises(InputError, match="weights"):
            lm.make_problem(obs.shape, (1.0, 1.0), 2, cells, y, np.ones((y.size, 1)),
                            weights=bad)


def _fitted_weighted(rng, **kw):
    """A fitted model (θ fixed) whose posterior is recomputed with random weights."""
    obs, v = _data(rng, (14, 16), 0.3)
    ay, ax = 40.0 - 0.5 * np.arange(obs.shape[0]), 3.0 + 0.35 * np.arange(obs.shape[1])
    est = lm.LatticeRegressor(2, margin=2, range=1.3, sd=0.8, noise=0.2, optimize=False,
                              fit_cells=None, large_scale=6, **kw).fit_grid([ay, ax], v)
    w = np.full(obs.shape, np.nan)
    w[obs] = rng.uniform(0.05, 1.5, obs.sum())
    est.params_ = dict(est._stage1_params)
    est.obs_weight_ = w
    return est, obs, est.scaler_.y(v[obs]), w[obs]


def test_weighted_posterior_is_the_dense_posterior_with_per_cell_noise(rng):
    """Mean and variance at every cell against dense kriging with noise σ²/w_i, the
    large-scale features and the trend integrated (their prior from the fitted model)."""
    est, obs, ys, w = _fitted_weighted(rng)
    est._posterior(obs, ys)
    p = est.params_
    shape, m = est.shape_, 2
    K = np.linalg.inv(dense_precision(shape, est.h_, 2, float(np.exp(p["log_range"])),
                                      float(np.exp(p["log_sd"]))))
    rows, cols = np.divmod(np.arange(shape[0] * shape[1]), shape[1])
    feats = est._features(rows, cols)
    lam = np.asarray(lm.spectral_weights(p, np.tile(np.sum(est.freq_**2, axis=1), 2),
                                         est._dw, est.large_scale_kernel))
    K = K + feats @ np.diag(lam) @ feats.T  # the large scales as part of the prior
    X = est._trend(rows, cols)
    r, c = np.nonzero(obs)
    cells = (r + m) * shape[1] + c + m
    C = K[np.ix_(cells, cells)] + np.diag(float(np.exp(2 * p["log_noise"])) / w)
    Ci = np.linalg.inv(C)
    V = np.linalg.inv(X[cells].T @ Ci @ X[cells])
    beta = V @ X[cells].T @ Ci @ ys
    ks = K[:, cells]
    mean = X @ beta + ks @ Ci @ (ys - X[cells] @ beta)
    g = X - ks @ Ci @ X[cells]
    var = np.diag(K) - np.einsum("ij,jk,ik->i", ks, Ci, ks) + np.einsum("ij,jk,ik->i", g, V, g)
    np.testing.assert_allclose(est.posterior_.mean, mean, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(est.posterior_.var, var, rtol=1e-7)


def test_weighted_posterior_on_tiles_matches_the_whole_one(rng):
    est, obs, ys, _ = _fitted_weighted(rng)
    whole = copy.copy(est)
    whole._posterior(obs, ys)
    tiled = copy.copy(est)
    tiled.posterior_tile, tiled.posterior_halo = 6, 14
    tiled._posterior(obs, ys)
    assert tiled.posterior_tiles_ > 1
    sd = np.sqrt(whole.posterior_.var)
    assert np.max(np.abs(tiled.posterior_.mean - whole.posterior_.mean) / sd) < 1e-2
    assert np.max(np.abs(np.sqrt(tiled.posterior_.var) / sd - 1.0)) < 1e-2


def test_cavity_is_the_posterior_without_the_observation(rng):
    """Leave one out by deleting the observation from a dense GP, against the cavity formula
    from the full posterior's marginal and the observation's own noise."""
    x = np.sort(rng.uniform(0, 10, 25))
    K = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2)
    noise = rng.uniform(0.01, 0.5, x.size)
    y = np.sin(x) + np.sqrt(noise) * rng.standard_normal(x.size)
    C = K + np.diag(noise)
    mean = K @ np.linalg.solve(C, y)
    var = np.diag(K - K @ np.linalg.solve(C, K))
    mu, v = cavity(mean, var, y, noise)
    for i in (0, 7, 24):
        keep = np.arange(x.size) != i
        Ck = C[np.ix_(keep, keep)]
        want_mu = K[i, keep] @ np.linalg.solve(Ck, y[keep])
        want_v = K[i, i] - K[i, keep] @ np.linalg.solve(Ck, K[keep, i])
        assert mu[i] == pytest.approx(want_mu, rel=1e-8)
        assert v[i] == pytest.approx(want_v, rel=1e-7)


def test_gap_distance_classes():
    obs = np.ones((9, 9), dtype=bool)
    obs[4, 4] = False
    got = np.full(obs.shape, -1)
    got[obs] = gap_distance_class(obs)
    yy, xx = np.indices(obs.shape)
    want = np.minimum(np.maximum(abs(yy - 4), abs(xx - 4)), DISTANCE_CLASSES) - 1
    assert np.array_equal(got[obs], want[obs])
    assert (gap_distance_class(np.ones((3, 4), bool)) == DISTANCE_CLASSES - 1).all()


def _clouded_field(seed):
    """A smooth field under three clouds (missing blocks), with a noise sd of 0.05."""
    rng = np.random.default_rng(seed)
    yy, xx = np.indices((60, 70))
    f = np.sin(yy / 6.0) + np.cos(xx / 9.0) + 0.5 * np.sin((xx + yy) / 4.0)
    v = f + 0.05 * rng.standard_normal(f.shape)
    obs = np.ones(f.shape, dtype=bool)
    obs[20:35, 20:40] = obs[5:12, 50:62] = obs[42:55, 5:15] = False
    return rng, f, np.where(obs, v, np.nan), (np.arange(60.0), np.arange(70.0))


def _gap_rmse(est, axes, f, gaps):
    p = est.predict_grid(list(axes))
    return float(np.sqrt(np.mean((p.mean - f)[gaps] ** 2)))


def test_robust_fit_finds_cloud_edge_errors_and_fills_the_gaps_as_if_clean():
    """Cells within 2 of a cloud made 1–3 colder with probability 0.3: the plain fit takes
    them for the field and misses the gaps by far; the robust one flags them and fills the
    gaps close to a fit on the clean data."""
    rng, f, clean, axes = _clouded_field(0)
    obs = np.isfinite(clean)
    hit = ndimage.binary_dilation(~obs, np.ones((5, 5), bool)) & obs & (rng.random(f.shape) < 0.3)
    dirty = clean.copy()
    dirty[hit] -= rng.uniform(1.0, 3.0, hit.sum())
    ref = _gap_rmse(lm.LatticeRegressor().fit_grid(axes, clean), axes, f, ~obs)
    plain = _gap_rmse(lm.LatticeRegressor().fit_grid(axes, dirty), axes, f, ~obs)
    est = lm.LatticeRegressor(robust=True).fit_grid(axes, dirty)
    robust = _gap_rmse(est, axes, f, ~obs)
    flagged = est.obs_weight_[obs] < 0.5
    assert np.sum(flagged & hit[obs]) >= 0.95 * hit.sum()
    assert np.sum(flagged & ~hit[obs]) <= 0.01 * np.sum(~hit[obs])
    assert plain > 3 * ref and robust < 1.25 * ref, (ref, plain, robust)
    g = est.gross_errors()
    assert g["flagged"] == int(flagged.sum()) and -3.0 < g["shift"] < -1.0
    assert g["prior"][0] > 0.1 and g["prior"][-1] < 0.01  # the errors sit at the edges


def test_robust_fit_of_clean_data_keeps_the_plain_fit():
    _, f, clean, axes = _clouded_field(1)
    obs = np.isfinite(clean)
    plain = lm.LatticeRegressor().fit_grid(axes, clean)
    est = lm.LatticeRegressor(robust=True).fit_grid(axes, clean)
    assert plain.obs_weight_ is None and np.isnan(est.obs_weight_[~obs]).all()
    assert np.mean(est.obs_weight_[obs] > 0.5) > 0.99
    a, b = _gap_rmse(plain, axes, f, ~obs), _gap_rmse(est, axes, f, ~obs)
    assert abs(b / a - 1.0) < 0.05, (a, b)


def test_robust_is_refused_where_it_does_not_apply():
    with pytest.raises(InputError, match="robust"):
        lm.LatticeRegressor(robust="yes").check_args()
    # a noisy plane: an exact one is so ill-conditioned that whether the large scales' fit
    # warns depends on the compiler's rounding
    plane = np.arange(30.0).reshape(5, 6) + 0.1 * np.random.default_rng(0).standard_normal((5, 6))
    with pytest.raises(InputError, match="robust=True"):
        lm.LatticeRegressor().fit_grid([np.arange(5.0), np.arange(6.0)], plane).gross_errors()


def _clouded_raster():
    """40 × 48 cells of the clouded field around its largest cloud, as a projected
    DataArray, cloud edges made colder: (raster, hit)."""
    rng, _, clean, (ay, ax) = _clouded_field(2)
    clean, ay, ax = clean[10:50, 10:58].copy(), ay[10:50], ax[10:58]
    obs = np.isfinite(clean)
    hit = ndimage.binary_dilation(~obs, np.ones((5, 5), bool)) & obs & (rng.random(obs.shape) < 0.3)
    clean[hit] -= rng.uniform(1.0, 3.0, hit.sum())
    da = xr.DataArray(clean, dims=("y", "x"), coords={"y": 5e5 - 100.0 * ay, "x": 100.0 * ax})
    return da.rio.write_crs(32633), hit


def test_the_front_end_maps_what_the_robust_fit_distrusted(tmp_path):
    """The weights map the leaks; a saved and loaded model maps the same weights (its file
    keeps them) and says that the gross-error model needs the fit itself."""
    da, hit = _clouded_raster()
    model = geogp.fit(da, robust=True)
    w = model.observation_weight()
    assert w.dims == ("y", "x") and w.rio.crs.to_epsg() == 32633
    assert np.array_equal(np.isnan(w.values), np.isnan(da.values))
    assert np.nanmax(w.values[hit]) < 0.5  # every leak distrusted, few clean cells
    assert np.mean(w.values[np.isfinite(da.values) & ~hit] < 0.5) <= 0.01
    model.save(tmp_path / "robust.npz")
    loaded = geogp.load_model(tmp_path / "robust.npz")
    np.testing.assert_array_equal(loaded.observation_weight().values, w.values)
    with pytest.raises(InputError, match="model files keep a robust fit's weights"):
        loaded.estimators_[0].gross_errors()
    with pytest.raises(InputError, match="robust=True"):
        geogp.fit(da, maxiter=2).observation_weight()


def test_geogp_fit_robust_writes_the_weights_as_a_band(tmp_path, capsys):
    from geogp.cli import main

    da, hit = _clouded_raster()
    src = tmp_path / "in.tif"
    da.rio.to_raster(src)
    assert main(["fit", str(src), "--out", str(tmp_path / "p.tif"), "--robust", "--quiet"]) == 0
    out = geogp.open_raster(tmp_path / "p.tif")
    band = list(out.attrs["long_name"]).index("obs_weight")
    w = out.values[band]
    assert np.nanmax(w[hit]) < 0.5 and np.isnan(w[~np.isfinite(da.values)]).all()
    capsys.readouterr()
    assert main(["fit", str(src), "--out", str(tmp_path / "q.tif"), "--robust", "--model",
                 "wavelet_basis", "--quiet"]) != 0
    assert "--robust belongs to the lattice and AFS models" in capsys.readouterr().err
    assert not (tmp_path / "q.tif").exists()


def _drawn_field(seed, shape=(60, 70), rng_range=6.0, sd=1.0, noise=0.1):
    """A draw of the lattice's α = 2 field (unit cells) plus noise, under three clouds."""
    from tests.models.test_spacetime_estimator import _field_draws

    rng = np.random.default_rng(seed)
    f = _field_draws(shape, rng_range, sd, rng, 1)[0]
    v = f + noise * rng.standard_normal(shape)
    obs = np.ones(shape, dtype=bool)
    obs[20:35, 20:40] = obs[5:12, 50:62] = obs[42:55, 5:15] = False
    return f, np.where(obs, v, np.nan), (np.arange(float(shape[0])), np.arange(float(shape[1])))


def test_robust_predictive_is_tempered_on_gap_folds_where_its_sds_are_too_small(monkeypatch):
    """θ fixed with the sd and noise 2.5× too small: the gap-shaped folds find a temperature
    well above 1 (the EM takes part of the misfit for gross errors and flags many cells, so
    less than 2.5: 1.81 here), the sds grow by exactly that factor, the mean does not move,
    and the gaps' coverage comes back from 0.59 to at least 0.85; at the right θ the
    temperature stays near 1."""
    f, v, axes = _drawn_field(2)
    obs = np.isfinite(v)

    def fit(scale, folds):
        monkeypatch.setattr(lm.regressor, "ROBUST_TEMPER_FOLDS", folds)
        return lm.LatticeRegressor(robust=True, optimize=False, range=6.0, sd=scale,
                                   noise=0.1 * scale, mean="constant").fit_grid(axes, v)

    narrow, plain = fit(0.4, 2), fit(0.4, 0)
    t = narrow.gross_errors()["temperature"]
    assert plain.gross_errors()["temperature"] == 1.0
    assert 1.5 <= t <= 2.5, t
    a, b = narrow.predict_grid(list(axes)), plain.predict_grid(list(axes))
    assert np.allclose(a.mean, b.mean, rtol=0, atol=1e-8 * np.abs(b.mean).max())
    assert np.allclose(np.sqrt(a.var_latent / b.var_latent), t, rtol=1e-6)
    gaps = ~obs
    z = np.abs(a.mean - f)[gaps] / np.sqrt(a.var_latent[gaps])
    assert np.mean(z < 1.96) > 0.85
    z = np.abs(b.mean - f)[gaps] / np.sqrt(b.var_latent[gaps])
    assert np.mean(z < 1.96) < 0.7  # untempered
    right = fit(1.0, 2)
    assert right.gross_errors()["temperature"] < 1.1


@pytest.mark.skipif(not HAVE_CHOLMOD, reason="needs CHOLMOD")
def test_robust_posteriors_keep_the_lattice_factor_and_give_the_same_fit(monkeypatch):
    """The reweighting steps' posteriors (and the temperature's folds) share the whole
    lattice's pattern: analysed once before the refit of θ and once after it, where each
    posterior analysed it again before; the fit is the same to rounding."""
    from geogp.linalg import _sksparse

    rng, f, clean, axes = _clouded_field(2)
    obs = np.isfinite(clean)
    hit = ndimage.binary_dilation(~obs, np.ones((5, 5), bool)) & obs & (rng.random(f.shape) < 0.3)
    dirty = clean.copy()
    dirty[hit] -= rng.uniform(1.0, 3.0, hit.sum())
    analysed = []

    def counting(analyse):
        def analyze(self, pattern):
            analysed.append(pattern.n)
            return analyse(self, pattern)
        return analyze

    for cls in _sksparse.CholmodBackend.__subclasses__():
        monkeypatch.setattr(cls, "analyze", counting(cls.analyze))
    fits = {}
    for hold in (True, False):
        analysed.clear()
        monkeypatch.setattr(lm.LatticeRegressor, "_holds_factor",
                            lambda self, shape, _h=hold: bool(self.robust) and _h)
        est = lm.LatticeRegressor(robust=True).fit_grid(axes, dirty)
        assert lm.gmrf._SHARED == {}  # nothing held once the fit is done
        whole = max(analysed)  # the whole lattice's unknowns: the largest pattern
        fits[hold] = (est, analysed.count(whole))  # with the fitting tile's where it is whole
    (held, n_held), (freed, n_freed) = fits[True], fits[False]
    posteriors = 1 + lm.regressor.ROBUST_STEPS + lm.regressor.ROBUST_TEMPER_FOLDS
    assert n_freed - n_held == posteriors - 2, (n_held, n_freed)  # the fits' own are equal
    np.testing.assert_allclose(held.posterior_.mean, freed.posterior_.mean, rtol=0, atol=1e-9)
    np.testing.assert_allclose(held.posterior_.var, freed.posterior_.var, rtol=1e-9)
    np.testing.assert_allclose(held.obs_weight_[obs], freed.obs_weight_[obs], atol=1e-9)
    assert held.temperature_ == freed.temperature_


def test_robust_estimate_counts_the_held_factor_only_where_it_fits():
    from geogp.models.lattice.memory import FACTOR_COPIES, factor_bytes

    shape = (300, 500)
    plain = lm.LatticeRegressor().cost_estimate(shape)
    est = lm.LatticeRegressor(robust=True)
    cost = est.cost_estimate(shape)
    assert plain["tiles"] == cost["tiles"] == 1 and cost["holds_factor"]
    m = int(est.margin)
    cells = (shape[0] + 2 * m) * (shape[1] + 2 * m)
    held = factor_bytes(cells, est._alpha(), est.mid_factor(shape) is not None) / FACTOR_COPIES
    assert cost["bytes"] == pytest.approx(plain["bytes"] + held, rel=1e-12)
    # a limit the plain fit meets but not the held factor: nothing held, the same estimate
    tight = lm.LatticeRegressor(robust=True, max_bytes=plain["bytes"] + 0.5 * held)
    cost = tight.cost_estimate(shape)
    assert not cost["holds_factor"] and cost["bytes"] == pytest.approx(plain["bytes"])
    tight.check_memory(shape)  # not refused for it
