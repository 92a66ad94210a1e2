"""Scaling and wavelet functions of the Daubechies family, evaluated at points (docs/wavelets.md,
basis).

A multiresolution analysis (thesis Def. 4.2) supplies a scaling function v and a wavelet w. For
``dbp`` (p vanishing moments, thesis §4.3.0.9) both are supported on [0, 2p − 1]:

- **Haar** (``"haar"`` = ``"db1"``, p = 1) in closed form, half-open: v = 1 on [0, 1);
  w = +1 on [0, ½) and −1 on [½, 1).
- **db2–db8** have no closed form. PyWavelets' filters are run through the cascade algorithm
  (``pywt.Wavelet(name).wavefun(level=L)``) once, giving v and w on the dyadic grid k·2^{-L},
  k = 0 … (2p − 1)·2^L. Points in between are linearly interpolated; outside the support both
  functions are 0 (thesis §4.3.0.8).

The functions here are the *unit-amplitude* mother functions: ∫v = 1, ∫v² = ∫w² = 1, ∫w = 0,
and {v(· − t)} ∪ {w(· − t)}, t ∈ Z, are orthonormal (tested, docs/tests.md T18). Scaled copies are
built in :mod:`geogp.features.wavelet`.

Example:
    >>> import numpy as np
    >>> table = wavelet_table("haar")
    >>> table.scaling(np.array([-0.5, 0.25, 1.0])).tolist()
    [0.0, 1.0, 0.0]
    >>> table.wavelet(np.array([0.25, 0.75])).tolist()
    [1.0, -1.0]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pywt

from geogp.exceptions import InputError

__all__ = ["FAMILIES", "WaveletTable", "wavelet_table", "canonical_family"]

#: Families accepted by geogp (``"haar"`` and ``"db1"`` are the same wavelet).
FAMILIES = ("haar", "db1", "db2", "db3", "db4", "db5", "db6", "db7", "db8")

_DEFAULT_LEVEL = 12


def canonical_family(family: str) -> tuple[str, int]:
    """Return ``(name, p)``: the PyWavelets name and the number of vanishing moments.

    Raises:
        InputError: for a family other than those in :data:`FAMILIES`.
    """
    name = str(family).strip().lower()
    if name == "haar":
        name = "db1"
    m = re.fullmatch(r"db(\d+)", name)
    if m is None or not 1 <= int(m.group(1)) <= 8:
        raise InputError(
            f"unknown wavelet family {family!r}; expected one of {', '.join(FAMILIES)} "
            "(Daubechies dbp, p = 1..8; 'haar' is db1)."
        )
    return name, int(m.group(1))


@dataclass(frozen=True, eq=False)
class WaveletTable:
    """Point evaluation of the scaling function v and wavelet w of one family.

    Attributes:
        family: PyWavelets name, ``"db1"`` … ``"db8"``.
        p: number of vanishing moments; the support of v and w is [0, 2p − 1].
        level: cascade level L of the table (grid step 2^{-L}); 0 for the closed-form Haar.
        phi, psi: (support·2^L + 1,) tabulated v and w on the grid k·2^{-L} (empty for Haar).
    """

    family: str
    p: int
    level: int
    phi: np.ndarray = field(repr=False)
    psi: np.ndarray = field(repr=False)

    @property
    def support(self) -> int:
        """Support width 2p − 1 of v and w (in units of the function's own scale)."""
        return 2 * self.p - 1

    def scaling(self, u: np.ndarray) -> np.ndarray:
        """v(u) for an array u of any shape. Cost O(size of u)."""
        u = np.asarray(u, dtype=np.float64)
        if self.p == 1:
            return ((u >= 0.0) & (u < 1.0)).astype(np.float64)
        return self._interp(self.phi, u)

    def wavelet(self, u: np.ndarray) -> np.ndarray:
        """w(u) for an array u of any shape. Cost O(size of u)."""
        u = np.asarray(u, dtype=np.float64)
        if self.p == 1:
            return np.where((u >= 0.0) & (u < 0.5), 1.0, 0.0) - np.where(
                (u >= 0.5) & (u < 1.0), 1.0, 0.0
            )
        return self._interp(self.psi, u)

    def _interp(self, values: np.ndarray, u: np.ndarray) -> np.ndarray:
        # uniform grid: index arithmetic instead of np.interp's binary search
        s = u * float(2**self.level)
        inside = (s >= 0.0) & (s <= values.size - 1)
        s = np.where(inside, s, 0.0)
        i = np.minimum(np.floor(s).astype(np.int64), values.size - 2)
        frac = s - i
        out = values[i] * (1.0 - frac) + values[i + 1] * frac
        return np.where(inside, out, 0.0)


@lru_cache(maxsize=32)
def _cached_table(name: str, p: int, level: int) -> WaveletTable:
    if p == 1:
        empty = np.zeros(0)
        return WaveletTable(name, 1, 0, empty, empty)
    phi, psi, x = pywt.Wavelet(name).wavefun(level=level)
    n = (2 * p - 1) * 2**level + 1
    if len(x) != n or x[0] != 0.0 or x[-1] != 2 * p - 1:  # pragma: no cover - pywt contract
        raise RuntimeError(f"unexpected PyWavelets grid for {name} at level {level}.")
    phi = np.asarray(phi, dtype=np.float64).copy()
    psi = np.asarray(psi, dtype=np.float64).copy()
    phi.flags.writeable = False
    psi.flags.writeable = False
    return WaveletTable(name, p, level, phi, psi)


def wavelet_table(family: str = "db4", level: int = _DEFAULT_LEVEL) -> WaveletTable:
    """Tabulate the family's scaling function and wavelet (cached).

    Args:
        family: ``"haar"`` or ``"db1"`` … ``"db8"``.
        level: cascade level L ≥ 10 (docs/wavelets.md (basis); default 12); ignored for Haar.

    Returns:
        A :class:`WaveletTable`.

    Cost: O((2p − 1)·2^L) once per (family, level); later calls hit a cache.
    """
    name, p = canonical_family(family)
    level = int(level)
    if p > 1 and not 10 <= level <= 20:
        raise InputError(
            f"cascade level must be between 10 and 20 (docs/wavelets.md, basis); got {level}. "
            "The default 12 gives interpolation errors far below the model's noise."
        )
    return _cached_table(name, p, level if p > 1 else 0)
