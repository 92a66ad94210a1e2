"""Model files are untrusted input: damaged or tampered files are refused, never predict garbage."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
import xarray as xr

import geogp
from geogp.exceptions import InputError, ReadError
from geogp.persist.checks import digest, meta_digest

pytestmark = [
    # small synthetic data: the models' approximation diagnostics warn, beside the point here
    pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning"),
    # small planar coordinates in a projected CRS look like degrees: a warning beside the point
    pytest.mark.filterwarnings("ignore::geogp.exceptions.GeographicCoordinatesWarning"),
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    rng = np.random.default_rng(0)
    y, x = np.arange(18.0, 0, -1), np.arange(24.0)
    z = np.sin(x / 4)[None, :] + np.cos(y / 3)[:, None] + 0.05 * rng.standard_normal((18, 24))
    z[4:8, 6:12] = np.nan
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": x}).rio.write_crs(32633)
    model = geogp.fit(da, n_features=48, maxiter=8)
    path = tmp_path_factory.mktemp("model") / "model.npz"
    model.save(path)
    return path, model.predict()


def _contents(path):
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k != "__meta__"}
        meta = json.loads(str(z["__meta__"]))
    return arrays, meta


def _write(path, arrays, meta, rechecksum=True):
    """Write a tampered file; with ``rechecksum`` the attacker also fixes the digests."""
    if rechecksum and isinstance(meta, dict) and "checksums" in meta:
        meta["checksums"] = {k: digest(np.asarray(v)) for k, v in arrays.items()}
        meta["meta_digest"] = meta_digest(meta)
    with open(path, "wb") as f:
        np.savez(f, **arrays, __meta__=np.array(json.dumps(meta)))


def _assert_refused_or_identical(path, reference):
    try:
        model = geogp.load_model(path)
    except InputError:
        return "refused"
    pred = model.predict()
    for v in ("mean", "std"):
        np.testing.assert_array_equal(pred[v].values, reference[v].values)
    return "identical"


def _assert_tampered_copy_refused(path, tmp_path, edit, match):
    """``edit(arrays, meta)`` on a copy of ``path`` (digests fixed): refused in one line."""
    arrays, meta = _contents(path)
    edit(arrays, meta)
    _write(tmp_path / "bad.npz", arrays, meta)
    with pytest.raises(ReadError, match=match) as info:
        geogp.load_model(tmp_path / "bad.npz")
    assert "\n" not in str(info.value)


def test_untouched_file_loads(saved):
    path, ref = saved
    assert _assert_refused_or_identical(path, ref) == "identical"


@pytest.mark.parametrize("edit, match", [
    (lambda a, m: a.__setitem__("s0/posterior/weights",
                                np.full_like(a["s0/posterior/weights"], np.nan)), "NaN or inf"),
    (lambda a, m: m["slices"][0].__setitem__("noise", -0.3), "'noise' must be > 0"),
    (lambda a, m: m["slices"][0].pop("noise"), "lacks 'noise'"),
    (lambda a, m: m.__setitem__("format_version", "2"), "supported version"),
    (lambda a, m: a.pop("s0/posterior/chol"), "lacks the array 's0/posterior/chol'"),
    (lambda a, m: a.__setitem__("s0/posterior/chol", a["s0/posterior/chol"][:-1]), "shape"),
    (lambda a, m: a.__setitem__("s0/kernel/0/lengthscale",
                                -a["s0/kernel/0/lengthscale"]), "must be > 0"),
    (lambda a, m: m["slices"][0].__setitem__("kernel_parts", ["os.system"]), "unknown kernel"),
    (lambda a, m: m["slices"][0].__setitem__("y_scale", "big"), "'y_scale' must be float"),
    (lambda a, m: m.__setitem__("spec", [1, 2]), "'spec' must be dict"),
    (lambda a, m: m["params"].__setitem__("model", "exact"), "only 'afs'"),
    (lambda a, m: m["target"].__setitem__("x_first", "yes"), "'x_first' must be true or false"),
])
def test_tampered_files_are_refused_with_one_line(saved, tmp_path, edit, match):
    path, _ = saved
    arrays, meta = _contents(path)
    edit(arrays, meta)
    bad = tmp_path / "bad.npz"
    _write(bad, arrays, meta)
    with pytest.raises(ReadError, match=match) as info:
        geogp.load_model(bad)
    assert "\n" not in str(info.value)


def test_changed_array_without_fixing_the_checksum_is_detected(saved, tmp_path):
    path, _ = saved
    arrays, meta = _contents(path)
    arrays["s0/posterior/weights"] = arrays["s0/posterior/weights"] * 1.0001
    _write(tmp_path / "bad.npz", arrays, meta, rechecksum=False)
    with pytest.raises(ReadError, match="checksum"):
        geogp.load_model(tmp_path / "bad.npz")
    arrays, meta = _contents(path)
    meta["slices"][0]["y_mean"] += 1.0                  # metadata changed, digest not fixed
    _write(tmp_path / "bad2.npz", arrays, meta, rechecksum=False)
    with pytest.raises(ReadError, match="digest"):
        geogp.load_model(tmp_path / "bad2.npz")


def test_metadata_as_a_list_is_refused(saved, tmp_path):
    path, _ = saved
    arrays, _ = _contents(path)
    _write(tmp_path / "bad.npz", arrays, ["not", "a", "dict"])
    with pytest.raises(ReadError, match="JSON object"):
        geogp.load_model(tmp_path / "bad.npz")


def test_huge_declared_array_is_refused_before_reading(tmp_path, monkeypatch):
    """A header declaring a 74.5 GiB array (with no data behind it) is refused up front."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (100_000, 100_000)})
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("s0/stats/G.npy", header.getvalue())
        buf = io.BytesIO()
        np.save(buf, np.array(json.dumps({"format": "geogp-model"})))
        zf.writestr("__meta__.npy", buf.getvalue())
    with pytest.raises(ReadError, match=r"74.5 GiB"):
        geogp.load_model(path, max_bytes=16 * 2**30)
    # the default limit (80 % of this machine's memory), whatever the machine
    from geogp.persist import checks as persist_checks

    monkeypatch.setattr(persist_checks, "_memory_limit", lambda: 8.0 * 2**30)
    with pytest.raises(ReadError, match=r"74.5 GiB"):
        geogp.load_model(path)


def test_pickled_arrays_are_refused(tmp_path):
    path = tmp_path / "pickle.npz"
    np.savez(path, __meta__=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ReadError, match="Python objects"):
        geogp.load_model(path)


def test_fuzz_random_byte_corruption(saved, tmp_path):
    """120 files with random bytes overwritten: each is refused or predicts identically."""
    path, ref = saved
    raw = path.read_bytes()
    rng = np.random.default_rng(1)
    outcomes = []
    for i in range(120):
        data = bytearray(raw)
        for pos in rng.integers(0, len(data), size=rng.integers(1, 4)):
            data[pos] = (data[pos] + int(rng.integers(1, 256))) % 256
        bad = tmp_path / f"fuzz{i}.npz"
        bad.write_bytes(bytes(data))
        outcomes.append(_assert_refused_or_identical(bad, ref))
    assert outcomes.count("refused") >= 100   # almost every flip lands in checked bytes


def test_fuzz_semantic_tampering(saved, tmp_path):
    """Values replaced by NaN, inf, 0, negatives or huge numbers in random arrays, with the
    checksums fixed: every load is refused or predicts finite values with std > 0."""
    path, _ = saved
    arrays0, meta0 = _contents(path)
    floats = [k for k, v in arrays0.items() if v.dtype.kind == "f" and v.size]
    rng = np.random.default_rng(2)
    for i in range(40):
        arrays = {k: v.copy() for k, v in arrays0.items()}
        meta = json.loads(json.dumps(meta0))
        key = floats[rng.integers(len(floats))]
        a = arrays[key].reshape(-1)
        a[rng.integers(a.size)] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -1.0, 1e300])
        bad = tmp_path / f"sem{i}.npz"
        _write(bad, arrays, meta)
        try:   # refused when loading, or when predicting (e.g. a window that moved)
            pred = geogp.load_model(bad).predict()
        except InputError:
            continue
        assert np.isfinite(pred["mean"].values).all(), key
        assert (pred["std"].values > 0).all() and np.isfinite(pred["std"].values).all(), key


# --------------------------------------------------------------------------- lattice models
@pytest.fixture(scope="module")
def saved_lattice(tmp_path_factory):
    rng = np.random.default_rng(3)
    y, x = np.arange(20.0, 0, -1) * 10, np.arange(26.0) * 10
    z = np.cumsum(rng.standard_normal((20, 26)), axis=1) * 0.3
    z[5:11, 7:15] = np.nan
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": x}, name="v",
                      attrs={"units": "K"}).rio.write_crs(32633)
    model = geogp.fit(da, model="lattice", maxiter=6, large_scale=8)
    path = tmp_path_factory.mktemp("lattice") / "lattice.npz"
    model.save(path)
    return path, model


def test_lattice_model_round_trip_is_bit_for_bit(saved_lattice):
    path, model = saved_lattice
    loaded = geogp.load_model(path)
    assert loaded.model == "lattice"
    for kw in ({}, dict(x=np.array([3.3, 101.7, 250.0]), y=np.array([12.5, 99.0, 190.1]),
                        points=True)):   # cell centres, and points between them
        a, b = model.predict(**kw), loaded.predict(**kw)
        for v in ("mean", "std", "std_latent"):
            np.testing.assert_array_equal(a[v].values, b[v].values)
    assert loaded.predict()["mean"].attrs == model.predict()["mean"].attrs
    est, back = model.estimators_[0], loaded.estimators_[0]
    assert back.params_ == {k: float(v) for k, v in est.params_.items()}
    assert back.alpha_ == est.alpha_ and back.alpha == est.alpha == "auto"
    np.testing.assert_array_equal(back.beta_, est.beta_)


@pytest.fixture(scope="module")
def saved_nonstationary(tmp_path_factory):
    """model="wavelet": the lattice model with a range and sd that vary (issue #45)."""
    rng = np.random.default_rng(5)
    y, x = np.arange(20.0, 0, -1) * 10, np.arange(26.0) * 10
    z = np.cumsum(rng.standard_normal((20, 26)), axis=1) * np.linspace(0.05, 0.6, 26)
    z[5:11, 7:15] = np.nan
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": x}, name="v").rio.write_crs(32633)
    model = geogp.fit(da, model="wavelet", maxiter=6, large_scale=8)
    path = tmp_path_factory.mktemp("nonstationary") / "nonstationary.npz"
    model.save(path)
    return path, model


def test_nonstationary_model_round_trip_is_bit_for_bit(saved_nonstationary):
    """The file records the model fitted ("nonstationary") and the name asked for (the alias
    "wavelet"); loading gives the same varying range and sd and the same predictions."""
    path, model = saved_nonstationary
    assert _contents(path)[1]["params"]["model"] == "nonstationary"
    loaded = geogp.load_model(path)
    assert (loaded.model, loaded.model_) == ("wavelet", "nonstationary")
    assert loaded.model_reason_ == model.model_reason_ and "alias" in loaded.model_reason_
    a, b = model.predict(), loaded.predict()
    for v in ("mean", "std", "std_latent"):
        np.testing.assert_array_equal(a[v].values, b[v].values)
    back = loaded.estimators_[0]
    assert back.varying is True and back.varying_basis_ is not None
    for v in ("local_range", "local_sd"):
        np.testing.assert_array_equal(loaded.local_scales()[v].values,
                                      model.local_scales()[v].values)


@pytest.mark.parametrize("edit, match", [
    (lambda a, m: a.__setitem__("s0/lattice/var", -a["s0/lattice/var"]), "must be > 0"),
    (lambda a, m: a.__setitem__("s0/lattice/mean",
                                np.full_like(a["s0/lattice/mean"], np.nan)), "NaN or inf"),
    (lambda a, m: a.__setitem__("s0/lattice/cov", a["s0/lattice/cov"][:, :-1]), "shape"),
    (lambda a, m: m["slices"][0].__setitem__("shape", [10, "x"]), "'shape' must be 2 finite"),
    (lambda a, m: m["slices"][0]["params"].pop("log_noise"), "malformed lattice parameters"),
    (lambda a, m: m["slices"][0]["init"].__setitem__("alpha", 7), "invalid estimator options"),
    (lambda a, m: m["slices"][0].__setitem__("alpha", "auto"), "alpha must be one of"),
    (lambda a, m: a.pop("s0/lattice/var"), "lacks the array 's0/lattice/var'"),
])
def test_tampered_lattice_files_are_refused(saved_lattice, tmp_path, edit, match):
    _assert_tampered_copy_refused(saved_lattice[0], tmp_path, edit, match)


# --------------------------------------------------------------------------- wavelet models
@pytest.fixture(scope="module")
def saved_wavelet(tmp_path_factory):
    rng = np.random.default_rng(4)
    y, x = np.arange(14.0, 0, -1) * 10, np.arange(17.0) * 10
    z = np.sin(x / 40)[None, :] + np.cos(y / 30)[:, None] + 0.05 * rng.standard_normal((14, 17))
    z[3:7, 5:10] = np.nan
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": x}, name="v").rio.write_crs(32633)
    model = geogp.fit(da, model="wavelet_basis", family="db2", iota=-1, j_max=1, maxiter=8)
    path = tmp_path_factory.mktemp("wavelet") / "wavelet.npz"
    model.save(path)
    return path, model


def test_wavelet_model_round_trip_is_bit_for_bit(saved_wavelet):
    """Basis, θ and the sparse statistics are stored; loading recomputes the posterior with
    the same backend rule, so predictions (grid and points) are reproduced bit for bit."""
    path, model = saved_wavelet
    loaded = geogp.load_model(path)
    assert loaded.model_ == "wavelet_basis"
    for kw in ({}, dict(x=np.array([3.3, 101.7, 150.0]), y=np.array([12.5, 99.0, 130.1]),
                        points=True)):
        a, b = model.predict(**kw), loaded.predict(**kw)
        for v in ("mean", "std", "std_latent"):
            np.testing.assert_array_equal(a[v].values, b[v].values)
    est, back = model.estimators_[0], loaded.estimators_[0]
    assert back.bound_ == est.bound_ and (back.iota_, back.j_max_) == (est.iota_, est.j_max_)


def test_a_file_saved_under_the_old_name_wavelet_loads_as_wavelet_basis(saved_wavelet, tmp_path):
    """Files written before issue #45 call WaveletRegressor "wavelet", the name that is now the
    non-stationary lattice model's alias: such a file loads as the wavelet-basis model it
    holds, with the same predictions, and a refit asks for that model again."""
    path, model = saved_wavelet
    arrays, meta = _contents(path)
    assert (meta["params"]["model"], meta["params"]["requested"]) == ("wavelet_basis",) * 2
    meta["params"].update(model="wavelet", requested="wavelet")  # as the old geogp wrote it
    _write(tmp_path / "old.npz", arrays, meta)
    loaded = geogp.load_model(tmp_path / "old.npz")
    assert (loaded.model, loaded.model_) == ("wavelet_basis", "wavelet_basis")
    assert type(loaded.estimators_[0]).__name__ == "WaveletRegressor"
    a, b = model.predict(), loaded.predict()
    for v in ("mean", "std", "std_latent"):
        np.testing.assert_array_equal(a[v].values, b[v].values)
    # the old name only ever held this model: another model under it is refused
    meta["params"].update(model="wavelet", requested="lattice")
    _write(tmp_path / "bad.npz", arrays, meta)
    with pytest.raises(ReadError, match="requested model 'lattice' does not match the "
                       "fitted 'wavelet_basis'"):
        geogp.load_model(tmp_path / "bad.npz")


@pytest.mark.parametrize("edit, match", [
    (lambda a, m: a.__setitem__("s0/wavelet/gram_data",
                                np.full_like(a["s0/wavelet/gram_data"], np.nan)), "NaN or inf"),
    (lambda a, m: a.__setitem__("s0/wavelet/active", a["s0/wavelet/active"][::-1].copy()),
     "increasing indices"),
    (lambda a, m: a.__setitem__("s0/wavelet/gram_indices",
                                a["s0/wavelet/gram_indices"] + 10**6), "malformed"),
    (lambda a, m: a.__setitem__("s0/wavelet/params/noise", -a["s0/wavelet/params/noise"]),
     "must be > 0"),
    (lambda a, m: a.__setitem__("s0/wavelet/r", a["s0/wavelet/r"][:-1]), "shape"),
    (lambda a, m: m["slices"][0].__setitem__("j_max", -5), "invalid wavelet basis"),
    (lambda a, m: m["slices"][0]["init"].__setitem__("family", "db99"),
     "invalid estimator options"),
    (lambda a, m: a.pop("s0/wavelet/gram_indptr"), "lacks the array"),
])
def test_tampered_wavelet_files_are_refused(saved_wavelet, tmp_path, edit, match):
    _assert_tampered_copy_refused(saved_wavelet[0], tmp_path, edit, match)
