"""The space-time lattice model's estimator: REML on a few windows of the stack, then the exact
posterior on overlapping tiles in space, each over every date (docs/spacetime.md).

Works in model units: cells of the lattice (the y step is the length unit), days, and values
standardised by the observed mean and sd; :mod:`geogp.models.spacetime.family` converts.
"""

from __future__ import annotations

import math
import queue
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import jax
import numpy as np

from geogp.core.optimize import FitReport, minimize_lbfgs
from geogp.exceptions import InputError, MemoryEstimateError, NotFittedError
from geogp.linalg.cholmod import available_cores
from geogp.linalg.solvers import Solver
from geogp.models.lattice.workers import dask_client, release_memory
from geogp.models.spacetime.calibration import interval_scale, stack_gap_folds
from geogp.models.spacetime.gmrf import (
    PARAMS,
    composite_log_likelihood,
    kriging_means,
    make_problem,
    posterior,
    prior_draws,
)
from geogp.models.spacetime.large import (
    Upsampler,
    add_deviations,
    block_mean,
    block_means,
    block_step,
    spans,
)

if TYPE_CHECKING:  # annotations only
    from distributed import Client
    from numpy.typing import ArrayLike

__all__ = ["SpaceTimeDate", "SpaceTimeForecast", "SpaceTimeRegressor", "cell_indices", "Window",
           "WINDOW_UNKNOWNS", "auto_side", "windows", "tile_task", "BASE_BYTES",
           "BYTES_PER_WINDOW_UNKNOWN", "STACK_COPIES"]


@dataclass(frozen=True)
class Window:
    """A tile: rows ``y0:y1`` and columns ``x0:x1`` of the lattice, every date; its core
    (``cy0:cy1``, ``cx0:cx1``, absolute) is what the tile predicts."""

    y0: int
    y1: int
    x0: int
    x1: int
    cy0: int
    cy1: int
    cx0: int
    cx1: int

    @property
    def shape(self) -> tuple[int, int]:
        return (self.y1 - self.y0, self.x1 - self.x0)

    @classmethod
    def over(cls, shape: tuple[int, ...]) -> Window:
        """The window of a whole block of cells ``shape`` (its last two: n_y, n_x), its core
        the same: a tile's own window once cut out of the stack."""
        ny, nx = shape[-2:]
        return cls(0, ny, 0, nx, 0, ny, 0, nx)


def _spans(n: int, size: int, halo: int) -> list[tuple[int, int, int, int]]:
    """(start, stop, core start, core stop) along one axis: cores partition 0..n, each window
    is ``size`` long (or n) and holds its core with up to ``halo`` cells each side."""
    if n <= size:
        return [(0, n, 0, n)]
    core = size - 2 * halo
    out = []
    for c0 in range(0, n, core):
        c1 = min(c0 + core, n)
        s0 = min(max(c0 - halo, 0), n - size)
        out.append((s0, s0 + size, c0, c1))
    return out


def windows(shape: tuple[int, int], size: int, halo: int) -> list[Window]:
    """The tiles covering a ``shape`` lattice: one window shape for all (one analysis)."""
    if size <= 2 * halo:
        raise InputError(f"tile ({size}) must be larger than twice the halo ({halo}).")
    return [Window(a[0], a[1], b[0], b[1], a[2], a[3], b[2], b[3])
            for a in _spans(shape[0], size, halo) for b in _spans(shape[1], size, halo)]


# unknowns of one window (cells × (dates + 1)): its factor's root separator holds a row of
# cells times every date, so the cost climbs steeply past this (docs/spacetime.md, "What a
# tile costs")
WINDOW_UNKNOWNS = 13_000


# peak memory: libraries and compiled code, a window's factor and selected inverse per unknown
# (fitted to peaks: docs/spacetime.md), and float64 stacks: the caller's, the model's
# standardised copy, the posterior's mean and variance filled in place (3.1 measured:
# tests/reliability/test_spacetime_memory.py), and half a stack for a float32 original the
# caller may hold as well (a file's values)
BASE_BYTES = 0.6 * 2**30
BYTES_PER_WINDOW_UNKNOWN = 45e3
STACK_COPIES = 4.5


# windows spread over the raster, and gap-shaped folds in each, for the intervals' factor (one
# posterior of a window per fold; a 95 % quantile needs a few thousand errors to settle).
# Spread, not the fitting windows: those have the most data, and the gaps are elsewhere
CALIBRATION_WINDOWS = 9
CALIBRATION_FOLDS = 2
# stop L-BFGS, converged, once the objective (per observation) fell by less than this over
# that many iterations: on stacks a weakly identified parameter (a time scale far beyond the
# series) drifts along a flat ridge for dozens of evaluations that change nothing else
STALL = (5, 1e-5)
# windows to compute before a second thread (and its own compiled likelihood) pays
MIN_THREADED_ITEMS = 4


def auto_side(n_dates: int) -> int:
    """The side of a window of about :data:`WINDOW_UNKNOWNS` unknowns (12 to 64 cells)."""
    return int(np.clip(math.sqrt(WINDOW_UNKNOWNS / (n_dates + 1)), 12, 64))


def _count(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise InputError(f"{name} must be 'auto' or an integer ≥ {low} (cells); got {value!r}.")
    return int(value)


def _loss(params: dict, *problems) -> jax.Array:
    n_obs = sum(p.n_obs for p in problems)
    return -composite_log_likelihood(params, problems) / n_obs


class SpaceTimeRegressor:
    """Exact space-time lattice GP (persistent field + AR(1) anomalies + dates' offsets) on
    tiles; see :mod:`geogp.models.spacetime.gmrf` for the model.

    Args:
        tile: side of a prediction tile in cells (every date); ``"auto"``: about
            :data:`WINDOW_UNKNOWNS` unknowns (:func:`auto_side`). halo: cells of context on
            each side of a tile's core (``"auto"``: a fifth of the tile, at least 3).
        fit_size: side of a window the hyperparameters are learnt on (``"auto"``: as a tile);
            fit_windows: how many (those with the most observations), their restricted
            likelihoods summed.
        maxiter: L-BFGS iterations. optimize: learn θ (else keep ``params``).
        params: starting (or, with ``optimize=False``, fixed) θ in model units.
        ordering: CHOLMOD's ordering (METIS: the least fill on these patterns).
        local_scale: multiply each tile's variances (signal and noise) by the factor its own
            data call for at θ (the REML estimate, :class:`~geogp.models.spacetime.gmrf.Moments`,
            shrunk towards 1 where a tile has few observations), interpolated between the
            tiles' centres: a variance that follows the data across the raster (a front, a
            rough coast) where θ is one for all. The means do not change.
        calibrate: widen the intervals by the factor that gap-shaped folds in windows spread
            over the raster call for (:mod:`geogp.models.spacetime.calibration`; never
            narrower).
        threads: tiles whose posteriors are computed at once (``"auto"``: the cores, at most
            4); each holds its own factor, so memory grows with it (:meth:`memory_estimate`).
        scheduler: where the posterior's tiles run when there are several: ``"auto"``
            (default) the current ``dask.distributed`` client's workers when there is one
            (``geogp fit --workers N``), else this process's threads; None: this process; a
            ``Client`` or a scheduler address. The fit's windows stay in this process.
        max_bytes: refuse, before allocating, a stack whose :meth:`memory_estimate` exceeds
            this.
        progress: ``progress(done, total)`` after each tile.
        large_scales: the side ``k`` of the blocks whose means a coarse joint model fits
            first (:mod:`geogp.models.spacetime.large`): its posterior is the cells'
            model's prior mean, so a date's anomaly at scales beyond a tile reaches the
            cells deep in its clouds. ``"auto"``: the tile's side, when the raster needs more
            than one tile and the coarse grid is at least 2 × 2 blocks; None: no coarse model.

    Attributes:
        params_: θ (model units). loc_, scale_: the standardisation. fit_report_: L-BFGS's.
        interval_scale_: the factor (≥ 1) applied to every sd (1.0 without ``calibrate``).
        times_: dates (days). h_: cell size (y step = 1).
        mean_, sd_latent_: (T, n_y, n_x) the posterior at the fitted dates, data units.
        noise_sd_: (n_y, n_x) the sd of a new observation's noise (σ widened as the
        variances are), so that sd_observed_ = √(sd_latent_² + noise_sd_²).
        block_: the large scales' block side (0: none). coarse_: their model (a
            :class:`SpaceTimeRegressor` of the standardised stack's block means) or None;
            ``values_`` then holds the standardised stack less its interpolated mean.
    """

    axes_: list[np.ndarray]  # the raster's (y, x) model coordinates, set by its family

    def __init__(self, *, tile: int | str = "auto", halo: int | str = "auto",
                 fit_size: int | str = "auto",
                 fit_windows: int = 2, maxiter: int = 60, optimize: bool = True,
                 params: dict | None = None, ordering: str = "metis",
                 local_scale: bool = True, calibrate: bool = True,
                 threads: int | str = "auto", scheduler: str | Client | None = "auto",
                 max_bytes: float = 4 * 2**30,
                 progress: Callable[[int, int], None] | None = None,
                 large_scales: int | str | None = "auto") -> None:
        self.tile, self.halo = tile, halo
        self.fit_size, self.fit_windows = fit_size, fit_windows
        self.maxiter, self.optimize, self.params = maxiter, optimize, params
        self.ordering, self.local_scale, self.calibrate = ordering, local_scale, calibrate
        self.threads = threads
        self.scheduler = scheduler
        self.max_bytes, self.progress = max_bytes, progress
        self.large_scales = large_scales

    def _threads(self) -> int:
        return min(available_cores(), 4) if self.threads == "auto" else int(self.threads)

    def memory_estimate(self, shape: tuple[int, int, int]) -> float:
        """Estimated peak bytes of fitting and predicting a stack of ``shape`` (T, n_y, n_x):
        :data:`BASE_BYTES`, the largest window's unknowns (its cells × (T + 1) + T) times
        :data:`BYTES_PER_WINDOW_UNKNOWN` for each window held at once (the fitting windows,
        or ``threads`` tiles), and :data:`STACK_COPIES` float64 stacks."""
        self.check_args()
        t, ny, nx = (int(v) for v in shape)
        side = max(auto_side(t) if v == "auto" else int(v) for v in (self.tile, self.fit_size))
        unknowns = min(side, ny) * min(side, nx) * (t + 1) + t
        held = max(self._threads(), self.fit_windows if self.optimize else 1)
        # the large scales' model runs before the cells' posterior: its windows are never
        # held beside the tiles, and its stacks are a block's area smaller
        k = ((auto_side(t) if self.tile == "auto" else int(self.tile))
             if self.large_scales == "auto" else int(self.large_scales or 0))
        coarse = math.ceil(ny / k) * math.ceil(nx / k) if k else 0
        return (BASE_BYTES + BYTES_PER_WINDOW_UNKNOWN * unknowns * held
                + STACK_COPIES * 8.0 * t * (ny * nx + coarse))

    def check_memory(self, shape: tuple[int, int, int]) -> None:
        """Refuse a stack whose :meth:`memory_estimate` exceeds ``max_bytes``."""
        need = self.memory_estimate(shape)
        if need > self.max_bytes:
            raise MemoryEstimateError(
                f"the space-time model on {shape[0]} dates × {shape[1]} × {shape[2]} cells "
                f"(its windows and {STACK_COPIES:g} copies of the stack)", need, self.max_bytes,
                "Crop the stack or fit fewer dates, or raise max_bytes.",
                cli_hint="Crop the stack or fit fewer dates, or raise --max-memory.")

    def check_args(self) -> None:
        """Refuse invalid constructor options (``InputError``), as :meth:`fit` would."""
        for name, low in (("tile", 4), ("halo", 0), ("fit_size", 4)):
            value = getattr(self, name)
            if value != "auto":
                _count(value, name, low)
        if isinstance(self.max_bytes, bool) or not (
                isinstance(self.max_bytes, (int, float)) and self.max_bytes > 0):
            raise InputError(f"max_bytes must be a positive number of bytes; got "
                             f"{self.max_bytes!r}.")
        if self.threads != "auto":
            _count(self.threads, "threads", 1)
        if self.large_scales not in ("auto", None):
            _count(self.large_scales, "large_scales", 2)
        for name, low in (("fit_windows", 1), ("maxiter", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise InputError(f"{name} must be an integer ≥ {low}; got {value!r}.")

    # ------------------------------------------------------------------ fitting
    def fit(self, values: np.ndarray, times: np.ndarray, h: tuple[float, float] = (1.0, 1.0)
            ) -> SpaceTimeRegressor:
        """Fit to ``values`` (T, n_y, n_x), NaN where missing, at ``times`` (T,) (days)."""
        shape = np.shape(values)
        if len(shape) != 3:
            raise InputError(f"a stack has three dimensions (time, y, x); got {len(shape)}.")
        self.check_memory(shape)  # before the model's own copies
        for name in ("values_", "mean_", "sd_latent_"):  # a refit's: freed before the new
            self.__dict__.pop(name, None)
        values = np.asarray(values)
        n_obs, self.loc_, self.scale_ = _observed_moments(values)
        if n_obs < 10:
            raise InputError("a stack needs at least 10 observed values.")
        self.times_ = np.asarray(times, dtype=np.float64)
        self.unit_ = float(h[0])  # lengths in y steps inside the model
        self.h_ = (1.0, float(h[1]) / self.unit_)
        self.shape_ = values.shape
        # one float64 copy, standardised in place (a stack may fill a good part of memory)
        self.values_ = np.array(values, dtype=np.float64)
        self.values_ -= self.loc_
        self.values_ /= self.scale_
        self.solver_ = Solver("cholmod", ordering=self.ordering)
        side = auto_side(values.shape[0])
        self.tile_ = side if self.tile == "auto" else _count(self.tile, "tile", 4)
        self.halo_ = (max(3, self.tile_ // 5) if self.halo == "auto"
                      else _count(self.halo, "halo", 0))
        self.fit_size_ = (self.tile_ if self.fit_size == "auto"
                          else _count(self.fit_size, "fit_size", 4))
        windows(self.shape_[1:], self.tile_, self.halo_)  # a halo too wide for the tile
        params = dict(self.params or self._start())
        missing = set(PARAMS) - set(params)
        if missing:
            raise InputError(f"params lacks {sorted(missing)}.")
        self.fit_report_ = None
        if self.optimize:
            # each window in its own slot: all factorised in one host call per evaluation
            problems = [self._problem(w, slot=k) for k, w in enumerate(self._fit_windows())]
            params, self.fit_report_ = minimize_lbfgs(
                _loss, params, args=tuple(problems), unconstrained=PARAMS,
                maxiter=self.maxiter, bounds=self._bounds(), stall=STALL)
        self.params_ = {k: float(v) for k, v in params.items()}
        self.block_ = self._large_block()
        self.coarse_ = self._fit_large() if self.block_ else None
        self.interval_scale_ = self._interval_scale() if self.calibrate else 1.0
        self.mean_, self.sd_latent_, self.noise_sd_ = self._moments(self.times_, self._block)
        return self

    def _large_block(self) -> int:
        """The large scales' block side: ``large_scales``, or with ``"auto"`` the tile's side
        where the raster needs more than one tile and holds at least 2 × 2 blocks (0: none)."""
        ny, nx = self.shape_[1:]
        if self.large_scales is None:
            return 0
        if self.large_scales != "auto":
            return _count(self.large_scales, "large_scales", 2)
        k = self.tile_
        several = len(windows((ny, nx), self.tile_, self.halo_)) > 1
        return k if several and ny > k and nx > k else 0

    def _fit_large(self) -> SpaceTimeRegressor | None:
        """Fit the coarse model to the standardised stack's block means (its own θ, learnt
        even where the cells' θ is given; the same windows' sides and options, no large
        scales of its own), and subtract its mean, interpolated to the cells, from
        ``values_``; None (and ``block_`` 0) where the blocks hold too few values."""
        k = self.block_
        coarse_values = block_means(self.values_, k)
        if np.isfinite(coarse_values).sum() < 10 or min(coarse_values.shape[1:]) < 2:
            self.block_ = 0
            return None
        coarse = SpaceTimeRegressor(
            tile=self.tile, halo=self.halo, fit_size=self.fit_size,  # windows no larger
            fit_windows=self.fit_windows, maxiter=self.maxiter, ordering=self.ordering,
            local_scale=self.local_scale, calibrate=self.calibrate, threads=self.threads,
            scheduler=self.scheduler, max_bytes=self.max_bytes, large_scales=None)
        ny, nx = self.shape_[1:]
        coarse.fit(coarse_values, self.times_,
                   (block_step(ny, k), block_step(nx, k) * self.h_[1]))
        up = Upsampler(self.shape_[1:], k)
        for i, plane in enumerate(coarse.mean_):
            self.values_[i] -= up.up(plane)  # in place; NaN stays missing
        return coarse

    def _large_moments(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The coarse model's (mean, latent sd) at ``times`` (its own fitted moments at the
        fitted dates), (len(times), c_y, c_x), in the cells' model's standardised units."""
        coarse = self.coarse_
        assert coarse is not None
        if np.array_equal(times, coarse.times_):
            return coarse.mean_, coarse.sd_latent_
        mean, latent, _ = coarse.predict_dates(times)
        return mean, latent

    @property
    def sd_observed_(self) -> np.ndarray:
        """(T, n_y, n_x) the sd of a new observation, data units: √(sd_latent_² +
        noise_sd_²), computed on each call (one stack: the model keeps the 2-D noise map
        only)."""
        return _observed_sd(self.sd_latent_, self.noise_sd_)

    def _start(self) -> dict:
        step = float(np.median(np.diff(self.times_)))
        return {"log_range": math.log(4.0), "log_sd": math.log(0.5),
                "log_tau": math.log(3.0 * step), "log_range_mean": math.log(4.0),
                "log_sd_mean": math.log(0.7), "log_sd_offset": math.log(0.3),
                "log_tau_offset": math.log(3.0 * step), "log_noise": math.log(0.2)}

    def _bounds(self) -> dict:
        span = float(self.times_[-1] - self.times_[0])
        reach = math.log(10.0 * max(self.shape_[1:]))
        step = float(np.min(np.diff(self.times_)))
        time_box = (math.log(0.05 * step), math.log(100.0 * span))
        return {"log_range": (math.log(0.5), reach), "log_range_mean": (math.log(0.5), reach),
                "log_tau": time_box, "log_tau_offset": time_box,
                "log_noise": (math.log(1e-4), None)}

    def _fit_windows(self) -> list[Window]:
        """The ``fit_windows`` windows of side ``fit_size`` with the most data, among those
        tiling the raster (the last of each row and column shifted inwards, so all have one
        shape; the whole raster where it is smaller)."""
        count = np.isfinite(self.values_).sum(axis=0)
        cands = windows(self.shape_[1:], self.fit_size_, 0)
        cands.sort(key=lambda w: -int(count[w.y0:w.y1, w.x0:w.x1].sum()))
        return cands[:self.fit_windows]

    def _calibration_windows(self) -> list[Window]:
        """Windows of side ``fit_size`` on an evenly spread grid of rows and columns of those
        tiling the raster (about :data:`CALIBRATION_WINDOWS`), those that hold data."""
        count = np.isfinite(self.values_).sum(axis=0)
        grid = windows(self.shape_[1:], self.fit_size_, 0)  # row by row
        n_rows = len({w.y0 for w in grid})
        n_cols = len(grid) // n_rows
        side = math.ceil(math.sqrt(CALIBRATION_WINDOWS))
        rows, cols = (np.unique(np.round(np.linspace(0, n - 1, min(side, n)))).astype(int)
                      for n in (n_rows, n_cols))
        picked = (grid[r * n_cols + c] for r in rows for c in cols)
        return [w for w in picked if count[w.y0:w.y1, w.x0:w.x1].sum() >= 10]

    def _interval_scale(self) -> float:
        """The factor the sds need for 95 % coverage of values hidden under other dates'
        clouds (:func:`stack_gap_folds`) in windows spread over the raster
        (:meth:`_calibration_windows`), at the fitted θ. With the large scales, each fold's
        are the coarse model's posterior without the fold's hidden values (its θ kept), and
        the hidden values' errors are scaled by both models' variances, as the sds are."""
        noise = math.exp(2.0 * self.params_["log_noise"])
        picked = []
        for k, w in enumerate(self._calibration_windows()):
            block = self.values_[:, w.y0:w.y1, w.x0:w.x1]
            try:
                folds = stack_gap_folds(np.isfinite(block), CALIBRATION_FOLDS, fraction=1.0,
                                        seed=k)
            except InputError:  # no cloud of one date over another's data
                continue
            picked += [(f, w, hidden) for f, hidden in enumerate(folds)
                       if int((np.isfinite(block) & ~hidden).sum()) >= 10]
        jobs = []
        up = Upsampler(self.shape_[1:], self.block_) if self.coarse_ is not None else None
        for f in range(CALIBRATION_FOLDS):
            fold = [(w, hidden) for g, w, hidden in picked if g == f]
            large = self._large_without(fold) if self.coarse_ is not None else None
            for w, hidden in fold:
                block, extra = self.values_[:, w.y0:w.y1, w.x0:w.x1], 0.0
                if large is not None and up is not None:  # less the fold's own large scales
                    rows, cols = slice(w.y0, w.y1), slice(w.x0, w.x1)
                    block = block + np.stack([up.up(a - b, rows, cols) for a, b in
                                              zip(self.coarse_.mean_, large[0], strict=True)])
                    extra = np.stack([up.up(s, rows, cols) ** 2 for s in large[1]])
                jobs.append((block, hidden, int((np.isfinite(block) & ~hidden).sum()), extra))

        def errors(job: tuple, slot: int) -> np.ndarray:
            block, hidden, kept, extra = job
            train = np.where(hidden, np.nan, block)
            problem = self._problem(Window.over(block.shape), train, slot=slot)
            m, v, _, scale2 = posterior(self.params_, problem, ordering=self.ordering)
            c2 = _shrunk(scale2, kept) if self.local_scale else 1.0
            z = (block - m.reshape(block.shape)) / np.sqrt(
                c2 * (v.reshape(block.shape) + noise) + extra)
            return z[hidden]

        found = list(self._in_threads(errors, jobs))
        return interval_scale(np.concatenate(found)) if found else 1.0

    def _large_without(self, fold: list[tuple[Window, np.ndarray]]
                       ) -> tuple[np.ndarray, np.ndarray]:
        """The coarse model's posterior (mean, latent sd), (T, c_y, c_x) in the cells' model's
        standardised units, with the values ``fold`` hides (each window's mask) left out of
        the block means: the blocks they touch are averaged again from the stack without
        them, and the coarse posterior is computed at its fitted θ."""
        coarse, k = self.coarse_, self.block_
        assert coarse is not None
        ny, nx = self.shape_[1:]
        up = Upsampler((ny, nx), k)
        rows, cols = spans(ny, k), spans(nx, k)
        touched: dict[tuple[int, int], np.ndarray] = {}
        for w, hidden in fold:
            for i, (y0, y1) in enumerate(rows):
                for j, (x0, x1) in enumerate(cols):
                    ya, yb, xa, xb = max(y0, w.y0), min(y1, w.y1), max(x0, w.x0), min(x1, w.x1)
                    if ya >= yb or xa >= xb:
                        continue
                    part = hidden[:, ya - w.y0:yb - w.y0, xa - w.x0:xb - w.x0]
                    if part.any():
                        mask = touched.setdefault(
                            (i, j), np.zeros((self.shape_[0], y1 - y0, x1 - x0), bool))
                        mask[:, ya - y0:yb - y0, xa - x0:xb - x0] |= part
        values = coarse.values_.copy()  # the coarse model's standardised block means
        for (i, j), mask in touched.items():
            (y0, y1), (x0, x1) = rows[i], cols[j]
            block = self.values_[:, y0:y1, x0:x1] + np.stack(
                [up.up(p, slice(y0, y1), slice(x0, x1)) for p in coarse.mean_])
            values[:, i, j] = (block_mean(np.where(mask, np.nan, block)) - coarse.loc_
                               ) / coarse.scale_
        mean, latent, _ = coarse._moments(coarse.times_,
                                          lambda w: values[:, w.y0:w.y1, w.x0:w.x1])
        return mean, latent

    def _in_threads(self, fn: Callable, items: list):
        """``fn(item, slot)`` for each item, ``threads`` at once, each call in a pattern slot
        no other running call holds (one factor per thread); the results in order. Fewer than
        :data:`MIN_THREADED_ITEMS` items run in one thread: a second slot compiles the
        likelihood again, which costs more than a few small windows gain."""
        threads = 1 if len(items) < MIN_THREADED_ITEMS else min(self._threads(), len(items))
        slots: queue.SimpleQueue = queue.SimpleQueue()
        for k in range(threads):
            slots.put(k)

        def run(item):
            slot = slots.get()
            try:
                return fn(item, slot)
            finally:
                slots.put(slot)

        with ThreadPoolExecutor(threads, thread_name_prefix="geogp-tile") as pool:
            yield from _in_order(lambda item: pool.submit(run, item), items, 2 * threads)

    def _problem(self, w: Window, values: np.ndarray | None = None,
                 times: np.ndarray | None = None, slot: int = 0):
        """The window's problem over the fitted stack (or ``values`` at ``times``), with the
        pattern of ``slot`` (:func:`~geogp.models.spacetime.gmrf.structure`)."""
        cells, steps, y = _observations(self.values_ if values is None else values, w)
        return make_problem(w.shape, self.h_, self.times_ if times is None else times, cells,
                            steps, y, np.ones((y.size, 1)), self.solver_, slot)

    # ------------------------------------------------------------------ prediction
    def predict_grid(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mean, latent sd, sd of a new observation), each (T, n_y, n_x), in data units."""
        if not hasattr(self, "params_"):
            raise NotFittedError("fit the model first.")
        mean, latent, noise_sd = self._moments(self.times_, self._block)
        return mean, latent, _observed_sd(latent, noise_sd)

    def _block(self, w: Window) -> np.ndarray:
        """The fitted stack's window ``w`` (standardised, a view)."""
        return self.values_[:, w.y0:w.y1, w.x0:w.x1]

    def predict_dates(self, times: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mean, latent sd, sd of a new observation), each (len(times), n_y, n_x), at dates
        ``times`` (days, on the fitted dates' scale) inside or beyond the series: the fitted
        θ's posterior with those dates added, unobserved. After the last date the anomalies
        and the offset decay as their AR(1) says (φ = exp(−Δt/τ)) and the interval widens to
        the prior's; a fitted date gives its own moments.

        Cost: one posterior pass over the stack with the new dates (no new fit); memory two
        arrays of the asked dates, each tile's window with the dates added built in turn."""
        if not hasattr(self, "params_"):
            raise NotFittedError("fit the model first.")
        new = np.asarray(times, dtype=np.float64).ravel()
        if new.size == 0 or not np.all(np.isfinite(new)):
            raise InputError("predict_dates needs one or more finite dates (days).")
        every = np.union1d(self.times_, new)
        mean, latent, noise_sd = self._moments(every, partial(self.dated_block, every),
                                               keep=np.searchsorted(every, new))
        return mean, latent, _observed_sd(latent, noise_sd)

    def dated_block(self, times: np.ndarray, w: Window) -> np.ndarray:
        """The fitted stack's window ``w`` (standardised) at ``times``, a sorted superset of
        the fitted dates: a new array, NaN at the dates added (one window at a time, never
        the whole stack with them)."""
        out = np.full((times.size, w.y1 - w.y0, w.x1 - w.x0), np.nan)
        out[np.searchsorted(times, self.times_)] = self._block(w)
        return out

    def _moments(self, times: np.ndarray, block: Callable[[Window], np.ndarray],
                 keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The posterior moments of the stack at ``times`` whose window ``w`` is ``block(w)``
        (standardised, NaN: missing), tile by tile at the fitted θ, ``threads`` tiles at once
        (each thread's tiles in a slot of their own: one factor per thread): (mean, latent
        sd) at the dates ``keep`` (indices into ``times``; all by default), each
        (len(keep), n_y, n_x), and the (n_y, n_x) sd of a new observation's noise, data
        units. Two stacks are allocated, and filled in place."""
        ny, nx = self.shape_[1:]
        keep = np.arange(len(times)) if keep is None else np.asarray(keep)
        mean, var = np.empty((keep.size, ny, nx)), np.empty((keep.size, ny, nx))
        tiles = windows((ny, nx), self.tile_, self.halo_)
        p = self.params_
        prior = math.exp(2 * p["log_sd"]) + math.exp(2 * p["log_sd_mean"]) + math.exp(
            2 * p["log_sd_offset"])

        def tile_moments(w: Window, slot: int) -> tuple[np.ndarray, np.ndarray, float]:
            return tile_task(p, self.h_, times, self.ordering, prior, block(w), self.solver_,
                             slot)

        scales = np.full(len(tiles), math.nan)
        with dask_client(self.scheduler if len(tiles) > 1 else None) as client:
            if client is None:
                moments = self._in_threads(tile_moments, tiles)
            else:  # each tile's window of the stack goes to a worker, its moments come back
                task = partial(tile_task, dict(p), self.h_, np.asarray(times), self.ordering,
                               prior)
                moments = _in_order(partial(client.submit, task, pure=False),
                                    (block(w) for w in tiles), TASKS_AHEAD)
            for i, (w, (m, v, scales[i])) in enumerate(zip(tiles, moments, strict=True)):
                core = (keep, slice(w.cy0 - w.y0, w.cy1 - w.y0),
                        slice(w.cx0 - w.x0, w.cx1 - w.x0))
                mean[:, w.cy0:w.cy1, w.cx0:w.cx1] = m[core]
                var[:, w.cy0:w.cy1, w.cx0:w.cx1] = v[core]
                if (i + 1) % TRIM_EVERY == 0:
                    release_memory()
                if self.progress is not None:
                    self.progress(i + 1, len(tiles))
        local = (_scale_map((ny, nx), tiles, scales) if self.local_scale
                 else np.ones((ny, nx)))
        wide = self.scale_ * self.interval_scale_
        np.maximum(var, 0.0, out=var)
        var *= local * wide**2
        if self.coarse_ is not None:  # the prior mean the tiles' data were taken from
            up = Upsampler((ny, nx), self.block_)
            for i, (m, s) in enumerate(zip(*self._large_moments(times[keep]), strict=True)):
                mean[i] += up.up(m)
                var[i] += (self.scale_ * up.up(s)) ** 2
        mean *= self.scale_
        mean += self.loc_
        latent = np.sqrt(var, out=var)
        return mean, latent, wide * np.sqrt(math.exp(2.0 * p["log_noise"]) * local)

    def forecast(self, time: float) -> SpaceTimeForecast:
        """The posterior at one date ``time`` (days, on the fitted dates' scale), inside or
        after the series: :meth:`predict_dates`' moments there, kept with the model as a
        :class:`SpaceTimeForecast` (what placement at that date starts from)."""
        t = np.asarray(time, dtype=np.float64)
        if t.size != 1 or not np.isfinite(t).all():
            raise InputError(f"time must be one finite date (days); got {time!r}.")
        self.check_memory((self.shape_[0] + 1, *self.shape_[1:]))  # the stack with that date
        mean, latent, observed = (m[0] for m in self.predict_dates([float(t)]))
        return SpaceTimeForecast(self, float(t), mean, latent, observed)

    # ------------------------------------------------------------------ samples
    def sample(self, n: int, seed: int | np.random.SeedSequence | np.random.Generator | None = None,
               observed: bool = False) -> np.ndarray:
        """``n`` posterior samples of the stack at every fitted (date, cell), (n, T, n_y, n_x),
        data units (``observed``: with a new observation's noise).

        Conditional simulation by Matheron's rule: a draw f of the prior over the whole raster
        and every date (:func:`~geogp.models.spacetime.gmrf.prior_draws`), its data
        y* = f + noise where the stack is observed, and the sample mean + (f − K y*), K the
        tiles' universal-kriging predictor (the one the mean comes from;
        :func:`~geogp.models.spacetime.gmrf.kriging_means`). Exact where one tile covers the
        stack; on tiles the prior draw is the whole raster's, so samples are continuous
        across the tiles' seams. The deviation is widened as the sds are (each tile's factor
        and the folds' factor), so the samples' spread reproduces ``sd_latent_``.

        Cost: per tile one factorisation and one solve with n right-hand sides; memory two
        stacks of n samples (the draws, which become the samples, and their data)."""
        if not hasattr(self, "params_"):
            raise NotFittedError("fit the model first.")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InputError(f"n (number of samples) must be an integer ≥ 1; got {n!r}.")
        rng = np.random.default_rng(seed)
        p, values, times = self.params_, self.values_, self.times_
        t = values.shape[0]
        f = prior_draws(p, self.shape_[1:], self.h_, times, int(n), rng, self.solver_)
        noise_sd = math.exp(p["log_noise"])
        y_star = rng.standard_normal(f.shape)  # in place: two stacks of draws, not three
        y_star *= noise_sd
        y_star += f

        def tile_draws(w: Window, slot: int) -> np.ndarray:
            cells, steps, y = _observations(values, w)
            if not steps.size:  # no data in reach: the prior itself
                return np.zeros((n, t, *w.shape))
            X = np.ones((y.size, 1))
            Y = y_star[:, :, w.y0:w.y1, w.x0:w.x1].reshape(n, t, -1)[:, steps, cells].T
            problem = make_problem(w.shape, self.h_, times, cells, steps, y, X, self.solver_,
                                   slot)
            k = kriging_means(p, problem, cells, steps, X, Y)  # (T, cells, n)
            return np.moveaxis(k, -1, 0).reshape(n, t, *w.shape)

        tiles = windows(self.shape_[1:], self.tile_, self.halo_)
        for w, k in zip(tiles, self._in_threads(tile_draws, tiles), strict=True):
            core = (slice(None), slice(None), slice(w.cy0, w.cy1), slice(w.cx0, w.cx1))
            local = (slice(None), slice(None), slice(w.cy0 - w.y0, w.cy1 - w.y0),
                     slice(w.cx0 - w.x0, w.cx1 - w.x0))
            f[core] -= k[local]  # the tiles read y*, never f: each core becomes f − K y*
        out, f, y_star = f, None, None  # free y* before the widening's temporaries
        # the sds' widening, read back from the noise map: noise_sd_ is (scale ·
        # interval_scale) σ times the root of each cell's variance factor
        wide = self.scale_ * self.interval_scale_
        factor = self.noise_sd_ / (wide * noise_sd)
        out *= wide * factor
        if self.coarse_ is not None:  # the large scales' own draws, independent of the cells'
            large = self.coarse_.sample(int(n), seed=rng)
            large -= self.coarse_.mean_[None]
            add_deviations(out, large, self.coarse_.sd_latent_,
                           Upsampler(self.shape_[1:], self.block_), self.scale_)
        if observed:
            noise = rng.standard_normal(out.shape)
            noise *= self.noise_sd_
            out += noise
        out += self.mean_[None]
        return out


def tile_task(params: dict, h: tuple[float, float], times: np.ndarray, ordering: str,
              prior: float, block: np.ndarray, solver: Solver | None = None,
              slot: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    """One tile's posterior moments from its window ``block`` (T, n_y, n_x) of the
    standardised stack (NaN: missing) alone, in this process's threads (``solver``, a pattern
    ``slot`` of its own) or as a dask worker's task (a solver of its own): (mean, variance,
    shrunk REML factor); a window without data gives the prior (around the stack's mean) and
    NaN."""
    t, shape = block.shape[0], block.shape[1:]
    cells, steps, y = _observations(block, Window.over(shape))
    if not steps.size:
        return np.zeros(block.shape), np.full(block.shape, prior), math.nan
    problem = make_problem(shape, h, times, cells, steps, y, np.ones((y.size, 1)),
                           solver or Solver("cholmod", ordering=ordering), slot)
    m, v, _, scale2 = posterior(params, problem, ordering=ordering)
    return m.reshape(t, *shape), v.reshape(t, *shape), _shrunk(scale2, int(steps.size))


def _observed_sd(latent: np.ndarray, noise_sd: np.ndarray) -> np.ndarray:
    """The sd of a new observation: the latent sd and the noise's in quadrature."""
    return np.sqrt(latent**2 + noise_sd**2)


def _observed_moments(values: np.ndarray) -> tuple[int, float, float]:
    """(count, mean, sd) of the finite values of a stack, date by date in float64 (no
    stack-sized temporaries); an sd of 0 (one value repeated) becomes 1."""
    n, total = 0, 0.0
    for plane in values:
        ok = np.isfinite(plane)
        n += int(ok.sum())
        total += float(plane[ok].sum(dtype=np.float64))
    mean = total / max(n, 1)
    squares = sum(float(np.square(plane[np.isfinite(plane)] - mean, dtype=np.float64).sum())
                  for plane in values)
    return n, mean, math.sqrt(squares / max(n, 1)) or 1.0


# return the freed heap to the system every this many tiles: without it the tiles' freed
# windows fragment glibc's arenas and the resident memory creeps up (+0.15 GiB per 1,000
# tiles measured on a 200 × 200 × 46 stack; flat with it, at no cost in time)
TRIM_EVERY = 50

# tiles' windows sent to a dask cluster ahead of the results read back (each window is held
# until its task ends: a whole stack's would be its size times the halo's overlap)
TASKS_AHEAD = 32


def _in_order(submit: Callable, items, ahead: int):
    """The results of ``submit(item)`` (a future: threads' or dask's) for each of ``items``
    (an iterator), in order, with at most ``ahead`` submitted and not yet read back, so that
    finished tiles never pile up in memory."""
    pending: deque = deque()
    for item in items:
        pending.append(submit(item))
        if len(pending) >= ahead:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def _observations(values: np.ndarray, w: Window) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cells, steps, y): the observed values of ``values`` (T, n_y, n_x) in window ``w``, with
    their flat cells in the window (row-major) and date indices, date by date."""
    flat = values[:, w.y0:w.y1, w.x0:w.x1].reshape(values.shape[0], -1)
    steps, cells = np.nonzero(np.isfinite(flat))
    return cells, steps, flat[steps, cells]


# a tile's variance factor is shrunk towards 1 as if from this many more observations at 1
# (a tile at the raster's edge or under cloud can hold few)
SCALE_PRIOR_OBS = 50


def _shrunk(scale2: float, n_obs: int) -> float:
    """A tile's REML variance factor shrunk towards 1 in log: n/(n + SCALE_PRIOR_OBS) of it."""
    return math.exp(n_obs / (n_obs + SCALE_PRIOR_OBS) * math.log(max(scale2, 1e-12)))


def _scale_map(shape: tuple[int, int], tiles: list[Window], scales: np.ndarray) -> np.ndarray:
    """(n_y, n_x) the tiles' variance factors (NaN: a tile without data) interpolated
    linearly in log between the centres of their cores (constant beyond the outer ones);
    tiles without data take the geometric mean of the others."""
    logs = np.log(scales)
    good = np.isfinite(logs)
    logs[~good] = logs[good].mean() if good.any() else 0.0
    ys = sorted({(w.cy0 + w.cy1 - 1) / 2.0 for w in tiles})
    xs = sorted({(w.cx0 + w.cx1 - 1) / 2.0 for w in tiles})
    grid = logs.reshape(len(ys), len(xs))  # windows() lists tiles row by row
    rows = np.stack([np.interp(np.arange(shape[1]), xs, g) for g in grid])
    return np.exp(np.stack([np.interp(np.arange(shape[0]), ys, rows[:, j])
                            for j in range(shape[1])], axis=1))


def cell_indices(axis: np.ndarray, q: np.ndarray, outside: str) -> np.ndarray:
    """Index of each coordinate ``q`` on the fitted ``axis`` (cell centres; −1: none, with
    ``outside="nan"``)."""
    step = abs(float(axis[1] - axis[0])) if axis.size > 1 else 1.0
    order = np.argsort(axis)
    pos = np.clip(np.searchsorted(axis[order], q), 0, axis.size - 1)
    near = np.where(np.abs(axis[order][np.maximum(pos - 1, 0)] - q)
                    < np.abs(axis[order][pos] - q), np.maximum(pos - 1, 0), pos)
    idx = order[near]
    hit = np.abs(axis[idx] - q) <= 0.05 * step  # cell centres, up to float32 coordinates
    if not hit.all() and outside == "raise":
        raise InputError("model='spacetime' predicts on the fitted stack's own cells; this "
                         "grid has cells elsewhere (predict with like=None, or pass "
                         "outside='nan').")
    return np.where(hit, idx, -1)


@dataclass(frozen=True)
class SpaceTimeForecast:
    """The posterior of a fitted :class:`SpaceTimeRegressor` at one date (a typed value, as
    :class:`SpaceTimeDate` is for a fitted date): ``time`` (days), and ``mean``,
    ``sd_latent``, ``sd_observed`` (n_y, n_x) there, data units, widened as the fitted dates'
    are. Sensor placement at that date starts from it
    (:mod:`geogp.placement.spacetime`)."""

    model: SpaceTimeRegressor
    time: float
    mean: np.ndarray
    sd_latent: np.ndarray
    sd_observed: np.ndarray


@dataclass(frozen=True)
class SpaceTimeDate:
    """One date of a fitted :class:`SpaceTimeRegressor`: what the front end keeps per slice."""

    model: SpaceTimeRegressor
    index: int

    @property
    def report_(self) -> FitReport | None:
        """The joint fit's optimisation report."""
        return self.model.fit_report_
