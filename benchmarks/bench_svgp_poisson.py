"""Minibatch SVGP on a Poisson count raster (issue #16): time, peak memory, held-out scores.

A smooth log-rate field f = b + φ(x)ᵀΛ^{1/2}v (Matérn-3/2, v ~ N(0, I), fixed seed) is drawn
on an n × n raster through AFS features (separable: one (n × M)(M × n) product per row block),
counts y ~ Poisson(exp f). 10 % of the cells are held out; the rest are fitted by
``SVGPRegressor("poisson", batch_size=4096)`` with Adam. Printed: fit time, peak resident
memory (ru_maxrss) before and after the fit, the RMSE of the predicted rates E[exp f*] against
the true rates, and the mean held-out log predictive density (against a constant-rate model).

Each size runs in its own process, so that the peaks are comparable: the peak during the fit
minus the peak before it (data already in memory) should not grow with N.

Usage: python benchmarks/bench_svgp_poisson.py [--sizes 500 1000] [--steps 3000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def simulate(n: int, seed: int = 0):
    """Cell centres (N, 2), true log rates (N,) and counts (N,) on an n × n raster."""
    import geogp  # noqa: F401
    from geogp.core.kernels import Matern32
    from geogp.features.fourier import FourierFeatures

    rng = np.random.default_rng(seed)
    ax = np.arange(n, dtype=np.float64)
    ff = FourierFeatures.build([(n - 1) / 2] * 2, [1.2 * n] * 2, 24)
    k = Matern32(lengthscale=0.08 * n, variance=0.6)
    w = np.exp(0.5 * np.asarray(ff.log_lambda(k))) * rng.normal(size=ff.n_features)
    By = ff.per_dim_blocks(np.stack([ax, ax], 1))[0][:, ff.rows[:, 0]] * w
    Bx = ff.per_dim_blocks(np.stack([ax, ax], 1))[1][:, ff.rows[:, 1]]
    f = np.empty((n, n))
    for s in range(0, n, 100):
        f[s:s + 100] = 1.0 + By[s:s + 100] @ Bx.T
    yy, xx = np.meshgrid(ax, ax, indexing="ij")
    X = np.stack([yy.ravel(), xx.ravel()], 1)
    f = f.ravel()
    return X, f, rng.poisson(np.exp(f)).astype(np.float64)


def holdout(n_cells: int, seed: int = 1) -> np.ndarray:
    """Boolean mask of the held-out cells (about 10 %), shared with benchmarks/peers."""
    return np.random.default_rng(seed).uniform(size=n_cells) < 0.1


def run(n: int, steps: int, batch: int, n_features: int) -> dict:
    from scipy.special import gammaln

    from geogp.models.svgp.regressor import SVGPRegressor

    X, f, y = simulate(n)
    test = holdout(y.size)
    data_mib = (X.nbytes + f.nbytes + y.nbytes) / 2**20
    rss0 = _rss_mib()
    t0 = time.perf_counter()
    model = SVGPRegressor("poisson", "matern32", n_features=n_features, batch_size=batch,
                          maxiter=steps, learning_rate=0.02, seed=0).fit(X[~test], y[~test])
    fit_s = time.perf_counter() - t0
    rss1 = _rss_mib()
    t1 = time.perf_counter()
    pred = model.predict(X[test])
    lpd = model.log_predictive_density(X[test], y[test])
    pred_s = time.perf_counter() - t1
    rate = np.exp(f[test])
    const = y[~test].mean()
    lpd0 = y[test] * np.log(const) - const - gammaln(y[test] + 1)
    return {"cells": int(y.size), "train": int((~test).sum()), "test": int(test.sum()),
            "M": model.features_.n_features, "steps": steps, "batch": batch,
            "fit_s": round(fit_s, 1), "predict_s": round(pred_s, 1),
            "data_mib": round(data_mib, 1), "peak_before_fit_mib": round(rss0, 1),
            "peak_after_fit_mib": round(rss1, 1), "fit_added_mib": round(rss1 - rss0, 1),
            "rmse_rate": float(np.sqrt(np.mean((pred.mean - rate) ** 2))),
            "rmse_rate_const": float(np.sqrt(np.mean((const - rate) ** 2))),
            "mean_rate": float(rate.mean()),
            "lpd": float(lpd.mean()), "lpd_const": float(lpd0.mean()),
            "lpd_oracle": float(np.mean(y[test] * f[test] - rate - gammaln(y[test] + 1))),
            "elbo_per_point": model.elbo_ / int((~test).sum()),
            "lengthscale_cells": (np.asarray(model.kernel_.lengthscale)
                                  * model.scaler_.x_scale).round(2).tolist()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[500, 1000], help="raster side n")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--features", type=int, default=256)
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        print(json.dumps(run(a.sizes[0], a.steps, a.batch, a.features)))
        return
    for n in a.sizes:
        out = subprocess.run([sys.executable, __file__, "--one", "--sizes", str(n), "--steps",
                              str(a.steps), "--batch", str(a.batch), "--features",
                              str(a.features)], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{r['cells']:>9,} cells ({r['train']:,} train, {r['test']:,} held out), "
              f"M = {r['M']}, {r['steps']} Adam steps of {r['batch']}: fit {r['fit_s']} s, "
              f"predict {r['predict_s']} s")
        print(f"    peak RSS {r['peak_before_fit_mib']} MiB before the fit (data "
              f"{r['data_mib']} MiB), {r['peak_after_fit_mib']} MiB after: the fit added "
              f"{r['fit_added_mib']} MiB")
        print(f"    held-out rate RMSE {r['rmse_rate']:.4f} (constant rate "
              f"{r['rmse_rate_const']:.4f}; mean rate {r['mean_rate']:.3f}); mean log "
              f"predictive density {r['lpd']:.4f} (constant {r['lpd_const']:.4f}, true rates "
              f"{r['lpd_oracle']:.4f}); learnt lengthscale {r['lengthscale_cells']} cells "
              f"(true {0.08 * round(r['cells'] ** 0.5):.0f})", flush=True)


if __name__ == "__main__":
    main()
