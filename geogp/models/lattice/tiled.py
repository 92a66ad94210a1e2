"""The lattice model's posterior, tile by tile (docs/lattice.md, the posterior on tiles).

Pure functions of one tile: a rectangle of the lattice (its *core*) is solved inside a larger
window (core plus a *halo* on every side, plus the model's margin of unobserved cells beyond
the raster's window), and only the core's moments are kept. The GMRF's posterior covariance
B⁻¹ decays over the posterior correlation length, so the core's part of B⁻¹Pᵀ[y, F]/σ² and of
the selected inverse match the whole lattice's to an error that falls off with the halo. The
large-scale and trend coefficients (u, β) stay global: their small dense system is the sum of
the tiles' Gram terms M = Σ_cores [y, F]ᵀ Σ_g⁻¹ [y, F] (Woodbury, restricted to the core's
observations). One tile whose core is the whole lattice is the exact whole-lattice posterior.

:func:`posterior_tiles` lays the tiles out. A tile's sparse work, all at the stage-1 θ, is
done once: :func:`solve_tile` factorises and solves, :func:`core_gram` gives its core's part
of M and :func:`core_state` keeps what its moments need (S_y, F − S_F and the selected
inverse's terms at its cells). Once stage 2 has run on M, :func:`core_moments` gives the
cells' posterior mean, variance and the neighbour covariances that bilinear prediction needs,
with dense work only.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from geogp import linalg
from geogp.models.lattice.gmrf import LatticeProblem, precision
from geogp.models.lattice.mid import mid_lattice, mid_stencil

if TYPE_CHECKING:  # annotations only
    from geogp.linalg.pattern import SparsePattern

__all__ = ["PosteriorTile", "CoreState", "posterior_tiles", "tile_lattice", "in_core",
           "solve_tile", "core_gram", "core_state", "extended_core", "SOLVE_BLOCK",
           "core_moments", "field_covariance", "selected_inverse", "inverse_later"]


class PosteriorTile(NamedTuple):
    """One tile of the posterior.

    Attributes:
        window: (rows, cols) slices of the raster whose cells (and data) the tile's problem
            holds; the problem adds the model's margin around them.
        core: (rows, cols) slices of the whole lattice (margin included) whose moments the
            tile gives; the cores of all tiles partition the lattice.
        offset: the whole lattice's (row, col) of the tile problem's cell (0, 0).
    """

    window: tuple
    core: tuple
    offset: tuple


def posterior_tiles(raster_shape: tuple[int, int], margin: int, core: int | None, halo: int,
                    align: int = 1) -> list[PosteriorTile]:
    """Tiles whose cores partition the lattice (the raster plus ``margin`` cells a side).

    ``core``: the side of a core in cells (None: one tile, the whole lattice). ``halo``: cells
    of data the tile's window reaches beyond its core on every side (clipped to the raster).
    ``align``: window starts are multiples of it (the mid-scale factor, so that each tile's
    coarse lattice is the whole lattice's: its nodes sit at multiples of r).
    """
    m = int(margin)
    lattice = [n + 2 * m for n in raster_shape]
    if core is None or all(core >= n for n in lattice):
        whole = tuple(slice(0, n) for n in raster_shape)
        return [PosteriorTile(whole, tuple(slice(0, n) for n in lattice), (0, 0))]
    core = max(int(core) // align, 1) * align
    halo = -(-int(halo) // align) * align  # rounded up

    def axis(n_raster, n_lattice):
        # cores of (nearly) equal sides up to ``core``, and windows of one length (one pattern
        # and one symbolic analysis for all tiles: an analysis costs about two
        # factorisations): the core and its halos less the margins, ≡ n_raster (mod align)
        # so that the last window, aligned, ends at the raster's end; a window at an edge
        # reaches further into the raster instead
        side = -(-n_lattice // -(-n_lattice // core) // align) * align  # ≤ core
        length = side + 2 * halo - 2 * m
        length = min(length + (n_raster - length) % align, n_raster)
        out = []
        for a in range(0, n_lattice, side):
            b = min(a + side, n_lattice)
            # window [lo, hi) of raster cells; the problem's lattice is [lo, hi + 2m)
            lo = min(max(a - halo, 0), n_raster - length)
            out.append((slice(lo, lo + length), slice(a, b), lo))
        return out

    rows, cols = (axis(nr, nl) for nr, nl in zip(raster_shape, lattice, strict=True))
    return [PosteriorTile((wr, wc), (cr, cc), (oy, ox))
            for wr, cr, oy in rows for wc, cc, ox in cols]


def tile_lattice(tile: PosteriorTile, margin: int) -> tuple[int, int, int, int]:
    """(row0, row1, col0, col1): the tile problem's lattice (its window plus ``margin`` cells a
    side) in whole-lattice cells, rows [row0, row1) and columns [col0, col1)."""
    (wr, wc), (oy, ox), m = tile.window, tile.offset, int(margin)
    return oy, oy + wr.stop - wr.start + 2 * m, ox, ox + wc.stop - wc.start + 2 * m


def in_core(cells: np.ndarray, shape: tuple[int, int], tile: PosteriorTile) -> np.ndarray:
    """Which of the tile lattice's flat ``cells`` (tile lattice of ``shape``) lie in its core."""
    r, c = np.divmod(cells, shape[1])
    (cr, cc), (oy, ox) = tile.core, tile.offset
    return (r + oy >= cr.start) & (r + oy < cr.stop) & (c + ox >= cc.start) & (c + ox < cc.stop)


# right-hand sides per CHOLMOD solve: faster and lighter than all at once (benchmarks/README.md)
SOLVE_BLOCK = 64


def extended_core(shape: tuple[int, int], core: tuple[slice, slice]) -> tuple[int, int, np.ndarray]:
    """(e_y, e_x, cells): the ``core`` of a tile lattice of ``shape`` plus the next row and
    column (clipped to the lattice), and its flat cells in row-major order."""
    (rows, cols), (ny, nx) = core, shape
    ey, ex = min(rows.stop + 1, ny) - rows.start, min(cols.stop + 1, nx) - cols.start
    gy, gx = np.meshgrid(np.arange(ey) + rows.start, np.arange(ex) + cols.start, indexing="ij")
    return ey, ex, (gy * nx + gx).ravel()


def solve_tile(params: dict, problem: LatticeProblem, shape: tuple[int, int],
               mid_factor: int | None, rows: np.ndarray | None = None,
               whole: bool = False) -> tuple[np.ndarray, np.ndarray | None, float, np.ndarray]:
    """The tile's sparse work at the local θ: (S at ``rows``, M, log|Σ_g|, B values).

    S = B⁻¹Pᵀ[y, F]/σ² seen at the cells, (len(rows), 1 + k + p): with the mid-scale level
    (coarsening factor ``mid_factor``; None without it), the fine part plus Π times the
    coarse part. ``rows``: flat cells of the tile lattice (``shape``) whose S is kept (None:
    all, row-major). M = [y, F]ᵀ Σ_g⁻¹ [y, F] and log|Σ_g| of the whole tile only with
    ``whole`` (else None). With CHOLMOD the solve runs on the host, outside JAX, in blocks of
    :data:`SOLVE_BLOCK` columns, so that no compiled function keeps the tile's pattern and
    factor alive and no copies of the (n, 1 + k + p) right-hand sides are made (the same
    numbers as :func:`~geogp.models.lattice.gmrf.sparse_statistics`).
    """
    q, logdet_q, _, noise = precision(params, problem)
    noise = float(noise)
    b_vals, ptw = np.asarray(q + problem.e_obs / noise), np.asarray(problem.ptw)
    n, width = problem.eig.shape[0], ptw.shape[1]
    pi = mid_lattice(shape, mid_factor)[1] if problem.has_mid else None
    if rows is not None and pi is not None:
        pi = pi[rows]

    def at_rows(x):  # S at the kept cells from the solution x of the joint unknowns
        out = x[:n] if rows is None else x[rows]
        return out if pi is None else out + pi @ x[n:]

    m_mat = np.array(problem.wtw, dtype=np.float64) / noise if whole else None
    if problem.solve.backend != "cholmod":  # the dense reference: one solve
        logdet_b, x = problem.solve(problem.pattern, b_vals, ptw / noise)
        x = np.asarray(x)
        if whole:
            m_mat -= ptw.T @ x / noise
        s = at_rows(x)
    else:
        fac = linalg.cholmod.analyze(problem.pattern, ordering=problem.solve.ordering)
        s = np.empty((n if rows is None else len(rows), width))
        for a in range(0, width, SOLVE_BLOCK):
            blk = slice(a, min(a + SOLVE_BLOCK, width))
            logdet_b, x = fac.host_forward(b_vals, np.asfortranarray(ptw[:, blk]))
            if not np.isfinite(logdet_b):
                linalg.cholmod.check_positive_definite(problem.pattern, b_vals,
                                                       ordering=problem.solve.ordering)
            x /= noise
            if whole:
                m_mat[:, blk] -= ptw.T @ x / noise  # rhsᵀ S, rhs = Pᵀ[y, F]/σ²
            s[:, blk] = at_rows(x)
            del x
    logdet_sigma = (float(logdet_b) - float(logdet_q) + problem.n_obs * math.log(noise)
                    - float(problem.log_weight) if whole else None)
    return s, m_mat, logdet_sigma, b_vals


def core_gram(w: np.ndarray, s: np.ndarray, noise: float,
              weight: np.ndarray | None = None) -> np.ndarray:
    """The core's part of M = [y, F]ᵀ Σ_g⁻¹ [y, F]: Σ_i ω_i W_iᵀ (W_i − (A S)_i) / σ² over the
    core's observed cells i, from ``w`` = ω W, W = [y, Φ, X], and ``s`` = A S (the field part
    of S) at those cells. ``noise``: σ². ``weight``: the cells' ω (None: all 1)."""
    unweighted = w if weight is None else w / weight[:, None]
    return (w.T @ unweighted - w.T @ s) / noise


def selected_inverse(problem: LatticeProblem, b_vals: np.ndarray, ordering: str,
                     release: bool = False) -> np.ndarray:
    """B⁻¹ on the problem's pattern (selected inversion, CHOLMOD; dense on the reference
    backend). ``release``: free the factor once the recursion has its copy (a lower peak; a
    pattern shared by the next tile is then analysed again)."""
    if problem.solve.backend == "dense":
        return np.linalg.inv(problem.pattern.to_scipy(b_vals).toarray())[
            problem.pattern.rows, problem.pattern.cols]
    return linalg.cholmod.selected_inverse(problem.pattern, b_vals, ordering=ordering,
                                           release=release)


def inverse_later(problem: LatticeProblem, b_vals: np.ndarray,
                  ordering: str) -> Callable[[], np.ndarray]:
    """:func:`selected_inverse`, computed by the returned function from a copy of the factor
    taken now: the function may run in another thread while the problem's pattern is
    factorised again for another tile."""
    if problem.solve.backend == "dense":
        return functools.partial(selected_inverse, problem, b_vals, ordering)
    return linalg.cholmod.analyze(problem.pattern, ordering=ordering).inverse_later(b_vals)


def field_covariance(pattern: SparsePattern, z: np.ndarray, shape: tuple[int, int],
                     mid_factor: int | None) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``cov(a, b)``: posterior covariances of the GMRF part of f at cells a, b (flat arrays,
    neighbours or equal) from the selected inverse ``z`` of B on ``pattern``: (B⁻¹)_ab, plus
    with the mid-scale level the terms of Π (the pattern holds every entry these need, see
    :func:`geogp.models.lattice.gmrf.make_problem`)."""
    size = pattern.n
    n = shape[0] * shape[1]

    def look(i, j):
        i, j = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
        return z[pattern.positions_of_keys(np.minimum(i, j) * size + np.maximum(i, j))]

    if size == n:  # no mid-scale level: B's unknowns are the cells
        return look
    _, nodes, weights = mid_stencil(shape, mid_factor)
    nodes = nodes + n

    def cov(a, b):
        out = look(a, b)
        for k in range(4):
            out = out + weights[b, k] * look(a, nodes[b, k])
            out = out + weights[a, k] * look(b, nodes[a, k])
        # coarse–coarse: the 4 × 4 block of B⁻¹ between the two cells' stencils, looked up
        # once per distinct pair of stencils (a stencil is fixed by its first node)
        pair = nodes[a, 0] * size + nodes[b, 0]
        _, first, inv = np.unique(pair, return_index=True, return_inverse=True)
        na, nb = nodes[a[first]], nodes[b[first]]
        block = np.stack([np.stack([look(na[:, k], nb[:, m]) for m in range(4)], axis=1)
                          for k in range(4)], axis=1)
        return out + np.einsum("ik,ikm,im->i", weights[a], block[inv.ravel()], weights[b])

    return cov


class CoreState(NamedTuple):
    """What a core's moments need once stage 2 has run, from the tile's sparse work (pass 1).

    The core extended by one row and one column (clipped to the tile lattice: the neighbours
    of its last row and column) holds ``s_y`` (e_y, e_x), S_y, and ``g`` (e_y, e_x, k + p),
    F − S_F: the cells' columns less their smoothed part. ``field`` (5, c_y, c_x): the GMRF
    part of the posterior covariance before the overall scale c, (B⁻¹)_aa, then the
    covariances with (i, j+1), (i+1, j), (i+1, j+1) and of (i+1, j) with (i, j+1) (zero past
    the lattice's last row or column).
    """

    s_y: np.ndarray
    g: np.ndarray
    field: np.ndarray


def core_state(shape: tuple[int, int], core: tuple[slice, slice], s: np.ndarray,
               columns: np.ndarray, field_cov: Callable[[np.ndarray, np.ndarray], np.ndarray],
               dtype: np.dtype | type = np.float64,
               band_bytes: float = 64 * 2**20, overwrite_s: bool = False) -> CoreState:
    """The :class:`CoreState` of a tile lattice's ``core`` ((rows, cols) slices of the tile
    lattice of ``shape``) from S at its extended core (``s``, (e_y·e_x, 1 + k + p) in the
    row-major order of :func:`extended_core`; :func:`solve_tile`), ``columns(rows, cols)`` →
    [Φ, X] at tile cells, and ``field_cov`` (:func:`field_covariance`). ``g`` is stored as
    ``dtype`` (float32 for tiles whose states wait on disk: its rounding, 6·10⁻⁸ relative,
    is far below the tiles' own error). ``overwrite_s`` (float64 only): ``g`` is computed in
    ``s``'s own columns, a view of ``s`` (no second (e_y·e_x, k + p) array; ``s`` is then
    overwritten)."""
    (rows, cols), nx = core, shape[1]
    cy, cx = rows.stop - rows.start, cols.stop - cols.start
    ey, ex, _ = extended_core(shape, core)
    kp = s.shape[1] - 1
    in_place = overwrite_s and np.dtype(dtype) == s.dtype and s.flags.writeable
    s_y = s[:, 0].reshape(ey, ex).copy()
    g = s[:, 1:].reshape(ey, ex, kp) if in_place else np.empty((ey, ex, kp), dtype=dtype)
    band = max(1, int(band_bytes // (8.0 * ex * max(kp, 1))))
    for a in range(0, ey, band):
        b = min(a + band, ey)
        gy, gx = np.meshgrid(np.arange(rows.start + a, rows.start + b),
                             np.arange(cols.start, cols.start + ex), indexing="ij")
        part = columns(gy.ravel(), gx.ravel())
        part -= s[a * ex:b * ex, 1:]
        g[a:b] = part.reshape(b - a, ex, kp)

    def at(di, dj, h, wd):  # flat tile-lattice cells of an h × wd block shifted by (di, dj)
        gy, gx = np.meshgrid(np.arange(h) + rows.start + di, np.arange(wd) + cols.start + dj,
                             indexing="ij")
        return (gy * nx + gx).ravel()

    field = np.zeros((5, cy, cx))
    ry, rx = min(cy, ey - 1), min(cx, ex - 1)  # core rows / columns that have a next one
    field[0] = field_cov(at(0, 0, cy, cx), at(0, 0, cy, cx)).reshape(cy, cx)
    field[1, :, :rx] = field_cov(at(0, 0, cy, rx), at(0, 1, cy, rx)).reshape(cy, rx)
    field[2, :ry, :] = field_cov(at(0, 0, ry, cx), at(1, 0, ry, cx)).reshape(ry, cx)
    field[3, :ry, :rx] = field_cov(at(0, 0, ry, rx), at(1, 1, ry, rx)).reshape(ry, rx)
    field[4, :ry, :rx] = field_cov(at(1, 0, ry, rx), at(0, 1, ry, rx)).reshape(ry, rx)
    return CoreState(s_y, g, field)


def core_moments(state: CoreState, scale: float, d: np.ndarray, w: np.ndarray,
                 vbeta: np.ndarray,
                 band_bytes: float = 64 * 2**20) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Posterior moments of a core's cells (standardised units) from its :class:`CoreState`
    and stage 2's result: dense work only.

    With r = (F − S_F) D the cells' columns (large-scale features √λ-scaled, trend) less their
    smoothed part, the mean is S_y + r w and Cov(f_a, f_b) = c (B⁻¹)_ab + r_a A⁻¹ r_bᵀ
    (``scale`` = c, ``vbeta`` = A⁻¹, ``d`` = D's diagonal, ``w`` = ŵ). Computed in bands of
    rows whose r and r A⁻¹ take at most ``band_bytes`` each.

    Returns:
        (mean, var, cov): mean and var (c_y, c_x); cov (4, c_y, c_x) the covariances with
        the cells (i, j+1), (i+1, j), (i+1, j+1) and of (i+1, j) with (i, j+1) (zero past the
        lattice's last row or column).
    """
    s_y, g, field = state
    (cy, cx), (ey, ex, kp) = field.shape[1:], g.shape
    mean, var = np.empty((cy, cx)), np.empty((cy, cx))
    cov = scale * field[1:]
    rx = min(cx, ex - 1)
    band = max(1, int(band_bytes // (8.0 * ex * max(kp, 1))))

    def quad(u, v):  # row-wise u A⁻¹ vᵀ, u already times A⁻¹
        return np.einsum("ijk,ijk->ij", u, v)

    for a in range(0, cy, band):
        b = min(a + band, cy)
        h, hy = b - a, min(b + 1, ey) - a - 1  # rows in the band; of them, with a next row
        r = g[a:a + h + 1].astype(np.float64) * d  # the band and the next row
        rv = r @ vbeta
        mean[a:b] = s_y[a:b, :cx] + r[:h, :cx] @ w
        var[a:b] = scale * field[0, a:b] + quad(rv[:h, :cx], r[:h, :cx])
        cov[0, a:b, :rx] += quad(rv[:h, :rx], r[:h, 1:rx + 1])
        cov[1, a:a + hy] += quad(rv[:hy, :cx], r[1:hy + 1, :cx])
        cov[2, a:a + hy, :rx] += quad(rv[:hy, :rx], r[1:hy + 1, 1:rx + 1])
        cov[3, a:a + hy, :rx] += quad(rv[1:hy + 1, :rx], r[:hy, 1:rx + 1])
    return mean, var, cov
