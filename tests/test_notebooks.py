"""The notebooks run top to bottom on a fresh kernel (nbclient), as a reader would."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from explorer import Target

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _run(name: str, timeout: int = 300):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    env = {"MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        start = time.perf_counter()
        client.execute()
        return nb, time.perf_counter() - start
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _text(nb) -> str:
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            out.append(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")))
    return "\n".join(out)


def test_01_explore_runs_top_to_bottom_on_a_fresh_kernel():
    nb, seconds = _run("01_explore.ipynb")
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert errors == []
    text = _text(nb)
    lanes = Target("llvm").vector_lanes                       # the host's, as the lesson
    assert "for i_0 in parallel(32):" in text and f"vectorized({lanes})" in text
    assert Target("llvm").describe() in text                  # the host, described
    assert "peak " in text and "GFLOP/s, bandwidth" in text   # the measured roofline
    assert text.count("correct (max abs error") >= 6          # every Run checked vs numpy
    assert "vectorize: loop 'k' is a reduction loop" in text
    assert "8 measured" in text                               # the real tuner's short run
    widgets = sum("application/vnd.jupyter.widget-view+json" in o.get("data", {})
                  for c in nb.cells for o in c.get("outputs", []))
    assert widgets >= 3                                       # explorer, sampler, dashboard
    pngs = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    assert pngs >= 1                                          # the four pictures
    assert seconds < 180
