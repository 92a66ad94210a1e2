"""Model names of issue #45: ``model="nonstationary"`` (alias ``"wavelet"``) is the lattice model
with a range and sd that vary in space; the thesis's wavelet-basis model is ``"wavelet_basis"``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import rasterio
import rioxarray  # noqa: F401
import xarray as xr
from scipy.ndimage import gaussian_filter

import geogp
from geogp.cli import build_parser, main
from geogp.exceptions import InputError

ALIAS_REASON = ("requested (model='wavelet' is an alias of model='nonstationary': the lattice "
                "model with a range and sd that vary in space on a multiresolution basis)")


def _raster(ny: int, nx: int, seed: int = 0) -> xr.DataArray:
    """A field that is smooth on the left and rough on the right, with a gap and noise."""
    rng = np.random.default_rng(seed)
    smooth = gaussian_filter(rng.standard_normal((ny, nx)), 6)
    rough = gaussian_filter(rng.standard_normal((ny, nx)), 1.2)
    right = (np.arange(nx) >= nx // 2)[None, :]
    z = 3 * np.where(right, rough, smooth) + 0.05 * rng.standard_normal((ny, nx))
    z[ny // 4: ny // 4 + 8, nx // 3: nx // 3 + 9] = np.nan
    return xr.DataArray(z, dims=("y", "x"), name="z",
                        coords={"y": 5000.0 - 100.0 * np.arange(ny),
                                "x": 300000.0 + 100.0 * np.arange(nx)}).rio.write_crs(32633)


@pytest.fixture(scope="module")
def fits():
    da = _raster(40, 48)
    return da, {name: geogp.fit(da, model=name)
                for name in ("wavelet", "nonstationary")}


def test_wavelet_and_nonstationary_fit_the_same_varying_lattice_model(fits):
    _, models = fits
    alias, named = models["wavelet"], models["nonstationary"]
    assert alias.model == "wavelet" and alias.model_ == named.model_ == "nonstationary"
    assert alias.model_reason_ == ALIAS_REASON and named.model_reason_ == "requested"
    for m in (alias, named):
        est = m.estimators_[0]
        assert type(est).__name__ == "LatticeRegressor"
        assert est.varying is True and est.varying_basis_ is not None  # the range does vary
    a, b = alias.predict(), named.predict()
    for v in ("mean", "std", "std_latent"):
        np.testing.assert_allclose(a[v].values, b[v].values, rtol=0, atol=1e-12)
    scales = alias.local_scales()
    assert np.ptp(scales["local_range"].values) > 0 and np.ptp(scales["local_sd"].values) > 0


def test_the_nonstationary_model_is_the_lattice_model_with_varying_true(fits):
    da, models = fits
    lattice = geogp.fit(da, model="lattice", varying=True)
    a, b = models["nonstationary"].predict(), lattice.predict()
    for v in ("mean", "std"):
        np.testing.assert_allclose(a[v].values, b[v].values, rtol=0, atol=1e-12)


@pytest.mark.parametrize("varying", [False, None, "auto"])
def test_a_fixed_range_with_the_nonstationary_model_is_refused_in_one_line(varying):
    da = _raster(12, 14)
    with pytest.raises(InputError, match="use model='lattice'") as info:
        geogp.fit(da, model="wavelet", varying=varying)
    assert "\n" not in str(info.value)


def test_an_unknown_model_name_lists_the_names_and_the_alias():
    with pytest.raises(InputError, match=r"'wavelet_basis'.*'nonstationary'.*\['wavelet'\]"):
        geogp.fit(_raster(12, 14), model="wavelets")


def test_the_command_line_takes_the_three_names_and_says_what_the_alias_is(capsys):
    parser = build_parser()
    for command in (["fit", "in.tif", "--out", "p.tif"], ["cv", "in.tif"],
                    ["place", "in.tif", "--out", "s.geojson"]):
        for name in ("wavelet", "nonstationary", "wavelet_basis"):
            assert parser.parse_args([*command, "--model", name]).model == name
    with pytest.raises(SystemExit):
        parser.parse_args(["fit", "in.tif", "--out", "p.tif", "--help"])
    text = "".join(capsys.readouterr().out.split())  # argparse wraps at spaces and hyphens
    for words in ("wavelet: an alias of nonstationary",
                  "nonstationary (the lattice model with a range and sd that vary in space",
                  "wavelet_basis (the thesis's wavelet-basis covariance)"):
        assert "".join(words.split()) in text


def test_geogp_fit_with_the_alias_writes_the_local_scales(tmp_path):
    src, out = tmp_path / "in.tif", tmp_path / "p.tif"
    _raster(20, 24, seed=2).rio.to_raster(src)
    assert main(["fit", str(src), "--out", str(out), "--model", "wavelet", "--local-range",
                 "--save-model", str(tmp_path / "m.npz"), "--quiet"]) == 0
    with rasterio.open(out) as f:
        assert f.descriptions == ("mean", "std", "local_range", "local_sd")
        assert np.all(np.isfinite(f.read()))
    loaded = geogp.load_model(tmp_path / "m.npz")
    assert (loaded.model, loaded.model_) == ("wavelet", "nonstationary")
    assert loaded.model_reason_ == ALIAS_REASON


def test_a_bad_combination_on_the_command_line_is_refused_in_one_line(tmp_path, capsys):
    src = tmp_path / "in.tif"
    _raster(12, 14).rio.to_raster(src)
    for name in ("wavelet", "nonstationary"):
        code = main(["fit", str(src), "--out", str(tmp_path / "p.tif"), "--model", name,
                     "--features", "64", "--quiet"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err
        assert "unknown option(s) ['n_features'] for model='nonstationary'" in err
    assert not (tmp_path / "p.tif").exists()
    code = main(["place", str(src), "--out", str(tmp_path / "s.geojson"), "--model",
                 "wavelet", "--kernel", "matern32"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "AFS options" in err


def test_geogp_place_with_the_nonstationary_model(tmp_path):
    src, out = tmp_path / "in.tif", tmp_path / "s.geojson"
    da = _raster(20, 24, seed=4)
    da.rio.to_raster(src)
    assert main(["place", str(src), "--n", "3", "--out", str(out), "--model", "nonstationary",
                 "--quiet"]) == 0
    xy = np.array([f["geometry"]["coordinates"] for f in json.loads(out.read_text())["features"]])
    assert xy.shape == (3, 2)
    assert np.all(np.isin(xy[:, 0], da.x.values)) and np.all(np.isin(xy[:, 1], da.y.values))
