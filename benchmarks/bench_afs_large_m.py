"""Large M: cost per optimiser step of the matrix-free AFS path, and its agreement with dense.

Data: the gappy synthetic raster of ``bench_scale.py`` (n × n cells on [0, 1]², 30 % missing in
clouds and random cells, noise sd 0.1), 1024² by default (≈ 7.3·10⁵ observed cells).

**Per-step cost** (``steps``, one subprocess per M): for each target M the statistics are read
once (``grid_stats(..., gram="operator")``: quadratic-form bins by separable transforms, the FFT of
the bins, the dense low-frequency block), then at fixed θ (Matérn-3/2, ℓ = 0.05, σ_f² = 0.5,
σ² = 0.01, near the fitted values) the script times

- ``matvec``: one batched product G·V with S + 1 = 9 columns (two FFTs of the Π Q_d lattice);
- ``step``: one compiled value-and-gradient of the bound (what L-BFGS calls once per
  evaluation): CG to relative residual 1e-4 with 8 Rademacher probes, SLQ, surrogate gradients,
  the Cholesky of the dense block (M/10 features, within [1024, 2048]) and its derivative;
- ``dense step`` (M ≤ 4,000): the dense route's value-and-gradient (Cholesky of M × M), and
  the relative differences of the value and gradient between the two routes.

``per M log M`` divides the step time by M·log₂M (ns): flat means M log M growth.

**Fits** (``fits``): the full estimator (``AFSRegressor(solver=...)``, fit_grid + full-grid
predict) on the same raster: dense at M ≈ 2,000 and matrix-free at M ≈ 2,000 (block 512, to
exercise the iterative path where dense runs), 10⁴ and 3·10⁴: learnt θ, L-BFGS steps, wall
times, RMSE of the mean against the noiseless field at the missing cells, and 95 % coverage of
that field by mean ± 1.96 std_latent there.

Run::

    .venv/bin/python benchmarks/bench_afs_large_m.py                 # steps + fits, 1024²
    .venv/bin/python benchmarks/bench_afs_large_m.py steps --m 1000 10000 100000
    .venv/bin/python benchmarks/bench_afs_large_m.py --quick         # 512², M ≤ 3·10⁴

A script, not a test: it prints a table and the machine's load. The default run takes about
15 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _machine import cpu_model
from bench_scale import Field

ELL, SIGNAL_VAR, NOISE_VAR = 0.05, 0.5, 0.01


def _load() -> float:
    return os.getloadavg()[0]


def _timed(fn, repeat=2):
    import jax

    out = fn()
    jax.block_until_ready(out)  # compile + warm
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        jax.block_until_ready(out)
        best = min(best, time.perf_counter() - t)
    return best, out


def step_worker(n: int, m: int, block: int, probes: int) -> dict:
    import jax
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    import geogp  # noqa: F401
    from geogp.core.kernels import make_kernel
    from geogp.features.fourier import FourierFeatures
    from geogp.features.fourier_statistics import grid_stats
    from geogp.models.afs.objectives import iterative_loss, negative_bound_per_point
    from geogp.models.collapsed_iterative import (
        IterativeOptions,
        iterative_parts,
        rademacher_probes,
    )

    field = Field(n)
    values, _ = field.numpy()
    axes = [field.axis, field.axis]
    ff = FourierFeatures.for_budget(np.full(2, 0.5), np.full(2, 1 / 0.95), m, max_bytes=np.inf)
    M = ff.n_features
    block = block or int(np.clip(M // 10, 1024, 2048))
    t = time.perf_counter()
    st = grid_stats(ff, axes, values, gram="operator", dense_block=block)
    t_stats = time.perf_counter() - t
    params = {"kernel": make_kernel("matern32", 2, ELL, SIGNAL_VAR),
              "noise": jnp.asarray(NOISE_VAR)}
    Z = rademacher_probes(M, probes)
    args = (st, jnp.asarray(ff.frequencies), jnp.asarray(ff.log_norm), Z)
    opts = IterativeOptions()
    vg = jax.jit(jax.value_and_grad(iterative_loss(opts)))
    t_step, (val, grad) = _timed(lambda: vg(params, *args))
    mv = jax.jit(st.G.matvec)
    V = jnp.ones((M, probes + 1))
    t_mv, _ = _timed(lambda: mv(V), repeat=3)
    info = jax.jit(lambda: iterative_parts(ff.log_lambda(params["kernel"]), params["noise"],
                                           st.G, st.r, Z, opts)[2])()
    row = {"n": n, "M": M, "Q": list(st.G.chat.shape), "block": block, "stats_s": t_stats,
           "matvec_s": t_mv, "step_s": t_step, "cg_iter": int(np.max(info["n_iter"])),
           "value": float(val), "slq_sd_per_n": float(info["slq_sd"]) / float(st.n)}
    if M <= 4000:
        dstats = grid_stats(ff, axes, values)
        dvg = jax.jit(jax.value_and_grad(negative_bound_per_point))
        t_dense, (dval, dgrad) = _timed(lambda: dvg(params, dstats, args[1], args[2]))
        g1, g2 = ravel_pytree(grad)[0], ravel_pytree(dgrad)[0]
        row.update(dense_step_s=t_dense, value_rel=abs(float(val - dval)) / abs(float(dval)),
                   grad_rel=float(jnp.linalg.norm(g1 - g2) / jnp.linalg.norm(g2)))
    row["peak_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    row["load"] = _load()
    return row


def fit_worker(n: int, m: int, solver: str, block: int, maxiter: int) -> dict:
    import geogp  # noqa: F401
    from geogp import families
    from geogp.models.afs import AFSRegressor

    field = Field(n)
    values, truth = field.numpy()
    axes = [field.axis, field.axis]
    t = time.perf_counter()
    est = AFSRegressor("matern32", n_features=m, solver=solver, dense_block=block or "auto",
                       maxiter=maxiter).fit_grid(axes, values)
    t_fit = time.perf_counter() - t
    t = time.perf_counter()
    pred = families.predict_grid(est, axes)
    t_pred = time.perf_counter() - t
    miss = ~np.isfinite(values)
    err = pred.mean[miss] - truth[miss]
    sd = np.sqrt(pred.var_latent[miss])
    its = getattr(est.posterior_, "cg_iterations", None)
    return {"n": n, "M": est.features_.n_features, "solver": est.solver_, "block": block,
            "lengthscale": [float(x) for x in np.asarray(est.lengthscale_[0])],
            "noise_sd": float(np.sqrt(est.noise_variance_)), "lbfgs": int(est.report_.n_iter),
            "evals": int(est.report_.n_eval), "fit_s": t_fit, "predict_s": t_pred,
            "rmse_gaps": float(np.sqrt(np.mean(err**2))),
            "cov95_gaps": float(np.mean(np.abs(err) <= 1.96 * sd)),
            "posterior_cg": None if its is None else [its[0], int(np.max(its[1] or [0]))],
            "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "load": _load()}


def _run(args: list) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="*", help="'steps' and/or 'fits' (default both)")
    ap.add_argument("--n", type=int, default=1024, help="raster side (default 1024)")
    ap.add_argument("--m", type=int, nargs="*", default=[1000, 3000, 10000, 30000, 100000])
    ap.add_argument("--fit-m", type=int, nargs="*", default=[10000, 30000])
    ap.add_argument("--block", type=int, default=0,
                    help="dense preconditioner block (default 0: AFSRegressor's rule, M/10 "
                         "clipped to [1024, 2048])")
    ap.add_argument("--probes", type=int, default=8)
    ap.add_argument("--maxiter", type=int, default=100, help="L-BFGS iterations of the fits")
    ap.add_argument("--quick", action="store_true", help="512², M ≤ 3·10⁴")
    ap.add_argument("--json", help="write all rows here")
    ap.add_argument("--step-worker", nargs=4, type=int, help=argparse.SUPPRESS)
    ap.add_argument("--fit-worker", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.step_worker:
        print(json.dumps(step_worker(*a.step_worker)))
        return 0
    if a.fit_worker:
        n, m, solver, block, maxiter = a.fit_worker
        print(json.dumps(fit_worker(int(n), int(m), solver, int(block), int(maxiter))))
        return 0
    a.what = a.what or ["steps", "fits"]
    if set(a.what) - {"steps", "fits"}:
        ap.error(f"unknown part(s) {sorted(set(a.what) - {'steps', 'fits'})}")
    if a.quick:
        a.n, a.m, a.fit_m = 512, [1000, 3000, 10000, 30000], [10000]
    print(f"# bench_afs_large_m: {cpu_model()}, {os.cpu_count()} cores, "
          f"{platform.python_version()}, raster {a.n}², load {_load():.1f}", flush=True)
    rows = []
    if "steps" in a.what:
        print("\n## cost per optimiser step (value + gradient), Matérn-3/2 at fixed θ")
        print("| M | lattice | stats | matvec (9 cols) | CG iters | step | ns per M log₂M "
              "| dense step | Δvalue rel | Δgrad rel | peak RSS | load |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for m in a.m:
            r = _run(["--step-worker", str(a.n), str(m), str(a.block), str(a.probes)])
            rows.append({"kind": "step", **r})
            if "error" in r:
                print(f"| {m} | error: {r['error']} |")
                continue
            mlogm = r["M"] * np.log2(r["M"])
            dense = (f"{r['dense_step_s']:.2f} s | {r['value_rel']:.1e} | {r['grad_rel']:.1e}"
                     if "dense_step_s" in r else "– | – | –")
            print(f"| {r['M']} | {r['Q'][0]}×{r['Q'][1]} | {r['stats_s']:.1f} s | "
                  f"{1e3 * r['matvec_s']:.0f} ms | {r['cg_iter']} | {r['step_s']:.2f} s | "
                  f"{1e9 * r['step_s'] / mlogm:.0f} | {dense} | {r['peak_gb']:.2f} GB | "
                  f"{r['load']:.1f} |", flush=True)
    if "fits" in a.what:
        print("\n## full fits (fit_grid + full-grid mean/std), Matérn-3/2")
        print("| solver | M | block | L-BFGS it/evals | fit | predict | ℓ | noise sd "
              "| RMSE gaps | cov95 gaps | posterior CG | peak RSS | load |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        configs = [("dense", 2000, a.block), ("iterative", 2000, 512)]
        configs += [("iterative", m, a.block) for m in a.fit_m]
        for solver, m, block in configs:
            r = _run(["--fit-worker", str(a.n), str(m), solver, str(block), str(a.maxiter)])
            rows.append({"kind": "fit", **r})
            if "error" in r:
                print(f"| {solver} | {m} | error: {r['error']} |")
                continue
            shown = (block or "auto") if solver == "iterative" else "–"
            print(f"| {r['solver']} | {r['M']} | {shown} | "
                  f"{r['lbfgs']}/{r['evals']} | {r['fit_s']:.1f} s | {r['predict_s']:.1f} s | "
                  f"{np.round(r['lengthscale'], 4).tolist()} | {r['noise_sd']:.4f} | "
                  f"{r['rmse_gaps']:.4f} | {r['cov95_gaps']:.3f} | {r['posterior_cg']} | "
                  f"{r['peak_gb']:.2f} GB | {r['load']:.1f} |", flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
