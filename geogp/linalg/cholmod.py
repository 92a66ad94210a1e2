"""Sparse ``(log|B|, B⁻¹b)`` with CHOLMOD behind a custom JAX VJP (docs/sparse_vjp.md).

``B`` is symmetric positive definite on a fixed :class:`~geogp.linalg.pattern.SparsePattern`
while its values change with the hyperparameters. The pattern is analysed once (fill-reducing
ordering + symbolic factor, docs/sparse_vjp.md (analysis once)); every call then does one numeric
factorisation on the host through ``jax.pure_callback``. The reverse rule (docs/sparse_vjp.md
(adjoint), storage convention (a)) is::

    b̄ = B⁻¹ γ̄ ,    B̄ = δ̄ B⁻¹ − b̄ γᵀ      evaluated on the pattern only

per stored entry ``(i, j)``: ``δ̄ Z_ii − Σ_k b̄_ik γ_ik`` on the diagonal and
``2 δ̄ Z_ij − Σ_k (b̄_ik γ_jk + b̄_jk γ_ik)`` below it, with ``Z = B⁻¹`` on the pattern from the
supernodal Takahashi recursion of :mod:`geogp.linalg.selinv` (docs/sparse_vjp.md, selected
inversion). No dense inverse is formed anywhere; memory is ``O(nnz(L))``. The JAX operation and
this per-entry rule are :mod:`geogp.linalg.host_vjp`'s (shared with :mod:`geogp.linalg.lapack`);
this module holds the host side, :class:`CholmodFactorization`.

Factorisation cache: the backward pass needs the factor of the same values as the forward
pass. The factor of the last values seen is kept, keyed by an exact copy of those values, so a
``value_and_grad`` costs one factorisation; any other values refactorise (docs/sparse_vjp.md,
backends). The shared factor is mutated by callbacks, so every use holds a per-pattern lock.

Threads: CHOLMOD's BLAS runs single-threaded (``threadpoolctl``, as in the selected inversion):
its supernodes are small to medium blocks, where a second OpenBLAS thread gains nothing when
the machine is idle and, with another process on the second core, makes the factorisation
several times slower (benchmarks/README.md, design measurements).

Prefetched inversion: ``host_forward(..., prefetch=True)`` starts a new factor's selected
inversion in a background thread as soon as it is factorised (the compiled kernel releases the
GIL), and the backward pass waits for it; a refactorisation cancels an inversion not started,
and so does a backward pass that reaches a still-queued inversion: it computes that one itself,
on its own core, while the pool's thread works through the others.
:mod:`geogp.linalg.cholmod_many` asks for it, so that one term's inversion overlaps the next
term's factorisation. It only pays when every forward pass
is followed by a backward pass, and only with a second core: on one core it is switched off.

Failure handling (STYLE.md guideline 8): inside a callback nothing raises. A matrix that is
not positive definite gives NaN value and gradients under tracing, so an L-BFGS line search
rejects the step. Called eagerly (concrete arrays), :func:`logdet_and_solve` raises
:class:`~geogp.exceptions.NotPositiveDefiniteError`, as does :func:`check_positive_definite`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from geogp.exceptions import InputError, NotPositiveDefiniteError
from geogp.linalg._checks import check_inputs
from geogp.linalg._sksparse import CholmodBackend, make_backend
from geogp.linalg.host_vjp import build_op, values_cotangent
from geogp.linalg.pattern import SparsePattern
from geogp.linalg.selinv import gather_on_pattern, reset_blas_limiter, single_blas_thread, takahashi

__all__ = [
    "available_cores",
    "CholmodFactorization",
    "analyze",
    "logdet_and_solve",
    "selected_inverse",
    "check_positive_definite",
    "NotPositiveDefiniteError",
]

_log = logging.getLogger(__name__)
_CACHE_LOCK = threading.Lock()
_PREFETCH: dict[str, Any] = {"pool": None, "generation": 0}


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's threads: a new pool, futures of the old one
    disowned (their generation is stale), and the BLAS limiter's bookkeeping reset."""
    _PREFETCH.update(pool=None, generation=_PREFETCH["generation"] + 1)
    reset_blas_limiter()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it)."""
    return (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count()) or 1


def _prefetch_pool() -> ThreadPoolExecutor | None:
    """The shared background pool of the prefetched inversions (one thread per core beyond
    the first); None on a single core."""
    with _CACHE_LOCK:
        if _PREFETCH["pool"] is None:
            cores = available_cores()
            _PREFETCH["pool"] = (ThreadPoolExecutor(cores - 1, thread_name_prefix="geogp-selinv")
                                 if cores > 1 else False)
        return _PREFETCH["pool"] or None


def _inverse_on_pattern(lfac, prow: np.ndarray, pcol: np.ndarray) -> np.ndarray:
    """``B⁻¹`` on the pattern entries (factor ordering ``prow``, ``pcol``) from ``L``."""
    if not lfac.has_sorted_indices:
        lfac.sort_indices()
    z = takahashi(lfac.indptr, lfac.indices, lfac.data)
    return gather_on_pattern(lfac.indptr, lfac.indices, z, prow, pcol)


class CholmodFactorization:
    """Symbolic analysis of one pattern plus its JAX operation (one per pattern and ordering).

    Holds the CHOLMOD factor (mutated by every numeric factorisation), a lock guarding it, and
    a cache keyed by the values of the current numeric factor. Build with :func:`analyze`.

    Attributes:
        pattern: The analysed pattern.
        backend: The scikit-sparse adapter (:class:`~geogp.linalg._sksparse.CholmodBackend`).
        lock: Guards ``backend`` and the cache.
        last_error: Repr of the last unexpected exception caught inside a callback, or None.
    """

    def __init__(
        self,
        pattern: SparsePattern,
        ordering: str = "amd",
        mode: str = "auto",
        module: ModuleType | None = None,
    ) -> None:
        """Analyse ``pattern`` (once) and build the custom-VJP operation for it."""
        self.pattern = pattern
        self.backend: CholmodBackend = make_backend(pattern, ordering, mode, module)
        self.lock = threading.Lock()
        self.last_error: str | None = None
        perm = self.backend.perm
        pinv = np.empty_like(perm)
        pinv[perm] = np.arange(perm.shape[0])
        # Pattern entries in the factor's ordering: (B⁻¹)_{p[a], p[b]} = Z_ab (docs/sparse_vjp.md,
        # selected inversion).
        self._prow, self._pcol = pinv[pattern.rows], pinv[pattern.cols]
        self._values: np.ndarray | None = None  # values of the current numeric factor
        self._zpattern: np.ndarray | None = None  # B⁻¹ on the pattern, for those values
        self._zfuture: tuple[int, Future] | None = None  # ... in the background (generation)
        self.op = build_op(self)

    # BLAS threads: CHOLMOD's supernodes are small to medium blocks, where a second thread
    # costs more than it gains (module docstring); dense subclasses set this False
    single_threaded_blas = True

    def _blas_threads(self):
        return single_blas_thread() if self.single_threaded_blas else contextlib.nullcontext()

    # ------------------------------------------------------------ host side (numpy only)
    def _ensure_factor(self, values: np.ndarray, prefetch: bool = False) -> bool:
        """Factorise ``values`` unless the current factor already holds them; with
        ``prefetch``, start its selected inversion in the background. Hold the lock."""
        if self._values is not None and np.array_equal(values, self._values):
            return self.backend.positive_definite
        self._values, self._zpattern = None, None
        self._drop_future()
        positive = self.backend.factorize(values)
        self._values = np.array(values, dtype=np.float64, copy=True)
        pool = _prefetch_pool() if positive and prefetch else None
        if pool is not None:  # the factor is copied here, so refactorising cannot disturb it
            lfac, _ = self.backend.factor_and_perm()
            self._zfuture = (_PREFETCH["generation"],
                             pool.submit(_inverse_on_pattern, lfac, self._prow, self._pcol))
        return positive

    def release(self) -> None:
        """Free the factor and the cached inverse (a compiled function may keep this object
        alive long after its last use); the next evaluation factorises again."""
        with self.lock:
            self._release_locked()

    def _release_locked(self) -> None:
        self._values, self._zpattern = None, None
        self._drop_future()
        release = getattr(self.backend, "release", None)  # dense LAPACK factors: none
        if release is not None:
            release()

    def _drop_future(self) -> None:
        if self._zfuture is not None:
            self._zfuture[1].cancel()  # a queued inversion of values no longer wanted
            self._zfuture = None

    def _selected_inverse_locked(self) -> np.ndarray:
        """``B⁻¹`` on the pattern for the current factor (cached). Hold the lock."""
        if self._zpattern is None:
            pending, self._zfuture = self._zfuture, None
            if (pending is not None and pending[0] == _PREFETCH["generation"]
                    and not pending[1].cancel()):  # running or done: wait for it
                self._zpattern = pending[1].result()  # re-raises the worker's error, if any
            else:  # none started, one still queued (this thread is free to do it), or one
                # started before a fork (its thread is the parent's)
                lfac, _ = self.backend.factor_and_perm()
                self._zpattern = _inverse_on_pattern(lfac, self._prow, self._pcol)
        return self._zpattern

    def host_forward(self, values: np.ndarray, rhs: np.ndarray,
                     prefetch: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``(log|B|, B⁻¹ b)`` on the host; NaN when ``B`` is not positive definite. Never raises.

        Args:
            values: float64, shape ``(nnz,)``.
            rhs: float64, shape ``(n,)`` or ``(n, k)``.
            prefetch: start the selected inversion of a new factor in the background (module
                docstring; :mod:`geogp.linalg.cholmod_many`).

        Returns:
            A 0-d array and an array shaped like ``rhs``.

        Cost: one numeric factorisation (none if the factor already holds ``values``) and one
        solve.
        """
        values = np.asarray(values, dtype=np.float64)
        rhs = np.asarray(rhs, dtype=np.float64)
        nan = (np.asarray(np.nan), np.full(rhs.shape, np.nan))
        try:
            with self.lock, self._blas_threads():
                if not self._ensure_factor(values, prefetch):
                    return nan
                logdet = self.backend.logdet()
                solution = self.backend.solve(rhs)
        except Exception as exc:  # a callback must not raise (STYLE.md §2.8)
            return self._failed(exc, nan)
        return np.asarray(logdet, dtype=np.float64), solution

    def host_backward(
        self,
        values: np.ndarray,
        solution: np.ndarray,
        g_logdet: np.ndarray,
        g_solution: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Cotangents ``(values̄, b̄)`` of docs/sparse_vjp.md (adjoint), convention (a). Never raises.

        Args:
            values: float64, shape ``(nnz,)``.
            solution: ``γ = B⁻¹ b``, shape ``(n,)`` or ``(n, k)``.
            g_logdet: ``δ̄``, 0-d.
            g_solution: ``γ̄``, shaped like ``solution``.

        Returns:
            ``values̄`` of shape ``(nnz,)`` and ``b̄ = B⁻¹ γ̄`` shaped like ``solution``.

        Cost: one solve, plus one selected inversion (about one factorisation) when
        ``δ̄ ≠ 0``; a refactorisation only if the factor holds other values.
        """
        values = np.asarray(values, dtype=np.float64)
        solution = np.asarray(solution, dtype=np.float64)
        g_solution = np.asarray(g_solution, dtype=np.float64)
        g_logdet = float(np.asarray(g_logdet))
        nan = (np.full(values.shape, np.nan), np.full(solution.shape, np.nan))
        try:
            with self.lock, self._blas_threads():
                if not self._ensure_factor(values):
                    return nan
                if np.any(g_solution):
                    g_rhs = self.backend.solve(g_solution)  # b̄ = B⁻¹ γ̄
                else:
                    g_rhs = np.zeros_like(g_solution)
                zpattern = self._selected_inverse_locked() if g_logdet != 0.0 else None
        except Exception as exc:  # a callback must not raise (STYLE.md §2.8)
            return self._failed(exc, nan)
        return values_cotangent(self.pattern, g_logdet, zpattern, g_rhs, solution), g_rhs

    def _failed(self, exc: Exception, nan: tuple[np.ndarray, np.ndarray]) -> Any:
        self.last_error = repr(exc)
        _log.error("CHOLMOD callback failed; returning NaN", exc_info=exc)
        return nan

    # ------------------------------------------------------------ eager helpers
    def check_positive_definite(self, values: Any) -> None:
        """Raise :class:`NotPositiveDefiniteError` unless ``B`` is positive definite (eager)."""
        values = _concrete(values, "values")
        with self.lock, self._blas_threads():
            positive = self._ensure_factor(values)
            bad = self.backend.first_bad_pivot()
            perm = self.backend.perm
        if positive:
            return
        where = ""
        if bad >= 0:
            where = (
                f" The pivot of row/column {int(perm[bad])} (step {bad} of the "
                "factorisation) is ≤ 0."
            )
        raise NotPositiveDefiniteError(
            f"Expected a symmetric positive definite matrix, but its Cholesky factorisation "
            f"failed (n={self.pattern.n}, nnz={self.pattern.nnz}).{where} Check the values and "
            "the storage convention (lower triangle with diagonal, docs/sparse_vjp.md (adjoint)), "
            "or add a "
            "small jitter to the diagonal."
        )

    def factor_and_perm(self, values: Any) -> tuple[Any, np.ndarray]:
        """(L, perm) with B[perm][:, perm] = L Lᵀ at ``values`` (L sparse, a copy)."""
        values = _concrete(values, "values")
        with self.lock, self._blas_threads():
            self._ensure_factor(values)
            return self.backend.factor_and_perm()

    def selected_inverse(self, values: Any, release: bool = False) -> np.ndarray:
        """``B⁻¹`` on the pattern entries, shape ``(nnz,)``; see :func:`selected_inverse`."""
        self.check_positive_definite(values)
        values = _concrete(values, "values")
        with self.lock, self._blas_threads():
            self._ensure_factor(values)
            if not release or self._zpattern is not None or self._zfuture is not None:
                out = self._selected_inverse_locked().copy()
                if release:
                    self._release_locked()
                return out
            # the recursion reads only the factor's LLᵀ copy: free CHOLMOD's factor first
            lfac, _ = self.backend.factor_and_perm()
            self._release_locked()
            return _inverse_on_pattern(lfac, self._prow, self._pcol)

    def inverse_later(self, values: Any) -> Callable[[], np.ndarray]:
        """A function giving ``B⁻¹`` on the pattern entries (as :meth:`selected_inverse`)
        from a copy of the factor taken now: it may run in another thread, while this
        pattern is factorised again (the recursion releases the GIL)."""
        self.check_positive_definite(values)
        values = _concrete(values, "values")
        with self.lock, self._blas_threads():
            self._ensure_factor(values)
            done = self._zpattern
            lfac = None if done is not None else self.backend.factor_and_perm()[0]
        if done is not None:
            return done.copy
        prow, pcol = self._prow, self._pcol
        return lambda: _inverse_on_pattern(lfac, prow, pcol)

    def logdet_and_solve(self, values: Any, rhs: Any) -> tuple[jax.Array, jax.Array]:
        """See :func:`logdet_and_solve` (this pattern, ordering and mode)."""
        values, rhs = check_inputs(self.pattern, values, rhs)
        logdet, solution = self.op(jnp.asarray(values), jnp.asarray(rhs))
        if not isinstance(logdet, jax.core.Tracer) and bool(jnp.isnan(logdet)):
            self.check_positive_definite(values)  # raises if B is not positive definite
            raise InputError(
                "log|B| is NaN although B is positive definite: values or rhs contain NaN "
                f"or inf (last callback error: {self.last_error})."
            )
        return logdet, solution


def _concrete(values: Any, name: str) -> np.ndarray:
    if isinstance(values, jax.core.Tracer):
        raise InputError(
            f"{name} must be concrete here (an eager helper): it cannot run under jit, grad or "
            "vmap. Call it outside the traced function."
        )
    return np.asarray(values, dtype=np.float64)


def analyze(
    pattern: SparsePattern,
    *,
    ordering: str = "amd",
    mode: str = "auto",
) -> CholmodFactorization:
    """Symbolic analysis of ``pattern``, done once and cached on the pattern (docs/sparse_vjp.md,
    analysis once).

    Args:
        pattern: Sparsity pattern (lower triangle with diagonal).
        ordering: Fill-reducing ordering passed to CHOLMOD: ``"amd"`` (default), ``"metis"``,
            ``"nesdis"``, ``"colamd"`` or ``"natural"``.
        mode: CHOLMOD factorisation mode: ``"auto"``, ``"simplicial"`` or ``"supernodal"``.

    Returns:
        The :class:`CholmodFactorization` for ``(pattern, ordering, mode)``.

    Cost: one CHOLMOD analysis on first use, then a dictionary lookup.
    """
    key = ("cholmod", ordering, mode)
    with _CACHE_LOCK:
        state = pattern._cache.get(key)
        if state is None:
            state = CholmodFactorization(pattern, ordering, mode)
            pattern._cache[key] = state
    return state


def logdet_and_solve(
    pattern: SparsePattern,
    values: Any,
    rhs: Any,
    *,
    ordering: str = "amd",
    mode: str = "auto",
) -> tuple[jax.Array, jax.Array]:
    """``(log|B|, B⁻¹ b)`` for sparse SPD ``B`` by CHOLMOD, differentiable (docs/sparse_vjp.md).

    Usable under ``jax.jit``, ``jax.vmap`` (sequential host calls) and reverse-mode autodiff
    (``jax.grad``, ``jax.vjp``) with respect to ``values`` and ``rhs``; forward mode
    (``jax.jvp``, ``jax.jacfwd``) is not defined for a custom VJP. Same contract as
    :func:`geogp.linalg.dense.logdet_and_solve`.

    Args:
        pattern: Sparsity pattern of ``B`` (static; analysed once, see :func:`analyze`).
        values: Values of ``B`` on the pattern, float64, shape ``(nnz,)``; storage convention
            (a) of docs/sparse_vjp.md (adjoint): lower triangle with diagonal,
            ``B = tril + trilᵀ − diag``.
        rhs: ``b``, float64, shape ``(n,)`` or ``(n, k)``.
        ordering: Fill-reducing ordering (see :func:`analyze`).
        mode: CHOLMOD mode (see :func:`analyze`).

    Returns:
        ``(logdet, solution)``: a scalar and ``B⁻¹ b`` shaped like ``rhs``. Under tracing both
        are NaN (and so are the gradients) when ``B`` is not positive definite.

    Raises:
        NotPositiveDefiniteError: Called eagerly with a matrix that is not positive definite.
        InputError: Wrong shapes or dtypes.

    Cost: one numeric factorisation and one solve forward; backward one solve and one
    selected inversion (about one factorisation), reusing the forward factor. Memory
    ``O(nnz(L))``. Callbacks run on the host CPU (a device↔host copy per call on GPU).

    Example:
        >>> import numpy as np, scipy.sparse as sp
        >>> a = sp.csc_matrix(np.array([[4.0, 1.0], [1.0, 3.0]]))
        >>> p = SparsePattern.from_scipy(a)
        >>> logdet, x = logdet_and_solve(p, p.values_from_scipy(a), np.ones(2))
        >>> round(float(logdet), 6) == round(float(np.log(11.0)), 6)
        True
    """
    return analyze(pattern, ordering=ordering, mode=mode).logdet_and_solve(values, rhs)


def selected_inverse(
    pattern: SparsePattern,
    values: Any,
    *,
    ordering: str = "amd",
    mode: str = "auto",
    release: bool = False,
) -> np.ndarray:
    """Entries of ``B⁻¹`` on the pattern, by Takahashi's recursion (docs/sparse_vjp.md, selected
    inversion). Eager.

    Args:
        pattern: Sparsity pattern of ``B``.
        values: Values of ``B`` on the pattern, shape ``(nnz,)``, convention (a).
        ordering: Fill-reducing ordering (see :func:`analyze`).
        mode: CHOLMOD mode (see :func:`analyze`).
        release: free the factor (numeric and symbolic) as soon as the recursion has its
            copy, lowering the peak memory by about the factor's size; the next use of the
            pattern analyses it again.

    Returns:
        ``(B⁻¹)[rows[e], cols[e]]`` for each stored entry ``e``, float64, shape ``(nnz,)``.

    Raises:
        NotPositiveDefiniteError: ``B`` is not positive definite.

    Cost: one factorisation and one selected inversion; memory ``O(nnz(L))``.
    """
    return analyze(pattern, ordering=ordering, mode=mode).selected_inverse(values, release)


def check_positive_definite(
    pattern: SparsePattern,
    values: Any,
    *,
    ordering: str = "amd",
    mode: str = "auto",
) -> None:
    """Raise :class:`NotPositiveDefiniteError` unless ``B`` is positive definite. Eager.

    CHOLMOD's simplicial mode does not fail on an indefinite matrix; this checks every pivot
    (``diag(L) > 0`` or ``D > 0``) explicitly (docs/sparse_vjp.md, backends).

    Args:
        pattern: Sparsity pattern of ``B``.
        values: Values of ``B`` on the pattern, shape ``(nnz,)``, convention (a).
        ordering: Fill-reducing ordering (see :func:`analyze`).
        mode: CHOLMOD mode (see :func:`analyze`).

    Raises:
        NotPositiveDefiniteError: With the first failing row/column when known.

    Cost: one numeric factorisation (none if the cached factor holds ``values``).
    """
    analyze(pattern, ordering=ordering, mode=mode).check_positive_definite(values)
