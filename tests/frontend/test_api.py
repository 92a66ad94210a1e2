"""GeoRegressor / geogp.fit: predictions as xr.Dataset, dask, extra dims, points, errors."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import geogp
from geogp.core.formatting import lengths
from geogp.exceptions import InputError, OutsideWindowError
from geogp.models.afs import AFSRegressor

from _frontend_rasters import FEATURES, make_raster

# small synthetic data: the models' approximation diagnostics warn, beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")


def test_prediction_dataset_keeps_grid_attrs_and_crs(raster, fast):
    model = geogp.fit(raster, **fast)
    pred = model.predict(quantiles=[0.05, 0.95])
    assert set(pred.data_vars) == {"mean", "std", "std_latent", "quantiles"}
    assert pred["mean"].dims == ("y", "x") and pred["quantiles"].dims == ("quantile", "y", "x")
    for dim in ("y", "x"):
        np.testing.assert_array_equal(pred[dim].values, raster[dim].values)
    assert pred.rio.crs.to_epsg() == 32633
    assert pred.rio.transform() == raster.rio.transform()
    assert pred["mean"].attrs["units"] == "m"
    assert np.isfinite(pred["mean"]).all()  # gaps are filled


def test_std_is_latent_plus_noise_and_quantiles_are_gaussian(raster, fast):
    model = geogp.fit(raster, **fast)
    pred = model.predict(quantiles=[0.05, 0.5, 0.95])
    noise_var = model.estimators_[0].noise_variance_
    np.testing.assert_allclose(pred["std"] ** 2, pred["std_latent"] ** 2 + noise_var, rtol=1e-10)
    q = pred["quantiles"]
    np.testing.assert_allclose(q.sel(quantile=0.5), pred["mean"], rtol=1e-12)
    np.testing.assert_allclose(q.sel(quantile=0.95) - pred["mean"],
                               1.6448536269514722 * pred["std"], rtol=1e-9)


def test_same_predictions_as_the_core_model(raster, fast):
    """The front end only translates: AFSRegressor.fit_grid on the arrays gives the same."""
    pred = geogp.fit(raster, **fast).predict()
    from geogp.models.afs.family import DEFAULT_KERNEL, DEFAULT_MEAN

    opts = {"kernel": DEFAULT_KERNEL, "mean": DEFAULT_MEAN, **fast}  # the front end's defaults
    core = AFSRegressor(**opts).fit_grid([raster.y.values, raster.x.values], raster.values)
    p = core.predict_grid([raster.y.values, raster.x.values])
    np.testing.assert_allclose(pred["mean"], p.mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(pred["std_latent"] ** 2, p.var_latent, rtol=1e-9, atol=1e-12)


def test_dask_input_gives_the_same_model(raster, fast):
    a = geogp.fit(raster, **fast)
    b = geogp.fit(raster.chunk({"y": 7}), **fast)
    pa, pb = a.predict(), b.predict()
    for v in ("mean", "std"):
        np.testing.assert_allclose(pa[v], pb[v], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.estimators_[0].stats_.G, a.estimators_[0].stats_.G,
                               rtol=1e-10, atol=1e-9)


def test_learnt_hyperparameters_in_user_units(raster):
    model = geogp.fit(raster, n_features=FEATURES, maxiter=40)
    table = model.hyperparameters()
    assert list(table.columns[:2]) == ["lengthscale_y", "lengthscale_x"]
    ell = model.lengthscale_
    assert np.all((ell > 100) & (ell < 20_000))  # metres: cells are 100 m, the field ~ 500 m
    assert 0 < table["noise_sd"].iloc[0] < table["signal_sd"].iloc[0]
    assert table["n_observed"].iloc[0] == raster.notnull().sum()
    # metres as a reader writes them (m, or km from 1 km up), the features named (issue 31)
    text = model.summary()
    assert f"lengthscale (y, x) = {lengths(ell, 'metre')}" in text and "metre" not in text
    assert f", {FEATURES} Fourier features, fit in" in text


def test_extra_dimension_fitted_slice_by_slice(fast):
    base = make_raster(seed=1)
    stack = xr.concat([base, 2 * base, base - 5], dim="time").assign_coords(
        time=np.array(["2020-01-01", "2020-02-01", "2020-03-01"], dtype="datetime64[ns]"))
    model = geogp.fit(stack, **fast)
    pred = model.predict()
    assert pred["mean"].dims == ("time", "y", "x") and len(model.estimators_) == 3
    np.testing.assert_array_equal(pred["time"].values, stack["time"].values)
    # each slice is its own model: an affine change of the data maps the predictions affinely
    np.testing.assert_allclose(pred["mean"][1], 2 * pred["mean"][0], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(pred["mean"][2], pred["mean"][0] - 5, rtol=1e-9, atol=1e-9)


def test_shared_hyperparameters_reuse_the_first_slice():
    base = make_raster(seed=2)
    other = make_raster(seed=5)
    stack = xr.concat([base, other], dim="time")
    model = geogp.fit(stack, n_features=FEATURES, maxiter=30, share_hyperparameters=True)
    first, second = model.estimators_
    assert second.report_.n_iter == 0 and first.report_.n_iter > 0
    np.testing.assert_allclose(np.asarray(second.kernel_.lengthscale),
                               np.asarray(first.kernel_.lengthscale), rtol=1e-12)
    assert second.noise_ == first.noise_
    assert model.predict()["mean"].dims == ("time", "y", "x")


def test_predict_on_another_grid_and_at_points(raster, fast):
    model = geogp.fit(raster, **fast)
    sub = raster.isel(y=slice(5, 15), x=slice(0, 40, 2))
    part = model.predict(like=sub)
    full = model.predict()
    np.testing.assert_allclose(part["mean"], full["mean"].isel(y=slice(5, 15), x=slice(0, 40, 2)),
                               rtol=1e-10, atol=1e-12)
    xs, ys = raster.x.values[[3, 7]], raster.y.values[[2, 9]]
    pts = model.predict(x=xs, y=ys, points=True)
    assert pts["mean"].dims == ("point",)
    np.testing.assert_allclose(pts["mean"], [full["mean"].values[2, 3], full["mean"].values[9, 7]],
                               rtol=1e-9, atol=1e-12)
    grid = model.predict(x=xs, y=ys)
    assert grid["mean"].shape == (2, 2)


def test_outside_the_window_raises_or_gives_nan(raster, fast):
    model = geogp.fit(raster, **fast)
    far = raster.x.values.max() + 1e5
    with pytest.raises(OutsideWindowError):
        model.predict(x=[far], y=raster.y.values[:2])
    out = model.predict(x=[far], y=raster.y.values[:2], outside="nan")
    assert np.isnan(out["mean"]).all()


def test_other_crs_for_like_is_refused(raster, fast):
    model = geogp.fit(raster, **fast)
    with pytest.raises(InputError, match="reproject"):
        model.predict(like=raster.rio.write_crs(32634))


def test_irregular_coordinates_take_the_scattered_path(fast):
    da = make_raster()
    x = da.x.values.copy()
    x[20:] += 37.0  # one uneven step: still monotone, no longer regular
    da = da.assign_coords(x=x)
    model = geogp.fit(da, **fast)
    pred = model.predict()
    assert np.isfinite(pred["mean"]).all()
    ok = np.isfinite(da.values)
    assert np.sqrt(np.mean((pred["mean"].values[ok] - da.values[ok]) ** 2)) < 0.3


def test_scattered_points_with_a_target_grid(raster, fast):
    pd = pytest.importorskip("pandas")
    Y, X = np.meshgrid(raster.y.values, raster.x.values, indexing="ij")
    ok = np.isfinite(raster.values)
    rng = np.random.default_rng(0)
    keep = ok & (rng.random(ok.shape) < 0.5) & (X < np.percentile(X, 80))
    df = pd.DataFrame({"x": X[keep], "y": Y[keep], "value": raster.values[keep]})
    model = geogp.fit(df, grid=raster, **fast)
    pred = model.predict()  # the window was widened to cover the whole grid
    assert pred["mean"].shape == raster.shape and np.isfinite(pred["mean"]).all()
    assert pred.rio.crs.to_epsg() == 32633
    rmse = np.sqrt(np.mean((pred["mean"].values[ok] - raster.values[ok]) ** 2))
    assert rmse < 0.4


@pytest.mark.parametrize("frac", [0.995])
def test_fewer_observed_cells_than_parameters(frac):
    da = make_raster(ny=8, nx=8, frac_missing=frac, seed=3)
    da[0, 0], da[0, 1] = 1.0, 2.0
    with pytest.raises(InputError, match="more observed points than parameters"):
        geogp.fit(da, n_features=16)


def test_unknown_model_and_option_are_clear(raster):
    with pytest.raises(InputError, match="model must be one of"):
        geogp.fit(raster, model="kriging")
    with pytest.raises(InputError, match=r"unknown option.*'n_feature'"):
        geogp.fit(raster, n_feature=10)


def test_exact_model_on_a_small_raster():
    da = make_raster(ny=8, nx=9, seed=4)
    pred = geogp.fit(da, model="exact", kernel="matern32", optimize=False,
                     lengthscale=0.3, noise=0.05).predict()
    assert np.isfinite(pred["mean"]).all() and pred["mean"].shape == (8, 9)


def test_wavelet_model_plugs_in_or_says_it_is_missing(raster):
    try:
        import geogp.models.wavelet
    except ImportError:
        with pytest.raises(InputError, match="not available"):
            geogp.fit(raster, model="wavelet_basis")
        return
    da = make_raster(ny=12, nx=14, seed=6)
    model = geogp.fit(da, model="wavelet_basis", family="haar", iota=0, j_max=1, n_components=0,
                      optimize=False)
    pred = model.predict()
    assert pred["mean"].shape == (12, 14) and np.isfinite(pred["std"]).all()
    # the summary's signal sd: √k(x, x) at the window's centre, in data units
    est = model.estimators_[0]
    centre = np.array([[0.5 * (b.lo + b.hi) for b in est.basis_.dims]])
    want = est.scaler_.y_scale * np.sqrt(est.posterior_.prior_variance(centre)[0])
    assert model.hyperparameters()["signal_sd"][0] == pytest.approx(want, rel=1e-12)
    with pytest.raises(InputError, match=r"unknown option.*'n_features'"):
        geogp.fit(da, model="wavelet_basis", n_features=10)


def test_complete_raster_takes_the_lemma_path_only_on_request(fast):
    da = make_raster(frac_missing=0.0)
    assert not geogp.fit(da, **fast).estimators_[0].stats_.diagonal  # exact route by default
    model = geogp.fit(da, grid_mode="diagonal", **fast)
    assert model.estimators_[0].stats_.diagonal  # G = N·I (docs/afs.md, gridded data)
    assert np.isfinite(model.predict()["mean"]).all()


def test_geodataframe_like_points_use_geometry_and_crs(raster, fast):
    """GeoPandas is optional: any table with point ``geometry`` (.x, .y) and ``crs`` works."""
    from types import SimpleNamespace

    Y, X = np.meshgrid(raster.y.values, raster.x.values, indexing="ij")
    ok = np.isfinite(raster.values)

    class FakeGeoDataFrame(dict):
        geometry = SimpleNamespace(x=X[ok], y=Y[ok])
        crs = "EPSG:32633"

    gdf = FakeGeoDataFrame(value=raster.values[ok])
    model = geogp.fit(gdf, grid=raster, **fast)
    assert model.spec_.crs.to_epsg() == 32633 and model.n_observed_ == [int(ok.sum())]
    np.testing.assert_allclose(model.predict()["mean"], geogp.fit(raster, **fast)
                               .predict()["mean"], atol=0.2)


def test_geogp_fit_stays_the_function_after_models_are_imported():
    import geogp.core.optimize  # the L-BFGS module; no longer named like the function
    import geogp.models.afs

    assert callable(geogp.fit) and geogp.fit.__module__ == "geogp.frontend.api"


def test_score_is_the_bound_in_data_units_and_ranks_models(raster, fast):
    """score() = the estimator's bound − N log(y_scale); the exact GP's score is its LML, and
    rescaling the data shifts the evidence by exactly −N log(scale)."""
    import numpy as np

    from geogp.models.exact.regressor import ExactGP

    small = raster.isel(y=slice(0, 10), x=slice(0, 12))
    afs = geogp.fit(small, **fast)
    est = afs.estimators_[0]
    n = afs.n_observed_[0]
    assert afs.score() == pytest.approx(est.bound() - n * np.log(est.scaler_.y_scale),
                                        rel=1e-12)
    exact = geogp.fit(small, model="exact", kernel="matern32", maxiter=30)
    e = exact.estimators_[0]
    assert isinstance(e, ExactGP)
    assert exact.score() == pytest.approx(
        e.log_marginal_likelihood() - n * np.log(e.scaler_.y_scale), rel=1e-12)
    # the same data at 10x the scale: evidence shifts by exactly −N log 10
    big = geogp.fit(small * 10.0, model="exact", kernel="matern32", maxiter=30)
    assert big.score() == pytest.approx(exact.score() - n * np.log(10.0), rel=1e-6, abs=1e-6)


def test_exceedance_probability_is_the_gaussian_tail(raster, fast):
    """P(f > t) = 1 − Φ((t − μ)/σ) per cell (scipy.stats.norm), latent or with noise; grid,
    coordinates and CRS of the prediction; thresholds in data units; bad thresholds refused."""
    from scipy.stats import norm

    model = geogp.fit(raster, **fast)
    pred = model.predict()
    for t in (-0.5, 0.3):
        for latent, sd in ((True, "std_latent"), (False, "std")):
            p = model.exceedance(t, latent=latent)
            want = norm.sf(t, loc=pred["mean"].values, scale=pred[sd].values)
            np.testing.assert_allclose(p.values, want, rtol=1e-10, atol=1e-15)
            assert p.dims == pred["mean"].dims and p.rio.crs.to_epsg() == 32633
            assert p.attrs["threshold"] == t
    lo, hi = model.exceedance(-0.5).values, model.exceedance(0.3).values
    assert np.all(lo >= hi)   # a higher threshold is never more likely to be exceeded
    with pytest.raises(InputError, match="finite"):
        model.exceedance(np.nan)


def test_sample_rasters_reproduce_the_prediction():
    """Posterior sample rasters of the default (lattice) model: dims (sample, y, x), CRS and
    coordinates of the grid; over 1,000 samples the mean is within 5 standard errors of the
    predicted mean and the sd within 10 % of std_latent (about 4.5 standard errors of a sample
    sd); seeded."""
    from _frontend_rasters import make_raster

    da = make_raster(ny=14, nx=16)
    model = geogp.fit(da, maxiter=5)
    assert model.model_ == "lattice"
    pred = model.predict()
    s = model.sample(1000, seed=1)
    assert s.dims == ("sample", "y", "x") and s.shape == (1000, 14, 16)
    assert s.rio.crs.to_epsg() == 32633
    np.testing.assert_array_equal(s.x.values, da.x.values)
    sd = pred["std_latent"].values
    assert np.all(np.abs(s.mean("sample").values - pred["mean"].values) < 5 * sd / np.sqrt(1000))
    np.testing.assert_allclose(s.std("sample").values, sd, rtol=0.1)
    np.testing.assert_array_equal(model.sample(3, seed=1).values, model.sample(3, seed=1).values)
    with pytest.raises(InputError, match="not available for model='exact' yet; fit with "
                       "model= one of 'afs', 'wavelet_basis', 'lattice', 'nonstationary'"):
        geogp.fit(da, model="exact", maxiter=3).sample(2)


def test_wavelet_sample_rasters_reproduce_the_prediction():
    """A wavelet model's 1,000 sample rasters: the predicted mean (5 standard errors) and the
    latent sd (within 10 %), on the raster's grid with its CRS."""
    from _frontend_rasters import make_raster

    da = make_raster(ny=14, nx=16)
    model = geogp.fit(da, model="wavelet_basis", maxiter=5)
    pred = model.predict()
    s = model.sample(1000, seed=1)
    assert s.dims == ("sample", "y", "x") and s.shape == (1000, 14, 16)
    assert s.rio.crs.to_epsg() == 32633
    sd = pred["std_latent"].values
    assert np.all(np.abs(s.mean("sample").values - pred["mean"].values) < 5 * sd / np.sqrt(1000))
    np.testing.assert_allclose(s.std("sample").values, sd, rtol=0.1)


def test_afs_sample_rasters_reproduce_the_prediction():
    """The same for an AFS model: 2,000 sample rasters (one grid transform each) have the
    predicted mean (5 standard errors) and sd within 10 % of √(std_latent² − r), r the prior
    variance the features leave out, k(0) − φᵀΛφ (large with so few features); CRS kept."""
    from geogp.features.afs_dft import log_lambda as _log_lambda

    from _frontend_rasters import make_raster

    da = make_raster(ny=14, nx=16)
    model = geogp.fit(da, model="afs", n_features=FEATURES, maxiter=10)
    pred = model.predict()
    s = model.sample(2000, seed=1)
    assert s.dims == ("sample", "y", "x") and s.shape == (2000, 14, 16)
    assert s.rio.crs.to_epsg() == 32633
    est = model.estimators_[0]
    my, mx = model.spec_.to_model(da.y.values, da.x.values)
    Y, X = np.meshgrid(my, mx, indexing="ij")
    Phi = np.asarray(est.features_(est.scaler_.x(np.stack([Y.ravel(), X.ravel()], 1))))
    lam = np.exp(np.asarray(_log_lambda(est.features_, est.kernel_)))
    resid = (est.kernel_.variance_at_zero - Phi**2 @ lam).reshape(Y.shape)
    sd = np.sqrt(pred["std_latent"].values**2 - est.scaler_.y_scale**2 * resid)
    assert np.all(np.abs(s.mean("sample").values - pred["mean"].values) < 5 * sd / np.sqrt(2000))
    np.testing.assert_allclose(s.std("sample").values, sd, rtol=0.1)


def test_observation_samples_add_the_noise():
    from _frontend_rasters import make_raster

    model = geogp.fit(make_raster(ny=12, nx=12), maxiter=5)
    s = model.sample(3000, seed=2, latent=False)
    sd = model.predict()["std"].values
    np.testing.assert_allclose(s.std("sample").values, sd, rtol=0.1)


def test_covariate_rasters_enter_the_mean(tmp_path):
    """geogp.fit(da, covariates=[...]): the covariate's coefficient is recovered (data units
    per covariate unit) and predictions in a gap use it; a misaligned covariate, an AFS fit
    and a point table are refused clearly; `geogp fit --covariate` writes the same mean."""
    from geogp.cli import main

    from _frontend_rasters import make_raster

    da = make_raster(ny=18, nx=22, frac_missing=0.0)
    rng = np.random.default_rng(3)
    h = xr.zeros_like(da) + rng.standard_normal(da.shape).cumsum(axis=1)
    h.name = "elev"
    truth = da + 0.5 * h
    obs = truth.copy()
    obs[5:12, 6:15] = np.nan
    model = geogp.fit(obs, covariates=[h], maxiter=20)
    assert model.model_ == "lattice"
    coef = model.covariate_coef_
    assert list(coef.columns) == ["elev"] and coef["elev"][0] == pytest.approx(0.5, rel=0.05)
    pred = model.predict()
    plain = geogp.fit(obs, maxiter=20).predict()
    hole = np.isnan(obs.values)
    rmse = [float(np.sqrt(np.mean((p["mean"].values[hole] - truth.values[hole]) ** 2)))
            for p in (pred, plain)]
    assert rmse[0] < 0.5 * rmse[1]
    with pytest.raises(InputError, match="grid differs"):
        geogp.fit(obs, covariates=[h.isel(x=slice(1, None))], maxiter=3)
    with pytest.raises(InputError, match="lattice model"):
        geogp.fit(obs, covariates=[h], model="afs", n_features=FEATURES, maxiter=3)
    obs.rio.to_raster(tmp_path / "obs.tif")
    h.rio.to_raster(tmp_path / "elev.tif")
    assert main(["fit", str(tmp_path / "obs.tif"), "--out", str(tmp_path / "p.tif"),
                 "--covariate", str(tmp_path / "elev.tif"), "--maxiter", "20", "--quiet"]) == 0
    cli = np.asarray(geogp.open_raster(tmp_path / "p.tif").isel(band=0))
    # the same model through the files (float32 bands, coordinates from the transform; the
    # optimiser may stop at a slightly different θ): the same gain in the hole
    assert float(np.sqrt(np.mean((cli[hole] - truth.values[hole]) ** 2))) < 0.5 * rmse[1]
    np.testing.assert_allclose(cli[~hole], pred["mean"].values[~hole], rtol=0,
                               atol=0.05 * float(np.std(truth.values)))


def test_wavelet_effective_lengthscale_map_band_and_panel(tmp_path, monkeypatch):
    """The wavelet model's effective-lengthscale map (issue #14) equals the thesis formula
    (eqs. 4.33–4.36) written out here in numpy, per axis, in the raster's units; `geogp fit`
    writes it as a named band with the same values; other models refuse the map. The CLI's
    automatic db4 levels respect the cost cap (patched to 400 functions to keep this fast)."""
    import rasterio

    import geogp.models.wavelet.regressor as wavelet_module
    from geogp.cli import main
    from geogp.exceptions import ApproximationWarning

    da = make_raster(ny=12, nx=14, seed=6)
    model = geogp.fit(da, model="wavelet_basis", family="haar", iota=0, j_max=1, n_components=1,
                      maxiter=15)
    ell = model.effective_lengthscale()
    est = model.estimators_[0]
    p = {k: np.asarray(v) for k, v in est.params_.items()}
    iota = est.basis_.dims[0].iota
    Y, X = np.meshgrid(da["y"].values, da["x"].values, indexing="ij")
    Z = (np.column_stack([Y.ravel(), X.ravel()]) - est.scaler_.x_mean) / est.scaler_.x_scale
    per_axis = []
    for d in range(2):
        j0 = iota + 0.5 * np.log2(np.e) / (1 + p["decay"][d])
        jq = iota + 0.5 * np.log2(np.e) / (1 + p["component_decay"][d])
        bg = p["component_weight"][d] * 2.0 ** (-((Z[:, d, None] - p["component_centre"][d])
                                                    / p["component_width"][d]) ** 2)
        per_axis.append((2.0**-j0 + (bg * 2.0**-jq).sum(1)) / (1 + bg.sum(1))
                        * est.scaler_.x_scale[d])
    want = np.sqrt(per_axis[0] * per_axis[1]).reshape(Y.shape)
    np.testing.assert_allclose(ell.values, want, rtol=1e-10)
    assert ell.dims == ("y", "x") and ell.rio.crs == da.rio.crs
    assert ell.attrs["units"] == "metre"
    assert np.ptp(want) > 0  # the learnt component makes it vary in space

    path = tmp_path / "in.tif"
    da.astype("float32").rio.write_nodata(np.nan, encoded=True).rio.to_raster(path)
    out = tmp_path / "pred.tif"
    monkeypatch.setattr(wavelet_module, "AUTO_MAX_FEATURES", 400)
    with pytest.warns(ApproximationWarning, match=r"basis functions \(> 400"):
        capped = geogp.fit(da, model="wavelet_basis", maxiter=2)
    assert 0 < capped.estimators_[0].n_features_ <= 400
    assert main(["fit", str(path), "--out", str(out), "--model", "wavelet_basis", "--map",
                 str(tmp_path / "m.png"), "--maxiter", "5", "--quiet"]) == 0
    with rasterio.open(out) as src:
        assert src.descriptions == ("mean", "std", "effective_lengthscale")
        assert np.all(np.isfinite(src.read(3))) and np.all(src.read(3) > 0)
    assert (tmp_path / "m.png").stat().st_size > 0
    with pytest.raises(InputError, match="local lengthscale of model='wavelet_basis'"):
        geogp.fit(da, model="afs", n_features=16, maxiter=2).effective_lengthscale()


def test_maps_of_a_point_model_without_grid_ask_for_one():
    """predict(), sample() and exceedance() share one grid rule: a model fitted on points
    without grid= needs like= or x=/y=, and says so (sample used to fail with AttributeError)."""
    rng = np.random.default_rng(3)
    table = {"x": rng.uniform(0, 1000, 80), "y": rng.uniform(0, 1000, 80)}
    table["value"] = np.sin(table["x"] / 300) + 0.1 * rng.standard_normal(80)
    model = geogp.fit(table, model="afs", crs=32633, n_features=16, maxiter=2)
    for call in (model.predict, lambda: model.sample(2), lambda: model.exceedance(0.0)):
        with pytest.raises(InputError, match="fitted on points without grid"):
            call()


def test_predictions_keep_the_input_dimension_order(raster, fast, tmp_path):
    """A raster stored (x, y) gets predictions, samples and reloaded predictions in (x, y),
    with the same values as the (y, x) raster's, transposed; like= sets the order."""
    xy = raster.transpose("x", "y")
    model = geogp.fit(xy, **fast)
    ref = geogp.fit(raster, **fast).predict()
    pred = model.predict()
    assert pred["mean"].dims == ("x", "y") and pred["std"].dims == ("x", "y")
    np.testing.assert_allclose(pred["mean"].values, ref["mean"].values.T, rtol=1e-12)
    assert model.predict(like=raster)["mean"].dims == ("y", "x")
    assert model.sample(2, seed=0).dims == ("sample", "x", "y")
    model.save(tmp_path / "m.npz")
    back = geogp.load_model(tmp_path / "m.npz").predict()
    assert back["mean"].dims == ("x", "y")
    np.testing.assert_array_equal(back["mean"].values, pred["mean"].values)
