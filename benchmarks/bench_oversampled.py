"""A raster oversampled by nearest-neighbour resampling (#41 item 2), against its native grid.

gdalwarp's default resampling turns each cell of a product into a k × k block of copies. The
satellite raster (``../shared/data/heaton_satellite_train.nc``; skipped when absent) is
resampled so, k = ``--factor`` per axis, and the gap folds of the native raster
(``geogp.crossval.gap_folds``, seed 0) are hidden in both: the hidden fine cells are the
copies of the hidden native ones. Scored on the hidden cells (RMSE, CRPS and 95 % coverage of
a new observation):

- ``native``: ``geogp.fit`` on the native raster;
- ``blocks``: ``geogp.fit`` on the oversampled raster (the default: it finds the blocks, fits
  one cell per block and predicts every cell as its block);
- ``cells``: the oversampled raster fitted cell by cell, as geogp did before it looked for
  blocks (``--cells``; 1.35·10⁶ cells at k = 3: minutes per fold).

Usage::

    .venv/bin/python benchmarks/bench_oversampled.py --folds 0 1 --cells
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import xarray as xr
from _pooled import Pooled  # benchmarks/ is on sys.path when run

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "heaton_satellite_train.nc"


def oversample(da: xr.DataArray, k: int) -> xr.DataArray:
    """Nearest-neighbour resampling by k per axis: cell centres k times as dense, each native
    cell's value copied into its k × k block (blocks aligned with the raster's corner)."""
    y, x = da["y"].values, da["x"].values
    dy, dx = (y[1] - y[0]) / k, (x[1] - x[0]) / k
    fy = (y[:, None] + dy * (np.arange(k) - (k - 1) / 2)).ravel()
    fx = (x[:, None] + dx * (np.arange(k) - (k - 1) / 2)).ravel()
    values = np.kron(da.values, np.ones((k, k)))
    out = xr.DataArray(values, dims=("y", "x"), coords={"y": fy, "x": fx}, name=da.name,
                       attrs=da.attrs)
    return out.rio.write_crs(da.rio.crs) if da.rio.crs is not None else out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--factor", type=int, default=3)
    ap.add_argument("--cells", action="store_true", help="also fit the fine raster cell by cell")
    args = ap.parse_args()
    if not DATA.exists():
        print(f"SKIP: {DATA} not found (the satellite grid is not shipped with geogp).")
        return
    import geogp
    from geogp.crossval.folds import gap_folds
    from geogp.frontend.api import GeoRegressor

    da = geogp.open_raster(DATA)
    truth = da.values
    fine = oversample(da, args.factor)
    folds = gap_folds(np.isfinite(truth), 5, seed=0)
    block = np.ones((args.factor, args.factor), bool)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.1f}; "
          f"{da.shape} → {fine.shape} (×{args.factor} nearest neighbour)")
    cases = ["native", "blocks"] + (["cells"] if args.cells else [])
    pooled = Pooled()
    for k in args.folds:
        held = folds[k]
        held_fine = np.kron(held, block)
        truth_fine = np.kron(truth, np.ones((args.factor, args.factor)))
        print(f"fold {k}: {int(held.sum())} hidden cells ({int(held_fine.sum())} fine)",
              flush=True)
        for case in cases:
            src, mask, ref = (da, held, truth) if case == "native" else (fine, held_fine,
                                                                         truth_fine)
            data = src.copy(data=np.where(mask, np.nan, src.values))
            t0 = time.perf_counter()
            if case == "cells":  # the fit before blocks were looked for
                find = GeoRegressor._find_blocks
                GeoRegressor._find_blocks = lambda self, g, covariates: None
                try:
                    model = geogp.fit(data)
                finally:
                    GeoRegressor._find_blocks = find
            else:
                model = geogp.fit(data)
            pred = model.predict()
            wall = time.perf_counter() - t0
            s = geogp.metrics.evaluate(ref[mask], pred["mean"].values[mask],
                                       pred["std"].values[mask])
            noise = model.hyperparameters()["noise_sd"].iloc[0]
            print(f"  {case:7s} RMSE {s['rmse']:.3f}  CRPS {s['crps']:.3f}  cov95 "
                  f"{s['coverage95']:.3f}  noise sd {noise:.3g}  {wall:6.1f} s"
                  + (f"  blocks {model.blocks_.factor}" if model.blocks_ else ""), flush=True)
            pooled.add(case, s, int(held.sum()), wall)  # each native cell once
    pooled.print(len(args.folds), 7)


if __name__ == "__main__":
    main()
