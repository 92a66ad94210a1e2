"""The behaviour every model family shares unless it says otherwise: :class:`Family`.

A family (:class:`Family`, the contract between the front end and a model) adapts one
numerical model to the front end.
By default a model is fitted on scattered points (``est.fit(X, y)``; a raster's observed cells
become points), predicted at points (``est.predict(X)``; a grid row block by row block), and
has no samples, evidence or file format. The families of :mod:`geogp.families` override what
their model does better (grid paths, samplers, evidence, persistence).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

from geogp.core.extrapolation import record_data_box, warn_if_far
from geogp.core.formatting import number
from geogp.core.memory import LAZY_BLOCK_CELLS, rows_per_block
from geogp.exceptions import GeogpError, GeographicCoordinatesWarning, InputError
from geogp.models.base import Prediction

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.core.kernels import Kernel
    from geogp.placement.contract import Placement

__all__ = ["Family", "FAMILY", "PointFitter", "PointPredictor", "kernel_facts",
           "lazy_block_rows", "observed_cells", "point_fitter", "point_predictor"]

# a lazy prediction's blocks: at most LAZY_BLOCK_CELLS cells (geogp.core.memory), and a power of
# two of rows up to LAZY_BLOCK_ROWS, so that they tile the GeoTIFF writer's windows
# (geogp.frontend.io.WRITE_ROWS, 1024 rows)
LAZY_BLOCK_ROWS = 1024

M = TypeVar("M")  # the family's model type


@runtime_checkable
class PointFitter(Protocol):
    """What the default :meth:`Family.fit_points` calls on a model."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> Any: ...


@runtime_checkable
class PointPredictor(Protocol):
    """What the default :meth:`Family.predict_at` calls on a model."""

    def predict(self, X: np.ndarray) -> Prediction: ...


def point_fitter(est: object, family: str) -> PointFitter:
    """``est`` as a model with ``fit(X, y)``, or a clear error: a family whose model has none
    overrides :meth:`Family.fit_points` (or the grid path)."""
    if not isinstance(est, PointFitter):
        raise TypeError(f"the {family!r} family's model {type(est).__name__} has no "
                        "fit(X, y); the family must override fit_points.")
    return est


def point_predictor(est: object, family: str) -> PointPredictor:
    """``est`` as a model with ``predict(X)``, or a clear error: a family whose model has
    none overrides :meth:`Family.predict_at`."""
    if not isinstance(est, PointPredictor):
        raise TypeError(f"the {family!r} family's model {type(est).__name__} has no "
                        "predict(X); the family must override predict_at.")
    return est


class Family(Generic[M]):
    """What the geodata front end needs from a model: one object per model (its package's
    ``family.py``, looked up by name in the registry, :mod:`geogp.families`) that builds,
    fits, predicts, samples, places, conditions, describes, scores, saves and loads that
    model, of type ``M``.

    The numerical models (``AFSRegressor``, ``LatticeRegressor``, ...) speak numpy in model
    coordinates; a family adapts one of them to the front end, so that the front end,
    persistence, cross-validation and placement never switch on the model's kind. Every
    method takes the model object ``est`` it works on (``make``/``from_arrays`` return one).
    Grids are tensor grids given by ``axes`` (y coordinates, x coordinates), model units.
    This class holds the defaults; a subclass sets ``name``, ``model_class``, its
    capability flags and ``defaults`` (the front end's option defaults), and overrides what
    its model does differently.

    Capability flags:
        savable: :meth:`to_arrays` can store a fitted model. can_sample: :meth:`sample_grid`
        draws posterior samples. takes_covariates: :meth:`fit_grid` accepts covariate
        rasters. takes_kernel: the model takes ``kernel=``. takes_features: it takes
        ``n_features=``. shares_hyperparameters: slices can share the first slice's
        hyperparameters. maps_lengthscale: the lengthscale varies in space. single_range:
        the lengthscale is one isotropic range (reported as ρ). estimates_cost: the model
        estimates a fit's tiles, memory and time up front. can_place / can_condition:
        :meth:`placement` / :meth:`condition` work. posterior_on_tiles: the posterior may
        be computed on tiles (:meth:`posterior_tiles`). fits_series: :meth:`fit_series` fits
        a stack's dates jointly (the front end's path for image time series).
        places_in_time: :meth:`forecast` gives the posterior at one date of a stack, which
        :meth:`placement` takes (where to measure at the next date). fits_robust:
        ``robust=True`` fits a noise model with gross errors (``geogp fit --robust``).
        maps_local_scales: the model has a range and sd per cell (:meth:`local_scales`;
        ``geogp fit --local-range``).

    Other attributes:
        default_maxiter: optimiser iterations of a progress bar (None: no training bar).
        placement_strategy: the default strategy of ``geogp place`` for this model.
        setup_phase: the name of the progress bar's phase before the optimiser.
    """

    name = "other"
    model_class: ClassVar[type | None] = None
    savable = False
    can_sample = False
    takes_covariates = False
    takes_kernel = False
    shares_hyperparameters = False
    maps_lengthscale = False
    maps_local_scales = False  # local_scales(): a range and sd per cell
    single_range = False
    estimates_cost = False
    default_maxiter: int | None = None
    can_place = False  # placement(): sensor placement on the fitted posterior
    can_condition = False  # condition(): observations added without refitting
    posterior_on_tiles = False  # the posterior may be computed on tiles (posterior_tile=)
    fits_series = False  # fit_series(): one joint fit over a stack's dates
    places_in_time = False  # forecast(): placement at a date of the stack (the next one)
    fits_robust = False  # robust=True: gross errors learnt and down-weighted
    takes_features = False  # n_features= (the AFS options --features and --kernel)
    # placement's feature limit (its dense posterior); None: no features
    max_placement_features: int | None = None
    placement_strategy = "mi"  # geogp place's default strategy
    placement_type: ClassVar[type[Placement] | None] = None  # what placement() builds
    setup_phase = "setup + compile"  # the progress bar of what precedes the optimiser
    default_kernel = "matern12"  # for models that take kernel= (see make)
    defaults: ClassVar[dict] = {}  # options that make() sets unless given
    unknowns_word = "Fourier features"

    # ------------------------------------------------------------------ building
    def option_names(self) -> set:
        """Keyword arguments the family's model accepts."""
        if self.model_class is None:
            return set()
        return set(inspect.signature(self.model_class).parameters)

    def make(self, options: dict | None = None, *, kernel: str | Kernel | None = None,
             n_features: int | str | None = None,
             progress: Callable[[int, float], object] | None = None) -> Any:
        """An unfitted model of this family.

        Args:
            options: further keyword arguments of the model (validated against its signature).
            kernel: kernel name (models that take one); default ``"matern12"``.
            n_features: number of Fourier features M (AFS).
            progress: ``progress(iteration, objective)`` callback, for models that take one.

        The front end's AFS defaults (Matérn-1/2, linear trend, M from the data size) were
        chosen by cross-validation on a real satellite raster (``benchmarks/heaton_cv.py``,
        issue #9); the lattice model's (64 large-scale features, the mid-scale level on
        rasters with ≥ 128 cells a side) are in :mod:`geogp.models.lattice.family`.
        """
        if self.model_class is None:
            raise InputError(f"model={self.name!r} cannot be built by the front end.")
        params = dict(options or {})
        accepted = self.option_names()
        if kernel is not None:
            params["kernel"] = kernel
        elif "kernel" in accepted:
            params.setdefault("kernel", self.default_kernel)
        if n_features is not None:
            params["n_features"] = n_features
        for key, value in self.defaults.items():
            params.setdefault(key, value)
        if progress is not None and "progress" in accepted:
            params["progress"] = progress
        unknown = sorted(set(params) - accepted)
        if unknown:
            raise InputError(
                f"unknown option(s) {unknown} for model={self.name!r}; it accepts "
                f"{sorted(accepted)}."
            )
        return self.model_class(**params)

    def memory_estimate(self, est: M, raster_shape: tuple) -> float:
        """Estimated peak bytes of a raster fit; NaN where the model has no estimate."""
        return float("nan")

    def check_memory(self, est: M, raster_shape: tuple) -> None:
        """Nothing to refuse up front (models check their own memory while fitting)."""

    def announce_cost(self, est: M, raster_shape: tuple) -> None:
        """Before a raster fit with progress bars (families with ``estimates_cost``): say
        on stderr what the fit will cost. Nothing to say by default."""

    # ------------------------------------------------------------------ fitting
    def widen(self, est: M, lo: np.ndarray, hi: np.ndarray, t_lo: np.ndarray, t_hi: np.ndarray,
              scale: np.ndarray) -> None:
        """Widen ``est``'s window from the data's box [lo, hi] to the target box [t_lo, t_hi]
        (model units; ``scale``: the data's standard deviation per axis). Default: no window."""

    def cover_target(self, est: M, X: np.ndarray, target_axes: list[np.ndarray] | None) -> None:
        """Widen the window of a model fitted on X (N, 2) to the target grid ``target_axes``."""
        if target_axes is None:
            return
        t_lo = np.array([min(a.min(), b) for a, b in zip(target_axes, X.min(axis=0), strict=True)])
        t_hi = np.array([max(a.max(), b) for a, b in zip(target_axes, X.max(axis=0), strict=True)])
        self.widen(est, X.min(axis=0), X.max(axis=0), t_lo, t_hi, X.std(axis=0))

    def fit_points(self, est: M, X: np.ndarray, y: np.ndarray,
                   target_axes: list[np.ndarray] | None = None,
                   units: str = "coordinate units") -> Any:
        """Fit on scattered points X (N, 2) (model coordinates), y (N,); the window covers
        ``target_axes``. The data's box (and ``units``) is kept for :func:`warn_if_far`."""
        self.cover_target(est, X, target_axes)
        with warnings.catch_warnings():  # model coordinates: longitude already scaled by cos φ̄
            warnings.simplefilter("ignore", GeographicCoordinatesWarning)
            point_fitter(est, self.name).fit(X, y)
        record_data_box(est, X[np.isfinite(np.asarray(y, dtype=np.float64))], units)
        return est

    def refuse_covariates(self, covariates: np.ndarray | None) -> None:
        if covariates is not None and not self.takes_covariates:
            raise InputError(f"covariates are supported by the lattice model only; got "
                             f"model={self.name!r}.")

    def fit_grid(self, est: M, axes: list, values: ArrayLike, regular: bool,
                 covariates: np.ndarray | None = None) -> Any:
        """Fit on one raster slice ``values`` (N_y, N_x) (numpy or dask, NaN = missing): by
        default its observed cells as scattered points, with a window over the raster."""
        self.refuse_covariates(covariates)
        v, obs, X = observed_cells(axes, values)
        return self.fit_points(est, X, v[obs], axes)

    def fit_series(self, est: M, axes: list, values: ArrayLike, times: np.ndarray,
                   regular: bool) -> list:
        """Fit a whole stack ``values`` (T, N_y, N_x) at ``times`` (T,, days) jointly; returns
        the per-date models the front end keeps (families with ``fits_series``)."""
        raise InputError(f"model={self.name!r} fits one image at a time; a joint fit over "
                         "the dates is model='spacetime'.")

    def forecast(self, est: M, time: float) -> Any:
        """The posterior at one date ``time`` (days on the fitted series' scale), inside or
        after the series, as a value that :meth:`placement` takes: where to measure at that
        date (families with ``places_in_time``)."""
        raise InputError(f"model={self.name!r} has no posterior at other dates; placement at "
                         "a date of a stack needs model='spacetime'.")

    def predict_dates(self, est: M, axes: list, times: np.ndarray) -> Prediction:
        """Predictive moments (len(times), N_y, N_x) on the grid ``axes`` (model units) at
        dates ``times`` (days on the fitted series' scale), inside or after the series
        (families with ``fits_series``)."""
        raise InputError(f"model={self.name!r} predicts the dates it was fitted on; other "
                         "dates (a forecast) need model='spacetime'.")

    # ------------------------------------------------------------------ prediction
    def predict_at(self, est: M, X: np.ndarray, outside: str = "raise") -> Prediction:
        """Predictive moments at X (N*, 2), without the far-from-data warning."""
        return point_predictor(est, self.name).predict(X)

    def predict_rows(self, est: M, rows: np.ndarray, cols: np.ndarray,
                     outside: str = "raise") -> Prediction:
        """Predictive moments (len(rows), len(cols)) on one block of grid rows."""
        Y, X = np.meshgrid(rows, cols, indexing="ij")
        p = self.predict_at(est, np.stack([Y.ravel(), X.ravel()], axis=1), outside)
        return Prediction(*(np.reshape(a, Y.shape) for a in p))

    def predict_points(self, est: M, X: np.ndarray, outside: str = "raise") -> Prediction:
        """Predict at points X (N*, 2) in model coordinates (warns far outside the data)."""
        warn_if_far(est, points=X)
        return self.predict_at(est, X, outside)

    def predict_grid(self, est: M, axes: list, outside: str = "raise", block_cells: int = 2**20,
                     on_block: Callable[[int], object] | None = None) -> Prediction:
        """Predict on the tensor grid ``axes`` (model coordinates) in blocks of rows.

        Returns a :class:`Prediction` of arrays (N_y, N_x). ``on_block(n_rows)`` is called
        after each block (progress)."""
        warn_if_far(est, axes=axes)
        ny, nx = len(axes[0]), len(axes[1])
        step = max(1, int(block_cells // max(nx, 1)))
        parts = []
        for start in range(0, ny, step):
            rows = axes[0][start:start + step]
            parts.append(self.predict_rows(est, rows, axes[1], outside))
            if on_block is not None:
                on_block(len(rows))
        return Prediction(*(np.concatenate([getattr(p, f) for p in parts], axis=0)
                            for f in Prediction._fields))

    def predict_grid_lazy(self, est: M, axes: list, outside: str = "raise",
                          block_rows: int | None = None) -> Prediction:
        """:meth:`predict_grid` as dask arrays (N_y, N_x), computed block by block of rows
        (:func:`lazy_block_rows`) when they are read or written: a raster's prediction
        without the whole raster in memory. The three moments of a block come from one task,
        so computing them together (one ``dask.compute``) predicts each block once. Points
        outside the window raise now (the grid's corners are predicted at once), not when
        the arrays are read."""
        # lazy: keeps `import geogp` light (dask only for lazy predictions)
        import dask  # noqa: PLC0415
        import dask.array as dsa  # noqa: PLC0415

        warn_if_far(est, axes=axes)
        ys, xs = (np.asarray(a, dtype=np.float64) for a in axes)
        if ys.size and xs.size:  # windows are boxes: the corners say whether any cell is out
            self.predict_rows(est, ys[[ys.argmin(), ys.argmax()]],
                              xs[[xs.argmin(), xs.argmax()]], outside)
        rows = block_rows or lazy_block_rows(xs.size)
        block = dask.delayed(_stacked_rows, pure=False)  # pure=False: nothing hashes est
        cube = dsa.concatenate(
            [dsa.from_delayed(block(self, est, ys[a:a + rows], xs, outside),
                              shape=(3, len(ys[a:a + rows]), xs.size), dtype=np.float64)
             for a in range(0, ys.size, rows)] or [dsa.zeros((3, 0, xs.size))], axis=1)
        return Prediction(cube[0], cube[1], cube[2])

    def sample_slices(self, estimators: list[M], axes: list, n: int,
                      seed: int | np.random.SeedSequence | None = None,
                      observed: bool = False) -> np.ndarray:
        """(n, slices, n_y, n_x) samples of every slice on the grid ``axes``; here each slice
        is drawn alone (its own seed spawned from ``seed``): a family that fits slices jointly
        (``fits_series``) draws them jointly instead."""
        seeds = (seed if isinstance(seed, np.random.SeedSequence)
                 else np.random.SeedSequence(seed)).spawn(len(estimators))
        return np.stack([self.sample_grid(est, axes, n, seed=ss, observed=observed)
                         for est, ss in zip(estimators, seeds, strict=True)], axis=1)

    def sample_grid(self, est: M, axes: list, n: int,
                    seed: int | np.random.SeedSequence | None = None,
                    observed: bool = False) -> np.ndarray:
        raise InputError(f"posterior samples are available for model='afs', 'lattice', "
                         f"'nonstationary' and 'wavelet_basis'; this model is {self.name!r}.")

    # ------------------------------------------------------------------ reports
    def describe(self, est: M) -> dict:
        """Fitted hyperparameters on the data's scale (see the contract); the generic part:
        the optimisation report, no lengthscale."""
        rep = getattr(est, "report_", None)
        out: dict[str, Any] = {"lengthscale": None, "signal_sd": np.nan, "noise_sd": np.nan,
               "n_features": None, "n_iter": getattr(rep, "n_iter", None),
               "converged": getattr(rep, "converged", None),
               "objective": getattr(rep, "objective", None)}
        out.update(self.hyperparameters(est))
        out["unknowns"] = self.unknowns(est, out["n_features"])
        return out

    def fit_reason(self, est: M) -> str | None:
        """What the fit itself chose from the data and why, in words (e.g. the lattice
        model's varying range and sd), for ``model_reason_``; None: nothing."""
        return None

    def local_scales(self, est: M, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(local range in model units, local sd in data units) at ``points`` (P, 2) of a
        model whose range and sd may vary in space (families with ``maps_local_scales``)."""
        raise InputError(f"local_range() and local_sd() map the lattice model's range and sd "
                         f"(fit with varying='auto' to let them vary); this model is "
                         f"{self.name!r}.")

    def series_words(self, est: M, length: Callable[[float], str]) -> str:
        """The fitted joint model of a stack in words (families with ``fits_series``);
        ``length`` writes a length in the data's units."""
        raise InputError(f"model={self.name!r} fits one image at a time.")

    def hyperparameters(self, est: M) -> dict:
        """The family's own entries of :meth:`describe`."""
        return {}

    def unknowns(self, est: M, n_features: int | str | None) -> str:
        """What the model's unknowns are, in words ("" without a count)."""
        if n_features is None or n_features != n_features:  # noqa: PLR0124 - None or NaN
            return ""
        return f", {number(int(n_features))} {self.unknowns_word}"

    def evidence(self, est: M) -> float:
        raise InputError(f"score() is not available for model={self.name!r}; it needs the "
                         "bound (afs) or the exact evidence (exact, wavelet_basis).")

    # ------------------------------------------------------------------ placement
    def placement_strategies(self) -> tuple[str, ...]:
        """The strategies :meth:`placement` supports, known before any fit (empty: none)."""
        return () if self.placement_type is None else tuple(self.placement_type.strategies)

    def placement(self, est: M) -> Placement:
        """The fitted model's placement posterior (:mod:`geogp.placement.contract`): an
        instance of :attr:`placement_type`."""
        if self.placement_type is not None:
            return self.placement_type(est)
        raise InputError(f"sensor placement is not available for {self._what(est)}; use the "
                         "afs, exact, lattice, nonstationary or wavelet_basis model.")

    def condition(self, est: M, X: ArrayLike, y: ArrayLike | None = None) -> Any:
        """A copy of the fitted model conditioned on observations (X, y) in model units,
        hyperparameters kept (``y=None``: the predictive means, so only the covariance
        changes); the model itself is unchanged."""
        raise InputError(f"adding observations without refitting is not available for "
                         f"{self._what(est)}; refit it with the new data, or use the afs or "
                         "lattice model.")

    def posterior_tiles(self, est: M, raster_shape: tuple) -> int:
        """Tiles of the posterior of ``est`` on a raster of ``raster_shape`` (1: whole)."""
        return 1

    def _what(self, est: M) -> str:
        return (f"model={self.name!r}" if self.model_class is not None
                else f"a {type(est).__name__}")

    # ------------------------------------------------------------------ persistence
    def to_arrays(self, est: M, prefix: str, arrays: dict) -> dict:
        raise GeogpError(f"saving model={self.name!r} is not supported.")

    def from_arrays(self, meta: dict, prefix: str, arrays: Any) -> object:
        raise GeogpError(f"loading model={self.name!r} is not supported.")

    def slices_to_arrays(self, estimators: list, arrays: dict) -> list[dict]:
        """The model file's slices: each slice's metadata, its arrays added to ``arrays``
        (one :meth:`to_arrays` per slice; a family whose slices share one model stores it
        once)."""
        return [self.to_arrays(est, f"s{k}/", arrays) for k, est in enumerate(estimators)]

    def slices_from_arrays(self, slices: list[dict], arrays: Any) -> list:
        """The inverse of :meth:`slices_to_arrays`."""
        return [self.from_arrays(m, f"s{k}/", arrays) for k, m in enumerate(slices)]

    def check_grid(self, est: M, axes: list[np.ndarray], where: str) -> None:
        """Nothing to check by default."""


def lazy_block_rows(n_columns: int) -> int:
    """Rows per block of a lazy prediction with ``n_columns`` columns: the largest power of
    two with at most :data:`LAZY_BLOCK_CELLS` cells and :data:`LAZY_BLOCK_ROWS` rows (at
    least one row)."""
    return rows_per_block(n_columns, LAZY_BLOCK_ROWS, LAZY_BLOCK_CELLS)


def _stacked_rows(fam: Family, est: M, rows: np.ndarray, cols: np.ndarray,
                  outside: str) -> np.ndarray:
    """One block of a lazy prediction: (mean, var_latent, var_observed) stacked, (3, r, c)."""
    return np.stack(tuple(fam.predict_rows(est, rows, cols, outside)))


def observed_cells(axes: list, values: ArrayLike) -> tuple:
    """A raster slice as float64 values ``v`` (N_y, N_x), its observed cells ``obs`` (bool)
    and their coordinates X (N_obs, 2); infinite values are refused."""
    v = np.asarray(values, dtype=np.float64)
    if np.isinf(v).any():
        raise InputError("the raster contains infinite values; replace them by NaN "
                         "(missing) or finite numbers.")
    obs = np.isfinite(v)
    iy, ix = np.nonzero(obs)
    return v, obs, np.stack([axes[0][iy], axes[1][ix]], axis=1)


def kernel_facts(est: Any, n_features: bool) -> dict:
    """Lengthscales ((P, 2), one row per kernel part), signal and noise sd of a model with a
    stationary kernel (``kernel_``, ``noise_``, ``scaler_``), on the data's scale."""
    sc = est.scaler_
    parts = getattr(est.kernel_, "parts", (est.kernel_,))
    out = {"lengthscale": np.stack(
        [np.broadcast_to(np.asarray(p.lengthscale), sc.x_scale.shape) * sc.x_scale
         for p in parts]),
        "signal_sd": float(np.sqrt(float(est.kernel_.variance_at_zero)) * sc.y_scale),
        "noise_sd": float(np.sqrt(est.noise_) * sc.y_scale)}
    if n_features:
        out["n_features"] = est.features_.n_features
    return out


FAMILY: Family[Any] = Family()
