"""Fixed sparsity pattern of a symmetric matrix, stored as its lower triangle (docs/sparse_vjp.md,
adjoint).

A :class:`SparsePattern` is made once (at precompute) and reused for every evaluation of the
objective while the values change with the hyperparameters. It holds only indices; the CHOLMOD
symbolic analysis attached to it lives in :mod:`geogp.linalg.cholmod` (cached per pattern).

Storage convention (a) of docs/sparse_vjp.md (adjoint): ``values[e]`` is entry
``(rows[e], cols[e])`` with ``rows[e] ≥ cols[e]``, every diagonal entry is present, entries are in
CSC order (by column, then row), and the symmetric matrix is ``B = tril + trilᵀ − diag``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from geogp.exceptions import InputError

__all__ = ["SparsePattern"]


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


class SparsePattern:
    """Lower triangle (with diagonal) of a fixed ``n × n`` symmetric sparsity pattern.

    Build with :meth:`from_scipy` or :meth:`from_coo`. Instances are immutable and hash by
    identity, so they can be closed over or passed as a static argument under ``jax.jit``.

    Attributes:
        n: Matrix size.
        rows: Row index of each stored entry, int64, shape ``(nnz,)``; ``rows ≥ cols``.
        cols: Column index of each stored entry, int64, shape ``(nnz,)``.
        nnz: Number of stored entries (lower triangle including the diagonal).
        indptr: CSC column pointers of the lower triangle, int64, shape ``(n + 1,)``.
        diag_index: Position of each diagonal entry in ``values``, int64, shape ``(n,)``.

    Example:
        >>> import numpy as np
        >>> p = SparsePattern.from_coo(np.array([1]), np.array([0]), 2)
        >>> p.rows.tolist(), p.cols.tolist()
        ([0, 1, 1], [0, 0, 1])
    """

    __slots__ = ("_cache", "_keys", "cols", "diag_index", "indptr", "n", "nnz", "rows")

    def __init__(self, rows: np.ndarray, cols: np.ndarray, n: int) -> None:
        """Store a canonical pattern; use :meth:`from_coo` or :meth:`from_scipy` instead."""
        self.n = int(n)
        self.rows = _readonly(np.asarray(rows, dtype=np.int64))
        self.cols = _readonly(np.asarray(cols, dtype=np.int64))
        self.nnz = int(self.rows.shape[0])
        counts = np.bincount(self.cols, minlength=self.n)
        self.indptr = _readonly(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
        self._keys = _readonly(self.cols * self.n + self.rows)  # sorted: CSC order
        self.diag_index = _readonly(self.indptr[:-1].copy())  # diagonal is first in a column
        self._cache: dict[Any, Any] = {}

    # ------------------------------------------------------------------ constructors
    def without_cache(self) -> SparsePattern:
        """The same pattern, sharing its read-only arrays, without the analyses cached on it:
        holding it keeps no factor alive."""
        out = object.__new__(SparsePattern)
        for name in self.__slots__:
            setattr(out, name, getattr(self, name))
        out._cache = {}
        return out

    @classmethod
    def from_coo(cls, rows: np.ndarray, cols: np.ndarray, n: int) -> SparsePattern:
        """Pattern from coordinates (either triangle; duplicates allowed); adds the diagonal.

        Args:
            rows: Row indices, shape ``(m,)``.
            cols: Column indices, shape ``(m,)``.
            n: Matrix size.

        Returns:
            The pattern of ``{(max(i, j), min(i, j))} ∪ diag``, in CSC order.

        Cost: ``O((m + n) log(m + n))``.
        """
        rows = np.asarray(rows).ravel()
        cols = np.asarray(cols).ravel()
        n = int(n)
        if rows.shape != cols.shape:
            raise InputError(
                f"rows and cols must have the same length, got {rows.shape[0]} and {cols.shape[0]}."
            )
        if n < 1:
            raise InputError(f"Expected a matrix size n ≥ 1, got n={n}.")
        if rows.size and (min(rows.min(), cols.min()) < 0 or max(rows.max(), cols.max()) >= n):
            raise InputError(f"Indices must lie in [0, {n}); got values outside that range.")
        lo = np.minimum(rows, cols).astype(np.int64)
        hi = np.maximum(rows, cols).astype(np.int64)
        diag = np.arange(n, dtype=np.int64)
        keys = _sorted_unique(np.concatenate([lo * n + hi, diag * n + diag]))
        return cls(keys % n, keys // n, n)

    @classmethod
    def from_scipy(cls, matrix: Any) -> SparsePattern:
        """Pattern of ``tril(A) ∪ diag`` for any square scipy sparse matrix or array.

        Explicitly stored zeros count as part of the pattern (a placeholder such as
        ``G + I`` with the right structure is enough).

        Args:
            matrix: Square sparse matrix, shape ``(n, n)``.

        Returns:
            The pattern.

        Cost: ``O(nnz log nnz)``.
        """
        coo = _square_coo(matrix)
        keep = coo.row >= coo.col
        return cls.from_coo(coo.row[keep], coo.col[keep], coo.shape[0])

    # ------------------------------------------------------------------ values
    def values_from_scipy(self, matrix: Any) -> np.ndarray:
        """Values of ``tril(A)`` in this pattern's order (duplicates summed; missing = 0).

        Args:
            matrix: Square sparse matrix, shape ``(n, n)``, whose lower triangle lies on the
                pattern.

        Returns:
            float64 values, shape ``(nnz,)``.

        Raises:
            InputError: ``A`` has the wrong size, or a lower-triangle entry off the pattern.
        """
        coo = _square_coo(matrix)
        if coo.shape[0] != self.n:
            raise InputError(f"Expected a {self.n}×{self.n} matrix, got {coo.shape}.")
        keep = coo.row >= coo.col
        keys = coo.col[keep].astype(np.int64) * self.n + coo.row[keep]
        pos = self.positions_of_keys(keys)
        out = np.zeros(self.nnz, dtype=np.float64)
        np.add.at(out, pos, np.asarray(coo.data[keep], dtype=np.float64))
        return out

    def positions_of_keys(self, keys: np.ndarray) -> np.ndarray:
        """Position in ``values`` of lower-triangle entries given as ``col * n + row``."""
        pos = np.searchsorted(self._keys, keys)
        pos_c = np.minimum(pos, self.nnz - 1)
        if not np.all(self._keys[pos_c] == keys):
            bad = int(np.flatnonzero(self._keys[pos_c] != keys)[0])
            i, j = int(keys[bad] % self.n), int(keys[bad] // self.n)
            raise InputError(
                f"Entry ({i}, {j}) is not on the sparsity pattern. Build the pattern from a "
                "matrix whose structure contains every entry (SparsePattern.from_scipy)."
            )
        return pos_c

    def to_scipy(self, values: Any) -> sp.csc_matrix:
        """Full symmetric matrix ``B = tril + trilᵀ − diag`` as CSC.

        Args:
            values: Values on the pattern, shape ``(nnz,)``.

        Returns:
            ``scipy.sparse.csc_matrix`` of shape ``(n, n)``.
        """
        low = self.to_scipy_lower(values)
        full = low + low.T - sp.diags(low.diagonal())
        return sp.csc_matrix(full)

    def to_scipy_lower(self, values: Any, index_dtype: Any = np.int32) -> sp.csc_matrix:
        """Lower triangle (with diagonal) as CSC with sorted indices, no copy of ``values``.

        Args:
            values: Values on the pattern, shape ``(nnz,)``.
            index_dtype: Integer type of ``indices`` / ``indptr`` (int32 for CHOLMOD).

        Returns:
            ``scipy.sparse.csc_matrix`` of shape ``(n, n)`` whose ``data`` is ``values``.
        """
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (self.nnz,):
            raise InputError(f"Expected values of shape ({self.nnz},), got {values.shape}.")
        key = ("lower_index", np.dtype(index_dtype).str)
        if key not in self._cache:
            self._cache[key] = (
                _readonly(self.indptr.astype(index_dtype)),
                _readonly(self.rows.astype(index_dtype)),
            )
        indptr, indices = self._cache[key]
        mat = sp.csc_matrix((self.n, self.n), dtype=np.float64)
        # Assign the arrays directly: the constructor would copy and re-check them.
        mat.indptr, mat.indices, mat.data = indptr, indices, values
        mat.has_sorted_indices = True
        return mat

    def release_factors(self) -> None:
        """Free the numeric factors cached on this pattern (they are refactorised on their
        next use): for patterns that compiled functions keep alive after their last use."""
        for state in list(self._cache.values()):
            release = getattr(state, "release", None)
            if callable(release):
                release()

    def __reduce__(self) -> tuple[Any, ...]:
        # Indices only: the cache (CHOLMOD analysis, locks) is rebuilt where it is unpickled.
        return (SparsePattern, (np.array(self.rows), np.array(self.cols), self.n))

    def __repr__(self) -> str:
        return f"SparsePattern(n={self.n}, nnz={self.nnz})"


def _square_coo(matrix: Any) -> sp.coo_matrix:
    if not sp.issparse(matrix):
        raise InputError(
            f"Expected a scipy sparse matrix, got {type(matrix).__name__}. Wrap dense input "
            "with scipy.sparse.csc_matrix(...)."
        )
    coo = sp.coo_matrix(matrix)
    if coo.shape[0] != coo.shape[1]:
        raise InputError(f"Expected a square matrix, got shape {coo.shape}.")
    return coo


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """``np.unique(keys)`` for a 1-D integer array, by one sort. numpy 2.4's ``np.unique``
    takes a hash-based route that is far slower on the 10⁷ int64 keys of a lattice pattern
    (benchmarks/README.md, design measurements)."""
    keys = np.sort(keys)
    if keys.size < 2:
        return keys
    first = np.empty(keys.size, dtype=bool)
    first[0] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    return keys[first]
