"""What a Dask worker runs: one candidate built, checked and timed in a local worker pool.

``measure_job`` is a module-level function: Dask sends its import path, not its
code, so every worker needs this package (the same version: a job from another
version is refused with a message saying so). Its arguments are data: JSON
text holding the ``MeasureInput`` (workload, trace and target), the
``RunConfig`` and the cutoff, and, for a workload not in the operator library,
the bytes of its expected-outputs file (arrays, read with ``allow_pickle=False``
and checked against their SHA-256). On the worker the candidate runs as on the
local path, in a ``WorkerPool`` of one process per target: a kernel that
crashes or hangs becomes a failed result there and the Dask worker carries on.
The result goes back as JSON text, with the worker's address and host name.

Workers declare Dask resources (``worker_resources``): ``measure=1``, so that
a worker measures one candidate at a time, and one tag per target it serves
(``target_tag``: ``llvm-znver4-avx512``, ``cuda-sm_90``); a job asks for both,
so it only lands on a worker of its target.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import socket
import tempfile
import threading
from dataclasses import replace

from ..target import as_target
from .builder import LocalBuilder
from .config import RunConfig
from .measurer import measure_env
from .pool import WorkerPool
from .result import MeasureInput, MeasureResult
from .runner import LocalRunner

MEASURE = "measure"            # the Dask resource of one measurement slot
TOPIC = "explorer-measure"     # the Dask event topic a job reports its start on
_VECTOR_ISA = {512: "avx512", 256: "avx2"}

_pools: dict = {}              # target string -> WorkerPool of one process
_lock = threading.Lock()
_state: dict = {"dir": None}


def target_tag(target) -> str:
    """The Dask resource naming ``target``'s device: ``llvm-<cpu>-<vector ISA>``
    (``llvm-znver4-avx512``), ``cuda-<arch>`` (``cuda-sm_90``), or ``interp``."""
    t = as_target(target)
    if t.kind == "llvm":
        return f"llvm-{t.mcpu}-{_VECTOR_ISA.get(t.vector_bits, f'v{t.vector_bits}')}"
    if t.kind == "cuda":
        return f"cuda-{t.arch}"
    return t.kind


def worker_resources(targets) -> dict:
    """The Dask resources of a worker that measures for ``targets``: one measurement
    slot and one tag per target."""
    return {MEASURE: 1, **{target_tag(t): 1 for t in targets}}


def job_resources(target) -> dict:
    """The Dask resources a job for ``target`` asks for."""
    return {MEASURE: 1, target_tag(target): 1}


def _version() -> str:
    from .. import __version__
    return __version__


def job_payload(job_id: str, inp: MeasureInput, config: RunConfig, cutoff) -> str:
    """The JSON text of one job (``expected`` travels beside it, as bytes)."""
    return json.dumps({"id": job_id, "version": _version(), "input": inp.as_json(),
                       "config": config.as_json(), "cutoff_secs": cutoff})


def _pool(target_text: str) -> WorkerPool:
    pool = _pools.get(target_text)
    if pool is None or pool.closed:
        threads = as_target(target_text).num_cores or os.cpu_count() or 1
        pool = _pools[target_text] = WorkerPool(1, env=measure_env(threads))
    return pool


def _store_expected(data: bytes) -> str:
    """Write expected-outputs bytes here under their digest (the name ``load_expected``
    checks) and return the path."""
    if _state["dir"] is None or not os.path.isdir(_state["dir"]):
        _state["dir"] = tempfile.mkdtemp(prefix="explorer-dask-expected-")
        # The files live as long as this worker process: remove them when it exits.
        atexit.register(shutil.rmtree, _state["dir"], True)
    path = os.path.join(_state["dir"], hashlib.sha256(data).hexdigest()[:32] + ".npz")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return path


def _here() -> tuple:
    """(this Dask worker, its address), or (None, "local") outside one."""
    try:
        from distributed import get_worker
        w = get_worker()
        return w, w.address
    except (ImportError, ValueError):
        return None, "local"


def _refusal(job: dict, worker) -> str | None:
    """Why this worker must not run ``job`` (another version, another target), or None."""
    if job.get("version") != _version():
        return (f"this Dask worker runs explorer {_version()}, the client "
                f"{job.get('version')}: install the same version on both")
    tag = target_tag(job["input"]["target"])
    held = worker.state.total_resources if worker is not None else {tag: 1}
    if tag not in held:
        return (f"this Dask worker serves {sorted(k for k in held if k != MEASURE)}, not "
                f"{tag}: start it with explorer worker --target for that target")
    return None


def measure_job(payload: str, expected: bytes | None = None) -> str:
    """Build, check and time the candidate of ``payload`` (``job_payload``) here; the
    ``MeasureResult`` as JSON text (its input left out: the client holds it)."""
    job = json.loads(payload)
    worker, address = _here()
    if worker is not None:
        worker.log_event(TOPIC, {"job": job["id"], "worker": address})
    inp = MeasureInput.from_json(job["input"])
    why = _refusal(job, worker)
    if why is not None:
        res = MeasureResult.failed(None, "internal", why)
    else:
        if expected is not None:
            inp = replace(inp, expected=_store_expected(expected))
        cfg = RunConfig.from_json(job["config"])
        with _lock:
            pool = _pool(inp.target)
            builds = LocalBuilder(pool, cfg.build_timeout).build([inp])
            res = LocalRunner(pool, cfg).run([inp], builds, job.get("cutoff_secs"))[0]
    out = res.as_json()
    out.update(input=None, worker=address, host=socket.gethostname())
    return json.dumps(out)
