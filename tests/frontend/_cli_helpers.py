"""Helpers of the command-line tests."""

from __future__ import annotations


def error_line(capsys) -> str:
    """The one ``geogp: error`` line on stderr (and no traceback)."""
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("geogp: error")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
