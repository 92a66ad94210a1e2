"""Peers side by side on the satellite grid: same data, same folds, same metrics as heaton_cv.py.

Run it in the peers' own venv (created by ``setup_peers.sh``; the peers are never geogp
dependencies)::

    bash benchmarks/peers/setup_peers.sh
    benchmarks/peers/.venv/bin/python benchmarks/peers/run_peers.py            # both folds
    benchmarks/peers/.venv/bin/python benchmarks/peers/run_peers.py --quick    # random fold

Data and scoring are imported from ``benchmarks/heaton_cv.py``: ``load`` (the MODIS grid
``../shared/data/heaton_satellite_train.nc``; skipped when absent), ``folds`` (``random``: a
seeded 10 % of the observed cells; ``block``: 10 of the 50 blocks of a 5 × 10 partition),
``score`` (``geogp.core.metrics.evaluate``: RMSE, MAE, NLPD, CRPS, 95 % interval score and
coverage of a new observation) and the planar coordinates ``_planar`` (latitude, longitude ×
cos(mean latitude)). Every method sees the same training cells and is scored on the same
held-out cells with the same code; each returns a predictive mean and the sd of a new
observation (noise included).

Methods (all Matérn-3/2 with one lengthscale per axis unless said otherwise; inputs and
outputs z-scored with the training statistics; float64 throughout):

- ``geogp AFS``: ``geogp.fit`` through ``heaton_cv.run_geogp`` with a configuration of
  ``heaton_cv.CONFIGS`` (default ``afs m12 M=2000 linear``, the front end's default since
  heaton_cv.py found it best on block-fold CRPS); the time includes the full-grid prediction
  (150,000 cells), not just the held-out cells.
- ``GPyTorch SKI``: KISS-GP, ``ScaleKernel(GridInterpolationKernel(MaternKernel(1.5)))`` on an
  inducing grid of ``--ski-grid`` points per axis (default 150 × 250, half the raster's
  resolution), all training cells, exact marginal likelihood by CG/Lanczos, Adam
  (``--ski-iters``, lr 0.1); predictions with LOVE (``fast_pred_var``).
- ``GPyTorch exact (subsample)``: exact GP (Cholesky) on ``--exact-n`` random training cells,
  Adam (``--exact-iters``, lr 0.1), predicting every held-out cell from that subsample.
- ``GPflow SGPR``: Titsias' collapsed bound, ``--sgpr-m`` inducing inputs initialised at
  random training cells (optimised), all training cells, scipy L-BFGS
  (``--sgpr-iters`` iterations). Skipped when GPflow is not installed.
- ``PyKrige OK``: ordinary kriging with a moving window of ``--krige-k`` nearest training cells
  (``n_closest_points``, ``backend="loop"``), variogram model ``--krige-model`` (default
  exponential) fitted automatically by PyKrige on ``--krige-fit-n`` random training cells.
  Two caveats, both about PyKrige's implementation rather than the method: (1) PyKrige's
  constructor computes all pairwise distances (``pdist``) and ``execute`` assembles the full
  N × N kriging matrix even with ``n_closest_points``, i.e. 72 GB for our ~95,000 training
  cells, so the model is constructed on the variogram subsample, then given the full training
  set with a lazy kriging matrix that builds only the (k+1) × (k+1) blocks the loop reads; the
  arithmetic of each moving-window solve is PyKrige's own. (2) The loop solves one system per
  point in Python (about 3 s for 10,000 held-out cells here); ``--krige-test`` caps the
  number of held-out cells scored (random subset, default all): the table says how many.
- ``tiled exact GP``: geogp's exact GP on a ``--tiles`` partition of the grid (default
  6 × 10 tiles of 50 × 50 cells), each with a ``--halo``-cell overlap (default 8): per tile,
  hyperparameters by L-BFGS on geogp's exact log marginal likelihood
  (``geogp.models.exact.log_marginal_likelihood`` through ``geogp.core.optimize.minimize_lbfgs``,
  ``--tile-iters``) on ``--tile-fit-n`` random training cells of the tile + halo, then an exact
  prediction of the tile's held-out cells from all its tile + halo training cells (≤ ~4,000;
  kernel and Cholesky in numpy/scipy); local constant mean: the tile's training mean. A tile
  with fewer than ``--tile-min-n`` training cells in tile + halo (inside a held-out block)
  doubles its halo until it has them. Not ``ExactGP.fit`` itself: it defines its loss inside
  ``fit``, so its jitted value-and-gradient is compiled anew for every tile (seconds each); a
  module-level loss of fixed shape compiles once.
- ``50-NN kriging``: ``heaton_cv.run_knn_kriging``, the baseline of heaton_cv.py.

Ratios are the peer's figure divided by geogp AFS's figure on the same fold and the same
scored cells (lower RMSE/CRPS/time ratios favour the peer). Times are wall clock on the
machine of the run (its load average is printed; the reference machine has 2 cores shared
with other jobs, so times are noisy). Each peer's work is bounded by iteration counts chosen
to keep it to a few minutes there; ``--budget`` (seconds) also stops the iterative trainings
(SKI, exact, tiles) early, which the table notes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/: heaton_cv

import heaton_cv  # noqa: E402

OPTIONAL = {"gpytorch": "gpytorch", "gpflow": "gpflow", "pykrige": "pykrige"}


# =========================================================================== shared data
class Split:
    """Training and held-out cells of one fold, in planar coordinates, z-scored."""

    def __init__(self, da, held):
        P = heaton_cv._planar(da)
        v = da.values.ravel().astype(np.float64)
        tr = np.isfinite(v) & ~held.ravel()
        te = held.ravel()
        self.shape = da.shape
        self.train_idx, self.test_idx = np.nonzero(tr)[0], np.nonzero(te)[0]
        self.x_mean, self.x_sd = P[tr].mean(0), P[tr].std(0)
        self.y_mean, self.y_sd = v[tr].mean(), v[tr].std()
        self.Xtr = (P[tr] - self.x_mean) / self.x_sd
        self.Xte = (P[te] - self.x_mean) / self.x_sd
        self.ytr = (v[tr] - self.y_mean) / self.y_sd
        self.yte_raw = v[te]

    def unscale(self, mean, std):
        return self.y_mean + self.y_sd * np.asarray(mean), self.y_sd * np.asarray(std)


class Budget:
    def __init__(self, seconds):
        self.t0, self.seconds = time.perf_counter(), seconds

    def over(self) -> bool:
        return self.seconds is not None and time.perf_counter() - self.t0 > self.seconds


# =========================================================================== peers
def peer_gpytorch_ski(s: Split, args):
    import gpytorch
    import torch

    torch.set_default_dtype(torch.float64)
    x = torch.from_numpy(s.Xtr)
    y = torch.from_numpy(s.ytr)
    lo, hi = np.minimum(s.Xtr.min(0), s.Xte.min(0)), np.maximum(s.Xtr.max(0), s.Xte.max(0))
    pad = 0.02 * (hi - lo)
    bounds = tuple((float(a - p), float(b + p)) for a, b, p in zip(lo, hi, pad, strict=True))

    model, lik = _gpytorch_model(x, y, lambda k: gpytorch.kernels.GridInterpolationKernel(
        k, grid_size=list(args.ski_grid), num_dims=2, grid_bounds=bounds))
    # No pivoted-Cholesky preconditioner: its backward pass gathers rows of the interpolated
    # kernel through index tensors of size N × rank × 16², several GB at N ≈ 95,000 (it
    # exhausted memory here); CG and Lanczos run unpreconditioned instead.
    with gpytorch.settings.max_preconditioner_size(0):
        t0 = time.perf_counter()
        iters, stopped = _adam(model, lik, x, y, args.ski_iters, Budget(args.budget))
        t1 = time.perf_counter()
        mean, std = _gpytorch_predict(model, lik, s.Xte, fast_pred_var=True)
        t2 = time.perf_counter()
    note = f"grid {args.ski_grid[0]}x{args.ski_grid[1]}, {iters} Adam it" + (
        " (budget)" if stopped else "")
    return None, mean, std, t1 - t0, t2 - t1, note


def _gpytorch_model(x, y, wrap=None):
    """A constant-mean GPyTorch ExactGP with a scaled ARD Matérn-3/2 kernel (optionally
    wrapped, e.g. by a GridInterpolationKernel) and a Gaussian likelihood, at the common start
    (z-scored units): ℓ = 0.2 per axis, σ_f² = 1, σ² = 0.1 (as SGPR). Returns (model, lik)."""
    import gpytorch

    class Model(gpytorch.models.ExactGP):
        def __init__(self, x, y, lik):
            super().__init__(x, y, lik)
            self.mean_module = gpytorch.means.ConstantMean()
            self.matern = gpytorch.kernels.MaternKernel(nu=1.5, ard_num_dims=2)
            inner = self.matern if wrap is None else wrap(self.matern)
            self.covar_module = gpytorch.kernels.ScaleKernel(inner)

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    lik = gpytorch.likelihoods.GaussianLikelihood()
    model = Model(x, y, lik)
    model.matern.lengthscale = 0.2
    model.covar_module.outputscale = 1.0
    lik.noise = 0.1
    return model, lik


def _gpytorch_predict(model, lik, X, fast_pred_var=False, block=5000):
    """Predictive mean and sd (of a new observation) at X (N, 2), in blocks of rows."""
    import contextlib

    import gpytorch
    import torch

    model.eval()
    lik.eval()
    xt = torch.from_numpy(X)
    mean, var = [], []
    fast = gpytorch.settings.fast_pred_var() if fast_pred_var else contextlib.nullcontext()
    with torch.no_grad(), fast:
        for a in range(0, xt.shape[0], block):
            p = lik(model(xt[a:a + block]))
            mean.append(p.mean.numpy())
            var.append(p.variance.numpy())
    return np.concatenate(mean), np.sqrt(np.concatenate(var))


def _adam(model, lik, x, y, n_iter, budget, lr=0.1):
    import gpytorch
    import torch

    model.train()
    lik.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    for i in range(n_iter):
        opt.zero_grad()
        loss = -mll(model(x), y)
        loss.backward()
        opt.step()
        if budget.over():
            return i + 1, True
    return n_iter, False


def peer_gpytorch_exact(s: Split, args):
    import gpytorch
    import torch

    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(1)
    sub = rng.choice(s.Xtr.shape[0], args.exact_n, replace=False)
    x = torch.from_numpy(s.Xtr[sub])
    y = torch.from_numpy(s.ytr[sub])

    model, lik = _gpytorch_model(x, y)
    with gpytorch.settings.max_cholesky_size(10**6):
        t0 = time.perf_counter()
        iters, stopped = _adam(model, lik, x, y, args.exact_iters, Budget(args.budget))
        t1 = time.perf_counter()
        mean, std = _gpytorch_predict(model, lik, s.Xte)
        t2 = time.perf_counter()
    note = f"N={args.exact_n} subsample, {iters} Adam it" + (" (budget)" if stopped else "")
    return None, mean, std, t1 - t0, t2 - t1, note


def peer_gpflow_sgpr(s: Split, args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import gpflow
    import tensorflow as tf

    gpflow.config.set_default_float(np.float64)
    rng = np.random.default_rng(2)
    Z = s.Xtr[rng.choice(s.Xtr.shape[0], args.sgpr_m, replace=False)].copy()
    kern = gpflow.kernels.Matern32(lengthscales=[0.2, 0.2])
    model = gpflow.models.SGPR((s.Xtr, s.ytr[:, None]), kernel=kern, inducing_variable=Z,
                               mean_function=gpflow.mean_functions.Constant())
    model.likelihood.variance.assign(0.1)
    t0 = time.perf_counter()
    res = gpflow.optimizers.Scipy().minimize(model.training_loss, model.trainable_variables,
                                             options={"maxiter": args.sgpr_iters})
    t1 = time.perf_counter()
    mean, var = [], []
    for a in range(0, s.Xte.shape[0], 5000):
        m, v = model.predict_y(tf.constant(s.Xte[a:a + 5000]))
        mean.append(m.numpy()[:, 0])
        var.append(v.numpy()[:, 0])
    t2 = time.perf_counter()
    note = f"M={args.sgpr_m}, {int(res.nit)} L-BFGS it"
    return None, np.concatenate(mean), np.sqrt(np.concatenate(var)), t1 - t0, t2 - t1, note


class _LazyKrigingMatrix:
    """PyKrige's (n+1) × (n+1) ordinary-kriging matrix, built block by block on demand.

    Entry (i, j) is −γ(‖x_i − x_j‖) off the diagonal, 0 on it; the last row and column
    are 1 (0 at the corner), exactly as ``OrdinaryKriging._get_kriging_matrix`` builds it.
    """

    def __init__(self, xy, gamma, params):
        self.xy, self.gamma, self.params = xy, gamma, params
        n = xy.shape[0]
        self.shape = (n + 1, n + 1)

    def __getitem__(self, key):
        rows, cols = key
        rows, cols = np.asarray(rows).ravel(), np.asarray(cols).ravel()
        n = self.shape[0] - 1
        ri, ci = rows < n, cols < n
        out = np.ones((rows.size, cols.size))
        a, b = self.xy[rows[ri]], self.xy[cols[ci]]
        d = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))
        block = -self.gamma(self.params, d)
        block[rows[ri][:, None] == cols[ci][None, :]] = 0.0
        out[np.ix_(ri, ci)] = block
        out[np.ix_(~ri, ~ci)] = 0.0
        return out


def peer_pykrige(s: Split, args):
    from pykrige.ok import OrdinaryKriging

    rng = np.random.default_rng(3)
    t0 = time.perf_counter()
    fit = rng.choice(s.Xtr.shape[0], args.krige_fit_n, replace=False)
    # PyKrige's x, y = planar longitude, latitude (our columns are (lat, lon))
    ok = OrdinaryKriging(s.Xtr[fit, 1], s.Xtr[fit, 0], s.ytr[fit],
                         variogram_model=args.krige_model, nlags=args.krige_nlags)
    # the full training set, with a lazy kriging matrix (see the module docstring)
    ok.X_ORIG, ok.Y_ORIG = s.Xtr[:, 1].copy(), s.Xtr[:, 0].copy()
    ok.X_ADJUSTED, ok.Y_ADJUSTED = ok.X_ORIG.copy(), ok.Y_ORIG.copy()
    ok.XCENTER, ok.YCENTER = 0.0, 0.0
    ok.Z = s.ytr.copy()
    xy = np.stack([ok.X_ADJUSTED, ok.Y_ADJUSTED], axis=1)
    ok._get_kriging_matrix = lambda n: _LazyKrigingMatrix(
        xy, ok.variogram_function, ok.variogram_model_parameters)
    t1 = time.perf_counter()
    idx = None
    Xte = s.Xte
    if args.krige_test and args.krige_test < Xte.shape[0]:
        idx = np.sort(rng.choice(Xte.shape[0], args.krige_test, replace=False))
        Xte = Xte[idx]
    z, ss = ok.execute("points", Xte[:, 1], Xte[:, 0], backend="loop",
                       n_closest_points=args.krige_k)
    t2 = time.perf_counter()
    params = ", ".join(f"{p:.3g}" for p in ok.variogram_model_parameters)
    note = (f"{args.krige_model} variogram ({params}) from {args.krige_fit_n} cells, "
            f"k={args.krige_k}")
    if idx is not None:
        note += f", {len(idx)} of {s.Xte.shape[0]} test cells"
    return idx, np.asarray(z), np.sqrt(np.maximum(np.asarray(ss), 1e-12)), t1 - t0, t2 - t1, note


def _tile_loss(p, X, y):
    """Negative exact log marginal likelihood per point (module level: one compilation)."""
    from geogp.models.exact.regressor import log_marginal_likelihood

    return -log_marginal_likelihood(p["kernel"], p["noise"], X, y) / y.shape[0]


def _matern32(A, B, ell, var):
    """σ² (1 + √3ρ) e^{−√3ρ}, ρ = ‖(a − b)/ℓ‖, in numpy: geogp's Matern32 without JAX's
    per-shape compilation of eager operations (every tile has its own shapes)."""
    from scipy.spatial.distance import cdist

    r = np.sqrt(3.0) * cdist(A / ell, B / ell)
    return var * (1.0 + r) * np.exp(-r)


def peer_tiled_exact(s: Split, args):
    import jax.numpy as jnp
    import scipy.linalg

    import geogp  # noqa: F401  (float64)
    from geogp.core.kernels import make_kernel
    from geogp.core.optimize import minimize_lbfgs

    ny, nx = s.shape
    ty, tx = args.tiles
    iy_tr, ix_tr = np.divmod(s.train_idx, nx)
    iy_te, ix_te = np.divmod(s.test_idx, nx)
    mean = np.full(s.Xte.shape[0], np.nan)
    std = np.full(s.Xte.shape[0], np.nan)
    rng = np.random.default_rng(4)
    budget = Budget(args.budget)
    t_fit = t_pred = 0.0
    done = total = 0
    ybounds = np.linspace(0, ny, ty + 1).round().astype(int)
    xbounds = np.linspace(0, nx, tx + 1).round().astype(int)
    h = args.halo
    n_max = widened = 0
    for a, b in itertools.pairwise(ybounds):
        for c, d in itertools.pairwise(xbounds):
            te = (iy_te >= a) & (iy_te < b) & (ix_te >= c) & (ix_te < d)
            if not te.any():
                continue
            total += 1
            if budget.over():
                continue
            hh = h
            while True:  # a tile inside a large gap: widen its halo until it has data
                tr = ((iy_tr >= a - hh) & (iy_tr < b + hh) & (ix_tr >= c - hh)
                      & (ix_tr < d + hh))
                tr_idx = np.nonzero(tr)[0]
                if tr_idx.size >= args.tile_min_n or hh >= max(ny, nx):
                    break
                hh *= 2
            widened += hh > h
            n_max = max(n_max, tr_idx.size)
            X, y = s.Xtr[tr_idx], s.ytr[tr_idx]
            mu = y.mean()
            t0 = time.perf_counter()
            sub = tr_idx if tr_idx.size <= args.tile_fit_n else rng.choice(
                tr_idx, args.tile_fit_n, replace=False)
            params = {"kernel": make_kernel("matern32", 2, 0.2, 0.5),
                      "noise": jnp.asarray(0.05)}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                params, _ = minimize_lbfgs(
                    _tile_loss, params, maxiter=args.tile_iters,
                    args=(jnp.asarray(s.Xtr[sub]), jnp.asarray(s.ytr[sub] - mu)))
            kern, noise = params["kernel"], float(params["noise"])
            t1 = time.perf_counter()
            # exact prediction from all the tile + halo training cells, at the fitted θ
            ell = np.broadcast_to(np.asarray(kern.lengthscale, dtype=float), (2,))
            var0 = float(kern.variance_at_zero)
            K = _matern32(X, X, ell, var0) + noise * np.eye(X.shape[0])
            Ks = _matern32(X, s.Xte[te], ell, var0)
            cf = scipy.linalg.cho_factor(K, lower=True)
            alpha = scipy.linalg.cho_solve(cf, y - mu)
            V = scipy.linalg.solve_triangular(cf[0], Ks, lower=True)
            var = var0 - np.sum(V * V, axis=0)
            mean[te] = mu + Ks.T @ alpha
            std[te] = np.sqrt(np.maximum(var, 0.0) + noise)
            t2 = time.perf_counter()
            t_fit += t1 - t0
            t_pred += t2 - t1
            done += 1
    note = (f"{ty}x{tx} tiles, halo {h}, <= {n_max} cells/tile, θ per tile from "
            f"{args.tile_fit_n} cells")
    if widened:
        note += f", halo widened for {widened} tiles (< {args.tile_min_n} training cells)"
    if done < total:
        note += f", budget: {done} of {total} tiles"
    idx = np.nonzero(np.isfinite(mean))[0]
    if idx.size == mean.size:
        idx = None
    else:
        mean, std = mean[idx], std[idx]
        note += f", {len(idx)} of {s.Xte.shape[0]} test cells"
    return idx, mean, std, t_fit, t_pred, note


PEERS = {
    "GPyTorch SKI": ("gpytorch", peer_gpytorch_ski),
    "GPyTorch exact (subsample)": ("gpytorch", peer_gpytorch_exact),
    "GPflow SGPR": ("gpflow", peer_gpflow_sgpr),
    "PyKrige OK (moving window)": ("pykrige", peer_pykrige),
    "tiled exact GP (geogp ExactGP)": (None, peer_tiled_exact),
}


def _available(module) -> str | None:
    if module is None:
        return None
    try:
        __import__(module)
        return None
    except Exception as e:  # any import failure: the peer is unavailable
        return f"{module} not importable ({type(e).__name__}: {e}); run setup_peers.sh"


# =========================================================================== driver
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folds", nargs="*", default=["random", "block"])
    ap.add_argument("--quick", action="store_true",
                    help="random fold only, fewer iterations, 120 s budget")
    ap.add_argument("--peers", nargs="*", help=f"subset of {list(PEERS)} (substring match)")
    ap.add_argument("--afs-config", default="afs m12 M=2000 linear",
                    help="geogp configuration (a key of heaton_cv.CONFIGS)")
    ap.add_argument("--no-knn", action="store_true", help="skip heaton_cv's 50-NN kriging")
    ap.add_argument("--budget", type=float, default=240.0,
                    help="seconds after which iterative trainings stop (default 240)")
    ap.add_argument("--ski-grid", type=int, nargs=2, default=[150, 250])
    ap.add_argument("--ski-iters", type=int, default=40)
    ap.add_argument("--exact-n", type=int, default=2000)
    ap.add_argument("--exact-iters", type=int, default=60)
    ap.add_argument("--sgpr-m", type=int, default=300)
    ap.add_argument("--sgpr-iters", type=int, default=60)
    ap.add_argument("--krige-k", type=int, default=50)
    ap.add_argument("--krige-model", default="exponential")
    ap.add_argument("--krige-nlags", type=int, default=20)
    ap.add_argument("--krige-fit-n", type=int, default=3000)
    ap.add_argument("--krige-test", type=int, default=0, help="max held-out cells (0 = all)")
    ap.add_argument("--tiles", type=int, nargs=2, default=[6, 10])
    ap.add_argument("--halo", type=int, default=8)
    ap.add_argument("--tile-fit-n", type=int, default=300)
    ap.add_argument("--tile-iters", type=int, default=30)
    ap.add_argument("--tile-min-n", type=int, default=300,
                    help="a tile with fewer training cells in tile + halo doubles its halo")
    ap.add_argument("--json", help="write all rows as JSON here")
    ap.add_argument("--mem-limit-gb", type=float, default=14.0,
                    help="address-space limit of this process (RLIMIT_AS, default 14 GB): a "
                         "peer that runs out fails with a MemoryError instead of taking the "
                         "machine's memory; 0 = no limit")
    args = ap.parse_args(argv)
    if args.mem_limit_gb:
        import resource

        lim = int(args.mem_limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    fold_kinds = args.folds
    if args.quick:
        fold_kinds = ["random"]
        args.ski_iters = min(args.ski_iters, 20)
        args.exact_iters = min(args.exact_iters, 30)
        args.sgpr_iters = min(args.sgpr_iters, 30)
        args.tile_iters = min(args.tile_iters, 30)
        args.budget = min(args.budget, 120.0)

    da = heaton_cv.load()
    la = os.getloadavg()
    print(f"# Peers on the Heaton satellite grid — {time.strftime('%Y-%m-%d %H:%M')} — "
          f"{heaton_cv.machine()} — load avg {la[0]:.1f} {la[1]:.1f} {la[2]:.1f}")
    versions = []
    for mod in ("geogp", "jax", "torch", "gpytorch", "tensorflow", "gpflow", "pykrige"):
        try:
            m = __import__(mod)
            versions.append(f"{mod} {getattr(m, '__version__', '?')}")
        except Exception:  # any import failure: version unknown
            versions.append(f"{mod} -")
    print("versions: " + ", ".join(versions))
    names = [n for n in PEERS if not args.peers or any(p.lower() in n.lower() for p in args.peers)]
    head = (f"{'fold':6} {'method':31} {'RMSE':>6} {'CRPS':>6} {'cov95':>6} {'NLPD':>6} "
            f"{'fit s':>7} {'pred s':>7} {'RMSE/g':>6} {'CRPS/g':>6} {'time/g':>6}  notes")
    rows = []
    for fk in fold_kinds:
        held = heaton_cv.folds(da, fk)
        s = Split(da, held)
        print(f"\nfold {fk}: {s.Xtr.shape[0]} training cells, {s.Xte.shape[0]} held out")
        print(head)
        t0 = time.perf_counter()
        res, _, pred = heaton_cv.run_geogp(da, held, heaton_cv.CONFIGS[args.afs_config])
        g_time = res["fit_s"] + res["predict_s"]
        g_mean = pred["mean"].values.ravel()[s.test_idx]
        g_std = pred["std"].values.ravel()[s.test_idx]
        rows.append(_row(fk, f"geogp AFS ({args.afs_config})", s.yte_raw, g_mean, g_std,
                         res["fit_s"], res["predict_s"], None, g_mean, g_std,
                         "full-grid prediction", la_now(), g_time))
        todo = [(n, *PEERS[n]) for n in names]
        if not args.no_knn:
            todo.append(("50-NN kriging (heaton_cv)", None, None))
        for name, module, fn in todo:
            why = _available(module)
            if why:
                print(f"{fk:6} {name:31} skipped: {why}", flush=True)
                rows.append({"fold": fk, "method": name, "skipped": why})
                continue
            try:
                if fn is None:  # heaton_cv's baseline scores itself on all held-out cells
                    r = heaton_cv.run_knn_kriging(da, held)
                    g = _g_scores(s.yte_raw, g_mean, g_std, None)
                    rows.append({"fold": fk, "method": name, **r, "time_s": r["fit_s"],
                                 "rmse_ratio": r["rmse"] / g["rmse"],
                                 "crps_ratio": r["crps"] / g["crps"],
                                 "time_ratio": r["fit_s"] / g_time,
                                 "notes": "hyperparameters from 2000 cells", "load": la_now()})
                    _print(rows[-1])
                    continue
                idx, m, sd, t_fit, t_pred, note = fn(s, args)
                mean, std = s.unscale(m, sd)
                y = s.yte_raw if idx is None else s.yte_raw[idx]
                rows.append(_row(fk, name, y, mean, std, t_fit, t_pred, idx, g_mean, g_std,
                                 note, la_now(), g_time))
            except Exception as e:  # a failing peer is recorded, the run goes on
                msg = f"failed: {type(e).__name__}: {str(e)[:200]}"
                print(f"{fk:6} {name:31} {msg}", flush=True)
                rows.append({"fold": fk, "method": name, "skipped": msg})
        print(f"(fold {fk} took {time.perf_counter() - t0:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=float))
    return 0


def la_now() -> float:
    return round(os.getloadavg()[0], 1)


def _g_scores(y, g_mean, g_std, idx):
    if idx is not None:
        g_mean, g_std = g_mean[idx], g_std[idx]
    return heaton_cv.score(y, g_mean, g_std)


def _row(fold, name, y, mean, std, t_fit, t_pred, idx, g_mean, g_std, note, load,
         g_time=None):
    r = heaton_cv.score(y, mean, std)
    g = _g_scores(y, g_mean, g_std, idx)
    t = t_fit + t_pred
    row = {"fold": fold, "method": name, **r, "fit_s": t_fit, "predict_s": t_pred,
           "time_s": t, "rmse_ratio": r["rmse"] / g["rmse"], "crps_ratio": r["crps"] / g["crps"],
           "time_ratio": None if g_time is None else t / g_time, "notes": note, "load": load}
    if idx is not None:
        row["notes"] += f"; geogp on the same cells: RMSE {g['rmse']:.3f}, CRPS {g['crps']:.3f}"
    _print(row)
    return row


def _print(r):
    tr = f"{r['time_ratio']:6.2f}" if r["time_ratio"] is not None else "     -"
    print(f"{r['fold']:6} {r['method'][:31]:31} {r['rmse']:6.3f} {r['crps']:6.3f} "
          f"{r['coverage95']:6.3f} {r['nlpd']:6.3f} {r['fit_s']:7.1f} {r['predict_s']:7.1f} "
          f"{r['rmse_ratio']:6.2f} {r['crps_ratio']:6.2f} {tr}  {r.get('notes', '')} "
          f"[load {r['load']}]", flush=True)


if __name__ == "__main__":
    sys.exit(main())
