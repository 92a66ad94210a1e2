"""Model files of wavelet models (see :mod:`geogp.persist` for the container and its checks).

A wavelet slice is stored as what its posterior is a function of: the basis (family, levels,
window, cascade level), θ, the standardiser and the sparse statistics of the active features
(G in canonical CSC form, r, yᵀy, N). Loading rebuilds the basis and recomputes the posterior
(one factorisation), with the same backend rule as the fit, so predictions are reproduced.
Every array and key is checked (shape, sortedness, ranges, finiteness, signs) before use.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from geogp.exceptions import GeogpError, InputError, ReadError
from geogp.features.wavelet import make_basis
from geogp.features.wavelet_statistics import WaveletStatistics
from geogp.models.wavelet import WaveletRegressor, make_problem, posterior
from geogp.persist.checks import Arrays, estimator_from_init, require, scaler_and_report

__all__ = ["save_wavelet", "load_wavelet"]

_PARAM_SHAPES = {"decay": "d", "component_decay": "dq", "component_weight": "dq",
                 "component_centre": "dq", "component_width": "dq", "noise": "", "amplitude": ""}
_SIGNED = ("component_centre",)


def save_wavelet(est: Any, pre: str, arrays: dict, init: dict) -> dict:
    """Add the estimator's arrays under ``pre`` to ``arrays``; return its metadata."""
    st, sc, rep = est.stats_, est.scaler_, est.report_
    gram = st.gram.tocsc()
    arrays.update({
        f"{pre}wavelet/active": np.asarray(st.active, dtype=np.int64),
        f"{pre}wavelet/gram_data": np.asarray(gram.data, dtype=np.float64),
        f"{pre}wavelet/gram_indices": np.asarray(gram.indices, dtype=np.int64),
        f"{pre}wavelet/gram_indptr": np.asarray(gram.indptr, dtype=np.int64),
        f"{pre}wavelet/r": np.asarray(st.r, dtype=np.float64),
        f"{pre}wavelet/window": np.array([[b.lo, b.hi] for b in est.basis_.dims]),
        f"{pre}scaler/x_mean": sc.x_mean, f"{pre}scaler/x_scale": sc.x_scale,
        f"{pre}report/history": np.asarray(rep.history, dtype=np.float64),
    })
    for k, v in est.params_.items():
        arrays[f"{pre}wavelet/params/{k}"] = np.asarray(v, dtype=np.float64)
    return {
        "init": init, "iota": int(est.iota_), "j_max": int(est.j_max_),
        "level": int(est.level),
        "yy": float(st.yy), "n": int(st.n),
        "y_mean": float(sc.y_mean), "y_scale": float(sc.y_scale),
        "report": {"objective": rep.objective, "n_iter": rep.n_iter, "n_eval": rep.n_eval,
                   "converged": rep.converged, "message": rep.message, "time_s": rep.time_s},
    }


def load_wavelet(meta: dict, pre: str, z: Arrays, accepted_init: Collection[str]
                 ) -> WaveletRegressor:
    """Rebuild a fitted WaveletRegressor from the metadata and arrays of one slice."""
    where = f"slice {pre[:-1]}"
    est = estimator_from_init(WaveletRegressor, meta, where, accepted_init)
    window = z.get(f"{pre}wavelet/window", ndim=2)
    d = window.shape[0]
    if window.shape != (d, 2) or not 1 <= d <= 2:
        raise ReadError(f"model file {where}: the wavelet window must be (D, 2) with D ≤ 2.")
    est.iota_ = require(meta, "iota", "int", where)
    est.j_max_ = require(meta, "j_max", "int", where)
    level = require(meta, "level", "int", where)
    try:
        est.basis_ = make_basis(est.family, est.iota_, est.j_max_, window, level)
    except InputError as err:
        raise ReadError(f"model file {where}: invalid wavelet basis ({err})") from None
    m_all = est.basis_.n_features
    active = z.get(f"{pre}wavelet/active", ndim=1, kind="iu")
    m = active.size
    if m == 0 or np.any(np.diff(active) <= 0) or active[0] < 0 or active[-1] >= m_all:
        raise ReadError(f"model file {where}: the active features must be increasing indices "
                        f"below {m_all}.")
    indptr = z.get(f"{pre}wavelet/gram_indptr", shape=(m + 1,), kind="iu")
    nnz = int(indptr[-1]) if indptr.size else 0
    indices = z.get(f"{pre}wavelet/gram_indices", shape=(nnz,), kind="iu")
    data = z.get(f"{pre}wavelet/gram_data", shape=(nnz,))
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or (nnz and (
            indices.min() < 0 or indices.max() >= m)):
        raise ReadError(f"model file {where}: the statistics' sparse matrix is malformed.")
    gram = sp.csc_matrix((data, indices, indptr), shape=(m, m))
    if not gram.has_sorted_indices or np.any(gram.diagonal() <= 0) \
            or sp.triu(gram, k=1).nnz:
        raise ReadError(f"model file {where}: the statistics' matrix must be the lower "
                        "triangle of G, sorted, with a positive diagonal.")
    r = z.get(f"{pre}wavelet/r", shape=(m,))
    n = require(meta, "n", "int", where, positive=True)
    yy = require(meta, "yy", "float", where, positive=True)
    q = int(est.n_components)
    params = {}
    for k, dims in _PARAM_SHAPES.items():
        shape = tuple({"d": d, "q": q}[c] for c in dims)
        params[k] = z.get(f"{pre}wavelet/params/{k}", shape=shape,
                          positive=k not in _SIGNED and k != "component_weight")
        if k == "component_weight" and np.any(params[k] < 0):
            raise ReadError(f"model file {where}: component weights must be ≥ 0.")
    est.scaler_, est.report_ = scaler_and_report(meta, pre, z, d, where)
    est.stats_ = WaveletStatistics(est.basis_, active, gram, r, yy, n)
    est.stats_time_s_ = 0.0
    est.params_ = {k: jnp.asarray(v) for k, v in params.items()}
    try:
        est.problem_ = make_problem(est.stats_, est.backend, est.normalisation, est.location)
        est.posterior_ = posterior(est.params_, est.problem_)
    except (GeogpError, InputError, ArithmeticError, ValueError) as err:
        raise ReadError(f"model file {where}: the stored statistics give no posterior ({err}).") \
            from None
    est.bound_ = est.posterior_.bound
    if not np.isfinite(est.bound_):
        raise ReadError(f"model file {where}: the stored statistics give a non-finite bound.")
    est.n_features_ = m_all
    est.n_active_features_ = m
    return est
