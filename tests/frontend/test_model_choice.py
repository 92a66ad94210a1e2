"""``model="auto"``, the front end's default: the lattice model for regular rasters that fit in
memory, AFS for everything else; the choice is recorded and reproducible."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import geogp
from geogp.core.formatting import lengths
from geogp.exceptions import InputError
from geogp.families import resolve_model
from geogp.models.lattice.family import DEFAULT_LARGE_SCALE, DEFAULT_MID_SCALE

from _frontend_rasters import FEATURES, make_raster

pytestmark = [
    # small synthetic data: the models' approximation diagnostics warn, beside the point here
    pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning"),
    # rasters without a CRS on purpose (planar is assumed, with a warning)
    pytest.mark.filterwarnings("ignore::geogp.exceptions.MissingCRSWarning"),
]


def test_default_on_a_regular_raster_is_the_lattice_model_with_large_scales():
    da = make_raster(ny=20, nx=24)
    auto = geogp.fit(da, maxiter=5)
    assert auto.model == "auto" and auto.model_ == "lattice"
    # the fit adds what it chose from the data: here one range and sd everywhere
    assert auto.model_reason_.startswith("regular raster; one range and sd: ")
    est = auto.estimators_[0]
    assert est.large_scale == DEFAULT_LARGE_SCALE and est._n_large() == 200
    explicit = geogp.fit(da, model="lattice", maxiter=5)
    a, b = auto.predict(), explicit.predict()
    for v in ("mean", "std"):   # "auto" is the lattice model with the front end's defaults
        np.testing.assert_allclose(a[v].values, b[v].values, rtol=1e-9)  # two fits: BLAS order
    assert "model='auto': regular raster" in auto.summary()


def test_default_adds_the_mid_scale_level_on_large_rasters_only(tmp_path):
    """The front end's lattice default has ``mid_scale="auto"``: the level (factor 12) on a
    raster with ≥ 128 cells a side, where it equals an explicit ``mid_scale=12`` fit, none on
    a smaller one; ``mid_scale=None`` turns it off; a saved model keeps it bit for bit."""
    from geogp.models.lattice import MID_SCALE_AUTO, MID_SCALE_MIN_CELLS

    n = MID_SCALE_MIN_CELLS
    big = make_raster(ny=n, nx=n + 4)
    auto = geogp.fit(big, optimize=False)
    est = auto.estimators_[0]
    assert est.mid_scale == DEFAULT_MID_SCALE == "auto"
    assert est.mid_factor() == MID_SCALE_AUTO and "log_range_mid" in est.params_
    explicit = geogp.fit(big, optimize=False, mid_scale=MID_SCALE_AUTO).predict()
    off = geogp.fit(big, optimize=False, mid_scale=None)
    assert off.estimators_[0].mid_factor() is None
    a = auto.predict()
    for v in ("mean", "std"):
        np.testing.assert_allclose(a[v].values, explicit[v].values, rtol=1e-9)
    d = est.describe()
    assert f"mid scales: range {lengths([d['mid_scale_range']], 'm')}" in auto.summary()
    assert " cells (raster and margin, Matérn ν = 1) + 64 large-scale Fourier features" in (
        auto.summary())
    assert "mid scales" not in off.summary()
    # the level changes the prediction (its variance adds to the local field's)
    assert np.nanmax(np.abs(a["std"].values - off.predict()["std"].values)) > 1e-3
    auto.save(tmp_path / "m.npz")
    back = geogp.load_model(tmp_path / "m.npz")
    assert back.estimators_[0].mid_factor() == MID_SCALE_AUTO
    b = back.predict()
    for v in ("mean", "std"):
        np.testing.assert_array_equal(a[v].values, b[v].values)
    small = geogp.fit(make_raster(ny=n - 1, nx=n + 4), optimize=False).estimators_[0]
    assert small.mid_scale == "auto" and small.mid_factor() is None


def test_auto_reports_a_bad_lattice_only_option_instead_of_falling_back():
    """An invalid option only the lattice model knows is that model's error, not a fall back
    to AFS that then calls the option unknown."""
    with pytest.raises(InputError, match="mid_scale must be None, 'auto' or an integer"):
        geogp.fit(make_raster(ny=20, nx=24), mid_scale=0)


@pytest.mark.parametrize("kwargs, reason", [
    (dict(kernel="matern32"), "AFS options given"),
    (dict(n_features=FEATURES), "AFS options given"),
    (dict(lengthscale=0.3), "AFS options given"),         # an option only AFS knows
    (dict(max_bytes=1e5), "raster too large"),            # the lattice's estimate is refused
])
def test_auto_falls_back_to_afs(kwargs, reason):
    da = make_raster(ny=20, nx=24)
    model = (geogp.fit(da, optimize=False, **kwargs) if "max_bytes" not in kwargs
             else None)  # the choice is what is tested: no optimisation needed
    if model is None:   # AFS itself needs more than 1e5 bytes: check the choice only
        got = resolve_model("auto", raster_shape=(20, 24), options=kwargs)
        assert got[0] == "afs" and reason in got[1]
        return
    assert model.model_ == "afs" and reason in model.model_reason_
    assert type(model.estimators_[0]).__name__ == "AFSRegressor"


def test_auto_uses_afs_for_points_and_irregular_rasters():
    da = make_raster(ny=20, nx=24)
    Y, X = np.meshgrid(da.y.values, da.x.values, indexing="ij")
    ok = np.isfinite(da.values)
    df = pd.DataFrame({"x": X[ok], "y": Y[ok], "value": da.values[ok]})
    pts = geogp.fit(df, n_features=FEATURES, maxiter=3)
    assert pts.model_ == "afs"
    # 300 points would get the exact GP without the option
    assert pts.model_reason_ == "scattered points; AFS options given (n_features)"
    assert resolve_model("auto")[1] == "scattered points"
    x = da.x.values.copy()
    x[10:] += 37.0
    irregular = geogp.fit(da.assign_coords(x=x), optimize=False)
    assert irregular.model_ == "afs" and irregular.model_reason_.startswith("irregular raster")


def test_memory_threshold_matches_the_lattice_estimate():
    """The raster size where auto switches is where the lattice would refuse."""
    from geogp.exceptions import MemoryEstimateError
    from geogp.models.lattice import LatticeRegressor

    est = LatticeRegressor(large_scale="auto", mid_scale="auto")
    sizes = [(100, 100), (400, 400), (600, 700), (1200, 1200), (3000, 3300)]
    chosen = {}
    for shape in sizes:
        chosen[shape], _why = resolve_model("auto", raster_shape=shape)
        try:
            est.check_memory(shape)
            fits = True
        except MemoryEstimateError as err:
            fits = False
            assert err.needed_bytes > est.max_bytes
        assert chosen[shape] == ("lattice" if fits else "afs"), shape
    # with the posterior on tiles the memory estimate grows with the tile, not the raster:
    # a whole MODIS tile (1200²) and a scene (10⁷ cells) get the lattice model
    assert all(chosen[s] == "lattice" for s in sizes)
    # the raster's own arrays still count: at 9·10⁸ cells they pass the 4 GiB limit
    with pytest.raises(MemoryEstimateError):
        est.check_memory((30000, 30000))


def _dated_stack(n=5, dim="time", dates=None):
    rng = np.random.default_rng(3)
    yy, xx = np.meshgrid(np.arange(14), np.arange(16), indexing="ij")
    v = np.stack([np.sin(xx / 4.0) + np.cos(yy / 5.0) + 0.1 * k
                  + 0.1 * rng.standard_normal(yy.shape) for k in range(n)])
    v[rng.random(v.shape) < 0.3] = np.nan
    dates = pd.date_range("2024-01-01", periods=n, freq="8D") if dates is None else dates
    import xarray as xr
    return xr.DataArray(v, dims=(dim, "y", "x"), coords={
        dim: dates, "y": 1000.0 - 100 * np.arange(14), "x": 100.0 * np.arange(16)})


def test_auto_fits_a_stack_of_dates_jointly_with_the_space_time_model():
    """#43: a stack with a time dimension gets the space-time model, the same fit as naming
    it; a stack along another dimension (bands) is fitted slice by slice as before."""
    stack = _dated_stack()
    auto = geogp.fit(stack, maxiter=3)
    assert auto.model_ == "spacetime" and "a stack of 5 dates" in auto.model_reason_
    named = geogp.fit(stack, model="spacetime", maxiter=3)
    np.testing.assert_allclose(auto.predict()["mean"].values, named.predict()["mean"].values,
                               rtol=1e-9)
    bands = _dated_stack(dim="band", dates=np.arange(5))
    assert geogp.fit(bands, maxiter=3).model_ == "lattice"
    one = geogp.fit(stack.isel(time=slice(0, 1)), maxiter=3)
    assert one.model_ == "lattice" and "one date along time: the 2-D model" in one.model_reason_


def test_auto_fits_each_date_alone_when_the_joint_model_cannot_and_says_why():
    auto = geogp.fit(_dated_stack(), maxiter=3, hole_effect=False)
    assert auto.model_ == "lattice" and len(auto.estimators_) == 5
    assert ("each of the 5 dates alone: options the spacetime model does not take "
            "(hole_effect)") in auto.model_reason_


def test_auto_refuses_a_stack_whose_dates_do_not_increase():
    dates = pd.DatetimeIndex(["2024-01-01", "2024-01-09", "2024-01-09", "2024-01-17",
                              "2024-01-25"])
    with pytest.raises(InputError, match=r"must increase strictly; date 2 .* repeats"):
        geogp.fit(_dated_stack(dates=dates), maxiter=3)


def test_resolve_model_on_stacks_follows_the_joint_models_conditions():
    assert resolve_model("auto", raster_shape=(14, 16), n_dates=5)[0] == "spacetime"
    for kw in ({"regular": False, "spacing": (0.01, 0.0)}, {"covariates": True}):
        model, why = resolve_model("auto", raster_shape=(14, 16), n_dates=5, **kw)
        assert model == "lattice" and "each of the 5 dates alone" in why, why
    assert resolve_model("auto", raster_shape=(14, 16), n_dates=1)[0] == "lattice"
    # 48 dates of 100 × 100 cells: the joint model's estimate passes 1.6 GiB, the lattice's not
    model, why = resolve_model("auto", raster_shape=(100, 100), n_dates=48,
                               options={"max_bytes": 1.6 * 2**30})
    assert model == "lattice" and "passes the spacetime model's memory limit" in why
