"""Which model for scattered points (#41 item 2): the exact GP against AFS by the number of
points, through ``geogp.fit`` on a point table, as a user calls it.

A field with a known truth: a Matérn-3/2 GP (range 2 km, sd 2) on a 20 km square, sampled
with noise sd 0.3 at N random points; 20 % of them are held out. Scored on the held-out
points: RMSE of the latent mean against the truth, CRPS and 95 % coverage of the noisy
values, and the fit's wall time. The crossover where AFS overtakes the exact GP in time at
equal accuracy is what ``model="auto"`` uses for point tables.

Run: ``.venv/bin/python benchmarks/bench_points_model.py [--sizes 300 1000 ...]``.
"""

from __future__ import annotations

import argparse
import datetime
import time
import warnings

import numpy as np
import pandas as pd
from scipy.stats import norm

import geogp


def field(n_total: int, seed: int):
    """(x, y, latent truth, noisy values) of a Matérn-3/2 draw at ``n_total`` points."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 20_000, size=(n_total, 2))
    d = np.sqrt(((xy[:, None, :] - xy[None, :, :]) ** 2).sum(-1)) * np.sqrt(3) / 2_000
    cov = 4.0 * (1 + d) * np.exp(-d) + 1e-8 * np.eye(n_total)
    f = np.linalg.cholesky(cov) @ rng.standard_normal(n_total)
    return xy[:, 0], xy[:, 1], f, f + 0.3 * rng.standard_normal(n_total)


def crps(mu, sd, z):
    w = (z - mu) / sd
    return float(np.mean(sd * (w * (2 * norm.cdf(w) - 1) + 2 * norm.pdf(w) - 1 / np.sqrt(np.pi))))


def run(n: int, model: str, seed: int = 0) -> dict:
    total = round(n / 0.8)
    x, y, f, z = field(total, seed)
    test = np.random.default_rng(seed + 1).uniform(size=total) < 0.2
    table = pd.DataFrame({"x": x[~test], "y": y[~test], "value": z[~test]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        m = geogp.fit(table, model=model)
        wall = time.perf_counter() - t0
        pred = m.predict(x=x[test], y=y[test], points=True)
    mu, sd = np.asarray(pred["mean"]).ravel(), np.asarray(pred["std"]).ravel()
    return {"n": int((~test).sum()), "model": model, "chosen": m.model_, "wall_s": wall,
            "rmse": float(np.sqrt(np.mean((mu - f[test]) ** 2))), "crps": crps(mu, sd, z[test]),
            "cov95": float(np.mean(np.abs(z[test] - mu) <= 1.96 * sd))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[300, 1000, 2000, 4000])
    args = ap.parse_args()
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[0]
    print(f"# {datetime.date.today()}, load {load}")
    print("| N | model | RMSE | CRPS | cov95 | fit s |")
    print("|---|---|---|---|---|---|")
    for n in args.sizes:
        for model in ("exact", "afs", "auto"):
            r = run(n, model)
            print(f"| {r['n']} | {model} ({r['chosen']}) | {r['rmse']:.3f} | {r['crps']:.3f} | "
                  f"{r['cov95']:.3f} | {r['wall_s']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
