"""Cross-validation folds on a raster: gap-shaped, random and block hold-outs.

A fold is a boolean mask of *observed* cells that are hidden from training and scored. Three
kinds are offered (:func:`make_folds`):

- ``"gaps"`` (the default, and the one to trust for gap filling): the raster's own missing-data
  shapes, i.e. the 8-connected components of its NaN mask (clouds, swaths, outages), are
  transplanted onto observed areas. Each shape is copied whole, possibly rotated by a multiple
  of 90° or mirrored, to a random position where it covers many observed cells; the observed
  cells under it are held out. Shapes are drawn (with replacement) with probability
  proportional to their size, so held-out cells lie as far from data as the real gap cells
  do: many deep inside large gaps, few one pixel away, unlike random hold-outs. A shape cut
  by the raster's border keeps its straight edge when moved.
- ``"random"``: a uniformly random subset of the observed cells (each cell's neighbours are
  mostly still observed: an optimistic test for gap filling).
- ``"blocks"``: rectangular blocks of a regular partition of the grid.

Folds are independent draws (a cell may be held out in several folds) unless ``"random"`` or
``"blocks"``, which partition. Within a fold no held-out cell is ever used for training.

:func:`distance_to_observed` gives, for every cell, the Euclidean distance in cells to the
nearest cell that is observed *and* used for training, the quantity by which scores are
stratified (at the edge of a gap it is 1; deep inside a large gap it is large).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import ndimage

from geogp.core.memory import check_memory
from geogp.exceptions import InputError

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["FOLD_KINDS", "make_folds", "gap_folds", "random_folds", "block_folds",
           "distance_to_observed", "transplant", "fold_bytes"]

FOLD_KINDS = ("gaps", "random", "blocks")
_EIGHT = np.ones((3, 3), dtype=bool)


def _check_observed(observed) -> np.ndarray:
    obs = np.asarray(observed)
    if obs.ndim != 2:
        raise InputError(f"cross-validation needs a 2-D raster (y, x); got {obs.ndim} "
                         "dimension(s). Select one slice of an extra dimension first.")
    if obs.dtype != bool:
        raise InputError(f"the observed mask must be boolean; got dtype {obs.dtype}.")
    if obs.sum() < 10:
        raise InputError(f"only {int(obs.sum())} observed cell(s): too few to cross-validate.")
    return obs


def _check_counts(n_folds: int, fraction: float) -> tuple[int, float]:
    if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)) or n_folds < 1:
        raise InputError(f"n_folds must be an integer ≥ 1; got {n_folds!r}.")
    fraction = float(fraction)
    if not 0 < fraction < 1:
        raise InputError(f"fraction must be in (0, 1); got {fraction!r}.")
    return int(n_folds), fraction


def _check_units(n_folds: int, n_units: int, units: str, kind: str) -> None:
    """Refuse more folds than there are units to hold out (each fold needs one of its own)."""
    if n_folds > n_units:
        raise InputError(f"n_folds={n_folds} {kind} folds need at least one {units} each, and "
                         f"the raster has {n_units}; use n_folds ≤ {n_units}.")


def _check_nonempty(folds: np.ndarray, kind: str) -> np.ndarray:
    empty = np.flatnonzero(~folds.reshape(folds.shape[0], -1).any(axis=1))
    if empty.size:
        raise InputError(f"{empty.size} of the {folds.shape[0]} {kind} folds would hold out no "
                         f"observed cell (fold {int(empty[0]) + 1} first); use fewer folds or "
                         "a larger fraction/block.")
    return folds


def fold_bytes(shape: tuple, n_folds: int) -> float:
    """Bytes that ``n_folds`` folds of a ``shape`` raster need: the (n_folds, ny, nx) masks,
    and (in :func:`~geogp.crossval.cross_validate`) up to one 9-column row per held-out cell
    and fold, bounded by one per cell and fold."""
    cells = float(np.prod(shape, dtype=np.float64))
    return n_folds * cells * (1 + 9 * 8)


def _orientations(shape_mask: np.ndarray, rng, rotate: bool, n: int = 2) -> list:
    """``n`` of the shape's 8 rotations/mirror images, drawn at random (itself if not rotate).

    Orientation i is rot90 by i % 4, mirrored (fliplr) when i ≥ 4; only the drawn ones are built.
    """
    if not rotate:
        return [shape_mask]
    picks = rng.permutation(8)[:n]
    return [np.fliplr(np.rot90(shape_mask, i % 4)) if i >= 4 else np.rot90(shape_mask, i)
            for i in picks]


def transplant(shape_mask: np.ndarray, grid_shape: tuple, offset: tuple) -> np.ndarray:
    """The boolean ``grid_shape`` mask of ``shape_mask`` with its top-left corner at ``offset``.

    The shape must fit inside the grid (it is never cropped, so it keeps its shape).
    """
    sy, sx = shape_mask.shape
    oy, ox = int(offset[0]), int(offset[1])
    if oy < 0 or ox < 0 or oy + sy > grid_shape[0] or ox + sx > grid_shape[1]:
        raise InputError(f"a {sy}×{sx} shape at offset {(oy, ox)} does not fit a grid of "
                         f"{grid_shape}.")
    out = np.zeros(grid_shape, dtype=bool)
    out[oy:oy + sy, ox:ox + sx] = shape_mask
    return out


def _best_position(shape_mask, available, rng, n_tries: int):
    """A random offset where the shape covers many available cells.

    Of ``n_tries`` random offsets, those covering at least half the best count are kept and
    one of them is drawn: the shape lands on observed ground, and the folds still spread over
    the raster instead of all choosing the single best spot.

    Returns (offset, covered count) or (None, 0) when the shape does not fit the grid.
    """
    ny, nx = available.shape
    sy, sx = shape_mask.shape
    if sy > ny or sx > nx:
        return None, 0
    oy = rng.integers(0, ny - sy + 1, size=n_tries)
    ox = rng.integers(0, nx - sx + 1, size=n_tries)
    # covered count at each sampled offset: index the available mask at the shape's cells
    ys, xs = np.nonzero(shape_mask)
    counts = np.array([available[ys + a, xs + b].sum() for a, b in zip(oy, ox, strict=True)])
    good = np.flatnonzero(counts >= 0.5 * counts.max())
    pick = int(rng.choice(good))
    return (int(oy[pick]), int(ox[pick])), int(counts[pick])


def gap_folds(observed: ArrayLike, n_folds: int = 5, *, fraction: float = 0.15, seed: int = 0,
              missing: ArrayLike | None = None, rotate: bool = True, n_tries: int = 64,
              min_cells: int = 1) -> np.ndarray:
    """Folds made of the raster's own gap shapes, moved onto observed areas.

    Args:
        observed: (ny, nx) boolean mask of observed cells.
        n_folds: number of folds (independent draws).
        fraction: target share of the observed cells held out per fold. Shapes are drawn
            with probability proportional to their size and are never cropped, so a fold
            stops adding shapes once it reaches the target and may hold out up to 1.5× it
            (more when its first shape alone is larger).
        seed: random seed (shape order, orientation and position).
        missing: the mask whose connected components give the shapes (default ``~observed``;
            pass another raster's cloud mask to transplant its gaps instead).
        rotate: also use the 8 rotations/mirror images of each shape.
        n_tries: random positions tried per shape; one of those covering at least half as
            many observed cells as the best is drawn.
        min_cells: shapes with fewer cells are not used.

    Returns:
        (n_folds, ny, nx) boolean array: True = held out (always an observed cell).
    """
    obs = _check_observed(observed)
    n_folds, fraction = _check_counts(n_folds, fraction)
    _check_units(n_folds, int(obs.sum()), "observed cell", "gap")
    miss = ~obs if missing is None else np.asarray(missing, dtype=bool)
    if miss.shape != obs.shape:
        raise InputError(f"missing has shape {miss.shape}; the raster has {obs.shape}.")
    labels, n_comp = ndimage.label(miss, structure=_EIGHT)
    if n_comp == 0:
        raise InputError("the raster has no missing cells, so there are no gap shapes to "
                         "transplant; use folds='blocks' or 'random', or pass missing= (a "
                         "cloud mask from another raster of the same grid).")
    slices = ndimage.find_objects(labels)
    shapes = [labels[sl] == i + 1 for i, sl in enumerate(slices)]
    shapes = [s for s in shapes if s.sum() >= min_cells]
    if not shapes:
        raise InputError(f"no gap has at least min_cells = {min_cells} cells.")
    n_obs = int(obs.sum())
    target = fraction * n_obs
    rng = np.random.default_rng(seed)
    folds = np.zeros((n_folds, *obs.shape), dtype=bool)
    # draw shapes with probability ∝ their size, so that held-out cells come from shapes as
    # the real missing cells do (a random gap cell usually belongs to a large cloud)
    sizes = np.array([s.sum() for s in shapes], dtype=np.float64)
    n_draws = max(4 * len(shapes), 64)  # shapes are drawn with replacement: few gaps suffice
    for k in range(n_folds):
        held = folds[k]
        for i in rng.choice(len(shapes), size=n_draws, replace=True, p=sizes / sizes.sum()):
            if held.sum() >= target:
                break
            available = obs & ~held
            best = None
            for shape in _orientations(shapes[i], rng, rotate):
                pos, count = _best_position(shape, available, rng, max(1, n_tries // 2))
                if pos is not None and (best is None or count > best[2]):
                    best = (shape, pos, count)
            if best is None or best[2] == 0:
                continue
            if held.any() and held.sum() + best[2] > 1.5 * target:
                continue  # too big to add; the first shape of a fold is always kept whole
            held |= transplant(best[0], obs.shape, best[1]) & available
        if not held.any():
            raise InputError("no gap shape could be placed on observed cells; the gaps may be "
                             "larger than the observed areas. Use folds='blocks' or lower "
                             "fraction.")
    return folds


def random_folds(observed: ArrayLike, n_folds: int = 5, *, fraction: float | None = None,
                 seed: int = 0) -> np.ndarray:
    """Disjoint random subsets of the observed cells (``fraction`` each, ±1 cell).

    The default fraction, 1/n_folds, partitions the observed cells (K-fold).
    """
    obs = _check_observed(observed)
    n_folds, fraction = _check_counts(n_folds, 1.0 / max(n_folds, 2) if fraction is None
                                      else fraction)
    if fraction * n_folds > 1 + 1e-12:
        raise InputError(f"random folds are disjoint: n_folds × fraction must be ≤ 1; got "
                         f"{n_folds} × {fraction}.")
    _check_units(n_folds, int(obs.sum()), "observed cell", "random")
    flat = np.flatnonzero(obs.ravel())
    order = np.random.default_rng(seed).permutation(flat)
    cuts = np.minimum(np.round(np.arange(n_folds + 1) * fraction * flat.size).astype(int),
                      flat.size)
    folds = np.zeros((n_folds, obs.size), dtype=bool)
    for k in range(n_folds):
        folds[k, order[cuts[k]:cuts[k + 1]]] = True
    return _check_nonempty(folds.reshape((n_folds, *obs.shape)), "random")


def block_folds(observed: ArrayLike, n_folds: int = 5, *, block: int | tuple | None = None,
                seed: int = 0) -> np.ndarray:
    """Rectangular blocks of a regular partition, dealt at random to ``n_folds`` folds.

    ``block`` is the block size in cells (default: the grid cut into about 10 × n_folds
    blocks). Every observed cell belongs to exactly one fold.
    """
    obs = _check_observed(observed)
    n_folds, _ = _check_counts(n_folds, 0.5)
    _check_units(n_folds, int(obs.sum()), "observed cell", "block")
    ny, nx = obs.shape
    if block is None:
        side = max(1, int(np.sqrt(ny * nx / (10.0 * n_folds))))
        block = (side, side)
    by, bx = (block, block) if np.isscalar(block) else tuple(int(b) for b in block)
    if by < 1 or bx < 1:
        raise InputError(f"block must be ≥ 1 cell; got {block!r}.")
    rows, cols = np.arange(ny) // by, np.arange(nx) // bx
    ids = rows[:, None] * (cols.max() + 1) + cols[None, :]
    n_blocks = int(ids.max()) + 1
    if n_blocks < n_folds:
        raise InputError(f"{n_blocks} block(s) of {by}×{bx} cells cannot make {n_folds} folds; "
                         "use smaller blocks.")
    _check_units(n_folds, np.unique(ids[obs]).size, f"block of {by}×{bx} cells holding data",
                 "block")
    deal = np.random.default_rng(seed).permutation(n_blocks) % n_folds
    fold_of = deal[ids]
    return _check_nonempty(np.stack([(fold_of == k) & obs for k in range(n_folds)]), "block")


def make_folds(observed: ArrayLike, kind: str = "gaps", n_folds: int = 5, *, seed: int = 0,
               **options: Any) -> np.ndarray:
    """Folds of ``kind`` (``"gaps"``, ``"random"`` or ``"blocks"``); see the module docstring.

    ``options`` go to :func:`gap_folds`, :func:`random_folds` or :func:`block_folds`.
    """
    makers = {"gaps": gap_folds, "random": random_folds, "blocks": block_folds}
    if kind not in makers:
        raise InputError(f"folds must be one of {list(FOLD_KINDS)} or a boolean array of "
                         f"shape (n_folds, ny, nx); got {kind!r}.")
    obs = _check_observed(observed)
    n_folds, _ = _check_counts(n_folds, 0.5)
    _check_units(n_folds, int(obs.sum()), "observed cell", kind)
    check_memory(fold_bytes(obs.shape, n_folds), f"{n_folds} {kind} folds of a raster of "
                 f"{obs.shape[0]}×{obs.shape[1]} cells", hint="Use fewer folds.")
    try:
        return makers[kind](observed, n_folds, seed=seed, **options)
    except TypeError as err:
        raise InputError(f"folds={kind!r}: {err}") from None


def distance_to_observed(train: ArrayLike) -> np.ndarray:
    """Euclidean distance, in cells, from every cell to the nearest training cell (0 on them)."""
    train = np.asarray(train, dtype=bool)
    if not train.any():
        raise InputError("a fold leaves no training cell; hold out less.")
    return ndimage.distance_transform_edt(~train)
