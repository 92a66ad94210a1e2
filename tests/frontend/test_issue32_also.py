"""Issue #32, hardening round 2, "Also": hidden files left by a killed write are removed by
the next write to that target; ``--overwrite`` on a symbolic link is documented (and does what
the documentation says); a lattice model loaded from a file refuses ``sample()`` saying why."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

import geogp
from geogp.cli import build_parser
from geogp.core import io_atomic
from geogp.exceptions import InputError
from geogp.frontend.io import atomic_path, hidden_sibling

posix = pytest.mark.skipif(os.name != "posix", reason="stale files are removed on POSIX only")

_KILLED_WRITE = """
import os, signal, sys
from geogp.core.io_atomic import atomic_path, hidden_sibling
target = sys.argv[1]
hidden_sibling(target, "previous").write_bytes(b"old output")   # what --overwrite keeps
with atomic_path(target, overwrite=True) as tmp:
    tmp.write_bytes(b"half")
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _dead_pid() -> int:
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                       capture_output=True, text=True, check=True)
    return int(p.stdout)


@posix
def test_issue32_also_stale_hidden_files_removed_on_next_write(tmp_path, monkeypatch):
    """A write killed by SIGKILL leaves its temporary file and the copy of the previous
    output; the next write to the same target removes exactly those (dead process, geogp's
    name pattern for this target), and keeps look-alikes, other targets' and live ones."""
    target = tmp_path / "o.tif"
    target.write_bytes(b"current")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    p = subprocess.run([sys.executable, "-c", _KILLED_WRITE, str(target)], env=env,
                       capture_output=True, timeout=60, check=False)
    assert p.returncode == -9, p.stderr
    left = sorted(n for n in os.listdir(tmp_path) if n.startswith("."))
    assert len(left) == 2 and all(n.startswith(".o.tif.geogp-") for n in left), left
    dead = _dead_pid()
    keep = [f".o.tif.geogp-{dead}-abcd1234.tmp.tif.bak",       # not geogp's exact pattern
            f".o.tiff.geogp-previous-{dead}-0123abcd",         # another target's
            f".o.tif.geogp-previous-{os.getpid()}-0123abcd",   # a live process's
            "notes.txt"]
    for name in keep:
        (tmp_path / name).write_bytes(b"x")
    monkeypatch.setattr(io_atomic, "STALE_AFTER_S", 0.0)
    with atomic_path(target, overwrite=True) as tmp:
        tmp.write_bytes(b"new")
    assert target.read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path)) == sorted([*keep, "o.tif"])


@posix
def test_issue32_also_recent_hidden_files_are_kept(tmp_path):
    """Within STALE_AFTER_S a dead process's hidden file is kept (another host's process on a
    shared folder could still be writing)."""
    target = tmp_path / "o.tif"
    young = tmp_path / f".o.tif.geogp-previous-{_dead_pid()}-0123abcd"
    young.write_bytes(b"x")
    assert io_atomic.remove_stale(target) == []
    assert young.exists()
    assert hidden_sibling(target, "previous").name.startswith(f".o.tif.geogp-previous-"
                                                              f"{os.getpid()}-")


@posix
def test_issue32_also_overwrite_on_a_symlink_replaces_the_link(tmp_path):
    """Documented (help and the docs' conventions): the link becomes a regular file, its target
    unchanged."""
    real = tmp_path / "real.tif"
    real.write_bytes(b"real")
    link = tmp_path / "link.tif"
    link.symlink_to(real)
    with atomic_path(link, overwrite=True) as tmp:
        tmp.write_bytes(b"new")
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert real.read_bytes() == b"real"
    fit = build_parser()._subparsers._group_actions[0].choices["fit"]
    help_text = " ".join(fit.format_help().split())
    assert "symbolic link is replaced itself, its target is left unchanged" in help_text
    docs = pathlib.Path(geogp.__file__).parent.parent.joinpath("docs", "guide", "conventions.md")
    assert "`--overwrite` on a symbolic link replaces the link itself" in docs.read_text()


def test_issue32_also_loaded_lattice_model_refuses_sample(tmp_path, raster):
    """Saying why (the file keeps the per-cell moments, not the factorisation) and what works."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = geogp.fit(raster.isel(y=slice(0, 12), x=slice(0, 14)), maxiter=1)
    assert model.model_ == "lattice"
    model.save(tmp_path / "m.npz")
    loaded = geogp.GeoRegressor.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.predict()["mean"], model.predict()["mean"])
    with pytest.raises(InputError, match=r"loaded from a file cannot draw them .*sparse "
                       r"factorisation.* refit the model to sample"):
        loaded.sample(2)
    docs = pathlib.Path(geogp.__file__).parent.parent.joinpath("docs", "guide", "models.md")
    text = docs.read_text()
    assert "A lattice model loaded from a file\n  predicts but cannot draw samples" in text
