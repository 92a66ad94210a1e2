"""Register the ``.geogp`` accessor (and rioxarray's ``.rio``) once xarray is imported.

``import geogp`` promises both accessors on every DataArray, but importing xarray and rioxarray
costs 1–2 s, which the ``geogp`` command should not pay to print ``--help``. So geogp registers
them when xarray is imported: at once if it already is, otherwise right after the first
``import xarray`` (a one-shot finder on :data:`sys.meta_path` that runs the registration after
xarray's module code; it removes itself first).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import warnings

__all__ = ["register_when_xarray_loads"]


def _register() -> None:
    # lazy: runs once xarray is imported (see the module docstring)
    import rioxarray  # noqa: F401, PLC0415  (the .rio accessor: CRS and transforms of rasters)

    import geogp.frontend.accessor  # noqa: F401, PLC0415  (the .geogp accessor)


class _AfterXarray(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps xarray's loader so that ``_register`` runs after it."""

    def find_spec(self, name, path=None, target=None):
        if name != "xarray":
            return None
        _remove_finder()
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            try:
                _register()
            except Exception as err:  # xarray itself stays usable; say what is missing
                warnings.warn(f"geogp could not register its xarray accessors: {err}",
                              ImportWarning, stacklevel=2)

        spec.loader.exec_module = exec_then_register
        return spec


def _remove_finder() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AfterXarray)]


def register_when_xarray_loads() -> None:
    """Register the accessors now if xarray is imported, else after its import."""
    if "xarray" in sys.modules:
        _register()
    elif not any(isinstance(f, _AfterXarray) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterXarray())
