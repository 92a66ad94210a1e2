"""How the ``geogp`` command runs a sub-command: exit codes, one-line errors and warnings,
Ctrl-C (:func:`run_command`). The sub-command modules and :mod:`geogp.cli` import it; it
imports nothing heavy (``geogp --help`` stays light).
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import logging
import queue
import re
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from geogp.exceptions import InputError, MemoryEstimateError

if TYPE_CHECKING:  # annotations only
    import argparse

__all__ = ["run_command", "usage_error", "EXIT_OK", "EXIT_ERROR", "EXIT_USAGE"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _UsageError(Exception):
    pass


def usage_error(msg: str) -> _UsageError:
    """An error that the CLI reports as one line with exit code 2 (wrong use of options)."""
    return _UsageError(msg)


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"geogp: warning: {message}", file=sys.stderr)


_INTERRUPT_LINE = re.compile(r"(^|\n)\s*KeyboardInterrupt\b")


def _is_interrupt(err: BaseException) -> bool:
    """Ctrl-C, also where JAX wraps it: a KeyboardInterrupt raised inside a host callback
    (``jax.pure_callback``: the sparse Cholesky of the lattice model) reaches the caller as a
    RuntimeError (``JaxRuntimeError``/``XlaRuntimeError``, "CpuCallback error") whose message
    ends with the callback's traceback, "KeyboardInterrupt". Follows the exception chain."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, KeyboardInterrupt):
            return True
        if isinstance(err, RuntimeError) and _INTERRUPT_LINE.search(str(err)):
            return True
        err = err.__cause__ or err.__context__
    return False


class _DropInterruptLogs(logging.Filter):
    """Drop JAX's "jax.pure_callback failed" log (with its traceback) of a KeyboardInterrupt:
    the command reports the interrupt itself, in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and _is_interrupt(exc))


@contextlib.contextmanager
def _quiet_callback_interrupts():
    loggers = [logging.getLogger(name) for name in ("jax._src.callback", "jax._src.ffi")]
    drop = _DropInterruptLogs()
    for lg in loggers:
        lg.addFilter(drop)
    try:
        yield
    finally:
        for lg in loggers:
            lg.removeFilter(drop)


def interrupt(signum: int, frame: FrameType | None) -> None:
    """The command's SIGINT handler: KeyboardInterrupt, as Python's own, except where Python
    would print and drop it ("Exception ignored in ..."), inside a garbage-collector callback
    (JAX has one) or a finaliser: there Ctrl-C was lost and the fit went on. It is raised
    again in the main thread as soon as that code has returned."""
    if _drops_exceptions(frame):
        _RETRY.put(None)  # no lock taken here: the retry thread interrupts the main thread
        return
    raise KeyboardInterrupt


# Ctrl-C deferred by interrupt() is raised again from this daemon thread, started with the
# handler: a thread started inside a signal handler could wait on a lock the interrupted
# code holds
_RETRY: queue.SimpleQueue = queue.SimpleQueue()


def install_interrupt() -> None:
    """Make :func:`interrupt` the SIGINT handler (unless SIGINT is ignored: a background
    job), with its retry thread."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return

    def retry() -> None:
        while True:
            _RETRY.get()
            time.sleep(0.05)
            _thread.interrupt_main()

    threading.Thread(target=retry, name="geogp-interrupt", daemon=True).start()
    signal.signal(signal.SIGINT, interrupt)


def _drops_exceptions(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside a gc callback or a ``__del__`` (up its stack)."""
    callbacks = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    while frame is not None:
        if frame.f_code in callbacks or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _interrupted() -> int:
    print("geogp: interrupted; no partial output was kept.", file=sys.stderr)
    return EXIT_INTERRUPTED


def run_command(handler: Callable[[argparse.Namespace, Callable[[str], object]], int],
                args: argparse.Namespace, quiet: bool = False) -> int:
    """Run ``handler(args, echo)`` with the CLI's conventions: warnings as one line, bad input
    as one line and exit 2, other errors as one line and exit 1 (``--traceback`` re-raises)."""
    def echo(text: str) -> None:
        if not quiet:
            print(text, flush=True)

    traceback = bool(getattr(args, "traceback", False))
    try:
        with warnings.catch_warnings(), _quiet_callback_interrupts():  # restores showwarning
            warnings.showwarning = _show_warning
            return handler(args, echo)
    except (InputError, _UsageError) as err:
        if traceback:
            raise
        print(f"geogp: error: {' '.join(str(err).split())}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryEstimateError as err:  # the advice in command-line flags
        if traceback:
            raise
        print(f"geogp: error: {' '.join(err.cli_message().split())}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as err:
        if _is_interrupt(err):  # Ctrl-C inside a JAX host callback (lattice fit)
            return _interrupted()
        if traceback:
            raise
        msg = str(err).splitlines()[0] if str(err) else ""
        print(f"geogp: error: {type(err).__name__}: {msg} (run with --traceback for details)",
              file=sys.stderr)
        return EXIT_ERROR
