"""Selected inversion: entries of ``C⁻¹`` on the pattern of a sparse Cholesky factor.

Given ``C = L Lᵀ`` with ``L`` sparse lower triangular (CSC), Takahashi's recursion
(Takahashi, Fagan & Chin 1973; Erisman & Tinney 1975) returns ``Z = C⁻¹`` on the pattern of
``L + Lᵀ`` without ever forming the dense inverse (docs/sparse_vjp.md, selected inversion). The
kernel here is the supernodal (block) form of the recursion, compiled with numba:

- columns with identical below-diagonal structure are grouped into supernodes
  ``J = [f, f + s)`` with common off-diagonal row set ``R`` (|R| = r);
- for each supernode, last to first (docs/sparse_vjp.md (selected inversion) step 2, in blocks)::

      Z_RJ = −Z_RR L_RJ L_JJ⁻¹
      Z_JJ = L_JJ⁻ᵀ L_JJ⁻¹ − (L_RJ L_JJ⁻¹)ᵀ Z_RJ

  ``Z_RR`` lies in the pattern of ancestor columns (R is a clique of the filled graph), so it
  has already been computed. Large blocks use BLAS (``np.dot``); small ones plain loops.

With ``s = 1`` this is exactly the column recursion of docs/sparse_vjp.md (selected inversion):
``Z_ij = −(1/L_jj) Σ_k L_kj Z_ki`` and ``Z_jj = 1/L_jj² − (1/L_jj) Σ_k L_kj Z_kj``.

Cost: about ``Σ_J (2 r² s + 3 s³)`` flops, the order of one numeric factorisation; memory
``nnz(L)`` for ``Z`` plus one dense ``r × r`` block at a time. No dense ``M × M`` array.

Threads: the blocks are small to medium, where OpenBLAS's thread start-up costs more than it
saves (benchmarks/README.md, design measurements). While the kernel runs, BLAS is limited to one
thread through ``threadpoolctl`` when it is installed (it comes with scikit-learn); the previous
limits are restored after. The compiled kernels release the GIL, so selected inversions of different
matrices run in parallel threads (the lattice model's fitting tiles,
:mod:`geogp.linalg.cholmod_many`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numba
import numpy as np

__all__ = [
    "SelectedInverseError",
    "supernodes",
    "takahashi",
    "gather_on_pattern",
    "single_blas_thread",
    "reset_blas_limiter",
]

# Status codes returned by the compiled kernels.
_OK = 0
_MISSING_ENTRY = 1  # the factor's pattern is not closed (an entry of Z_RR is not stored)
_BAD_DIAGONAL = 2  # a column does not start with a positive diagonal entry
_NOT_FOUND = 3  # a requested (row, col) is not on the factor's pattern

_MESSAGES = {
    _MISSING_ENTRY: "the factor's pattern is not closed under elimination (an entry needed by "
    "the recursion is not stored); pass the full symbolic pattern of L, explicit zeros included",
    _BAD_DIAGONAL: "a column of L does not start with a positive diagonal entry",
    _NOT_FOUND: "a requested entry is not on the pattern of L + Lᵀ",
}

# Blocks with s ≥ _BLAS_MIN_S and r ≥ _BLAS_MIN_R use a dense gather + BLAS; others loops.
_BLAS_MIN_S = 4
_BLAS_MIN_R = 8
# Z_JJ of a block this wide uses BLAS whatever r (the roots of the elimination tree have r = 0)
_BLAS_MIN_JJ = 16


class SelectedInverseError(RuntimeError):
    """The Cholesky factor handed to the selected inversion is malformed."""


def _as_index32(indices: np.ndarray) -> np.ndarray:
    """Row indices as contiguous int32 (one compiled specialisation; rows < n < 2³¹)."""
    return np.ascontiguousarray(indices, dtype=np.int32)


_BLAS_LOCK = threading.Lock()
_blas_state: dict[str, Any] = {"controller": None, "depth": 0, "limiter": None}


def reset_blas_limiter() -> None:
    """In a forked child, which has none of the parent's threads: a new lock, and the BLAS
    limiter's bookkeeping reset."""
    global _BLAS_LOCK  # noqa: PLW0603 - the parent's lock may be held by a thread the child lacks
    _BLAS_LOCK = threading.Lock()
    _blas_state.update(depth=0, limiter=None)
    try:  # threadpoolctl lets one thread control OpenBLAS: maybe one the child lacks
        from threadpoolctl import OpenBLASController  # noqa: PLC0415 - optional

        OpenBLASController.clear_controlling_thread(force=True)
    except (ImportError, AttributeError):  # pragma: no cover - older or no threadpoolctl
        pass


@contextlib.contextmanager
def single_blas_thread() -> Iterator[None]:
    """Limit BLAS (OpenBLAS, MKL...) to one thread; re-entrant and safe across threads."""
    try:
        from threadpoolctl import ThreadpoolController  # noqa: PLC0415 - optional
    except ImportError:  # pragma: no cover - depends on the installation
        yield
        return
    with _BLAS_LOCK:
        if _blas_state["controller"] is None:
            import scipy.linalg.cython_blas  # noqa: F401, PLC0415 - load the BLAS numba calls

            _blas_state["controller"] = ThreadpoolController()
        if _blas_state["depth"] == 0:
            _blas_state["limiter"] = _blas_state["controller"].limit(limits=1, user_api="blas")
        _blas_state["depth"] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _blas_state["depth"] -= 1
            if _blas_state["depth"] == 0:
                _blas_state["limiter"].restore_original_limits()
                _blas_state["limiter"] = None


def _raise_for(status: int) -> None:
    if status != _OK:
        raise SelectedInverseError(_MESSAGES.get(status, f"unknown status {status}"))


@numba.njit(cache=True)
def _supernode_starts(indptr, indices):  # pragma: no cover - compiled
    n = indptr.shape[0] - 1
    starts = np.empty(n + 1, dtype=np.int64)
    ns = 0
    for j in range(n):
        new = True
        if j > 0:
            cprev = indptr[j] - indptr[j - 1]
            ccur = indptr[j + 1] - indptr[j]
            # col j-1 = {j-1, j} ∪ struct(col j) ⇔ same count + 1 and second row is j
            if cprev == ccur + 1 and indices[indptr[j - 1] + 1] == j:
                new = False
        if new:
            starts[ns] = j
            ns += 1
    starts[ns] = n
    return starts[: ns + 1].copy()


def supernodes(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Partition the columns of a CSC factor into supernodes.

    Args:
        indptr: Column pointers of ``L``, shape ``(n + 1,)``.
        indices: Sorted row indices of ``L`` with the diagonal first, shape ``(nnz(L),)``.

    Returns:
        ``starts``, shape ``(n_super + 1,)``: supernode ``t`` holds columns
        ``starts[t] .. starts[t + 1] - 1``, which share their off-diagonal rows.

    Cost: ``O(n)``.
    """
    return _supernode_starts(np.ascontiguousarray(indptr, np.int64), _as_index32(indices))


@numba.njit(cache=True, nogil=True)
def _tri_inv(ld):  # pragma: no cover - compiled
    """Inverse of a dense lower-triangular matrix (blocked; BLAS for the off-diagonal blocks)."""
    s = ld.shape[0]
    x = np.zeros((s, s))
    nb = 32
    for k0 in range(0, s, nb):
        k1 = min(k0 + nb, s)
        # diagonal block: forward substitution
        for c in range(k0, k1):
            x[c, c] = 1.0 / ld[c, c]
            for t in range(c + 1, k1):
                acc = 0.0
                for q in range(c, t):
                    acc += ld[t, q] * x[q, c]
                x[t, c] = -acc / ld[t, t]
        if k0 > 0:
            # X[K, :K] = −X[K, K] (L[K, :K] X[:K, :K])
            lk = np.ascontiguousarray(ld[k0:k1, :k0])
            xk = np.ascontiguousarray(x[:k0, :k0])
            tmp = np.dot(lk, xk)
            xkk = np.ascontiguousarray(x[k0:k1, k0:k1])
            x[k0:k1, :k0] = -np.dot(xkk, tmp)
    return x


@numba.njit(cache=True, nogil=True)
def _takahashi_kernel(indptr, indices, data, starts, z):  # pragma: no cover - compiled
    nsup = starts.shape[0] - 1
    for sn in range(nsup - 1, -1, -1):
        f = starts[sn]
        s = starts[sn + 1] - f
        p0 = indptr[f]
        r = indptr[f + 1] - p0 - s
        # ---- L_JJ (s × s, lower) and L_RJ (r × s) ----
        ld = np.zeros((s, s))
        lr = np.empty((r, s))
        for c in range(s):
            pc = indptr[f + c]
            if indices[pc] != f + c or not data[pc] > 0.0:
                return _BAD_DIAGONAL
            for t in range(c, s):
                ld[t, c] = data[pc + t - c]
            for a in range(r):
                lr[a, c] = data[pc + s - c + a]
        use_blas = s >= _BLAS_MIN_S and r >= _BLAS_MIN_R
        # ---- Linv = L_JJ⁻¹ and W = L_RJ L_JJ⁻¹ ----
        if s == 1:
            linv = np.empty((1, 1))
            linv[0, 0] = 1.0 / ld[0, 0]
            w = lr * linv[0, 0]
        else:
            linv = _tri_inv(ld)
            if use_blas:
                w = np.dot(lr, linv)
            else:
                w = np.zeros((r, s))
                for a in range(r):
                    for q in range(s):
                        lq = lr[a, q]
                        for c in range(q + 1):
                            w[a, c] += lq * linv[q, c]
        # ---- Y = Z_RR W: Z_RR is read from ancestor columns of z ----
        zrr = np.empty((r, r)) if use_blas else np.empty((0, 0))
        y = np.zeros((r, s))
        for a in range(r):
            k = indices[p0 + s + a]
            q = indptr[k]
            qend = indptr[k + 1]
            zkk = z[q]
            q += 1
            if use_blas:
                zrr[a, a] = zkk
            else:
                for c in range(s):
                    y[a, c] += zkk * w[a, c]
            for t in range(a + 1, r):
                target = indices[p0 + s + t]
                while q < qend and indices[q] < target:
                    q += 1
                if q == qend or indices[q] != target:
                    return _MISSING_ENTRY
                zv = z[q]
                q += 1
                if use_blas:
                    zrr[t, a] = zv
                    zrr[a, t] = zv
                else:
                    for c in range(s):
                        y[t, c] += zv * w[a, c]
                        y[a, c] += zv * w[t, c]
        if use_blas:
            y = np.dot(zrr, w)
        # ---- Z_JJ = Linv Linvᵀ... (lower part): Linvᵀ Linv + Wᵀ Y ----
        if use_blas:
            zjj = np.dot(linv.T, linv) + np.dot(w.T, y)
        elif s >= _BLAS_MIN_JJ:  # a root block (r = 0): its s³ loop would dominate the cost
            zjj = np.dot(np.ascontiguousarray(linv.T), linv)
            if r > 0:
                zjj += np.dot(np.ascontiguousarray(w.T), y)
        else:
            zjj = np.zeros((s, s))
            for c in range(s):
                for t in range(c, s):
                    acc = 0.0
                    for q in range(t, s):
                        acc += linv[q, t] * linv[q, c]
                    for a in range(r):
                        acc += w[a, t] * y[a, c]
                    zjj[t, c] = acc
        # ---- write back: column f + c holds rows f + c .. f + s − 1, then R ----
        for c in range(s):
            pc = indptr[f + c]
            for t in range(c, s):
                z[pc + t - c] = zjj[t, c]
            for a in range(r):
                z[pc + s - c + a] = -y[a, c]
    return _OK


def takahashi(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Selected inverse ``Z = (L Lᵀ)⁻¹`` on the pattern of ``L`` (docs/sparse_vjp.md, selected
    inversion).

    Args:
        indptr: Column pointers of the lower-triangular factor ``L``, shape ``(n + 1,)``.
        indices: Row indices, sorted within each column, diagonal first, shape ``(nnz(L),)``.
            The pattern must be the full symbolic pattern of a Cholesky factor (closed under
            elimination), explicit zeros included, as CHOLMOD stores it.
        data: Values of ``L`` (``L Lᵀ`` form, positive diagonal), shape ``(nnz(L),)``.

    Returns:
        ``z``, shape ``(nnz(L),)``: ``z[p] = Z[indices[p], col(p)]``, the lower triangle of
        ``(L Lᵀ)⁻¹`` on the pattern of ``L`` (the upper triangle follows by symmetry).

    Raises:
        SelectedInverseError: The pattern is not closed or a diagonal entry is not positive.

    Cost: about one numeric factorisation (``Σ_J 2 r² s + 3 s³`` flops over supernodes);
    memory ``nnz(L)`` plus one dense block ``r × r``.
    """
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = _as_index32(indices)
    data = np.ascontiguousarray(data, dtype=np.float64)
    starts = _supernode_starts(indptr, indices)
    z = np.empty_like(data)
    with single_blas_thread():
        status = _takahashi_kernel(indptr, indices, data, starts, z)
    _raise_for(status)
    return z


@numba.njit(cache=True, nogil=True)
def _gather_kernel(indptr, indices, z, rows, cols, out):  # pragma: no cover - compiled
    for e in range(rows.shape[0]):
        a = rows[e]
        b = cols[e]
        if a < b:
            a, b = b, a
        lo = indptr[b]
        hi = indptr[b + 1]
        while lo < hi:  # binary search for row a in column b
            mid = (lo + hi) // 2
            if indices[mid] < a:
                lo = mid + 1
            else:
                hi = mid
        if lo == indptr[b + 1] or indices[lo] != a:
            return _NOT_FOUND
        out[e] = z[lo]
    return _OK


def gather_on_pattern(
    indptr: np.ndarray,
    indices: np.ndarray,
    z: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
) -> np.ndarray:
    """Read entries ``Z[rows[e], cols[e]]`` of a symmetric matrix stored on ``L``'s pattern.

    Args:
        indptr, indices: Pattern of the lower-triangular factor, as for :func:`takahashi`.
        z: Values on that pattern, shape ``(nnz(L),)`` (output of :func:`takahashi`).
        rows, cols: Entries wanted (either triangle), in the factor's (permuted) ordering,
            shape ``(m,)`` each.

    Returns:
        Values, shape ``(m,)``.

    Raises:
        SelectedInverseError: An entry is not on the pattern of ``L + Lᵀ``.

    Cost: ``O(m log(max column count))``.
    """
    out = np.empty(len(rows), dtype=np.float64)
    status = _gather_kernel(
        np.ascontiguousarray(indptr, dtype=np.int64),
        _as_index32(indices),
        np.ascontiguousarray(z, dtype=np.float64),
        np.ascontiguousarray(rows, dtype=np.int64),
        np.ascontiguousarray(cols, dtype=np.int64),
        out,
    )
    _raise_for(status)
    return out
