"""Peers side by side on real image stacks (issue #43): geogp's space-time model, the R
package gapfill, DINEOF and linear interpolation in time, scored on the same hidden cells.

``ndvi``: the study of gapfill (Gerber et al. 2018, IEEE TGRS; its tests-local/maskstudy.rda,
GPL ≥ 2, fetched by ``bench_spacetime.py``, never shipped): MODIS NDVI, 100 × 100 cells, 48
16-day composites (day of year 145–257, 2004–2009), with real cloud masks added until 20 %
(or 50 %) of the cells are missing. A seeded random sample of ``--cells`` hidden cells per
mask is scored (gapfill predicts every cell on its own, so a sample costs it in proportion;
0: all). ``sst``: DINEOF's own example (``bench_spacetime.py sst``'s stack and hidden cells,
all scored); gapfill needs seasons × years of equally spaced dates, which 10 days are not.
Every method is scored with the same code: RMSE, and CRPS and 95 % coverage of the true
value where it gives an sd (geogp only).

- ``spacetime``: ``geogp.fit(stack)`` with the defaults (the space-time lattice model).
- ``two-stages``: the large scales first (``bench_spacetime.two_stages``: the joint model on
  ``--block`` × ``--block`` block means, then on the residuals; not geogp's default).
- ``per-image``: ``geogp.fit(stack, model="lattice")``, one fit per date (slow: not run
  unless ``--methods`` names it).
- ``gapfill``: ``Gapfill()`` with the package's defaults and ``clipRange = c(0, 1)``
  (``gapfill_stack.R``, through ``Rscript``), from ``setup_stack_peers.sh``'s library.
- ``DINEOF``: pyDINEOF's ``run_2D`` with up to 10 EOF modes (3 on 10 dates: its Krylov
  space must be smaller than the dates; ``dineof_stack.py`` in ``.venv-dineof``); it fits
  log values and leaves cells it never saw (or saw only at ≤ 0) empty. It is also scored on
  the cells it filled.
- ``linear in time``: each cell's series interpolated linearly in time (days) between its
  observed dates (held constant beyond the first and last); ``same day, linear across years``
  (NDVI): the same per day of year, across the years (where a day was never seen, the
  former).

Where a method leaves a scored cell empty, the date's mean of the observed values stands in
(one rule for all; the count is printed).

A peer whose environment is missing is skipped with a line that says how to set it up::

    bash benchmarks/peers/setup_stack_peers.sh          # R + gapfill, pyDINEOF (as root)
    .venv/bin/python benchmarks/peers/stack_peers.py [--data maskstudy.npz --rda maskstudy.rda]
        [--sst alboranSST_small.nc] [--studies ndvi sst] [--masks 20 50] [--cells 10000]
        [--methods spacetime linear DINEOF gapfill]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from geogp.core.metrics import crps_gaussian  # noqa: E402

from bench_spacetime import (  # noqa: E402
    NDVI_URL,
    fetched,
    machine,
    ndvi_arrays,
    ndvi_stack,
    sst_hidden,
    sst_stack,
    timed_fit,
    two_stages,
)

RLIB = os.path.join(HERE, ".rlib")
METHODS = ("spacetime", "two-stages", "linear", "DINEOF", "gapfill", "per-image")
DINEOF_PY = os.path.join(HERE, ".venv-dineof", "bin", "python")


def r_index(cells: tuple[np.ndarray, np.ndarray, np.ndarray], n_doy: int, ny: int,
            nx: int) -> np.ndarray:
    """1-based linear indices into R's (x, y, doy, year) arrays of date-major cells
    (date, row, col), date = year · n_doy + doy (``bench_spacetime.ndvi_arrays``)."""
    date, row, col = cells
    year, doy = np.divmod(date, n_doy)
    return 1 + col + nx * (row + ny * (doy + n_doy * year))


def linear_in_time(values: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Each cell's series (axis 0, at the datetime64 ``times``) interpolated linearly in time
    between its observed dates, constant beyond them; NaN where a cell was never observed."""
    t = values.shape[0]
    flat = values.reshape(t, -1)
    out = np.full_like(flat, np.nan)
    steps = (times - times[0]) / np.timedelta64(1, "D")
    for j in range(flat.shape[1]):
        seen = np.isfinite(flat[:, j])
        if seen.any():
            out[:, j] = np.interp(steps, steps[seen], flat[seen, j])
    return out.reshape(values.shape)


def run_gapfill(rda: str, pct: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(fill, truth, seconds) at R indices ``idx`` from gapfill_stack.R."""
    with tempfile.TemporaryDirectory() as tmp:
        cells, out = os.path.join(tmp, "cells.txt"), os.path.join(tmp, "out.csv")
        np.savetxt(cells, idx, fmt="%d")
        subprocess.run(["Rscript", os.path.join(HERE, "gapfill_stack.R"), RLIB, rda, str(pct),
                        cells, out], check=True)
        with open(out) as fh:
            secs = float(fh.readline().split()[-1])
            table = pd.read_csv(fh)
    if not np.array_equal(table["index"].to_numpy(), idx):
        raise SystemExit("gapfill_stack.R returned other cells than it was given")
    return table["fill"].to_numpy(float), table["truth"].to_numpy(float), secs


def run_dineof(values: np.ndarray, times: np.ndarray, nev: int,
               ncv: int) -> tuple[np.ndarray, float]:
    """(fill (T, n_y, n_x), seconds) from dineof_stack.py in its own venv."""
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        np.savez(inp, values=values, time=times)
        subprocess.run([DINEOF_PY, os.path.join(HERE, "dineof_stack.py"), inp, out,
                        "--nev", str(nev), "--ncv", str(ncv)], check=True)
        with np.load(out) as z:
            return z["fill"], float(z["seconds"])


def score(name: str, y: np.ndarray, mean: np.ndarray, secs: float,
          sd: np.ndarray | None = None) -> dict:
    """RMSE, and CRPS and 95 % coverage of the true values ``y`` where ``sd`` is given."""
    row = {"method": name, "rmse": float(np.sqrt(np.mean((mean - y) ** 2))),
           "crps": np.nan, "cov95": np.nan, "seconds": secs}
    if sd is not None:
        row["crps"] = float(crps_gaussian(y, mean, sd))
        row["cov95"] = float(np.mean(np.abs(y - mean) <= 1.96 * sd))
    return row


class Table:
    """Rows of scores, each printed as it comes."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, name: str, y: np.ndarray, mean: np.ndarray, secs: float,
            sd: np.ndarray | None = None) -> None:
        self.rows.append(score(name, y, mean, secs, sd))
        print(pd.DataFrame(self.rows[-1:]).set_index("method").round(4).to_string(), flush=True)

    def print(self) -> None:
        print(pd.DataFrame(self.rows).set_index("method").round(4).to_string())


def geogp_fits(table: Table, label: str, train, cells, y, methods, block: int = 4) -> None:
    """geogp's space-time default, the large scales first (``bench_spacetime.two_stages``) and
    image by image (those in ``methods``) on ``train``, scored at ``cells``."""
    for method, kw in (("spacetime", {"model": "spacetime"}),
                       ("per-image", {"model": "lattice"})):
        if method not in methods:
            continue
        pred, secs = timed_fit(train, **kw)
        table.add(f"{method} {label}", y, pred["mean"].values[cells], secs,
                  pred["std"].values[cells])
    if "two-stages" in methods:
        t0 = time.perf_counter()
        _, _, mean, sd = two_stages(train, block)
        table.add(f"two-stages {label}", y, mean[cells], time.perf_counter() - t0, sd[cells])


def stand_in(fill: np.ndarray, values: np.ndarray, cells, name: str) -> np.ndarray:
    """``fill`` with its empty cells replaced by their date's mean of ``values``, the one
    stand-in for every method that leaves cells empty; says how many."""
    lost = ~np.isfinite(fill)
    if lost.any():
        print(f"# {name} left {int(lost.sum())} of the {fill.size} scored cells empty: their "
              f"date's mean stands in", flush=True)
        fill = fill.copy()
        fill[lost] = np.nanmean(values, axis=(1, 2))[cells[0][lost]]
    return fill


def add_dineof(table: Table, label: str, values, times, cells, y) -> None:
    """DINEOF (Krylov space and modes within what the dates allow) on every scored cell (the
    stand-in where it left one empty) and on those it filled."""
    ncv = min(20, values.shape[0] - 1)
    fill, secs = run_dineof(values, times, nev=min(10, ncv - 6), ncv=ncv)
    fill = fill[cells]
    table.add(f"DINEOF {label}", y, stand_in(fill, values, cells, "DINEOF"), secs)
    done = np.isfinite(fill)
    if not done.all():
        table.add(f"DINEOF, the cells it filled {label}", y[done], fill[done], secs)


def run_ndvi(args, table: Table, have_r: bool, have_dineof: bool) -> None:
    a = ndvi_arrays(args.data)
    if have_r and "gapfill" in args.methods:
        rda = args.rda or (args.data if args.data and args.data.endswith(".rda")
                           else fetched(None, NDVI_URL, "maskstudy.rda"))
    truth = a["data"]
    n_doy = int(np.unique(a["doy"]).size)
    for pct in args.masks:
        masked = a[f"masked{pct}"]
        hidden = np.isfinite(truth) & ~np.isfinite(masked)
        cells = np.nonzero(hidden)
        if 0 < args.cells < cells[0].size:
            pick = np.sort(np.random.default_rng(0).choice(cells[0].size, args.cells,
                                                           replace=False))
            cells = tuple(c[pick] for c in cells)
        y = truth[cells]
        label = f"{pct}%"
        print(f"# NDVI {pct} % masked: {int(hidden.sum())} hidden cells, {y.size} scored; "
              f"{machine()}", flush=True)
        train = ndvi_stack(a, masked)
        geogp_fits(table, label, train, cells, y, args.methods, args.block)
        times = train["time"].values
        if "linear" in args.methods:
            t0 = time.perf_counter()
            lin = stand_in(linear_in_time(masked, times)[cells], masked, cells, "linear")
            table.add(f"linear in time {label}", y, lin, time.perf_counter() - t0)
            t0 = time.perf_counter()  # the same day of year, linear across the years
            n_year = masked.shape[0] // n_doy
            by_doy = masked.reshape(n_year, n_doy, -1).transpose(1, 0, 2)
            years = times.reshape(n_year, n_doy).T
            across = np.stack([linear_in_time(d, yr) for d, yr in zip(by_doy, years,
                                                                      strict=True)])
            across = across.transpose(1, 0, 2).reshape(masked.shape)[cells]
            table.add(f"same day, linear across years {label}", y,
                      np.where(np.isfinite(across), across, lin), time.perf_counter() - t0)
        if have_dineof and "DINEOF" in args.methods:
            add_dineof(table, label, masked, times, cells, y)
        if have_r and "gapfill" in args.methods:
            fill, check, secs = run_gapfill(rda, pct, r_index(cells, n_doy, *masked.shape[1:]))
            if not np.allclose(check, y):
                raise SystemExit("gapfill_stack.R read other cells than this script scores")
            table.add(f"gapfill {label}", y, stand_in(fill, masked, cells, "gapfill"), secs)


def run_sst(args, table: Table, have_dineof: bool) -> None:
    """DINEOF's own example on bench_spacetime.py sst's folds (gapfill needs seasons × years
    of equally spaced dates, which 10 days are not)."""
    da, sea = sst_stack(args.sst)
    v = da.values
    hidden = sst_hidden(v, sea)
    cells = np.nonzero(hidden)
    y = v[cells]
    train = da.where(~hidden)
    print(f"# SST {v.shape}: {y.size} hidden cells; {machine()}", flush=True)
    geogp_fits(table, "SST", train, cells, y, args.methods, args.block)
    values, times = train.values, train["time"].values
    if "linear" in args.methods:
        t0 = time.perf_counter()
        lin = stand_in(linear_in_time(values, times)[cells], values, cells, "linear")
        table.add("linear in time SST", y, lin, time.perf_counter() - t0)
    if have_dineof and "DINEOF" in args.methods:
        add_dineof(table, "SST", values, times, cells, y)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", nargs="+", default=["ndvi", "sst"], choices=["ndvi", "sst"])
    ap.add_argument("--data", default=None,
                    help="the NDVI study for geogp and the Python peers: maskstudy.rda (read "
                         "with the rdata package) or its arrays in an .npz (bench_spacetime.py "
                         "ndvi's --data); fetched when not given")
    ap.add_argument("--rda", default=None,
                    help="maskstudy.rda for gapfill (default: --data where it is the .rda)")
    ap.add_argument("--sst", default=None, help="alboranSST_small.nc (fetched when not given)")
    ap.add_argument("--masks", type=int, nargs="+", default=[20, 50], choices=[20, 50])
    ap.add_argument("--cells", type=int, default=10_000,
                    help="NDVI hidden cells scored per mask (a seeded sample; 0: all)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS[:-1]), choices=METHODS,
                    help="what to run (default: all but per-image)")
    ap.add_argument("--block", type=int, default=4, help="two-stages: the coarse blocks' side")
    args = ap.parse_args()
    have_r = shutil.which("Rscript") is not None and os.path.isdir(os.path.join(RLIB, "gapfill"))
    have_dineof = os.path.exists(DINEOF_PY) and subprocess.run(
        [DINEOF_PY, "-c", "import pydineof"], check=False, capture_output=True).returncode == 0
    for name, ok in (("gapfill", have_r), ("DINEOF", have_dineof)):
        if not ok:
            print(f"# {name} skipped: run benchmarks/peers/setup_stack_peers.sh first")
    table = Table()
    if "ndvi" in args.studies:
        run_ndvi(args, table, have_r, have_dineof)
    if "sst" in args.studies:
        run_sst(args, table, have_dineof)
    table.print()


if __name__ == "__main__":
    main()
