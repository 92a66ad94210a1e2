"""The quickstart notebook runs from top to bottom (nbclient, kernel python3 of this Python)."""

from __future__ import annotations

import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"


def test_quickstart_notebook_executes(tmp_path):
    """jupyter_client starts the ``python3`` kernel with ``sys.executable`` (the Python running
    the tests), so the notebook sees this installation of geogp."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    assert "95% coverage" in outputs and "('mean', 'std')" in outputs
    assert (tmp_path / "quickstart_prediction.tif").exists()
