"""The lattice model's posterior, tile by tile (docs/lattice.md, the posterior on tiles).

Pure functions of one tile: a rectangle of the lattice (its *core*) is solved inside a larger
window (core plus a *halo* on every side, plus the model's margin of unobserved cells beyond
the raster's window), and only the core's moments are kept. The GMRF's posterior covariance
B⁻¹ decays over the posterior correlation length, so the core's part of B⁻¹Pᵀ[y, F]/σ² and of
the selected inverse match the whole lattice's to an error that falls off with the halo. The
large-scale and trend coefficients (u, β) stay global: their small dense system is the sum of
the tiles' Gram terms M = Σ_cores [y, F]ᵀ Σ_g⁻¹ [y, F] (Woodbury, restricted to the core's
observations). One tile whose core is the whole lattice is the exact whole-lattice posterior.

:func:`posterior_tiles` lays the tiles out, :func:`solve_tile` does a tile's sparse work,
:func:`core_gram` gives its part of M and :func:`core_moments` its cells' posterior mean,
variance and the neighbour covariances that bilinear prediction needs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from geogp.models.lattice_gmrf import LatticeProblem, sparse_system, statistics_from_solve
from geogp.models.lattice_mid import mid_lattice, mid_stencil

__all__ = ["PosteriorTile", "posterior_tiles", "in_core", "solve_tile", "core_gram",
           "core_moments", "field_covariance", "selected_inverse"]


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


def posterior_tiles(raster_shape, margin: int, core: int | None, halo: int,
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
        out = []
        for a in range(0, n_lattice, core):
            b = min(a + core, n_lattice)
            # window [lo, hi) of raster cells; the problem's lattice is [lo, hi + 2m)
            lo = min(max(a - halo, 0), n_raster - 1)
            lo -= lo % align
            hi = max(min(b + halo - 2 * m, n_raster), lo + 1)
            out.append((slice(lo, hi), slice(a, b), lo))
        return out

    rows, cols = (axis(nr, nl) for nr, nl in zip(raster_shape, lattice))
    return [PosteriorTile((wr, wc), (cr, cc), (oy, ox))
            for wr, cr, oy in rows for wc, cc, ox in cols]


def in_core(cells: np.ndarray, shape, tile: PosteriorTile) -> np.ndarray:
    """Which of the tile lattice's flat ``cells`` (tile lattice of ``shape``) lie in its core."""
    r, c = np.divmod(cells, shape[1])
    (cr, cc), (oy, ox) = tile.core, tile.offset
    return (r + oy >= cr.start) & (r + oy < cr.stop) & (c + ox >= cc.start) & (c + ox < cc.stop)


def solve_tile(params, problem: LatticeProblem, shape, mid_factor):
    """The tile's sparse work at the local θ: (S at the cells, M, log|Σ_g|, B values).

    S = B⁻¹Pᵀ[y, F]/σ² seen at the cells, (n, 1 + k + p): with the mid-scale level (coarsening
    factor ``mid_factor``; None without it), the fine part plus Π times the coarse part.
    ``shape``: the tile lattice's shape. With CHOLMOD the solve runs on the host, outside
    JAX, so that no compiled function keeps the tile's pattern and factor alive and no
    device copies of the (n, 1 + k + p) arrays are made (the same numbers as
    :func:`~geogp.models.lattice_gmrf.sparse_statistics`).
    """
    b_vals, rhs, logdet_q, noise = sparse_system(params, problem)
    if problem.solve.backend == "cholmod":
        from geogp import linalg

        b_vals, rhs = np.asarray(b_vals), np.asarray(rhs)
        fac = linalg.cholmod.analyze(problem.pattern, ordering=problem.solve.ordering)
        logdet_b, s = fac.host_forward(b_vals, rhs)
        if not np.isfinite(logdet_b):
            linalg.cholmod.check_positive_definite(problem.pattern, b_vals,
                                                   ordering=problem.solve.ordering)
    else:
        logdet_b, s = problem.solve(problem.pattern, b_vals, rhs)
    logdet_sigma, m_mat = (np.asarray(v) for v in statistics_from_solve(
        problem, logdet_b, s, rhs, logdet_q, noise))
    del rhs
    s, b_vals = np.asarray(s), np.asarray(b_vals)
    n = problem.eig.shape[0]
    if problem.has_mid:
        s = s[:n] + mid_lattice(shape, mid_factor)[1] @ s[n:]
    return s, m_mat, logdet_sigma, b_vals


def core_gram(problem: LatticeProblem, s: np.ndarray, noise: float, obs_cells: np.ndarray,
              inside: np.ndarray) -> np.ndarray:
    """The core's part of M = [y, F]ᵀ Σ_g⁻¹ [y, F]: Σ_i W_iᵀ (W_i − (A S)_i) / σ² over the
    core's observed cells i (W = [y, Φ, X] at the cell, A S the field part of S there).

    ``obs_cells``: the tile's observed cells (flat, tile lattice); ``inside``: which of them
    lie in the core (:func:`in_core`). ``noise``: σ²."""
    c = obs_cells[inside]
    w = problem.ptw[c]
    return (w.T @ w - w.T @ s[c]) / noise


def selected_inverse(problem: LatticeProblem, b_vals: np.ndarray, ordering: str) -> np.ndarray:
    """B⁻¹ on the problem's pattern (selected inversion, CHOLMOD; dense on the reference
    backend)."""
    if problem.solve.backend == "dense":
        return np.linalg.inv(problem.pattern.to_scipy(b_vals).toarray())[
            problem.pattern.rows, problem.pattern.cols]
    from geogp import linalg

    return linalg.cholmod.selected_inverse(problem.pattern, b_vals, ordering=ordering)


def field_covariance(pattern, z: np.ndarray, shape, mid_factor):
    """``cov(a, b)``: posterior covariances of the GMRF part of f at cells a, b (flat arrays,
    neighbours or equal) from the selected inverse ``z`` of B on ``pattern``: (B⁻¹)_ab, plus
    with the mid-scale level the terms of Π (the pattern holds every entry these need, see
    :func:`geogp.models.lattice_gmrf.make_problem`)."""
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


def core_moments(shape, core, s: np.ndarray, columns, field_cov, d: np.ndarray,
                 w: np.ndarray, vbeta: np.ndarray, keep_r: bool = False,
                 band_bytes: float = 64 * 2**20):
    """Posterior moments of the core's cells (standardised units).

    With r = (F − S_F) D the cell's columns (large-scale features √λ-scaled, trend) less their
    smoothed part, the mean is S_y + r w and Cov(f_a, f_b) = (B⁻¹)_ab + r_a A⁻¹ r_bᵀ
    (``vbeta`` = A⁻¹, ``field_cov`` the first term: :func:`field_covariance`). Computed in
    bands of rows whose r and r A⁻¹ take at most ``band_bytes`` each.

    Args:
        shape: the tile lattice's shape. core: (rows, cols) slices of it.
        s: (n, 1 + k + p) S at the tile's cells (:func:`solve_tile`).
        columns: ``columns(rows, cols)`` → (len, k + p) [Φ, X] at tile cells.
        keep_r: also return r of the core's cells (what posterior samples need).

    Returns:
        (mean, var, cov, r): mean and var (c_y, c_x); cov (4, c_y, c_x) the covariances with
        the cells (i, j+1), (i+1, j), (i+1, j+1) and of (i+1, j) with (i, j+1) (zero past the
        lattice's last row or column); r (c_y·c_x, k + p), or None without ``keep_r``.
    """
    rows, cols = core
    cy, cx = rows.stop - rows.start, cols.stop - cols.start
    band = max(1, int(band_bytes // (8.0 * (cx + 1) * max(s.shape[1] - 1, 1))))
    mean, var, cov = np.zeros((cy, cx)), np.zeros((cy, cx)), np.zeros((4, cy, cx))
    r = np.zeros((cy * cx, s.shape[1] - 1)) if keep_r else None
    for a in range(0, cy, band):
        b = min(a + band, cy)
        part = _block_moments(shape, (slice(rows.start + a, rows.start + b), cols), s, columns,
                              field_cov, d, w, vbeta)
        mean[a:b], var[a:b], cov[:, a:b] = part[:3]
        if keep_r:
            r[a * cx:b * cx] = part[3]
    return mean, var, cov, r


def _block_moments(shape, core, s, columns, field_cov, d, w, vbeta):
    """:func:`core_moments` of one block of the core."""
    ny, nx = shape
    rows, cols = core
    # the core plus one row and column beyond it (the neighbours of its last row and column)
    r1, c1 = min(rows.stop + 1, ny), min(cols.stop + 1, nx)
    ey, ex = r1 - rows.start, c1 - cols.start
    gy, gx = np.meshgrid(np.arange(rows.start, r1), np.arange(cols.start, c1), indexing="ij")
    flat = (gy * nx + gx).ravel()
    r = columns(gy.ravel(), gx.ravel())
    r -= s[flat, 1:]
    r *= d
    mean = s[flat, 0] + r @ w
    rv = r @ vbeta
    local = np.arange(ey * ex).reshape(ey, ex)

    def cov(a, b):  # a, b: indices into the extended block
        return field_cov(flat[a], flat[b]) + np.einsum("ij,ij->i", rv[a], r[b])

    cy, cx = rows.stop - rows.start, cols.stop - cols.start
    core_idx = local[:cy, :cx].ravel()
    var = cov(core_idx, core_idx)
    out = np.zeros((4, cy, cx))
    ry, rx = min(cy, ey - 1), min(cx, ex - 1)  # core rows/cols that have a next one
    a = local[:cy, :rx]
    out[0, :, :rx] = cov(a.ravel(), local[:cy, 1:rx + 1].ravel()).reshape(a.shape)
    a = local[:ry, :cx]
    out[1, :ry, :] = cov(a.ravel(), local[1:ry + 1, :cx].ravel()).reshape(a.shape)
    a = local[:ry, :rx]
    out[2, :ry, :rx] = cov(a.ravel(), local[1:ry + 1, 1:rx + 1].ravel()).reshape(a.shape)
    out[3, :ry, :rx] = cov(local[:ry, 1:rx + 1].ravel(),
                           local[1:ry + 1, :rx].ravel()).reshape(a.shape)
    return (mean.reshape(ey, ex)[:cy, :cx], var.reshape(cy, cx), out,
            r.reshape(ey, ex, -1)[:cy, :cx].reshape(cy * cx, -1))
