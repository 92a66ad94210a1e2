"""Issue #32, hardening round 2 (raw tracebacks): Ctrl-C during a lattice fit exits 130 with
one line, also when JAX wraps the KeyboardInterrupt raised inside a host callback (the sparse
Cholesky's ``jax.pure_callback``) in a "CpuCallback error"."""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geogp.cli import main


def _interrupted_callback():
    """What a Ctrl-C inside the lattice model's CHOLMOD callback produces: JAX logs "jax.
    pure_callback failed" and raises its runtime error, whose message holds the traceback."""
    def host(x):
        raise KeyboardInterrupt

    f = jax.jit(lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct((2,), jnp.float64), x,
                                            vmap_method="sequential"))
    return f(jnp.ones(2)).block_until_ready()


@pytest.fixture
def raster_file(tmp_path, raster):
    path = tmp_path / "in.tif"
    raster.rio.to_raster(path)
    return str(path)


def test_issue32_interrupt_in_jax_callback_exits_130(tmp_path, raster_file, monkeypatch,
                                                     capsys, caplog):
    import geogp.frontend.api

    with pytest.raises(RuntimeError, match="KeyboardInterrupt") as info:  # what JAX raises
        _interrupted_callback()
    assert not isinstance(info.value, KeyboardInterrupt)

    def fit(self, *args, **kwargs):
        _interrupted_callback()

    monkeypatch.setattr(geogp.frontend.api.GeoRegressor, "fit", fit)
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        code = main(["fit", raster_file, "--out", str(tmp_path / "o.tif"), "-q"])
    err = capsys.readouterr().err
    assert code == 130, err
    lines = [ln for ln in err.splitlines() if not ln.startswith("geogp: warning:")]
    assert lines == ["geogp: interrupted; no partial output was kept."], err
    assert "pure_callback" not in err and "Traceback" not in err
    assert not [r for r in caplog.records if "pure_callback" in r.getMessage()]
    assert not (tmp_path / "o.tif").exists()


def test_issue32_interrupt_other_callback_errors_stay_errors(tmp_path, raster_file,
                                                             monkeypatch, capsys):
    """A callback failing for another reason is an error (exit 1), not an interrupt."""
    import geogp.frontend.api

    def fit(self, *args, **kwargs):
        def host(x):
            raise ValueError("boom, not KeyboardInterrupt-related")

        jax.pure_callback(host, jax.ShapeDtypeStruct((2,), jnp.float64), np.ones(2),
                          vmap_method="sequential")

    monkeypatch.setattr(geogp.frontend.api.GeoRegressor, "fit", fit)
    code = main(["fit", raster_file, "--out", str(tmp_path / "o.tif"), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "interrupted" not in err, err


def test_issue32_interrupt_plain_keyboard_interrupt_still_130(tmp_path, raster_file,
                                                              monkeypatch, capsys):
    import geogp.frontend.api

    def fit(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(geogp.frontend.api.GeoRegressor, "fit", fit)
    assert main(["fit", raster_file, "--out", str(tmp_path / "o.tif"), "-q"]) == 130
    assert "interrupted" in capsys.readouterr().err
