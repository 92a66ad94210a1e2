"""The demo: fill holes in a real elevation model and check the uncertainty on held-out cells.

Data: the USGS digital elevation model of the Jacksboro fault (Tennessee) that ships with
matplotlib (``matplotlib.cbook.get_sample_data("jacksboro_fault_dem.npz")``): 344 × 403 cells
of 3 arc-seconds (≈ 93 m × 74 m), elevation in metres. The file stores the cell size (``dx``,
``dy``, degrees) and the bounding edges; its ``ymin``/``ymax`` keys hold the northern and southern
edges in that order, and row 0 is the northern row (the image is drawn north-up). Cell-centre
coordinates are built from these, in EPSG:4326.

Protocol: three discs are cut out (large gaps) and 20 % of the remaining cells are held out at
random (seeded). The model is fitted on what is left, predicts the full grid, and is scored on
the held-out cells (RMSE, 95 % coverage, docs/crossvalidation.md (scores)), separately for the discs
and the random cells.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import xarray as xr
from matplotlib import cbook

from geogp.core import metrics
from geogp.core.progress import bar
from geogp.exceptions import InputError
from geogp.frontend.api import GeoRegressor
from geogp.frontend.io import check_writable, write_geotiff
from geogp.frontend.plotting import save_maps

__all__ = ["load_elevation", "cut_holes", "run_demo"]


def load_elevation() -> xr.DataArray:
    """The Jacksboro fault DEM as a DataArray (lat, lon) in metres, EPSG:4326."""
    with cbook.get_sample_data("jacksboro_fault_dem.npz") as dem:
        z = np.asarray(dem["elevation"], dtype=np.float64)
        dx, dy = float(dem["dx"]), float(dem["dy"])
        west = float(dem["xmin"])
        north = max(float(dem["ymin"]), float(dem["ymax"]))
    ny, nx = z.shape
    lat = north - (np.arange(ny) + 0.5) * dy
    lon = west + (np.arange(nx) + 0.5) * dx
    da = xr.DataArray(
        z, dims=("lat", "lon"),
        coords={"lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude"}),
                "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude"})},
        name="elevation",
        attrs={"units": "m", "long_name": "elevation",
               "source": "USGS DEM of the Jacksboro fault, via matplotlib sample data"},
    )
    return da.rio.set_spatial_dims(x_dim="lon", y_dim="lat").rio.write_crs("EPSG:4326")


def cut_holes(da: xr.DataArray, seed: int = 0,
              frac: float = 0.2) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    """(observed, heldout_discs, heldout_random): the raster with holes, and the truth there.

    Three discs (radii 5–8 % of the grid's width) plus a random ``frac`` of the other cells.
    """
    rng = np.random.default_rng(seed)
    ny, nx = da.shape
    iy, ix = np.mgrid[0:ny, 0:nx]
    discs = np.zeros((ny, nx), dtype=bool)
    for cy, cx, r in ((0.30, 0.25, 0.08), (0.65, 0.70, 0.06), (0.75, 0.30, 0.05)):
        discs |= (iy - cy * ny) ** 2 + (ix - cx * nx) ** 2 <= (r * nx) ** 2
    random = (rng.random((ny, nx)) < frac) & ~discs
    observed = da.where(~(discs | random))
    return observed, da.where(discs), da.where(random)


def _demo_folder(out_dir) -> Path:
    """``out_dir`` as an existing folder (created if need be); a file there is refused."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"the demo's output folder {str(out)!r} is an existing file, not a "
                         "folder; choose another --out-dir.")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot create the demo's output folder {str(out)!r}: "
                         f"{err.strerror or err}; choose another --out-dir.") from None
    return out


def run_demo(out_dir: str | os.PathLike[str] = "geogp-demo", *, model: str = "auto",
             n_features: int | None = None, seed: int = 0, progress: bool = True,
             echo: Callable[[str], object] = print) -> dict:
    """Run the demo and write ``demo_prediction.tif`` (band 1 mean, band 2 std) and
    ``demo_map.png`` to ``out_dir`` (created; existing demo files are replaced).

    The model is :func:`geogp.fit`'s default (``model="auto"``: the lattice model on this
    raster, about 2 minutes on 2 cores); ``n_features`` (or ``model="afs"``) fits AFS
    instead (800 features: about 10 s, with intervals too narrow in the holes).

    Returns:
        dict with ``fit_time_s``, ``total_time_s``, ``rmse`` and ``coverage95`` on all held-out
        cells, the same per hole type, and the output paths.
    """
    t_start = time.perf_counter()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be an integer ≥ 0; got {seed!r}.")
    out = _demo_folder(out_dir)
    for name in ("demo_prediction.tif", "demo_map.png"):  # before the fit, not after it
        check_writable(out / name, overwrite=True)
    truth = load_elevation()
    observed, discs, random = cut_holes(truth, seed)
    heldout = discs.fillna(random)
    n_obs = int(observed.notnull().sum())
    echo(f"Jacksboro fault DEM: {truth.shape[0]} × {truth.shape[1]} cells, {n_obs} observed, "
         f"{int(discs.notnull().sum())} in 3 holes, {int(random.notnull().sum())} held out "
         "at random")
    t0 = time.perf_counter()
    model = GeoRegressor(model, n_features=n_features, progress=progress).fit(observed)
    fit_time = time.perf_counter() - t0
    pred = model.predict(like=truth)
    with bar("writing", 2, progress, unit="file") as pbar:
        tif = write_geotiff(pred, out / "demo_prediction.tif", overwrite=True)
        pbar.update(1)
        png = save_maps(out / "demo_map.png", observed, pred, heldout, overwrite=True,
                        title="geogp demo: Jacksboro fault DEM, 3 holes + 20 % held-out cells")
        pbar.update(1)
    result = {"fit_time_s": fit_time, "geotiff": str(tif), "map": str(png)}
    for key, ref in (("", heldout), ("discs_", discs), ("random_", random)):
        result[f"{key}rmse"] = metrics.rmse(ref.values, pred["mean"].values)
        result[f"{key}coverage95"] = metrics.coverage(ref.values, pred["mean"].values,
                                                      pred["std"].values)
    result["total_time_s"] = time.perf_counter() - t_start
    echo(model.summary())
    echo(f"held-out RMSE {result['rmse']:.2f} m, 95% coverage {result['coverage95']:.1%} "
         f"(holes: {result['discs_rmse']:.2f} m, {result['discs_coverage95']:.1%}; random cells: "
         f"{result['random_rmse']:.2f} m, {result['random_coverage95']:.1%})")
    echo(f"fit {fit_time:.1f} s, total {result['total_time_s']:.1f} s")
    echo(f"wrote {tif} (band 1 mean, band 2 std) and {png}")
    return result
