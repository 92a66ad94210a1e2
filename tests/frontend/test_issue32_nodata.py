"""Issue #32, hardening round 2, item 4 (nodata): a declared nodata value that the raster's
type cannot hold, and a nodata= that is not one number, are refused with one clear line."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

import geogp
from geogp.exceptions import InputError, NodataWarning
from geogp.frontend.nodata import masked_values


def _int16(attrs=None):
    z = (np.arange(30, dtype=np.int16) * 7).reshape(5, 6)
    z[0, :3] = -32768  # a sentinel block
    return xr.DataArray(z, dims=("y", "x"), coords={"y": 100.0 * np.arange(5, 0, -1),
                                                    "x": 100.0 * np.arange(6)},
                        attrs=attrs or {}).rio.write_crs(32633)


def test_issue32_fillvalue_outside_the_dtype_is_refused():
    """_FillValue=1e10 on int16 masked nothing and silenced the sentinel warning, so the
    -32768 block was fitted as data: refused, naming the value, its source and the type."""
    da = _int16({"_FillValue": 1e10})
    with pytest.raises(InputError, match=r"nodata value 1e\+10 \(attribute _FillValue\).*int16"):
        masked_values(da)
    with pytest.raises(InputError, match="int16"):
        geogp.fit(da, model="afs", n_features=16, optimize=False, lengthscale=300.0)
    # the fix the message names: the right nodata= masks the block
    out = masked_values(da, nodata=-32768)
    assert int(out.isnull().sum()) == 3
    # and without a declared value the sentinel warning still fires
    with pytest.warns(NodataWarning, match="-32768"):
        masked_values(_int16())


def test_issue32_user_nodata_outside_the_dtype_is_refused():
    with pytest.raises(InputError, match=r"nodata=1e\+10 cannot occur .* int16"):
        masked_values(_int16(), nodata=1e10)
    with pytest.raises(InputError, match=r"nodata=0.5 cannot occur"):
        masked_values(_int16(), nodata=0.5)


@pytest.mark.parametrize("nodata, expected", [
    ("abc", "must be a number"), ([1, 2], "single number"), (np.array([1.0, 2.0]), "single"),
    (True, "single number"),
])
def test_issue32_nodata_that_is_not_one_number_is_refused(nodata, expected):
    """nodata='abc' was ignored and nodata=[1, 2] silently used 1 only."""
    with pytest.raises(InputError, match=expected):
        masked_values(_int16(), nodata=nodata)
    with pytest.raises(InputError, match=expected):
        geogp.GeoRegressor("afs", nodata=nodata).fit(_int16())


def test_issue32_valid_nodata_values_still_work():
    da = _int16().astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NodataWarning)
        assert int(masked_values(da, nodata="-32768").isnull().sum()) == 3  # numeric text
        assert int(masked_values(da, nodata=np.float32(-32768)).isnull().sum()) == 3
    cf = _int16({"missing_value": np.array([-32768, 28], dtype=np.int16)})  # a CF vector
    assert int(masked_values(cf).isnull().sum()) == 4
