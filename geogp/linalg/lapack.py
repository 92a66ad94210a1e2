"""Dense ``(log|B|, B⁻¹b)`` by LAPACK behind the same custom JAX VJP as CHOLMOD
(docs/sparse_vjp.md).

For patterns that are nearly full (the coarse levels of overlapping wavelets make P 20–100 %
dense), a sparse factorisation only adds overhead, and JAX's autodiff of a dense Cholesky
(:mod:`geogp.linalg.dense`, the test oracle) costs several O(n³) passes per gradient plus a
compilation that constant-folds the pattern. This backend keeps the contract of
:func:`geogp.linalg.cholmod.logdet_and_solve` and its reverse rule, with the factor computed by
LAPACK on the host:

- forward: ``dpotrf`` of the lower triangle filled from the pattern, log|B| = 2 Σ log C_ii,
  ``dpotrs`` for B⁻¹b;
- backward: b̄ = B⁻¹γ̄ by ``dpotrs`` and, when δ̄ ≠ 0, Z = B⁻¹ by ``dpotri`` (about one more
  factorisation), read on the pattern; the per-entry cotangent is
  :func:`geogp.linalg.host_vjp.values_cotangent`.

A ``value_and_grad`` thus costs about n³ flops (``dpotrf`` n³/3 + ``dpotri`` 2n³/3), and memory
two n × n arrays. The factor of the last values is cached (keyed by an exact copy), as in the
CHOLMOD backend, whose host logic (:class:`~geogp.linalg.cholmod.CholmodFactorization`) this
module reuses with a LAPACK "backend" in place of scikit-sparse's factor.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

import numpy as np
from scipy.linalg import lapack

from geogp.linalg.cholmod import CholmodFactorization
from geogp.linalg.host_vjp import build_op
from geogp.linalg.pattern import SparsePattern

if TYPE_CHECKING:  # annotations only
    import jax

__all__ = ["DenseFactorization", "factorization", "logdet_and_solve"]

_log = logging.getLogger(__name__)
_CACHE_LOCK = threading.Lock()


class LapackFactor:
    """Dense Cholesky factor with the interface :class:`CholmodFactorization` uses.

    Attributes:
        perm: the identity (no fill-reducing ordering).
    """

    def __init__(self, pattern: SparsePattern) -> None:
        self.pattern = pattern
        self.perm = np.arange(pattern.n)
        self._rows = np.asarray(pattern.rows, dtype=np.int64)
        self._cols = np.asarray(pattern.cols, dtype=np.int64)
        self._chol: np.ndarray | None = None
        self._info = 0

    def factorize(self, values: np.ndarray) -> bool:
        """Factorise B (lower triangle from ``values``); True when positive definite."""
        n = self.pattern.n
        lower = np.zeros((n, n), order="F")
        lower[self._rows, self._cols] = values
        chol, info = lapack.dpotrf(lower, lower=1, clean=1, overwrite_a=1)
        self._chol, self._info = chol, int(info)
        return self._info == 0

    @property
    def positive_definite(self) -> bool:
        return self._chol is not None and self._info == 0

    def first_bad_pivot(self) -> int:
        """Index of the first non-positive pivot (−1 when none)."""
        return self._info - 1 if self._info > 0 else -1

    def logdet(self) -> float:
        return float(2.0 * np.sum(np.log(np.diagonal(self._chol))))

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        rhs = np.asarray(rhs, dtype=np.float64)
        x, info = lapack.dpotrs(self._chol, rhs.reshape(rhs.shape[0], -1), lower=1)
        if info != 0:  # pragma: no cover - LAPACK argument error
            raise RuntimeError(f"dpotrs failed (info={info}).")
        return x.reshape(rhs.shape)

    def inverse_on_pattern(self) -> np.ndarray:
        """B⁻¹ at the pattern's (lower) entries, from ``dpotri``."""
        inv, info = lapack.dpotri(self._chol, lower=1)
        if info != 0:  # pragma: no cover - only for a singular factor, excluded above
            raise RuntimeError(f"dpotri failed (info={info}).")
        return inv[self._rows, self._cols]


class DenseFactorization(CholmodFactorization):
    """:class:`~geogp.linalg.cholmod.CholmodFactorization` with a dense LAPACK factor.

    BLAS keeps its own thread count here: dense blocks are large enough for a second thread
    to pay (benchmarks/README.md, design measurements).
    """

    single_threaded_blas = False

    def __init__(self, pattern: SparsePattern) -> None:  # no CHOLMOD analysis
        self.pattern = pattern
        self.backend = LapackFactor(pattern)
        self.lock = threading.Lock()
        self.last_error: str | None = None
        self._values: np.ndarray | None = None
        self._zpattern: np.ndarray | None = None
        self._zfuture = None  # never set: dpotri is one LAPACK call, not prefetched
        self.op = build_op(self)

    def _selected_inverse_locked(self) -> np.ndarray:
        if self._zpattern is None:
            self._zpattern = self.backend.inverse_on_pattern()
        return self._zpattern


def factorization(pattern: SparsePattern) -> DenseFactorization:
    """The (cached) :class:`DenseFactorization` of ``pattern``."""
    with _CACHE_LOCK:
        state = pattern._cache.get(("lapack",))
        if state is None:
            state = DenseFactorization(pattern)
            pattern._cache[("lapack",)] = state
    return state


def logdet_and_solve(pattern: SparsePattern, values: jax.Array,
                     rhs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(log|B|, B⁻¹ b)`` by dense LAPACK Cholesky, differentiable (docs/sparse_vjp.md, contract).

    Same contract, storage convention (a) and failure handling as
    :func:`geogp.linalg.cholmod.logdet_and_solve` (NaN under tracing when B is not positive
    definite, :class:`~geogp.exceptions.NotPositiveDefiniteError` when called eagerly).

    Cost: about n³/3 flops forward, n³ with the gradient; memory O(n²).
    """
    return factorization(pattern).logdet_and_solve(values, rhs)
