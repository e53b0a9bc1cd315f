"""Expected outputs computed once in the parent and handed to workers as arrays.

A library operator's worker calls the library's numpy reference by the
operator's name. A user's workload is checked by a numpy function (code, which
does not travel to a worker) or by its unscheduled program (compiled with LLVM);
either way the parent computes the inputs and the expected outputs once per
workload and seed (``Workload.expected``) and writes them to an ``.npz`` file
named by the SHA-256 of its bytes. A worker reads it with ``allow_pickle=False``
(arrays, never code), checks its digest and its shapes against the workload's
function, and checks every candidate against it. The files live in one
temporary directory per process, removed when the process exits.
"""
from __future__ import annotations

import atexit
import hashlib
import io
import os
import shutil
import tempfile

import numpy as np

from ..errors import MeasureError

_state: dict = {"dir": None}


def _directory() -> str:
    if _state["dir"] is None or not os.path.isdir(_state["dir"]):
        _state["dir"] = tempfile.mkdtemp(prefix="explorer-expected-")
        atexit.register(shutil.rmtree, _state["dir"], True)
    return _state["dir"]


def expected_file(wl, seed: int = 0) -> str:
    """The path of the file holding ``wl.expected(seed)``, written on first use (kept on
    the workload, so a new reference function never meets an old file)."""
    key = ("expected_file", seed)
    path = wl._cache.get(key)
    if path is not None and os.path.exists(path):
        return path
    inputs, outputs = wl.expected(seed)
    buf = io.BytesIO()
    np.savez(buf, **{f"in{i}": a for i, a in enumerate(inputs)},
             **{f"out{i}": a for i, a in enumerate(outputs)})
    data = buf.getvalue()
    path = os.path.join(_directory(), hashlib.sha256(data).hexdigest()[:32] + ".npz")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    wl._cache[key] = path
    return path


def load_expected(path: str, wl) -> tuple:
    """``(inputs, outputs)`` read from ``path`` for workload ``wl``; MeasureError when the
    file is missing, altered, or does not fit the workload's parameters."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise MeasureError(f"{wl.key}: the expected outputs file {path} cannot be read ({e}); "
                           "the process that wrote it has ended?") from None
    if not os.path.basename(path).startswith(hashlib.sha256(data).hexdigest()[:32]):
        raise MeasureError(f"{wl.key}: the expected outputs file {path} was altered (its "
                           "digest no longer matches its name)")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (ValueError, OSError) as e:
        raise MeasureError(f"{wl.key}: {path} is not an array file ({e})") from None
    n_in = len(wl.inputs)
    names = [f"in{i}" for i in range(n_in)] + [f"out{i}" for i in range(len(wl.outputs))]
    if sorted(arrays) != sorted(names):
        raise MeasureError(f"{wl.key}: {path} holds {sorted(arrays)}, expected {names}")
    for name, buf in zip(names, wl.func.params):
        a = arrays[name]
        if a.shape != tuple(buf.shape) or a.dtype != np.dtype(buf.dtype):
            raise MeasureError(f"{wl.key}: {path} holds {name} as {a.dtype}{a.shape}, but "
                               f"parameter {buf.name} is {buf.dtype}{tuple(buf.shape)}")
    return ([arrays[n] for n in names[:n_in]], tuple(arrays[n] for n in names[n_in:]))
