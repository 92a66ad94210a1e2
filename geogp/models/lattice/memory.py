"""The lattice model's posterior tiles and its memory and time estimates, made before
anything is allocated (:func:`plan_tiles`, :func:`lattice_bytes`, :func:`lattice_seconds`).

A fit holds, at its peak, one posterior tile's sparse work (the whole lattice when the
posterior is not tiled) and the per-cell arrays of the whole raster:

    bytes ≈ base + tile + factor(n_t) + dense · 8 · n_t · (1 + k + p) + per_cell · n

with n_t the largest tile's unknowns (cells, margin included), n the lattice's cells, k + p the
large-scale and trend columns. The factor has nnz ≈ fill · n_t log₂ n_t entries (nested
dissection on these lattices; the mid-scale level's coupling adds half), each held as a
value and an index in three copies (CHOLMOD's factor, its scipy copy for the selected inverse,
and B⁻¹ on its pattern). The dense term counts the n_t × (1 + k + p) arrays alive at once: the
right-hand sides Pᵀ[y, Φ, X], S at the kept cells and a block of solutions (then S and
F − S_F; the moments work in bands of rows). Calibration (peak resident memory against the
estimate): the 300 × 500 satellite raster (whole-lattice posterior, mid-scale level, 200
features) 2.53 against 3.21 GiB; a 1200² raster on 25 tiles 3.12 against 3.56 GiB; a 200 × 250
raster on tiles of 96² cores
(tests/reliability/test_lattice_memory.py checks the bound).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Iterator
from itertools import takewhile
from typing import TYPE_CHECKING

from geogp.exceptions import InputError
from geogp.models.lattice.tiled import PosteriorTile, posterior_tiles

if TYPE_CHECKING:  # annotations only
    from distributed import Client

__all__ = ["lattice_bytes", "factor_bytes", "varying_bytes", "VARYING_TILE_FACTORS",
           "lattice_seconds", "plan_tiles", "plan_worker_tiles",
           "tile_cells",
           "state_bytes", "check_state_disk",
           "WHOLE_LATTICE_MAX_CELLS", "POSTERIOR_CORE", "POSTERIOR_HALO"]

# posterior_tile="auto": lattices up to this many cells get the exact whole-lattice posterior
# (within the memory limit); larger ones get the largest core up to POSTERIOR_CORE cells a side
# that fits, each solved with a halo of POSTERIOR_HALO cells of data around it
# (docs/lattice.md, the posterior on tiles)
WHOLE_LATTICE_MAX_CELLS = 400_000
POSTERIOR_CORE = 512
POSTERIOR_HALO = 96

# nnz(L) / (n log₂ n) of nested dissection on these lattices, rounded up (benchmarks/README.md)
FILL = {1: 2.6, 2: 6.5, 3: 11.8}
# with the mid-scale level's coupling, as a multiple of FILL[2], rounded up (benchmarks/README.md)
MID_FILL = 1.55
# bytes per stored entry of the factor (value + row index), times the copies alive at once
FACTOR_COPIES = 3
BYTES_PER_FACTOR_ENTRY = FACTOR_COPIES * 12.0
# n_t × (1 + k + p) float64 arrays alive at once during a tile's sparse work (Pᵀ[y, Φ, X], S at
# the kept cells, a block of solutions; then S and F − S_F)
DENSE_COPIES = 3
# float64 arrays per lattice cell of the whole raster (values, mask, mean, variance, four
# neighbour covariances, the front end's mean / std / latent std rasters)
PER_CELL_ARRAYS = 12
# the interpreter, JAX, XLA's code, the libraries and what the hyperparameter fit leaves
# (benchmarks/README.md, design measurements)
BASE_BYTES = 1.0 * 2**30
# a tile's fixed part: its features at the observed cells, the problem's scipy intermediates
# and JAX's buffers for a new shape (benchmarks/README.md, design measurements)
TILE_BYTES = 0.35 * 2**30
# a dask worker process on this machine before its tiles' work: the interpreter and the
# libraries a tile loads (benchmarks/README.md, design measurements)
WORKER_BASE_BYTES = 0.3 * 2**30
# bytes per raster cell of the tiles' states between the two passes, held by the workers
# (state_bytes), beyond 4 per column: F − S_F in float32 plus S_y and five covariance terms
STATE_BYTES_PER_CELL = 48.0


def factor_bytes(unknowns: int, alpha: int, mid: bool) -> float:
    """Bytes of the sparse factor of B over ``unknowns`` and its companions (module
    docstring)."""
    n_t = max(int(unknowns), 2)
    factor = FILL[int(alpha)] * n_t * math.log2(n_t) * BYTES_PER_FACTOR_ENTRY
    return MID_FILL * factor if mid else factor


# the varying range and sd's stage holds every fitting tile's problem and factors at once (its
# likelihood sums over them): per tile, measured peaks (varying=True on 500² and 700² rasters,
# 16 and 25 tiles, and on 500² with the mid-scale level: docs/lattice.md) came to 1.1–1.25
# factor_bytes of the tile's lattice without the level (its coarse lattice adds little here)
VARYING_TILE_FACTORS = 1.5


def varying_bytes(lattice_cells: int, tiles_cells: list[int]) -> float:
    """Estimated peak bytes of the varying range and sd's stage (its fitting tiles' lattices
    of ``tiles_cells`` cells each, all held at once) with the raster's arrays. The stage runs
    after the stationary θ's fit, whose tiles are freed by then (and, under
    ``varying="auto"``, after its posterior)."""
    here = BASE_BYTES + PER_CELL_ARRAYS * 8.0 * lattice_cells
    return here + VARYING_TILE_FACTORS * sum(factor_bytes(c, 2, False) for c in tiles_cells)


def lattice_bytes(lattice_cells: int, tile_cells: int, alpha: int, mid: bool,
                  columns: int, workers: int = 0) -> float:
    """Estimated peak bytes of a lattice fit (module docstring), over every process of this
    machine that works on it.

    Args:
        lattice_cells: cells of the whole lattice (raster plus margins).
        tile_cells: cells of the largest posterior tile's lattice (= ``lattice_cells`` for
            the whole-lattice posterior).
        alpha: 1 or 2. mid: whether the mid-scale level is on.
        columns: 1 + k + p (the data, large-scale features and trend columns).
        workers: dask worker processes on this machine that run the posterior's tiles (0:
            this process runs them). Each holds a tile's work at a time, and together they
            hold the tiles' states between the passes; this process keeps the raster's
            arrays.
    """
    n_t = max(int(tile_cells), 2)
    tile = TILE_BYTES + factor_bytes(n_t, alpha, mid) + DENSE_COPIES * 8.0 * n_t * columns
    here = BASE_BYTES + PER_CELL_ARRAYS * 8.0 * lattice_cells
    if int(workers) <= 0:
        return here + tile
    states = (4.0 * (columns - 1) + STATE_BYTES_PER_CELL) * lattice_cells
    return here + int(workers) * (WORKER_BASE_BYTES + tile) + states


# the time estimate: the two fitting stages, then seconds per cell of the posterior's tile
# lattices (this process, its tiles overlapped on two threads), and what each dask worker
# process does relative to it (benchmarks/README.md, design measurements)
STAGES_SECONDS = 30.0
SECONDS_PER_TILE_CELL = 1.6e-5
WORKER_EFFICIENCY = 0.5


def lattice_seconds(tile_cells_total: int, workers: int = 1, fits: int = 1,
                    posteriors: int = 1) -> float:
    """A rough wall-time estimate of a lattice fit whose posterior tiles hold
    ``tile_cells_total`` cells in all, on ``workers`` processes (machine-dependent: it is the
    rate measured on the 2-core reference machine), with ``fits`` hyperparameter fits and
    ``posteriors`` posteriors (a robust fit has more of both)."""
    speedup = 1.0 if int(workers) <= 1 else WORKER_EFFICIENCY * int(workers)
    return fits * STAGES_SECONDS + posteriors * SECONDS_PER_TILE_CELL * tile_cells_total / speedup


def tile_cells(tile: PosteriorTile, margin: int) -> int:
    """Cells of a tile's lattice: its window plus the margin on every side."""
    return ((tile.window[0].stop - tile.window[0].start + 2 * margin)
            * (tile.window[1].stop - tile.window[1].start + 2 * margin))


def plan_tiles(raster_shape: tuple[int, int], margin: int, alpha: int, mid_factor: int | None,
               columns: int,
               max_bytes: float, core: int | str | None = "auto",
               halo: int | str = "auto") -> list[PosteriorTile]:
    """The posterior's tiles (:func:`~geogp.models.lattice.tiled.posterior_tiles`).

    ``core="auto"``: the whole lattice when it has at most :data:`WHOLE_LATTICE_MAX_CELLS`
    cells and its estimate is within ``max_bytes``; else the largest core up to
    :data:`POSTERIOR_CORE` (a multiple of the mid-scale factor) whose tile fits in this
    process. ``halo="auto"``: :data:`POSTERIOR_HALO`."""
    halo = POSTERIOR_HALO if halo == "auto" else int(halo)
    align = mid_factor or 1
    m = int(margin)
    if core == "auto":
        n = (raster_shape[0] + 2 * m) * (raster_shape[1] + 2 * m)

        def fits(cells):
            return lattice_bytes(n, cells, alpha, align > 1, columns) <= max_bytes

        if n <= WHOLE_LATTICE_MAX_CELLS and fits(n):
            return posterior_tiles(raster_shape, m, None, halo, align)
        # the smallest core tried: 2 mid-scale cells, or 16 cells (without the level the step
        # of 16 used to run on to a core of 0, i.e. one tile per cell, before the refusal)
        smallest = max(2 * align, 16)
        if not fits(0):
            # the raster's own arrays exceed the budget whatever the tile: the memory check
            # refuses it, and a plan of millions of 16-cell tiles would only delay that
            return posterior_tiles(raster_shape, m, POSTERIOR_CORE, halo, align)
        # the first core that fits, or the first at or below the smallest (refused later)
        core = next(c for c in _cores(align)
                    if c <= smallest or fits((c + 2 * halo + 2 * m) ** 2))
    return posterior_tiles(raster_shape, m, core, halo, align)


def _cores(align: int) -> Iterator[int]:
    """The automatic plans' cores, largest first: :data:`POSTERIOR_CORE`, then down in steps
    of the mid-scale factor (or of 16 cells without the level)."""
    core = POSTERIOR_CORE
    while core > 0:
        yield core
        core -= align if align > 1 else 16


def plan_worker_tiles(raster_shape: tuple[int, int], margin: int, alpha: int,
                      mid_factor: int | None, columns: int, max_bytes: float, workers: int,
                      halo: int | str = "auto") -> list[PosteriorTile] | None:
    """Tiles for ``workers`` dask workers on this machine that hold one each, with this
    process's arrays and the tiles' states, within ``max_bytes`` (:func:`lattice_bytes`): the
    largest core up to :data:`POSTERIOR_CORE` that fits, but none below twice the halo, where
    the halos would cost the tiles more than a second worker gains. None when none fits (the
    tiles then run in this process, :func:`plan_tiles`)."""
    halo = POSTERIOR_HALO if halo == "auto" else int(halo)
    align = mid_factor or 1
    m = int(margin)
    n = (raster_shape[0] + 2 * m) * (raster_shape[1] + 2 * m)
    smallest = max(2 * halo, 2 * align, 16)
    core = next((c for c in takewhile(lambda c: c >= smallest, _cores(align))
                 if lattice_bytes(n, (c + 2 * halo + 2 * m) ** 2, alpha, align > 1, columns,
                                  workers) <= max_bytes), None)
    if core is None:
        return None
    tiles = posterior_tiles(raster_shape, m, core, halo, align)
    return tiles if len(tiles) > 1 else None


def state_bytes(tiles: list[PosteriorTile], columns: int) -> float:
    """Bytes of the tiles' states between the two passes
    (:class:`~geogp.models.lattice.tiled.CoreState`: F − S_F in float32 and S_y over each core
    plus a row and a column, five float64 covariance terms per core cell)."""
    total = 0.0
    for tile in tiles:
        cy, cx = (c.stop - c.start for c in tile.core)
        total += (cy + 1) * (cx + 1) * (4.0 * (columns - 1) + 8.0) + 40.0 * cy * cx
    return total


def check_state_disk(tiles: list[PosteriorTile], columns: int,
                     client: Client | None = None) -> None:
    """Refuse, before pass 1, when the temporary directory cannot hold the tiles' states (this
    process keeps them on disk between the passes; on a dask cluster the workers keep them)."""
    if client is not None:
        return
    need = state_bytes(tiles, columns)
    where = tempfile.gettempdir()
    free = shutil.disk_usage(where).free
    if need > 0.9 * free:
        raise InputError(
            f"lattice model: the {len(tiles)} posterior tiles keep about {need / 2**30:.2f} GiB "
            f"on disk between their two passes, and {where} has {free / 2**30:.2f} GiB free. "
            "Point TMPDIR at a larger disk, or run the tiles on a dask cluster "
            "(scheduler=, geogp fit --workers / --scheduler).")
