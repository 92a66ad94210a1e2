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

from typing import NamedTuple

import numpy as np

from geogp.models.lattice_gmrf import LatticeProblem, sparse_system, statistics_from_solve
from geogp.models.lattice_mid import mid_lattice, mid_stencil

__all__ = ["PosteriorTile", "CoreState", "posterior_tiles", "in_core", "solve_tile", "core_gram",
           "core_state", "core_moments", "field_covariance", "selected_inverse"]


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


def core_state(shape, core, s: np.ndarray, columns, field_cov, dtype=np.float64,
               band_bytes: float = 64 * 2**20) -> CoreState:
    """The :class:`CoreState` of a tile lattice's ``core`` ((rows, cols) slices of the tile
    lattice of ``shape``) from S at its cells (``s``, (n, 1 + k + p), :func:`solve_tile`),
    ``columns(rows, cols)`` → [Φ, X] at tile cells, and ``field_cov``
    (:func:`field_covariance`). ``g`` is stored as ``dtype`` (float32 for tiles whose states
    wait on disk: its rounding, 6·10⁻⁸ relative, is far below the tiles' own error)."""
    (rows, cols), (ny, nx) = core, shape
    cy, cx = rows.stop - rows.start, cols.stop - cols.start
    ey, ex = min(cy + 1, ny - rows.start), min(cx + 1, nx - cols.start)
    kp = s.shape[1] - 1
    s_y, g = np.empty((ey, ex)), np.empty((ey, ex, kp), dtype=dtype)
    band = max(1, int(band_bytes // (8.0 * ex * max(kp, 1))))
    for a in range(0, ey, band):
        b = min(a + band, ey)
        gy, gx = np.meshgrid(np.arange(rows.start + a, rows.start + b),
                             np.arange(cols.start, cols.start + ex), indexing="ij")
        flat = (gy * nx + gx).ravel()
        part = columns(gy.ravel(), gx.ravel())
        part -= s[flat, 1:]
        g[a:b] = part.reshape(b - a, ex, kp)
        s_y[a:b] = s[flat, 0].reshape(b - a, ex)

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
                 vbeta: np.ndarray, keep_r: bool = False, band_bytes: float = 64 * 2**20):
    """Posterior moments of a core's cells (standardised units) from its :class:`CoreState`
    and stage 2's result: dense work only.

    With r = (F − S_F) D the cells' columns (large-scale features √λ-scaled, trend) less their
    smoothed part, the mean is S_y + r w and Cov(f_a, f_b) = c (B⁻¹)_ab + r_a A⁻¹ r_bᵀ
    (``scale`` = c, ``vbeta`` = A⁻¹, ``d`` = D's diagonal, ``w`` = ŵ). Computed in bands of
    rows whose r and r A⁻¹ take at most ``band_bytes`` each.

    Returns:
        (mean, var, cov, r): mean and var (c_y, c_x); cov (4, c_y, c_x) the covariances with
        the cells (i, j+1), (i+1, j), (i+1, j+1) and of (i+1, j) with (i, j+1) (zero past the
        lattice's last row or column); r (c_y·c_x, k + p), or None without ``keep_r``.
    """
    s_y, g, field = state
    (cy, cx), (ey, ex, kp) = field.shape[1:], g.shape
    mean, var = np.empty((cy, cx)), np.empty((cy, cx))
    cov = scale * field[1:]
    r_core = np.empty((cy * cx, kp)) if keep_r else None
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
        if keep_r:
            r_core[a * cx:b * cx] = r[:h, :cx].reshape(-1, kp)
    return mean, var, cov, r_core
