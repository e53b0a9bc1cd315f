"""The lessons' runs of this test session, shared between the test files that check them.

Every lesson runs once a session. Where the browser tests run (``tests/browser``, first
in the suite's order), they run each lesson in a real JupyterLab and ``keep`` what its
cells showed; ``tests/test_notebooks.py`` and the lesson tests then check those outputs
instead of running the lesson a second time with nbclient (two runs of the seven lessons
cost about two and a half minutes of the suite). Without a browser the lessons run under
nbclient as before.
"""
from __future__ import annotations

from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"

_RUNS: dict = {}


def keep(name: str, outputs: list, seconds: float) -> None:
    """Keep the run of ``notebooks/<name>``: ``outputs`` is, per code cell in order, the
    list of its outputs as nbformat dicts (JupyterLab's model ``toJSON``)."""
    import nbformat
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    if len(code) != len(outputs):
        raise ValueError(f"{name}: {len(outputs)} cells of outputs for {len(code)} code cells")
    for cell, outs in zip(code, outputs):
        cell.outputs = [nbformat.from_dict(o) for o in outs]
    _RUNS[name] = (nb, seconds)


def kept(name: str):
    """(notebook with outputs, seconds) of a run kept this session, or None."""
    return _RUNS.get(name)
