"""SPDE / GMRF lattice model (``model="lattice"``, issue #13) on the MODIS satellite raster.

Two measurements on ``/work/shared/data/heaton_satellite_train.nc`` (300×500 lon/lat, ~30 %
cloud gaps; skipped when absent):

1. one fit on the whole raster: wall and CPU seconds of the fit (hyperparameters by L-BFGS)
   and of the full-grid mean/std prediction, the fitted range / sd / noise, L-BFGS iterations;
2. gap-shaped cross-validation, ``geogp.cross_validate(da, folds="gaps", n_folds=5,
   model="lattice", ...)``: RMSE, CRPS and 95 % coverage overall and by distance to the nearest
   training cell. With ``--pykrige`` (needs the peers' venv, ``bash
   benchmarks/peers/setup_peers.sh``) the moving-window PyKrige kriging of ``gap_cv.py`` is
   scored on the same folds.

Usage::

    .venv/bin/python benchmarks/bench_lattice.py --fit-only --large-scale 64 --mid-scale 12
                                                      # = geogp.fit(da)'s model: time, memory
    .venv/bin/python benchmarks/bench_lattice.py --alpha 1 --fit-only
    .venv/bin/python benchmarks/bench_lattice.py --fit-cells 0         # exact full likelihood
    .venv/bin/python benchmarks/bench_lattice.py --cv-only --large-scale 200   # multi-resolution
    .venv/bin/python benchmarks/bench_lattice.py --large-scale 200 --mid-scale 4 --maxiter 30
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

DATA = Path("/work/shared/data/heaton_satellite_train.nc")


def _options(args) -> dict:
    opts = dict(alpha=args.alpha, margin=args.margin, mean=args.mean, maxiter=args.maxiter,
                fit_cells=(args.fit_cells or None), tile=args.tile)
    if args.second_range:
        opts["second_range"] = True
    if args.mid_scale:
        opts["mid_scale"] = args.mid_scale
    if args.large_scale:
        opts.update(large_scale=args.large_scale, large_scale_kernel=args.large_scale_kernel,
                    large_scale_window=args.large_scale_window)
    return opts


def single_fit(da, opts: dict) -> None:
    import numpy as np

    import geogp

    w0, c0 = time.perf_counter(), time.process_time()
    model = geogp.fit(da, model="lattice", **opts)
    w1, c1 = time.perf_counter(), time.process_time()
    out = model.predict()
    w2, c2 = time.perf_counter(), time.process_time()
    est = model.estimators_[0]
    rep = est.report_
    print(f"fit {w1 - w0:.1f} s wall / {c1 - c0:.1f} s CPU (L-BFGS {rep.n_iter} iterations, "
          f"{rep.n_eval} evaluations on {est.fit_tiles_} tile(s) in {rep.time_s:.1f} s, "
          f"converged={rep.converged}); "
          f"full-grid mean/std {w2 - w1:.1f} s wall / {c2 - c1:.1f} s CPU; total "
          f"{w2 - w0:.1f} s wall")
    print(f"  range {est.range_:.4g} model units ({est.range_ / est.unit_:.1f} cells), "
          f"sd {est.sd_:.3f}, noise sd {est.noise_sd_:.3f}, lattice {est.shape_}, "
          f"REML log-lik (whole raster) {est.log_likelihood_:.1f}")
    if est.mid_scale is not None:
        d = est.describe()
        print(f"  mid-scale level: range {d['mid_scale_range'] / est.unit_:.1f} cells, sd "
              f"{d['mid_scale_sd']:.3f}")
    std = out["std"].values
    print(f"  predicted std: min {np.nanmin(std):.3f}, median {np.nanmedian(std):.3f}, "
          f"max {np.nanmax(std):.3f}", flush=True)
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB → GiB
    print(f"  peak RSS of the process {peak:.2f} GiB", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--alpha", type=int, default=2, choices=(1, 2))
    ap.add_argument("--margin", type=int, default=16)
    ap.add_argument("--mean", default="linear")
    ap.add_argument("--maxiter", type=int, default=100)
    ap.add_argument("--fit-cells", type=int, default=60_000,
                    help="raster cells in the hyperparameter fit (0: exact full likelihood)")
    ap.add_argument("--tile", type=int, default=128)
    ap.add_argument("--large-scale", type=int, default=0,
                    help="large-scale Fourier features (multi-resolution model; 0: none)")
    ap.add_argument("--large-scale-kernel", default="matern32")
    ap.add_argument("--large-scale-window", type=float, default=1.5)
    ap.add_argument("--second-range", action="store_true",
                    help="α = 2 as (κ₁² − Δ)(κ₂² − Δ) with two learnt ranges")
    ap.add_argument("--mid-scale", type=int, default=0,
                    help="add the mid-scale α = 2 level on a lattice this many times coarser "
                         "(0: none)")
    ap.add_argument("--n-folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fit-only", action="store_true", help="skip the cross-validation")
    ap.add_argument("--cv-only", action="store_true", help="skip the single timed fit")
    ap.add_argument("--pykrige", action="store_true",
                    help="also score gap_cv.py's PyKrige moving-window kriging on the folds")
    args = ap.parse_args(argv)
    if not args.data.exists():
        print(f"skipped: {args.data} not found")
        return 0

    import geogp

    da = geogp.open_raster(args.data)
    opts = _options(args)
    la = os.getloadavg()
    print(f"# bench_lattice — {time.strftime('%Y-%m-%d %H:%M')} — {os.cpu_count()} CPUs — "
          f"load {la[0]:.1f} {la[1]:.1f} {la[2]:.1f} — options {opts}", flush=True)
    if not args.cv_only:
        single_fit(da, opts)
    if args.fit_only:
        return 0
    cv = geogp.cross_validate(da, folds="gaps", n_folds=args.n_folds, seed=args.seed,
                              model="lattice", label=f"lattice α={args.alpha}"
                              + (f" + {args.large_scale} {args.large_scale_kernel}"
                                 if args.large_scale else ""), **opts)
    print(cv.summary(), flush=True)
    if args.pykrige:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from gap_cv import pykrige_method

        ref = geogp.cross_validate(da, folds="gaps", n_folds=args.n_folds, seed=args.seed,
                                   method=pykrige_method(), label="PyKrige k=50")
        print(ref.summary())
        a, b = cv.scores().loc["all"], ref.scores().loc["all"]
        print(f"lattice vs PyKrige: RMSE {100 * (1 - a['rmse'] / b['rmse']):+.1f} %, "
              f"CRPS {100 * (1 - a['crps'] / b['crps']):+.1f} % (positive = lattice better)")
    la = os.getloadavg()
    print(f"# load at the end {la[0]:.1f} {la[1]:.1f} {la[2]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
