"""`geogp --help` starts without JAX, xarray, rioxarray or matplotlib (issue 31 item 5), and
`import geogp` still gives the ``.geogp`` and ``.rio`` accessors and float64 JAX."""

from __future__ import annotations

import os
import subprocess
import sys

HEAVY = ("jax", "xarray", "rioxarray", "matplotlib", "scipy", "pandas", "geogp.frontend.api")


def _python(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env["JAX_PLATFORMS"] = "cpu"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def test_cli_parser_and_help_import_no_heavy_module():
    code = ("import sys, contextlib, io\n"
            "import geogp.cli\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    for argv in ([], ['fit', '--help'], ['place', '--help'], ['cv', '--help'],\n"
            "                 ['demo', '--help']):\n"
            "        try:\n"
            "            geogp.cli.main(argv)\n"
            "        except SystemExit:\n"
            "            pass\n"
            "assert 'usage: geogp place' in out.getvalue()\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n")
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_import_geogp_then_xarray_registers_both_accessors_and_float64():
    code = ("import sys, geogp\n"
            "assert 'jax' not in sys.modules and 'xarray' not in sys.modules\n"
            "import numpy as np, xarray as xr\n"
            "da = xr.DataArray(np.zeros((3, 4)), dims=('y', 'x'),\n"
            "                  coords={'y': np.arange(3.0), 'x': np.arange(4.0)})\n"
            "da = da.rio.write_crs(32633)\n"
            "assert type(da.geogp).__name__ == 'GeogpDataArrayAccessor'\n"
            "assert type(da.to_dataset(name='v').geogp).__name__ == 'GeogpDatasetAccessor'\n"
            "import jax.numpy as jnp\n"
            "assert jnp.zeros(2).dtype == jnp.float64\n"
            "assert geogp.Matern32 is __import__('geogp.core.kernels').kernels.Matern32\n"
            "assert callable(geogp.load_model) and 'GeoRegressor' in dir(geogp)\n")
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr


def test_import_geogp_after_xarray_registers_the_accessor_at_once():
    code = ("import numpy as np, xarray as xr, geogp\n"
            "assert type(xr.DataArray(np.zeros(2)).geogp).__name__ == 'GeogpDataArrayAccessor'\n"
            "assert hasattr(xr.DataArray(np.zeros(2)), 'rio')\n")
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr


def _help(*argv) -> str:
    import contextlib
    import io

    import pytest

    from geogp.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([*argv, "--help"])
    return out.getvalue()


def test_help_texts_print_percent_signs_once():
    for command in ("fit", "cv", "place", "demo"):
        assert "%%" not in _help(command)
    assert "95% coverage" in _help("demo")


def test_place_help_names_the_strategies_each_model_accepts():
    """The strategies place --help gives each model are the ones the placement code accepts
    (and refuses the others)."""
    import pytest

    from geogp.exceptions import InputError
    from geogp.placement import lattice, wavelet

    text = " ".join(_help("place").split())
    assert "strategies reduction, mi and variance" in text   # the lattice model
    assert text.count("mi, variance and krause") == 2         # afs and wavelet

    class Fitted:  # passes the lattice and wavelet "fitted" checks; one posterior tile
        _mean = posterior_ = basis_ = scaler_ = params_ = 0.0
        posterior_tiles_ = 1

    for strategy in ("reduction", "mi", "variance"):
        lattice.check_lattice(Fitted(), strategy)
    with pytest.raises(InputError):
        lattice.check_lattice(Fitted(), "krause")
    for strategy in ("mi", "variance", "krause"):
        wavelet.check_wavelet(Fitted(), strategy)
    with pytest.raises(InputError, match="reduction"):
        wavelet.check_wavelet(Fitted(), "reduction")
