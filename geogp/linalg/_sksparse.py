"""Adapter over scikit-sparse 0.4.x and 0.5.x CHOLMOD bindings (docs/sparse_vjp.md, backends).

The two series name everything differently:

- symbolic analysis: 0.4 ``analyze(A, mode=, ordering_method=)``;
  0.5 ``CholeskyFactor(A, lower=, order=, supernodal_mode=)``.
- numeric factorisation: 0.4 ``Factor.cholesky_inplace(A)``; 0.5 ``.factorize(A)``.
- solve ``A x = b``: 0.4 ``Factor.solve_A(b)``; 0.5 ``.solve(b)`` (``system="A"`` is passed
  when the installed version accepts it).
- permutation: 0.4 ``Factor.P()``; 0.5 ``.perm``.
- factor ``L``: 0.4 ``Factor.L()`` (a copy converted to LLᵀ, explicit zeros kept); 0.5 the
  ``.factor`` view (LLᵀ, or LD which the adapter rescales to LLᵀ).
- pivots for the positive-definiteness check: 0.4 ``Factor.D()`` (``diag(L)²`` or ``D``);
  0.5 the diagonal of ``.factor``.

:class:`CholmodBackend` hides the difference. Both adapters pass the triangle (lower) and the
ordering explicitly, never use a version's default, and check that the permutation they get
back is a permutation (and the identity for ``"natural"``). 0.5.x needs SuiteSparse ≥ 7.4, so
it cannot be built against Debian 12's SuiteSparse 5.12; its adapter is tested with a mock that
mimics its API (``tests/linalg/test_cholmod_adapter.py``).

Not positive definite: CHOLMOD's simplicial LDLᵀ mode does not fail on an indefinite matrix
(``logdet()`` is NaN with a runtime warning), while the supernodal mode raises.
:meth:`CholmodBackend.factorize` turns both into ``False`` by checking ``diag(L) > 0``
(``D > 0``) itself; it never raises for a matrix that is merely not positive definite.
"""

from __future__ import annotations

import inspect
import warnings
from abc import ABC, abstractmethod
from types import ModuleType
from typing import Any

import numpy as np
import scipy.sparse as sp

from geogp.exceptions import GeogpError
from geogp.linalg.pattern import SparsePattern

__all__ = ["CholmodBackend", "CholmodBackend04", "CholmodBackend05", "make_backend", "ORDERINGS"]

ORDERINGS = ("amd", "metis", "nesdis", "natural", "colamd")
MODES = ("auto", "simplicial", "supernodal")


class CholmodBackendError(GeogpError, RuntimeError):
    """The CHOLMOD binding returned something the adapter cannot use."""


def _is_not_pd_error(exc: BaseException) -> bool:
    return "NotPositiveDefinite" in type(exc).__name__


def _valid_permutation(perm: Any, n: int, ordering: str) -> np.ndarray:
    perm = np.array(perm, dtype=np.int64).ravel()  # copy: views die with the factor
    if perm.shape != (n,) or not np.array_equal(np.sort(perm), np.arange(n)):
        raise CholmodBackendError(
            f"CHOLMOD returned an invalid permutation for ordering={ordering!r} (expected a "
            f"permutation of 0..{n - 1}, got {perm.shape[0]} entries). Check the scikit-sparse "
            "installation, or use ordering='natural'."
        )
    if ordering == "natural" and not np.array_equal(perm, np.arange(n)):
        raise CholmodBackendError(
            "CHOLMOD returned a non-identity permutation for ordering='natural'."
        )
    return perm


class CholmodBackend(ABC):
    """One symbolic analysis of a pattern, then any number of numeric factorisations.

    Not thread-safe: the factor is mutated by :meth:`factorize`. Callers hold a lock.

    Attributes:
        pattern: The sparsity pattern analysed.
        ordering: Fill-reducing ordering (``"amd"``, ``"metis"``, ``"natural"``, ...).
        mode: ``"auto"``, ``"simplicial"`` or ``"supernodal"``.
        perm: Validated permutation ``p`` with ``L Lᵀ = B[p][:, p]``, shape ``(n,)``.
        n_analyses: Number of symbolic analyses performed (1 after construction).
        n_factorizations: Number of numeric factorisations performed.
    """

    def __init__(self, module: ModuleType, pattern: SparsePattern, ordering: str, mode: str):
        if ordering not in ORDERINGS:
            raise ValueError(f"Expected ordering in {ORDERINGS}, got {ordering!r}.")
        if mode not in MODES:
            raise ValueError(f"Expected mode in {MODES}, got {mode!r}.")
        self.module = module
        self.pattern = pattern
        self.ordering = ordering
        self.mode = mode
        self.n_analyses = 0
        self.n_factorizations = 0
        self._positive = False
        self._diag = np.empty(0)
        self._released = False
        self.perm = self.analyze(pattern)

    def _placeholder(self) -> sp.csc_matrix:
        # Values are irrelevant to the analysis; the pattern (lower triangle) is what counts.
        return self.pattern.to_scipy_lower(np.ones(self.pattern.nnz))

    @abstractmethod
    def analyze(self, pattern: SparsePattern) -> np.ndarray:
        """Symbolic analysis with the fill-reducing ordering; returns the checked permutation."""

    @abstractmethod
    def _factorize(self, lower: sp.csc_matrix) -> np.ndarray:
        """Numeric factorisation; returns diag(D) of ``L D Lᵀ`` (``diag(L)²`` for LLᵀ)."""

    @abstractmethod
    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``B⁻¹ b`` for ``b`` of shape ``(n,)`` or ``(n, k)`` (same shape out)."""

    @abstractmethod
    def factor_and_perm(self) -> tuple[sp.csc_matrix, np.ndarray]:
        """``(L, p)``: lower CSC factor in LLᵀ form (full symbolic pattern), permutation."""

    def factorize(self, values: np.ndarray) -> bool:
        """Numeric factorisation of ``B`` given its values on the pattern.

        Args:
            values: float64, shape ``(nnz,)``, storage convention (a) of docs/sparse_vjp.md
            (adjoint).

        Returns:
            True when ``B`` is positive definite (every pivot finite and > 0), else False.
        """
        lower = self.pattern.to_scipy_lower(values)
        if self._released:  # analyse again (the same ordering, checked)
            perm = self.analyze(self.pattern)
            if not np.array_equal(perm, self.perm):
                raise CholmodBackendError("the re-analysis of a released factor gave another "
                                          "permutation.")
            self._released = False
        self.n_factorizations += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                diag = np.asarray(self._factorize(lower), dtype=np.float64)
        except Exception as exc:  # CHOLMOD errors are mapped to "not PD"
            if not _is_not_pd_error(exc):
                raise
            self._positive, self._diag = False, np.empty(0)
            return False
        self._diag = diag
        self._positive = bool(np.all(np.isfinite(diag)) and np.all(diag > 0.0))
        return self._positive

    def release(self) -> None:
        """Free the factor (numeric and symbolic); the next :meth:`factorize` analyses the
        pattern again."""
        self._factor, self._released = None, True
        self._positive, self._diag = False, np.empty(0)

    @property
    def positive_definite(self) -> bool:
        """Whether the last factorisation found ``B`` positive definite."""
        return self._positive

    def first_bad_pivot(self) -> int:
        """Index (in factor order) of the first non-positive pivot, or -1."""
        bad = np.flatnonzero(~(np.isfinite(self._diag) & (self._diag > 0.0)))
        return int(bad[0]) if bad.size else -1

    def logdet(self) -> float:
        """``log|B| = Σ log D_jj`` of the last (positive definite) factorisation."""
        if not self._positive:
            return float("nan")
        return float(np.sum(np.log(self._diag)))


class CholmodBackend04(CholmodBackend):
    """scikit-sparse 0.4.x: ``analyze`` / ``Factor.cholesky_inplace``."""

    def analyze(self, pattern: SparsePattern) -> np.ndarray:
        """See :meth:`CholmodBackend.analyze`."""
        self._factor = self.module.analyze(
            self._placeholder(), mode=self.mode, ordering_method=self.ordering
        )
        self.n_analyses += 1
        return _valid_permutation(self._factor.P(), pattern.n, self.ordering)

    def _factorize(self, lower: sp.csc_matrix) -> np.ndarray:
        self._factor.cholesky_inplace(lower)  # reads the lower triangle (stype = −1)
        return self._factor.D()

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """See :meth:`CholmodBackend.solve`."""
        return np.asarray(self._factor.solve_A(rhs), dtype=np.float64).reshape(rhs.shape)

    def factor_and_perm(self) -> tuple[sp.csc_matrix, np.ndarray]:
        """See :meth:`CholmodBackend.factor_and_perm`."""
        # Factor.L() converts a copy to LLᵀ; explicit zeros of the symbolic pattern are kept.
        return self._factor.L(), self.perm


class CholmodBackend05(CholmodBackend):
    """scikit-sparse 0.5.x: ``CholeskyFactor(A, lower=, order=, supernodal_mode=)``."""

    def analyze(self, pattern: SparsePattern) -> np.ndarray:
        """See :meth:`CholmodBackend.analyze`."""
        self._factor = self.module.CholeskyFactor(
            self._placeholder(), lower=True, order=self.ordering, supernodal_mode=self.mode
        )
        self.n_analyses += 1
        solve_params = inspect.signature(self._factor.solve).parameters
        self._solve_kwargs = {"system": "A"} if "system" in solve_params else {}
        return _valid_permutation(self._factor.perm, pattern.n, self.ordering)

    def _factorize(self, lower: sp.csc_matrix) -> np.ndarray:
        self._factor.factorize(lower)
        # `factor` is a view: LLᵀ (lower) or the combined LD (unit L below, D on the diagonal).
        diag = np.asarray(self._factor.factor.diagonal(), dtype=np.float64)
        return diag**2 if self._factor.is_ll else diag

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """See :meth:`CholmodBackend.solve`."""
        out = self._factor.solve(np.asarray(rhs, dtype=np.float64), **self._solve_kwargs)
        return np.asarray(out, dtype=np.float64).reshape(rhs.shape)

    def factor_and_perm(self) -> tuple[sp.csc_matrix, np.ndarray]:
        """See :meth:`CholmodBackend.factor_and_perm`."""
        view = sp.csc_matrix(self._factor.factor, copy=True)  # keeps explicit zeros
        view.sort_indices()
        if not self._factor.is_ll:  # LD form → L_ll[:, j] = L_unit[:, j] √D_j, diag √D_j
            d = view.diagonal()
            sqrt_d = np.sqrt(d)
            view.setdiag(1.0)
            view = sp.csc_matrix(view @ sp.diags(sqrt_d))
        return view, self.perm


def make_backend(
    pattern: SparsePattern,
    ordering: str = "amd",
    mode: str = "auto",
    module: ModuleType | None = None,
) -> CholmodBackend:
    """Analyse a pattern with whichever scikit-sparse API is installed (or given).

    Args:
        pattern: Sparsity pattern (lower triangle with diagonal).
        ordering: Fill-reducing ordering: ``"amd"`` (default), ``"metis"``, ``"nesdis"``,
            ``"colamd"`` or ``"natural"``. Always passed explicitly to CHOLMOD.
        mode: ``"auto"``, ``"simplicial"`` or ``"supernodal"``.
        module: A ``sksparse.cholmod``-like module; imported when None.

    Returns:
        A :class:`CholmodBackend` holding the symbolic analysis.

    Raises:
        ImportError: scikit-sparse is not installed.
        CholmodBackendError: The module matches neither API, or returns a bad permutation.

    Cost: one symbolic analysis (ordering + elimination tree + column counts).
    """
    if module is None:
        from sksparse import cholmod as module  # noqa: PLC0415 - optional dependency
    if hasattr(module, "CholeskyFactor"):
        return CholmodBackend05(module, pattern, ordering, mode)
    if hasattr(module, "analyze"):
        return CholmodBackend04(module, pattern, ordering, mode)
    raise CholmodBackendError(
        f"{getattr(module, '__name__', module)!r} has neither CholeskyFactor (scikit-sparse "
        "0.5) nor analyze (scikit-sparse 0.4)."
    )
