"""Scale of the wavelet-basis model (issue #14): time and peak memory of a default fit on a 2048²
raster with 30 % gaps, plus the full-grid mean/std.

The raster is ``bench_scale.Field`` (the AFS scale benchmark's closed-form field: a seeded sum
of plane waves with elliptical clouds and random missing cells, 30 % gaps, noise sd 0.1). Each
size runs in a fresh subprocess that fits ``WaveletRegressor()`` with its defaults through the
grid route (``fit_grid``: per-axis wavelet evaluations, levels from the pixel size capped by
the memory estimate and the basis-size limit), then predicts mean and std of a new observation
on every cell with ``geogp.families.predict_grid`` (row blocks of 2²⁰ cells). Phases: ``data``
(generating the raster), ``stats`` (the grid statistics), ``fit`` (L-BFGS and the posterior),
``predict``. Peak memory as in ``bench_scale.py``: per-phase sampled RSS and the worker's
``ru_maxrss``. Targets: ≤ 10 min and ≤ 8 GB at 2048².

With ``--satellite`` it measures the issue's other size instead: ``geogp.fit(da,
model="wavelet_basis")`` with defaults on ``../shared/data/heaton_satellite_train.nc`` (300×500,
~30 % missing), then ``model.predict()`` on the full grid (target ≤ 60 s).

Usage::

    .venv/bin/python benchmarks/bench_wavelet_scale.py                 # 2048²
    .venv/bin/python benchmarks/bench_wavelet_scale.py --sizes 512 1024 2048
    .venv/bin/python benchmarks/bench_wavelet_scale.py --satellite
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import (  # benchmarks/ is on sys.path
    GAP_FRACTION,
    MAX_RSS_GB,
    Field,
    RSSMonitor,
    _load,
    _maxrss_bytes,
    machine,
)


def worker(n: int, seed: int, family: str | None) -> dict:
    mon = RSSMonitor().start()
    import geogp  # noqa: F401  (float64 on import)
    from geogp import families
    from geogp.models.wavelet import WaveletRegressor

    base = mon.rss()
    timer = {}
    load_start = _load()

    class Timed(WaveletRegressor):
        """WaveletRegressor that marks the start of the L-BFGS phase (after the statistics);
        the front end routes it as a wavelet_basis model (geogp.families.family_of is an
        isinstance test: before that, this subclass made the prediction go cell by cell, 127 s
        at 2048²)."""

        def _learn(self, *args, **kw):
            timer["stats_end"] = time.perf_counter()
            mon.mark("fit")
            return super()._learn(*args, **kw)

    field = Field(n, seed)
    axes = [field.axis, field.axis]
    t0 = time.perf_counter()
    mon.mark("data")
    values, truth = field.numpy()
    t1 = time.perf_counter()
    mon.mark("stats")
    est = Timed(**({"family": family} if family else {}))
    est.fit_grid(axes, values)
    t2 = time.perf_counter()
    mon.mark("predict")
    pred = families.predict_grid(est, axes)
    t3 = time.perf_counter()
    gap = ~np.isfinite(values)
    err = pred.mean[gap] - truth[gap]
    half = 1.959964 * np.sqrt(pred.var_latent[gap])
    mon.stop()
    return {"n": n, "family": est.family, "iota": int(est.iota_), "j_max": int(est.j_max_),
            "n_features": int(est.n_features_), "spacing": float(est.spacing_),
            "n_iter": int(est.report_.n_iter), "base_gb": base / 1e9,
            "rmse_gap": float(np.sqrt(np.mean(err**2))),
            "cover95_gap": float(np.mean(np.abs(err) <= half)),
            "data_s": t1 - t0, "stats_s": timer["stats_end"] - t1,
            "fit_s": t2 - timer["stats_end"], "predict_s": t3 - t2, "total_s": t3 - t1,
            "peak_gb": {k: v / 1e9 for k, v in mon.peaks.items()},
            "maxrss_gb": _maxrss_bytes() / 1e9, "load_start": load_start, "load_end": _load()}


SATELLITE = Path("/work/shared/data/heaton_satellite_train.nc")


def satellite(path: Path) -> int:
    """Default wavelet fit + full-grid mean/std on the satellite raster, in this process."""
    import geogp

    da = geogp.open_raster(path)
    load_start = _load()
    t0 = time.perf_counter()
    model = geogp.fit(da, model="wavelet_basis")
    t1 = time.perf_counter()
    out = model.predict()
    t2 = time.perf_counter()
    est = model.estimators_[0]
    std = out["std"].values
    print(f"satellite {da.shape[0]}×{da.shape[1]}: {est.family} levels {est.iota_}..{est.j_max_} "
          f"({est.n_features_} functions, {est.n_active_features_} active), "
          f"{est.report_.n_iter} iterations; fit {t1 - t0:.1f} s, full-grid mean/std "
          f"{t2 - t1:.1f} s, total {t2 - t0:.1f} s (target ≤ 60 s); std median "
          f"{np.nanmedian(std):.3f}; load {load_start}/{_load()}", flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[2048])
    ap.add_argument("--family", default=None, help="wavelet family (default: the model's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the rows as JSON here")
    ap.add_argument("--satellite", nargs="?", const=SATELLITE, type=Path,
                    help="measure the satellite raster instead (default path: %(const)s)")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.seed, args.family)))
        return 0
    if args.satellite:
        print(f"# wavelet scale benchmark — {machine()}")
        if not args.satellite.exists():
            print(f"skipped: {args.satellite} not found")
            return 0
        return satellite(args.satellite)
    print(f"# wavelet scale benchmark — {machine()}")
    print(f"WaveletRegressor defaults{f', family {args.family}' if args.family else ''}, "
          f"{GAP_FRACTION:.0%} gaps; targets at 2048²: ≤ 600 s fit + predict, ≤ "
          f"{MAX_RSS_GB:.0f} GB peak")
    rows = []
    for n in args.sizes:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(n),
               "--seed", str(args.seed)] + (["--family", args.family] if args.family else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(f"  size {n}: worker failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(r)
        pk = r["peak_gb"]
        print(f"{n}²: {r['family']} levels {r['iota']}..{r['j_max']} ({r['n_features']} "
              f"functions; pixel {r['spacing']:.2e} standardised units), {r['n_iter']} "
              f"iterations; data {r['data_s']:.1f} s, stats {r['stats_s']:.1f} s, fit "
              f"{r['fit_s']:.1f} s, predict {r['predict_s']:.1f} s, stats + fit + predict "
              f"{r['total_s']:.1f} s; peak RSS stats {pk.get('stats', 0):.2f} / fit "
              f"{pk.get('fit', 0):.2f} / predict {pk.get('predict', 0):.2f} GB, maxRSS "
              f"{r['maxrss_gb']:.2f} GB; gap RMSE {r['rmse_gap']:.3f}, cov95 "
              f"{r['cover95_gap']:.3f}; load {r['load_start']}/{r['load_end']}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine(), "rows": rows}, fh, indent=1)
    return 0 if len(rows) == len(args.sizes) else 1


if __name__ == "__main__":
    sys.exit(main())
