"""Every Python snippet of the README and of the docs' user guide runs as written (in a scratch
folder)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

# the README's examples fit quickly: their AFS models' approximation diagnostics warn
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]


def _snippets() -> list:
    found = [code for page in PAGES
             for code in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)]
    return list(dict.fromkeys(found))  # a snippet the guide repeats from the README runs once


def test_readme_has_python_snippets():
    readme = re.findall(r"```python\n(.*?)```", PAGES[0].read_text(), flags=re.S)
    assert len(readme) >= 4  # a raster, points, a time stack, the active loop


@pytest.mark.parametrize("index", range(len(_snippets())))
def test_readme_snippet_runs(index, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(_snippets()[index], f"README.md snippet {index + 1}", "exec"), namespace)
    # what the quick start promises: a filled raster on the input grid and a CV report
    if "pred" in namespace and "da" in namespace:
        pred, da = namespace["pred"], namespace["da"]
        assert pred["mean"].shape == da.shape
        assert np.isfinite(pred["mean"].values).all() and (pred["std"].values > 0).all()
        assert (tmp_path / "filled.tif").stat().st_size > 0
        # the quick start runs twice in a row (issue 31): its writes again, in the same folder
        writes = [line for line in _snippets()[index].splitlines()
                  if re.search(r"write_geotiff\(|\.save\(|\.plot\(|\.to_raster\(", line)]
        assert len(writes) >= 3
        exec(compile("\n".join(writes), f"README.md snippet {index + 1}, again", "exec"),
             namespace)
    if "stations" in namespace:  # the README's claim: a few hundred points get the exact GP
        assert namespace["model"].model_ == "exact"
        assert np.isfinite(namespace["grid"]["mean"].values).all()
    if "stack" in namespace and "filled" in namespace:  # fitted jointly over its dates
        assert namespace["model"].model_ == "spacetime"
        assert namespace["filled"]["mean"].shape == namespace["stack"].shape
    if "cv" in namespace:
        assert 0.5 < namespace["cv"].scores().loc["all", "coverage95"] <= 1.0
    if "sites" in namespace:
        assert len(namespace["sites"]) == 10
    if "sites" in namespace and "stack" in namespace:  # a stack's sites: for the next date
        assert (namespace["sites"]["time"] == "2024-07-04").all()
    if "model2" in namespace:  # the active loop: every site in the gap, and measuring them
        # lowers the latent std summed over the raster (and the old model keeps its own)
        rows, cols = np.divmod(namespace["sites"]["index"].to_numpy(), 80)
        assert np.all((rows >= 20) & (rows < 35) & (cols >= 30) & (cols < 50)), (rows, cols)
        before = float(namespace["model"].predict()["std_latent"].sum())
        after = float(namespace["model2"].predict()["std_latent"].sum())
        assert after < before
        assert len(namespace["more"]) == 10
