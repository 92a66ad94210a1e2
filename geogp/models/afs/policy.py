"""The AFS estimator's feature and solver policy and its refusals, before anything of size M is
allocated.

Pure functions of the estimator's settings (docs/afs.md, solvers): how many features
``n_features="auto"`` gives, which solver a feature set gets, the size of the matrix-free
solver's dense low-frequency block, and the memory estimates that refuse, with the figure,
what would not fit in ``max_bytes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from geogp.core.kernels import make_kernel
from geogp.exceptions import InputError, MemoryEstimateError
from geogp.features.fourier_statistics import DEFAULT_DENSE_BLOCK
from geogp.features.gram_operator import operator_bytes

if TYPE_CHECKING:  # annotations only
    from geogp.features.fourier import FourierFeatures

__all__ = ["ITERATIVE_ABOVE", "SOLVERS", "auto_features", "dense_block_size",
           "check_iterative_options", "check_budget", "choose_solver"]

ITERATIVE_ABOVE = 4096  # solver="auto": matrix-free above this many features
SOLVERS = ("auto", "dense", "iterative")


def auto_features(n_obs: int) -> int:
    """The ``n_features="auto"`` rule: M = N_obs // 8, clipped to [2,000, 10,000].

    More features resolve shorter scales; on the satellite cross-validation
    (``benchmarks/heaton_cv.py``) M = 10,000 (matrix-free) beat M = 2,000 on random and block
    folds at under a minute (figures in benchmarks/README.md). Small data keep M = 2,000 and
    the exact dense solver.
    """
    return int(np.clip(int(n_obs) // 8, 2000, 10000))


def _integer(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def dense_block_size(dense_block: int | str, n_features: int) -> int:
    """The matrix-free solver's dense low-frequency block: ``"auto"`` → M/10 clipped to
    [DEFAULT_DENSE_BLOCK, 2·DEFAULT_DENSE_BLOCK], else the integer given."""
    if dense_block == "auto":
        return int(np.clip(n_features // 10, DEFAULT_DENSE_BLOCK, 2 * DEFAULT_DENSE_BLOCK))
    return int(dense_block)


def check_iterative_options(n_probes: int, n_samples: int, cg_tol: float, dense_block: int | str,
                            warm_start: int) -> None:
    """Refuse settings of the matrix-free solver that would give NaN or garbage (all problems
    in one :class:`~geogp.exceptions.InputError`)."""
    problems = []
    if not (_integer(n_probes) and n_probes >= 1):
        problems.append(f"n_probes must be an integer ≥ 1 (got {n_probes!r})")
    if not (_integer(n_samples) and n_samples >= 0):
        problems.append(f"n_samples must be an integer ≥ 0 (got {n_samples!r})")
    if not (isinstance(cg_tol, (int, float)) and 0 < cg_tol < 1):
        problems.append(f"cg_tol must be in (0, 1) (got {cg_tol!r})")
    if not (dense_block == "auto" or (_integer(dense_block) and dense_block >= 0)):
        problems.append(f"dense_block must be 'auto' or an integer ≥ 0 (got {dense_block!r})")
    if not (_integer(warm_start) and warm_start >= 0):
        problems.append(f"warm_start must be an integer ≥ 0 (got {warm_start!r})")
    if problems:
        raise InputError("invalid matrix-free solver settings: " + "; ".join(problems) + ".")


def check_budget(n_features: int, n_dims: int, max_bytes: float) -> None:
    """Refuse a feature budget M whose cheapest solver cannot fit in ``max_bytes``, before
    anything of size M is allocated (the feature search itself builds ~M index rows)."""
    M = n_features
    rows = 8.0 * M * n_dims * 4  # candidate index rows of the masked lattice search
    vectors = 8.0 * M * 6  # the fewest M-vectors any solver keeps (one right-hand side)
    needed = rows + min(vectors, 8.0 * M * M)  # each solver's full estimate comes later
    if needed > max_bytes:
        raise MemoryEstimateError(
            f"n_features={M} (at least: feature search and the cheapest solver's vectors)",
            needed, max_bytes, "Reduce n_features, or raise max_bytes if the machine has the "
            "memory.", cli_hint=_FEATURES_CLI)


_FEATURES_CLI = "Lower --features, or raise --max-memory GIB if the machine has the memory."


def choose_solver(ff: FourierFeatures, estimator: Any) -> str:
    """``"dense"`` or ``"iterative"`` for the features ``ff`` under the settings of
    ``estimator`` (an :class:`~geogp.models.afs.AFSRegressor`); refuses, with the estimate,
    what would not fit in its ``max_bytes``."""
    est = estimator
    if est.solver not in SOLVERS:
        raise InputError(f"solver must be 'auto', 'dense' or 'iterative'; got {est.solver!r}.")
    M = ff.n_features
    iterative = est.solver == "iterative" or (est.solver == "auto" and M > ITERATIVE_ABOVE)
    if iterative and not hasattr(make_kernel(est.kernel, ff.n_dims), "log_spectral_density"):
        raise InputError("the iterative solver needs a kernel with a spectral density (SE, "
                         "Matérn or their sums); use solver='dense'.")
    if iterative:
        check_iterative_options(est.n_probes, est.n_samples, est.cg_tol, est.dense_block,
                                est.warm_start)
        cols = int(est.n_probes) + 1
        block = min(dense_block_size(est.dense_block, M), M)
        needed = (2 * operator_bytes(ff, cols) + 8.0 * M * (cols * 6 + 2 * est.n_samples)
                  + 8.0 * block * block * 4)
        what = f"{M} Fourier features, matrix-free with {cols} right-hand sides"
        hint = "Reduce n_features or n_probes, or raise max_bytes."
    else:
        needed = 8.0 * M * M * 3
        what = f"{M} Fourier features (dense {M}×{M} statistics and factors)"
        hint = ("Use solver='iterative' (matrix-free), reduce n_features, or raise max_bytes "
                "if the machine has the memory.")
    if needed > est.max_bytes:
        raise MemoryEstimateError(what, needed, est.max_bytes, hint, cli_hint=_FEATURES_CLI)
    return "iterative" if iterative else "dense"
