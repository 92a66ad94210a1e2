"""Bad input gets one clear line, never garbage: dtypes, damaged rasters, misused calls."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio
import xarray as xr
from rasterio.transform import from_origin

import geogp
from geogp.exceptions import InputError, ReadError

pytestmark = [
    # small synthetic data: the models' approximation diagnostics warn, beside the point here
    pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning"),
    # small planar coordinates in a projected CRS look like degrees: a warning beside the point
    pytest.mark.filterwarnings("ignore::geogp.exceptions.GeographicCoordinatesWarning"),
]


def _da(values):
    ny, nx = values.shape
    return xr.DataArray(values, dims=("y", "x"),
                        coords={"y": np.arange(ny, 0, -1.0), "x": np.arange(nx) * 1.0}
                        ).rio.write_crs(32633)


@pytest.mark.parametrize("values, match", [
    (np.ones((6, 7)) + 1j, "complex"),
    (np.ones((6, 7), dtype=bool), "boolean"),
    (np.full((6, 7), "a"), "real numbers"),
])
def test_non_real_rasters_are_refused(values, match):
    with pytest.raises(InputError, match=match):
        geogp.fit(_da(values), n_features=16, maxiter=2)


def _write_tif(path, ny=300, nx=400):
    data = np.arange(ny * nx, dtype=np.float32).reshape(ny, nx)
    with rasterio.open(path, "w", driver="GTiff", height=ny, width=nx, count=1,
                       dtype="float32", crs="EPSG:32633",
                       transform=from_origin(0, ny, 1, 1)) as dst:
        dst.write(data, 1)
    return data


@pytest.mark.parametrize("damage", ["truncate", "scramble"])
def test_damaged_geotiff_is_refused_on_open(tmp_path, damage):
    path = tmp_path / "in.tif"
    _write_tif(path)
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        raw = raw[: len(raw) // 2]
    else:  # overwrite the strip offsets area and the data with garbage
        rng = np.random.default_rng(0)
        raw[8:] = rng.integers(0, 256, len(raw) - 8, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(raw))
    with pytest.raises(ReadError) as info:
        geogp.open_raster(path)
    assert "\n" not in str(info.value)


def test_intact_geotiff_reads_back(tmp_path):
    path = tmp_path / "ok.tif"
    data = _write_tif(path, 20, 30)
    np.testing.assert_array_equal(geogp.open_raster(path).values, data)


def test_misused_calls_say_what_to_do(tmp_path):
    z = np.add.outer(np.sin(np.arange(10.0) / 3), np.cos(np.arange(12.0) / 4))
    model = geogp.fit(_da(z), n_features=16, maxiter=3)
    with pytest.raises(InputError, match="like= must be an xarray"):
        model.predict(like=np.zeros((10, 12)))
    pred = model.predict()
    with pytest.raises(InputError, match="Dataset returned by predict"):
        geogp.write_geotiff(pred["mean"], tmp_path / "p.tif")
    assert not (tmp_path / "p.tif").exists()


def _estimators():
    from geogp.models.afs import AFSRegressor
    from geogp.models.exact.regressor import ExactGP
    from geogp.models.wavelet import WaveletRegressor

    from _reference.sgpr import SGPRRegressor

    return [AFSRegressor(n_features=32, maxiter=3), ExactGP(maxiter=3),
            SGPRRegressor(n_inducing=8, maxiter=3),
            WaveletRegressor("haar", iota=-1, j_max=1, n_components=0, maxiter=3)]


@pytest.mark.parametrize("index", range(4))
def test_unfitted_estimators_raise_not_fitted(index):
    """scikit-learn's convention: NotFittedError, which is a ValueError and an AttributeError."""
    from geogp.exceptions import NotFittedError

    est = _estimators()[index]
    with pytest.raises(NotFittedError, match="not fitted"):
        est.predict(np.zeros((3, 2)))
    assert issubclass(NotFittedError, ValueError) and issubclass(NotFittedError, AttributeError)


@pytest.mark.parametrize("index", range(4))
def test_wrong_number_of_columns_is_refused(index):
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(40, 2))
    y = np.sin(4 * X[:, 0]) + 0.1 * rng.normal(size=40)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = _estimators()[index].fit(X, y)
    ok = est.predict(X[:2])  # the right shape still predicts
    assert np.all(np.isfinite(ok.mean))
    with pytest.raises(InputError, match="3 column"):
        est.predict(np.zeros((3, 3)))


def test_lattice_refuses_unfitted_use_and_wrong_columns():
    from geogp.exceptions import NotFittedError
    from geogp.models.lattice import LatticeRegressor

    est = LatticeRegressor(margin=2, maxiter=3)
    with pytest.raises(NotFittedError, match="not fitted"):
        est.predict(np.zeros((3, 2)))
    rng = np.random.default_rng(0)
    ay, ax = np.arange(12.0), np.arange(15.0)
    v = np.sin(ay / 3)[:, None] + np.cos(ax / 4)[None, :] + 0.1 * rng.normal(size=(12, 15))
    est.fit_grid([ay, ax], v)
    ok = est.predict(np.array([[3.2, 4.7], [5.0, 6.0]]))
    assert np.all(np.isfinite(ok.mean))
    with pytest.raises(InputError, match="3 column"):
        est.predict(np.zeros((3, 3)))


def test_unfitted_front_end_refuses_predict_and_save(tmp_path):
    from geogp.exceptions import NotFittedError

    model = geogp.GeoRegressor()
    with pytest.raises(NotFittedError):
        model.predict()
    with pytest.raises(NotFittedError):
        model.save(tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("model", ["afs", "lattice", "exact"])
def test_values_that_overflow_float64_are_refused(model):
    v = np.random.default_rng(0).normal(size=(12, 15)) * 1e300
    with pytest.raises(InputError, match="too large in magnitude"):
        geogp.fit(_da(v), model=model, maxiter=2)


def test_large_but_representable_values_scale_exactly():
    """Standardisation makes the fit equivariant: values × 1e100 give predictions × 1e100."""
    from geogp.models.exact.regressor import ExactGP

    rng = np.random.default_rng(1)
    X = rng.uniform(size=(30, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=30)
    a = ExactGP(maxiter=20).fit(X, y).predict(X[:5])
    b = ExactGP(maxiter=20).fit(X, y * 1e100).predict(X[:5])
    np.testing.assert_allclose(b.mean, a.mean * 1e100, rtol=1e-8)
    np.testing.assert_allclose(b.var_observed, a.var_observed * 1e200, rtol=1e-8)


@pytest.mark.parametrize("n_features", [10**9, 10**12])
def test_huge_feature_budget_is_refused_before_allocating(n_features):
    """The estimate comes before the feature search (which would build ~M index rows)."""
    import tracemalloc

    from geogp.exceptions import MemoryEstimateError
    from geogp.models.afs import AFSRegressor

    rng = np.random.default_rng(0)
    X, y = rng.uniform(size=(30, 2)), rng.normal(size=30)
    tracemalloc.start()
    try:
        with pytest.raises(MemoryEstimateError, match="GiB") as err:
            AFSRegressor(n_features=n_features).fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err.value.needed_bytes >= 8.0 * n_features  # at least one vector of length M
    assert peak < 50 * 2**20  # refused without allocating anything of size M


def test_undeclared_sentinel_values_are_warned_about():
    """-9999 or an integer type's extreme in a raster without nodata: warned, not silent."""
    import warnings

    from geogp.exceptions import NodataWarning

    rng = np.random.default_rng(0)
    v = (rng.normal(size=(10, 12)) * 100).astype(np.int16)
    v[2, 3], v[4, 4] = -9999, np.iinfo(np.int16).min
    with pytest.warns(NodataWarning, match=r"2 cell\(s\) equal -32768, -9999") as rec:
        geogp.fit(_da(v), n_features=16, maxiter=2)
    first = next(w for w in rec if issubclass(w.category, NodataWarning))  # (also: degrees?)
    assert "nodata=-32768" in str(first.message)
    assert first.filename == __file__  # pointed at the caller's line, not inside geogp
    with warnings.catch_warnings():
        warnings.simplefilter("error", NodataWarning)
        geogp.fit(_da(v), n_features=16, maxiter=2, nodata=-9999)   # declared: no warning
        geogp.fit(_da(rng.normal(size=(10, 12))), n_features=16, maxiter=2)  # ordinary data


@pytest.mark.parametrize("maxiter", [-1, 0, 2.5, True])
def test_a_bad_iteration_limit_is_refused(maxiter):
    v = np.random.default_rng(0).normal(size=(10, 12))
    with pytest.raises(InputError, match="maxiter must be an integer"):
        geogp.fit(_da(v), n_features=16, maxiter=maxiter)


@pytest.mark.parametrize("route", ["exact", "wavelet_basis", "afs_dense", "afs_matrix_free",
                                   "lattice"])
def test_each_route_refuses_before_allocating(route):
    """Every model refuses with its estimate (MemoryEstimateError, in GiB) before allocating
    what scales with the problem; the estimate exceeds the limit that refused it."""
    import tracemalloc

    from geogp.exceptions import MemoryEstimateError
    from geogp.models.afs import AFSRegressor
    from geogp.models.exact.regressor import ExactGP
    from geogp.models.lattice import LatticeRegressor
    from geogp.models.wavelet import WaveletRegressor

    rng = np.random.default_rng(0)
    X, y = rng.uniform(size=(3000, 2)), rng.normal(size=3000)
    limit = 2**20
    make = {"exact": lambda: ExactGP(max_bytes=limit).fit(X, y),
            "wavelet_basis": lambda: WaveletRegressor("db2", j_max=5, max_bytes=limit).fit(X, y),
            "afs_dense": lambda: AFSRegressor(n_features=2000, solver="dense",
                                              max_bytes=limit).fit(X, y),
            "afs_matrix_free": lambda: AFSRegressor(n_features=20000, solver="iterative",
                                                    max_bytes=limit).fit(X, y),
            "lattice": lambda: LatticeRegressor(max_bytes=limit).fit_grid(
                [np.arange(300.0), np.arange(400.0)], rng.normal(size=(300, 400)))}[route]
    tracemalloc.start()
    try:
        with pytest.raises(MemoryEstimateError, match="GiB") as err:
            make()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err.value.needed_bytes > err.value.limit_bytes == limit
    assert peak < 40 * 2**20   # the inputs and small set-up only


@pytest.fixture(scope="module")
def placement_model():
    import warnings

    from geogp.models.afs import AFSRegressor

    rng = np.random.default_rng(0)
    X = rng.uniform(size=(300, 2))
    y = np.sin(4 * X[:, 0]) + 0.1 * rng.normal(size=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AFSRegressor(n_features=64, maxiter=5).fit(X, y)


@pytest.mark.parametrize("side, options", [
    (400, dict(strategy="mi", max_bytes=2**26)),  # all 160,000 targets: bounds route
    (400, dict(strategy="variance")),
    (400, dict(strategy="krause")),
    (200, dict(strategy="mi", targets=100)),  # dense features, explicit |T| × |V_c| matrix
    (200, dict(strategy="variance")),
])
def test_placement_memory_stays_within_its_estimate(placement_model, side, options):
    """The peak of suggest_sites (traced allocations) stays under placement's memory estimate,
    and the estimate is not loose by more than 3× (it is what refuses large problems). On a
    400 × 400 grid the mi criterion scores every cell within a capped batch, so the peak
    stays far below an (N × M) feature matrix."""
    import tracemalloc

    from geogp.placement import Candidates, suggest_sites
    from geogp.placement.feature_models import memory_estimate

    ax = np.linspace(0.02, 0.98, side)
    cands = Candidates.grid([ax, ax])
    options = dict(options)
    if "targets" in options:
        options["targets"] = np.random.default_rng(1).uniform(0.05, 0.95, (options["targets"], 2))
    M = placement_model.features_.n_features
    tracemalloc.start()
    try:
        sites = suggest_sites(placement_model, cands, 2, **options)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    a = sites.attrs
    N, n_t = side * side, a["n_targets"]
    screened = options["strategy"] == "mi" and "targets" not in options
    estimate = memory_estimate(N, n_t, M, same="targets" not in options, dense=N * M <= 2**23,
                               strategy=options["strategy"], screened=screened,
                               matrix_targets=0 if screened else n_t)
    assert len(sites) == 2 and a["criterion_gap"] == 0.0
    if screened:
        assert n_t == N  # every cell is a target, none thinned
    assert peak <= estimate <= 3 * peak + 8 * 2**20, (peak / 2**20, estimate / 2**20)


def test_placement_refuses_before_allocating(placement_model):
    """Placement over a grid whose estimate passes max_memory is refused with the estimate
    (in GiB) before any O(cells) work."""
    import tracemalloc

    from geogp.exceptions import MemoryEstimateError
    from geogp.placement import Candidates, suggest_sites

    ax = np.linspace(0.02, 0.98, 400)
    cands = Candidates.grid([ax, ax])
    tracemalloc.start()
    try:
        with pytest.raises(MemoryEstimateError, match="GiB") as err:
            suggest_sites(placement_model, cands, 3, max_memory=2**24)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err.value.needed_bytes > err.value.limit_bytes == 2**24
    assert "160000 candidates" in str(err.value)
    assert peak < 4 * 2**20  # far below one vector per cell and feature
