"""Where the lattice posterior's tiles run: in this process, or as tasks on a dask cluster.

Each tile's sparse work is a pure function of the estimator's fitted settings, the tile's
window of the standardised raster and a few small arrays (:func:`~geogp.models.
lattice_posterior.tile_statistics`), so it runs the same on a ``dask.distributed`` worker as
here: the estimator goes to the workers once (a light copy without its per-cell arrays or
callbacks, :func:`tile_context`), each task gets its window, and the small part of its result
(the core's part of M) comes back in tile order. The rest, the core's state for the dense
pass 2, stays where it was made (:class:`KeptStates`). Every sparse step runs
single-threaded, so a worker computes the same numbers as this process, bit for bit.

Which: the estimator's ``scheduler`` — ``"auto"`` (default): the current dask client
(``distributed.get_client()``: a ``Client`` the user created, in this process) when there is
one, else this process; None: this process; a ``distributed.Client``; or a scheduler address.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import gc
import os
import socket
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np

from geogp.exceptions import GeogpError, InputError
from geogp.linalg.cholmod import available_cores
from geogp.linalg.selinv import single_blas_thread
from geogp.models.lattice.tiled import CoreState

if TYPE_CHECKING:  # annotations only
    from distributed import Client

    from geogp.models.lattice.regressor import LatticeRegressor

__all__ = ["sparse_pass", "KeptStates", "tile_context", "dask_client", "local_workers",
           "release_memory"]

# per-cell or unpicklable state a worker does not need
_LOCAL_ONLY = ("progress", "tile_progress", "scheduler", "posterior_", "report_",
               "report_large_", "contamination_")


@contextlib.contextmanager
def dask_client(scheduler: str | Client | None) -> Iterator[Client | None]:
    """The ``distributed.Client`` the tiles should use, or None for this process; a client
    this opens (``scheduler`` an address) is closed on leaving."""
    if scheduler is None:
        yield None
        return
    try:
        import distributed  # noqa: PLC0415 - lazy: dask.distributed loads only with a scheduler
    except ImportError as err:  # pragma: no cover - a dependency; only a broken install lacks it
        if scheduler != "auto":
            raise InputError(
                "scheduler= needs dask.distributed (pip install distributed).") from err
        yield None
        return
    if scheduler == "auto":
        try:
            client = distributed.get_client()
        except ValueError:  # no client in this process
            client = None
        yield client
    elif isinstance(scheduler, distributed.Client):
        yield scheduler
    elif isinstance(scheduler, str):
        with distributed.Client(scheduler, set_as_default=False) as client:
            yield client
    else:
        raise InputError(f"scheduler must be 'auto', None, a dask.distributed Client or a "
                         f"scheduler address; got {scheduler!r}.")


def local_workers(scheduler: str | Client | None) -> int:
    """How many dask workers that would run the tiles live on this machine, so that their
    memory adds to this process's: those of the current client (``"auto"``) or of a given
    ``Client`` whose address is a loopback or this host's. 0 for this process alone, and for
    a cluster reached by its address (``scheduler`` a string: its workers' memory is theirs).
    """
    if scheduler is None or (isinstance(scheduler, str) and scheduler != "auto"):
        return 0
    with dask_client(scheduler) as client:
        if client is None:
            return 0
        here = {"127.0.0.1", "localhost", "::1", socket.gethostname()}
        with contextlib.suppress(OSError):
            here.add(socket.gethostbyname(socket.gethostname()))
        addresses = client.scheduler_info().get("workers", {})
        return sum(urlsplit(a).hostname in here or a.startswith("inproc") for a in addresses)


def tile_context(est: LatticeRegressor) -> LatticeRegressor:
    """A light copy of the fitted estimator that a worker can unpickle: its settings and
    fitted attributes, without per-cell arrays, callbacks or the samples' factor."""
    ctx = copy.copy(est)
    for name in _LOCAL_ONLY:
        if name in ctx.__dict__:
            setattr(ctx, name, None)
    return ctx


def sparse_pass(est: LatticeRegressor, fn: Callable[..., Any], raster: np.ndarray, tiles: list,
                args: tuple, client: Client | None = None) -> tuple[list, KeptStates]:
    """Pass 1: ``fn(est, raster, tile, *args)`` → (small, state) for each tile, here
    (``client`` None: ``fn(..., later=True)`` → (small, a function giving the function that
    computes the state), :func:`_in_process`) or on the dask client's workers. Returns the
    smalls in tile order and the states, kept where they were made until pass 2
    (:class:`KeptStates`: on disk here, in the workers' memory on a cluster). Reports each
    finished tile to ``est.tile_progress``; ``fn`` frees its tile's memory itself on a worker
    (:func:`release_memory`), and this process after each state."""
    report = getattr(est, "tile_progress", None)
    kept = KeptStates(client, len(tiles))
    small = [None] * len(tiles)
    if client is None:
        try:
            _in_process(est, fn, raster, tiles, args, small, kept, report)
        except BaseException:
            kept.close()
            raise
        return small, kept
    from distributed import as_completed  # noqa: PLC0415 - lazy: as above

    ctx = client.scatter(tile_context(est), broadcast=True)
    futures = [client.submit(fn, ctx, raster[tile.window], _rebased(tile), *args, pure=False)
               for tile in tiles]
    kept.futures = futures
    firsts = [client.submit(_first, f, pure=False) for f in futures]
    index = {f.key: i for i, f in enumerate(firsts)}
    for done, future in enumerate(as_completed(firsts), start=1):
        small[index[future.key]] = future.result()
        if report is not None:
            report("solve", done, len(tiles))
    return small, kept


def _in_process(est: LatticeRegressor, fn: Callable[..., Any], raster: np.ndarray, tiles: list,
                args: tuple, small: list, kept: KeptStates,
                report: Callable[[str, int, int], object] | None) -> None:
    """Pass 1 in this process, tile after tile. Their windows have one shape
    (:func:`~geogp.models.lattice.tiled.posterior_tiles`), so they share the lattice's pattern
    and its symbolic analysis (geogp.models.lattice.gmrf.make_problem).
    With a second core, a tile's state (its selected inversion, which releases the GIL) is
    computed in a background thread while the next tile is factorised and solved: one state
    at a time, from a copy of the factor taken once the previous state is done, so that at
    most one CHOLMOD factor (the current tile's), one copy and its inverse are alive, as
    without the overlap: a pending state holds no factor of its own, so a tile of another
    shape (its own pattern and factor) does not wait for it. BLAS runs on one thread
    throughout: a BLAS call on two threads leaves a thread spinning on the core the other
    tile's work needs (pass 1 of a 700² raster on 16 tiles: 31.9 s against 26.6 s). The
    objects alive when the pass starts are frozen out of the garbage collector, so that
    each tile's collection looks at the pass's own objects only (16.1 s against 17.8 s).
    Whichever thread computes a state, the numbers are the same (tested)."""
    pool = (ThreadPoolExecutor(1, thread_name_prefix="geogp-state") if available_cores() > 1
            else None)
    pending: list = []  # [(tile index, future of its state)]: at most one
    done = 0

    def keep(i: int, state: Any) -> None:
        nonlocal done
        kept.put(i, state)
        del state
        release_memory()
        done += 1
        if report is not None:
            report("solve", done, len(tiles))

    def settle() -> None:
        while pending:
            i, future = pending.pop()
            keep(i, future.result())

    gc.collect()
    gc.freeze()  # what exists now is not a tile's garbage: each tile's collection skips it
    # both cores run tiles' work: a BLAS call on two threads would leave one spinning
    with single_blas_thread():
        try:
            for i, tile in enumerate(tiles):
                small[i], detach = fn(est, raster, tile, *args, later=True)
                settle()
                compute = detach()  # the factor's copy, before the next tile refactorises it
                del detach
                if pool is None:
                    keep(i, compute())
                else:
                    pending.append((i, pool.submit(compute)))
                del compute
            settle()
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
            gc.unfreeze()


class KeptStates:
    """The tiles' pass-1 states until pass 2: ``.npz`` files in a temporary directory (this
    process; removed by :meth:`close`), or the pass-1 results on the dask workers (dask
    spills them to its workers' disks under memory pressure)."""

    def __init__(self, client: Client | None, count: int) -> None:
        self.client, self.futures, self._dir = client, None, None
        self.count = count
        if client is None and count:
            self._dir = tempfile.TemporaryDirectory(prefix="geogp-tiles-")

    def put(self, i: int, state: Any) -> None:
        path = os.path.join(self._dir.name, f"{i}.npz")
        try:
            np.savez(path, *state)
        except OSError as exc:
            raise GeogpError(
                f"lattice model: could not keep a posterior tile's state in "
                f"{self._dir.name} ({exc}); free disk space there or point TMPDIR at a "
                "larger disk.") from exc

    def map(self, fn: Callable[..., Any], args: tuple,
            report: Callable[[str, int, int], object] | None = None) -> list:
        """Pass 2: ``[fn(state, *args) for each tile's state]`` in tile order."""
        out = [None] * self.count
        if self.client is None:
            for i in range(self.count):
                with np.load(os.path.join(self._dir.name, f"{i}.npz")) as f:
                    state = CoreState(*(f[f"arr_{k}"] for k in range(len(f.files))))
                out[i] = fn(state, *args)
                if report is not None:
                    report("moments", i + 1, self.count)
            return out
        from distributed import as_completed  # noqa: PLC0415 - lazy: as above

        futures = [self.client.submit(_apply_to_state, f, fn, *args, pure=False)
                   for f in self.futures]
        index = {f.key: i for i, f in enumerate(futures)}
        for done, future in enumerate(as_completed(futures), start=1):
            out[index[future.key]] = future.result()
            if report is not None:
                report("moments", done, self.count)
        return out

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
        if self.futures is not None:
            self.client.cancel(self.futures)
            self.futures = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _first(result):
    return result[0]


def _apply_to_state(result, fn, *args):
    return fn(result[1], *args)


def _rebased(tile):
    """The tile as seen from the window's array that a task receives: its window starts at
    (0, 0); ``offset`` still places it in the raster."""
    return tile._replace(window=tuple(slice(0, w.stop - w.start) for w in tile.window))


def release_memory() -> None:
    """Give freed heap memory back to the system after a tile (glibc's ``malloc_trim``).

    A tile's n_t × (1 + k + p) arrays and factor are freed when it ends, but glibc keeps much
    of that heap: without trimming, the resident memory of a 700² raster's 25 tiles grew by
    about 60 MB a tile, and a 1200² raster peaked at 8.8 GB against a tile's 3.4 GB."""
    gc.collect()  # tile arrays held by reference cycles (closures, JAX tracebacks)
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to do
        ctypes.CDLL("libc.so.6").malloc_trim(0)
