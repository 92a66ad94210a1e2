"""Large gaps in smooth periodic rasters (#41 item 1): the default lattice model against an
exact GP, on the family of ``tests/reliability/test_large_gaps_*.py`` (two variants) plus more
periods and gaps, and a gap smaller than a period (the control: it was never the problem).

Each variant: 200×200 cells of 100 m, noise sd 0.1, 10 % of the cells missing at random and
one square block gap. Scored in the gap: the latent RMSE over that of predicting the field's
mean (0), and the coverage of the hidden noisy values by the 95 % interval of a new
observation. Rows: ``geogp.fit`` with its defaults (``alpha="auto"``, ``hole_effect="auto"``),
the same without the oscillating operator (``hole_effect=False``), with Matérn ν = 1 only
(``alpha=2``, the model before #41), and exact GPs (Matérn-3/2, Matérn-5/2,
SE) with maximum-likelihood hyperparameters on the observed cells within 12 cells of the gap
(every second one, ≤ 2,000 points). No assertions: the acceptance numbers are in the test.

Run: ``.venv/bin/python benchmarks/bench_smooth_gaps.py [--exact]`` (about 2 min a variant on
2 cores, a few more with ``--exact``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import warnings

import numpy as np
from scipy.ndimage import distance_transform_edt

import geogp
from geogp.models.exact.regressor import ExactGP

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from reliability._large_gaps import periodic_case

# the tests' two variants are (30, 60, 0, "product") and (20, 50, 3, "sum")
VARIANTS = [(30, 60, 0, "product"), (30, 60, 1, "sum"), (40, 70, 2, "product"),
            (60, 40, 3, "sum"), (20, 50, 3, "sum")]


def score(mean, std, z, f, gap):
    rmse = np.sqrt(np.mean((mean - f[gap]) ** 2)) / np.sqrt(np.mean(f[gap] ** 2))
    return rmse, np.mean(np.abs(z[gap] - mean) <= 1.96 * std)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exact", action="store_true", help="add the exact-GP rows")
    args = ap.parse_args()
    print(f"# {datetime.date.today()}, load {os.getloadavg()[0]:.1f}")
    print("period gap field | model | RMSE/mean's | cov95 | s")
    for period, side, seed, kind in VARIANTS:
        da, z, f, gap = periodic_case(period, side, seed, kind)
        rows = []
        for label, kw in (("default", {}), ("hole_effect=False", {"hole_effect": False}),
                          ("alpha=2", {"alpha": 2, "hole_effect": False})):
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = geogp.fit(da, **kw)
            pred = model.predict(like=da)
            est = model.estimators_[0]
            r, c = score(pred["mean"].values[gap], pred["std"].values[gap], z, f, gap)
            kind_ = "oscillating" if est.hole_ else f"α = {est.alpha_}"
            rows.append((f"lattice {label} ({kind_})", r, c, time.perf_counter() - t))
        if args.exact:
            obs = np.isfinite(da.values)
            near = np.flatnonzero((obs & (distance_transform_edt(~gap) <= 12)).ravel())[::2]
            near = near[:2000]
            yy, xx = np.meshgrid(da.y.values, da.x.values, indexing="ij")
            X = np.stack([yy.ravel(), xx.ravel()], axis=1)
            for kernel in ("matern32", "matern52", "se"):
                t = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    gp = ExactGP(kernel, lengthscale=0.3, noise=0.01, maxiter=200).fit(
                        X[near], da.values.ravel()[near])
                p = gp.predict(X[gap.ravel()])
                r, c = score(p.mean, p.std_observed, z, f, gap)
                rows.append((f"exact {kernel}", r, c, time.perf_counter() - t))
        for label, r, c, s in rows:
            print(f"{period} {side} {kind} | {label} | {r:.3f} | {c:.3f} | {s:.0f}", flush=True)


if __name__ == "__main__":
    main()
