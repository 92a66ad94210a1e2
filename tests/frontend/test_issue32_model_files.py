"""Issue #32, hardening round 2: model files. Item 6 (checked, not authenticated): every
consistent-but-wrong edit that describes an inconsistent model is refused without a key, and
with a key every edit is refused by the signature (HMAC). Runaways: a small file declaring
gigabytes is refused from its headers, and digests are computed in streams."""

from __future__ import annotations

import io
import json
import tracemalloc
import zipfile

import numpy as np
import pytest
import xarray as xr

import geogp
from geogp.exceptions import InputError, ReadError
from geogp.persist.checks import digest, meta_digest

# small synthetic data: the models' approximation diagnostics warn, beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")

KEY = b"correct horse battery staple"


def _da(ny=12, nx=16, crs=32633):
    rng = np.random.default_rng(5)
    y, x = 5e6 - 100 * np.arange(ny), 3e5 + 100 * np.arange(nx)
    z = np.sin(x / 400)[None, :] + np.cos(y / 300)[:, None] + 0.05 * rng.standard_normal((ny, nx))
    z[3:6, 4:9] = np.nan
    return xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": x}, name="v").rio.write_crs(crs)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """AFS and lattice models, each saved unsigned and signed."""
    root = tmp_path_factory.mktemp("models")
    models = {"afs": geogp.fit(_da(), model="afs", n_features=36, maxiter=3),
              "lattice": geogp.fit(_da(), model="lattice", maxiter=3)}
    out = {}
    for kind, model in models.items():
        model.save(root / f"{kind}.npz")
        model.save(root / f"{kind}_signed.npz", key=KEY)
        out[kind] = (root / f"{kind}.npz", root / f"{kind}_signed.npz", model)
    return out


def _contents(path):
    with np.load(path, allow_pickle=False) as z:
        return ({k: z[k] for k in z.files if k != "__meta__"},
                json.loads(str(z["__meta__"])))


def _write(path, arrays, meta, rechecksum=True):
    """The attacker's copy: digests recomputed consistently (a MAC cannot be)."""
    if rechecksum:
        meta["checksums"] = {k: digest(np.asarray(v)) for k, v in arrays.items()}
        meta["meta_digest"] = meta_digest(meta)
    with open(path, "wb") as f:
        np.savez(f, **arrays, __meta__=np.array(json.dumps(meta)))
    return path


def _utm34(a, m):
    from pyproj import CRS

    wkt = CRS.from_epsg(32634).to_wkt()  # the map moves 6° east
    m["spec"]["crs_wkt"] = m["target"]["crs_wkt"] = wkt


def _shuffle_x(a, m):
    a["target/x"] = np.random.default_rng(0).permutation(a["target/x"])


def _move_origin(a, m):
    m["slices"][0]["origin"][1] += 500.0


def _transpose_shape(a, m):
    m["slices"][0]["shape"] = m["slices"][0]["shape"][::-1]


def _extra_member(a, m):
    a["s0/extra"] = np.zeros(3)


# (model kind, edit, what the semantic checks say without a key; None: undetectable)
TAMPERING = [
    ("afs", _utm34, None),
    ("lattice", _utm34, None),
    ("afs", _shuffle_x, "not monotonic"),
    ("lattice", _shuffle_x, "not monotonic"),
    ("lattice", _move_origin, "lattice origin"),
    ("lattice", _transpose_shape, "lattice shape"),
    ("afs", _extra_member, "no geogp model reads"),
    ("lattice", _extra_member, "no geogp model reads"),
]


@pytest.mark.parametrize("kind, edit, match", TAMPERING,
                         ids=[f"{k}-{e.__name__[1:]}" for k, e, _ in TAMPERING])
def test_issue32_item6_consistent_tampering(files, tmp_path, kind, edit, match):
    """Edits with every digest recomputed: the inconsistent ones are refused without a key;
    a CRS replaced by another valid one is not detectable without a key (documented), and
    with a key every edit is refused by the signature."""
    plain, signed, _model = files[kind]
    arrays, meta = _contents(plain)
    edit(arrays, meta)
    bad = _write(tmp_path / "bad.npz", arrays, meta)
    if match is None:
        loaded = geogp.load_model(bad)  # integrity-checked, not authenticated
        assert loaded.spec_.crs.to_epsg() == 32634
    else:
        with pytest.raises(ReadError, match=match) as err:
            geogp.load_model(bad)
        assert "\n" not in str(err.value)
    arrays, meta = _contents(signed)
    edit(arrays, meta)
    bad = _write(tmp_path / "bad_signed.npz", arrays, meta)
    with pytest.raises(ReadError, match="signature does not match"):
        geogp.load_model(bad, key=KEY)


@pytest.mark.parametrize("kind", ["afs", "lattice"])
def test_issue32_item6_downgrade_to_version_1_refused(files, tmp_path, kind):
    """Format version 1, digests removed, weights ×3 and an extra member: no silent
    downgrade to a file that cannot be checked."""
    plain, signed, _ = files[kind]
    for path in (plain, signed):
        arrays, meta = _contents(path)
        meta["format_version"] = 1
        for k in ("checksums", "meta_digest", "mac"):
            meta.pop(k, None)
        name = "s0/posterior/weights" if kind == "afs" else "s0/lattice/mean"
        arrays[name] = arrays[name] * 3
        arrays["s0/evil"] = np.ones(2)
        bad = _write(tmp_path / "v1.npz", arrays, meta, rechecksum=False)
        for key in (None, KEY):
            with pytest.raises(ReadError, match="version 1"):
                geogp.load_model(bad, key=key)


def test_issue32_item6_signed_files(files, tmp_path):
    """A signed file loads with its key and predicts as the model; without a key, with
    another key, or with its signature stripped, it is refused."""
    plain, signed, model = files["lattice"]
    loaded = geogp.load_model(signed, key=KEY)
    np.testing.assert_array_equal(loaded.predict()["mean"].values, model.predict()["mean"].values)
    with pytest.raises(ReadError, match="signed; pass key="):
        geogp.load_model(signed)
    with pytest.raises(ReadError, match="signature does not match"):
        geogp.load_model(signed, key=b"another key")
    with pytest.raises(ReadError, match="not signed"):
        geogp.load_model(plain, key=KEY)
    arrays, meta = _contents(signed)
    meta.pop("mac")
    stripped = _write(tmp_path / "stripped.npz", arrays, meta)
    with pytest.raises(ReadError, match="not signed"):
        geogp.load_model(stripped, key=KEY)
    with pytest.raises(InputError, match="key must be bytes"):
        geogp.load_model(signed, key="text")


@pytest.mark.parametrize("value", ["abc", float("nan"), 0, -1, 1.5])
def test_issue32_item6_lon_scale_checked_at_load(files, tmp_path, value):
    """lon_scale="abc" failed at predict (UFuncTypeError); NaN, 0, −1 with a misleading
    OutsideWindowError. Now one line at load naming the field."""
    arrays, meta = _contents(files["afs"][0])
    meta["spec"]["lon_scale"] = value
    with pytest.raises(ReadError, match="lon_scale"):
        geogp.load_model(_write(tmp_path / "bad.npz", arrays, meta))


@pytest.mark.parametrize("field, value, match", [
    ("n_observed", ["many"], "n_observed"),
    ("n_observed", [-4], "n_observed"),
    ("fit_time_s", ["slow"], "fit_time_s"),
])
def test_issue32_item6_bookkeeping_checked_at_load(files, tmp_path, field, value, match):
    """n_observed: ["many"] broke summary(); now refused at load."""
    arrays, meta = _contents(files["afs"][0])
    meta[field] = value
    with pytest.raises(ReadError, match=match):
        geogp.load_model(_write(tmp_path / "bad.npz", arrays, meta))


@pytest.mark.parametrize("wkt, match", [("hello", "does not parse"),
                                        ('GEOGCS["WGS 84"]', "does not parse|geographic")])
def test_issue32_item6_crs_checked_at_load(files, tmp_path, wkt, match):
    arrays, meta = _contents(files["afs"][0])
    meta["spec"]["crs_wkt"] = meta["target"]["crs_wkt"] = wkt
    with pytest.raises(ReadError, match=match):
        geogp.load_model(_write(tmp_path / "bad.npz", arrays, meta))


def test_issue32_item6_cli_signs_with_a_key_file(tmp_path):
    from geogp.cli import main

    src, key_file = tmp_path / "in.nc", tmp_path / "key"
    _da().to_dataset().to_netcdf(src)
    key_file.write_bytes(KEY + b"\n")
    out = tmp_path / "m.npz"
    assert main(["fit", str(src), "--model", "lattice", "--maxiter", "3", "--quiet",
                 "--out", str(tmp_path / "o.tif"), "--save-model", str(out),
                 "--model-key-file", str(key_file)]) == 0
    assert geogp.load_model(out, key=KEY).model_ == "lattice"
    with pytest.raises(ReadError, match="signed"):
        geogp.load_model(out)
    for extra in (["--save-model", str(tmp_path / "n.npz")], []):  # no such key file; no model
        assert main(["fit", str(src), "--quiet", "--out", str(tmp_path / "n.tif"),
                     "--model-key-file", str(tmp_path / "none"), *extra]) == 2


# --------------------------------------------------------------------------- runaways
def _bomb(path, declared_mib: int):
    """A model-like .npz whose compressed member declares ``declared_mib`` MiB of zeros."""
    n = declared_mib * 2**20 // 8
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False,
                                               "shape": (n,)})
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("s0/lattice/mean.npy", "w", force_zip64=True) as f:
            f.write(buf.getvalue())
            zeros = bytes(2**20)
            for _ in range(declared_mib):
                f.write(zeros)
        meta = io.BytesIO()
        np.save(meta, np.array(json.dumps({"format": "geogp-model", "format_version": 2})))
        zf.writestr("__meta__.npy", meta.getvalue())
    return path


def test_issue32_load_refuses_huge_declared_members_from_headers(tmp_path):
    """A 2.3 MiB file declaring 2.24 GiB of zeros peaked at 4.9 GiB before refusing (the
    limit was 80 % of the RAM, and the digest copied the array again). Now the headers alone
    refuse it: a member may not declare more than the file stores for it. Here 256 MiB of
    zeros in about 0.25 MiB; the traced peak stays under 4 MiB."""
    path = _bomb(tmp_path / "bomb.npz", 256)
    assert path.stat().st_size < 2**20
    tracemalloc.start()
    with pytest.raises(ReadError, match=r"declares 0.25 GiB .* stores") as err:
        geogp.load_model(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * 2**20 and "\n" not in str(err.value)


def test_issue32_load_hashes_in_streams(tmp_path):
    """The digests are computed from the stored bytes in chunks: verifying a 32 MiB array
    allocates far less than the array (it used to load it and copy it once more)."""
    from geogp.persist.checks import verify_digests

    a = np.arange(4 * 2**20, dtype=np.float64)
    path = tmp_path / "big.npz"
    np.savez(path, big=a, __meta__=np.array("{}"))
    want = {"big": digest(a)}
    with np.load(path) as z:
        tracemalloc.start()
        verify_digests(z, want)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 4 * 2**20
        with pytest.raises(ReadError, match="does not match its checksum"):
            verify_digests(z, {"big": digest(a + 1)})
