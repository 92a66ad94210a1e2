"""geogp's SVGP against a GPflow SVGP on the Poisson count raster of bench_svgp_poisson.py.

Issue #16: "held-out log predictive density and RMSE of rates against a GPflow SVGP peer on the
same data". Run it in the peers' venv (GPflow is never a geogp dependency)::

    benchmarks/peers/.venv/bin/python benchmarks/peers/svgp_poisson_peer.py            # 300²
    benchmarks/peers/.venv/bin/python benchmarks/peers/svgp_poisson_peer.py --n 500

Data: ``bench_svgp_poisson.simulate(n)`` (Matérn-3/2 log-rate field, counts ~ Poisson) and its
hold-out mask ``bench_svgp_poisson.holdout`` (the same ~10 % of cells), imported, not copied.

Methods (both: Matérn-3/2 with one lengthscale per axis, a learnt constant mean, inputs
standardised with the training mean/sd, initial lengthscale 0.2 and variance 1 in those units,
minibatches of ``--batch`` drawn as epochs of a random permutation, ``--steps`` Adam steps
whose step size decays geometrically from ``--lr`` to a tenth, float64):

- ``geogp SVGP``: ``SVGPRegressor("poisson", "matern32", n_features=--features, ...)``, the
  benchmark's settings (q over M AFS features, whitened).
- ``GPflow SVGP``: ``gpflow.models.SVGP`` with ``gpflow.likelihoods.Poisson`` (exp link),
  ``--inducing`` inducing points initialised on a regular grid over the training window and
  optimised, whitened q(u) with a full covariance, constant mean initialised at log ȳ.

Scoring (same code for both, from each model's latent marginals q(f*) = N(μ, v)): RMSE of the
rate E[exp f*] = exp(μ + v/2) against the true rates exp(f), and the mean held-out log
predictive density log E_q[Poisson(y* | e^f)] by 40-point Gauss–Hermite quadrature. Each
library's own LPD (geogp ``log_predictive_density``, GPflow ``predict_log_density``) is printed
alongside as a check. Baselines: the constant rate (training mean) and the true rates (oracle).
Times are fit times (wall clock, the two fits run one after the other in this process).
Cost: ~0.16 s (geogp) and ~0.17 s (GPflow) per step of 4096 on 2 shared cores at load ≈ 3–4,
i.e. ~17 min for the default 3000 steps (2026-11-25); ``--steps 1500`` halves it.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import gammaln, logsumexp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/: bench_svgp_poisson

import bench_svgp_poisson as bench  # noqa: E402


def score(mu, var, y, f_true):
    """RMSE of E[exp f] against exp(f_true), and the mean of log E_q[Poisson(y | e^f)]."""
    mu, var = np.asarray(mu, float).ravel(), np.maximum(np.asarray(var, float).ravel(), 0.0)
    rate = np.exp(mu + var / 2)
    rmse = float(np.sqrt(np.mean((rate - np.exp(f_true)) ** 2)))
    x, w = np.polynomial.hermite_e.hermegauss(40)
    w = w / np.sqrt(2 * np.pi)
    f = mu[:, None] + np.sqrt(var)[:, None] * x
    lp = y[:, None] * f - np.exp(f) - gammaln(y[:, None] + 1)
    lpd = float(np.mean(logsumexp(lp + np.log(w), axis=1)))
    return rmse, lpd


def fit_geogp(Xtr, ytr, Xte, yte, a):
    from geogp.models.svgp.regressor import SVGPRegressor

    t0 = time.perf_counter()
    model = SVGPRegressor("poisson", "matern32", n_features=a.features, batch_size=a.batch,
                          maxiter=a.steps, learning_rate=a.lr, seed=0).fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    pred = model.predict(Xte)
    own = float(np.mean(model.log_predictive_density(Xte, yte)))
    ls = (np.asarray(model.kernel_.lengthscale) * model.scaler_.x_scale).round(1).tolist()
    return {"method": f"geogp SVGP (M = {model.features_.n_features} AFS features)",
            "fit_s": fit_s, "mu": pred.mean_latent, "var": pred.var_latent, "own_lpd": own,
            "lengthscale": ls}


def fit_gpflow(Xtr, ytr, Xte, yte, a):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import gpflow
    import tensorflow as tf

    gpflow.config.set_default_float(np.float64)
    tf.random.set_seed(0)
    mean, sd = Xtr.mean(0), Xtr.std(0)
    Xs, Xts = (Xtr - mean) / sd, (Xte - mean) / sd
    g = int(round(np.sqrt(a.inducing)))  # noqa: RUF046 - NumPy 1.x: round(float64) is a float64
    axes = [np.linspace(Xs[:, d].min(), Xs[:, d].max(), g) for d in range(2)]
    Z = np.stack([c.ravel() for c in np.meshgrid(*axes, indexing="ij")], 1)
    kern = gpflow.kernels.Matern32(variance=1.0, lengthscales=[0.2, 0.2])
    model = gpflow.models.SVGP(
        kern, gpflow.likelihoods.Poisson(), inducing_variable=Z,
        mean_function=gpflow.mean_functions.Constant(np.log(max(ytr.mean(), 1e-3))),
        num_data=Xs.shape[0], whiten=True)
    N, B, T = Xs.shape[0], a.batch, a.steps
    opt = tf.optimizers.Adam(learning_rate=a.lr)
    variables = model.trainable_variables

    @tf.function
    def step(xb, yb):
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(variables)
            loss = model.training_loss((xb, yb))
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        return loss

    rng = np.random.default_rng(0)
    order, pos = rng.permutation(N), 0
    Ytr = ytr[:, None]
    t0 = time.perf_counter()
    for t in range(T):
        if pos + B > N:
            order, pos = rng.permutation(N), 0
        idx = np.sort(order[pos:pos + B])
        pos += B
        opt.learning_rate.assign(a.lr * 0.1 ** (t / max(T - 1, 1)))  # same decay as geogp
        step(tf.constant(Xs[idx]), tf.constant(Ytr[idx]))
    fit_s = time.perf_counter() - t0
    mu, var, own = [], [], []
    for s in range(0, Xts.shape[0], 8192):
        xs = tf.constant(Xts[s:s + 8192])
        m, v = model.predict_f(xs)
        mu.append(m.numpy().ravel())
        var.append(v.numpy().ravel())
        own.append(model.predict_log_density((xs, tf.constant(yte[s:s + 8192, None]))).numpy())
    ls = (np.asarray(kern.lengthscales.numpy()) * sd).round(1).tolist()
    return {"method": f"GPflow {gpflow.__version__} SVGP (M = {Z.shape[0]} inducing points)",
            "fit_s": fit_s, "mu": np.concatenate(mu), "var": np.concatenate(var),
            "own_lpd": float(np.mean(np.concatenate(own))), "lengthscale": ls}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=300, help="raster side (n × n cells)")
    p.add_argument("--steps", type=int, default=3000, help="Adam steps (both models)")
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--features", type=int, default=256, help="geogp: AFS features M")
    p.add_argument("--inducing", type=int, default=256, help="GPflow: inducing points (a grid)")
    p.add_argument("--only", choices=["geogp", "gpflow"], help="fit one model only")
    a = p.parse_args()

    X, f, y = bench.simulate(a.n)
    test = bench.holdout(y.size)
    Xtr, ytr, Xte, yte, fte = X[~test], y[~test], X[test], y[test], f[test]
    print(f"{y.size:,} cells ({ytr.size:,} train, {yte.size:,} held out), mean rate "
          f"{np.exp(fte).mean():.3f}; {a.steps} Adam steps of {a.batch}, lr {a.lr} → "
          f"{a.lr / 10}; true lengthscale {0.08 * a.n:.0f} cells", flush=True)
    rows = []
    fits = {"geogp": fit_geogp, "gpflow": fit_gpflow}
    for name in ([a.only] if a.only else ["geogp", "gpflow"]):
        try:
            r = fits[name](Xtr, ytr, Xte, yte, a)
        except ImportError as e:
            print(f"{name}: skipped ({e})", flush=True)
            continue
        r["rmse"], r["lpd"] = score(r["mu"], r["var"], yte, fte)
        print(f"{r['method']}: fit {r['fit_s']:.1f} s, RMSE {r['rmse']:.4f}, LPD "
              f"{r['lpd']:.4f} (library's own {r['own_lpd']:.4f}), lengthscale "
              f"{r['lengthscale']} cells", flush=True)
        rows.append(r)
    const = ytr.mean()
    rmse0 = float(np.sqrt(np.mean((const - np.exp(fte)) ** 2)))
    lpd0 = float(np.mean(yte * np.log(const) - const - gammaln(yte + 1)))
    lpd_oracle = float(np.mean(yte * fte - np.exp(fte) - gammaln(yte + 1)))

    print(f"\n{a.n} × {a.n} cells, {a.steps} steps of {a.batch}; python "
          f"{platform.python_version()}\n")
    print("| method | fit [s] | rate RMSE | mean LPD | LPD (library's own) | lengthscale [cells] |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        print(f"| {r['method']} | {r['fit_s']:.1f} | {r['rmse']:.4f} | {r['lpd']:.4f} | "
              f"{r['own_lpd']:.4f} | {', '.join(f'{v:g}' for v in r['lengthscale'])} |")
    print(f"| constant rate ({const:.3f}) | – | {rmse0:.4f} | {lpd0:.4f} | – | – |")
    print(f"| true rates (oracle) | – | 0 | {lpd_oracle:.4f} | – | {0.08 * a.n:g} (true) |")


if __name__ == "__main__":
    main()
