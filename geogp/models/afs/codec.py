"""AFS models in a model file: their features, statistics, kernel and posterior as arrays.

Per slice: the Fourier features (window, lattice, rows), the sufficient statistics (G, r, yᵀy,
N), the fitted kernel and noise, the posterior (λ^{1/2}, weights, Q, chol), the standardiser
and the optimisation report; for matrix-free models (large M) the FFT operator instead of G,
and the posterior as vectors and samples
(:class:`~geogp.models.collapsed_iterative.IterativePosterior`). Loading checks every array
(:class:`~geogp.persist.checks.Arrays`) and rebuilds the estimator, so that predictions are
reproduced bit for bit.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from geogp.core import kernels as _kernels
from geogp.exceptions import ReadError
from geogp.features.fourier import FourierFeatures
from geogp.features.fourier_statistics import SufficientStats
from geogp.features.gram_operator import GramOperator
from geogp.models.afs import AFSRegressor
from geogp.models.collapsed import Posterior
from geogp.models.collapsed_iterative import IterativePosterior
from geogp.persist.checks import Arrays, clean, init_names, require, scaler_and_report

__all__ = ["save_afs", "load_afs"]

# mean-function statistics, when the model has one; weights' sums, when weighted
_OPTIONAL_STATS = ("F", "HH", "Hy", "wsum", "logw")
# matrix-free models (solver="iterative"): GramOperator fields, IterativePosterior arrays
_OPERATOR_FIELDS = ("chat", "coef", "index", "diag", "low", "G_low")
_ITERATIVE_POSTERIOR_ARRAYS = ("weights", "diag_quad", "low", "quad_low", "sample_a", "sample_b")
_KERNELS = {"SquaredExponential", "Matern12", "Matern32", "Matern52"}


def _kernel_parts(kernel) -> list:
    parts = getattr(kernel, "parts", (kernel,))
    return [type(p).__name__ for p in parts]


def save_afs(est: Any, pre: str, arrays: dict) -> dict:
    """Store the arrays of a fitted AFS model under ``pre`` in ``arrays``; returns its metadata."""
    ff, st, post, sc = est.features_, est.stats_, est.posterior_, est.scaler_
    arrays.update({
        f"{pre}features/center": ff.center, f"{pre}features/width": ff.width,
        f"{pre}features/rows": ff.rows, f"{pre}features/numerators": ff.numerators,
        f"{pre}features/kinds": ff.kinds,
        f"{pre}stats/r": np.asarray(st.r),
        f"{pre}stats/yy": np.asarray(st.yy), f"{pre}stats/n": np.asarray(st.n),
        f"{pre}scaler/x_mean": sc.x_mean, f"{pre}scaler/x_scale": sc.x_scale,
        f"{pre}report/history": np.asarray(est.report_.history, dtype=np.float64),
    })
    if st.matrix_free:  # the FFT operator and the vector-form posterior (no M × M array)
        for name in _OPERATOR_FIELDS:
            if getattr(st.G, name) is not None:
                arrays[f"{pre}stats/G/{name}"] = np.asarray(getattr(st.G, name))
        for name in _ITERATIVE_POSTERIOR_ARRAYS:
            if getattr(post, name) is not None:
                arrays[f"{pre}posterior/{name}"] = np.asarray(getattr(post, name))
    else:
        arrays.update({f"{pre}stats/G": np.asarray(st.G),
                       f"{pre}posterior/sqrt_lam": post.sqrt_lam,
                       f"{pre}posterior/weights": post.weights,
                       f"{pre}posterior/quad": post.quad, f"{pre}posterior/chol": post.chol})
    for name in _OPTIONAL_STATS:
        if getattr(st, name, None) is not None:
            arrays[f"{pre}stats/{name}"] = np.asarray(getattr(st, name))
    for name in ("beta_", "powers_"):
        if getattr(est, name, None) is not None:
            arrays[f"{pre}{name}"] = np.asarray(getattr(est, name))
    for i, p in enumerate(getattr(est.kernel_, "parts", (est.kernel_,))):
        arrays[f"{pre}kernel/{i}/lengthscale"] = np.asarray(p.lengthscale)
        arrays[f"{pre}kernel/{i}/variance"] = np.asarray(p.variance)
    rep = est.report_
    return {
        "init": {**clean({k: getattr(est, k) for k in init_names(type(est))}),
                 "kernel": est.kernel if isinstance(est.kernel, str) else None},
        "n_freq": list(ff.n_freq), "lattice": ff.lattice, "diagonal": bool(st.diagonal),
        "matrix_free": bool(st.matrix_free),
        "cg_iterations": ([*post.cg_iterations[:1], list(post.cg_iterations[1])]
                          if st.matrix_free else None),
        "kernel_parts": _kernel_parts(est.kernel_), "noise": float(est.noise_),
        "posterior_noise": float(post.noise), "kvar0": float(post.kvar0),
        "y_mean": float(sc.y_mean), "y_scale": float(sc.y_scale),
        "report": {"objective": rep.objective, "n_iter": rep.n_iter, "n_eval": rep.n_eval,
                   "converged": rep.converged, "message": rep.message, "time_s": rep.time_s},
        "stats_time_s": float(getattr(est, "stats_time_s_", float("nan"))),
    }


def load_afs(meta: dict, pre: str, z: Arrays) -> AFSRegressor:
    """The fitted AFS model of one slice (keys under ``pre``), every array checked."""
    where = f"slice {pre[:-1]}"
    names = require(meta, "kernel_parts", "list", where)
    if not names or not all(isinstance(n, str) and n in _KERNELS for n in names):
        raise ReadError(f"model file {where}: unknown kernel parts {names!r:.80}; expected "
                        f"names among {sorted(_KERNELS)}.")
    center = z.get(f"{pre}features/center", ndim=1)
    D = center.shape[0]
    parts = []
    for i, cls_name in enumerate(names):
        parts.append(getattr(_kernels, cls_name)(
            lengthscale=z.get(f"{pre}kernel/{i}/lengthscale", shape=(D,), positive=True),
            variance=z.get(f"{pre}kernel/{i}/variance", ndim=0, positive=True)))
    kernel = parts[0] if len(parts) == 1 else _kernels.SumKernel(parts)
    init = dict(require(meta, "init", "dict", where))
    accepted = set(init_names(AFSRegressor))
    kname = init.pop("kernel", None)
    try:
        est = AFSRegressor(kernel=kname if isinstance(kname, str) else kernel,
                           **{k: v for k, v in init.items() if k in accepted})
    except (TypeError, ValueError) as err:
        raise ReadError(f"model file {where}: invalid estimator options ({err}).") from None
    n_freq = require(meta, "n_freq", "list", where)
    lattice = require(meta, "lattice", "str", where)
    if len(n_freq) != D or not all(isinstance(k, int) and k >= 1 for k in n_freq) \
            or lattice not in ("odd", "full"):
        raise ReadError(f"model file {where}: n_freq {n_freq!r:.60} / lattice {lattice!r} do "
                        f"not describe a {D}-D feature set.")
    rows = z.get(f"{pre}features/rows", ndim=2, kind="iu")
    M = rows.shape[0]
    est.features_ = FourierFeatures(
        center, z.get(f"{pre}features/width", shape=(D,), positive=True), tuple(n_freq),
        lattice, rows, z.get(f"{pre}features/numerators", shape=(M, D)),
        z.get(f"{pre}features/kinds", shape=(M, D), kind="iu"))
    optional = {k: jnp.asarray(z.get(f"{pre}stats/{k}")) for k in _OPTIONAL_STATS
                if f"{pre}stats/{k}" in z}
    matrix_free = require(meta, "matrix_free", "bool", where)
    diagonal = require(meta, "diagonal", "bool", where)
    if matrix_free:
        G = GramOperator(*(jnp.asarray(z.get(f"{pre}stats/G/{k}", kind="iufc"))
                           if f"{pre}stats/G/{k}" in z else None for k in _OPERATOR_FIELDS))
    else:
        G = jnp.asarray(z.get(f"{pre}stats/G", shape=(M,) if diagonal else (M, M)))
    est.stats_ = SufficientStats(G, jnp.asarray(z.get(f"{pre}stats/r", shape=(M,))),
                                 jnp.asarray(z.get(f"{pre}stats/yy", ndim=0)),
                                 jnp.asarray(z.get(f"{pre}stats/n", ndim=0, positive=True)),
                                 diagonal, **optional)
    est.solver_ = "iterative" if matrix_free else "dense"
    for name in ("beta_", "powers_"):
        setattr(est, name, z.get(f"{pre}{name}", kind="iuf") if f"{pre}{name}" in z else None)
    est.kernel_ = kernel
    est.noise_ = require(meta, "noise", "float", where, positive=True)
    post_noise = require(meta, "posterior_noise", "float", where, positive=True)
    kvar0 = require(meta, "kvar0", "float", where, positive=True)
    if matrix_free:
        got = {k: (z.get(f"{pre}posterior/{k}", kind="iuf") if f"{pre}posterior/{k}" in z
                   else None)
               for k in _ITERATIVE_POSTERIOR_ARRAYS}
        if got["weights"] is None or got["weights"].shape != (M,):
            raise ReadError(f"model file {where}: the posterior weights are missing or not "
                            f"of shape ({M},).")
        its = require(meta, "cg_iterations", "list", where)
        try:
            cg = (int(its[0]), tuple(int(i) for i in its[1]))
        except (TypeError, ValueError, IndexError):
            raise ReadError(f"model file {where}: 'cg_iterations' is malformed.") from None
        est.posterior_ = IterativePosterior(**got, noise=post_noise, kvar0=kvar0,
                                            cg_iterations=cg)
    else:
        square = (M,) if diagonal else (M, M)
        est.posterior_ = Posterior(z.get(f"{pre}posterior/sqrt_lam", shape=(M,), positive=True),
                                   z.get(f"{pre}posterior/weights", shape=(M,)),
                                   z.get(f"{pre}posterior/quad", shape=square),
                                   z.get(f"{pre}posterior/chol", shape=square),
                                   post_noise, kvar0)
    est.scaler_, est.report_ = scaler_and_report(meta, pre, z, D, where)
    est.stats_time_s_ = meta.get("stats_time_s", float("nan"))
    return est
