"""The thread runtime behind parallel loops.

Two runtimes run the outlined task functions (``parallel.py``):

- ``gomp`` (the default): the generated code calls libgomp's ``GOMP_parallel``
  directly. A launch costs a few microseconds and works wherever the parallel
  loop sits (inside serial loops, several per kernel), with no trip through
  Python. Measured on the 2-core development machine (benchmarks/llvm_gemm.py
  --runtime): launch overhead about 3 us against about 60 us for the pool, and
  the same 2-thread gemm speed-up. libgomp is loaded once with
  ``load_library_permanently``.
- ``pool`` (fallback where libgomp is missing): the generated code calls
  ``explorer_parallel_launch``, a ctypes callback that hands the tasks to a
  Python thread pool; each worker calls the task through ctypes, which releases
  the GIL, so the tasks run truly in parallel.

Caveat for process-based measurement: libgomp's thread pool does not survive
``fork``; worker processes that run kernels should be started with ``spawn``
(or fork before the first parallel kernel runs in the parent).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm

_lock = threading.Lock()
_state: dict = {}

_TASK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32)
_LAUNCH = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)


def gomp_available() -> bool:
    """Load libgomp into the process (once); False when it cannot be found."""
    with _lock:
        if "gomp" not in _state:
            _state["gomp"] = _load_gomp()
        return _state["gomp"]


def _load_gomp() -> bool:
    for name in (ctypes.util.find_library("gomp"), "libgomp.so.1"):
        if not name:
            continue
        try:
            llvm.load_library_permanently(name)
            return True
        except RuntimeError:
            continue
    return False


def default_runtime() -> str:
    return "gomp" if gomp_available() else "pool"


def prepare(runtime: str) -> None:
    """Make the symbols a module built for ``runtime`` calls resolvable in MCJIT."""
    if runtime == "gomp":
        if not gomp_available():
            from ...errors import BuildError
            raise BuildError("the gomp runtime needs libgomp (libgomp.so.1), which was not "
                             "found: install it or build with runtime='pool'")
        return
    with _lock:
        if "launch" not in _state:
            cb = _LAUNCH(_launch)
            _state["launch"] = cb  # keep the callback alive for the life of the process
            llvm.add_symbol("explorer_parallel_launch", ctypes.cast(cb, ctypes.c_void_p).value)


def _pool() -> ThreadPoolExecutor:
    pid = os.getpid()
    if _state.get("pool_pid") != pid:  # a forked child gets a fresh pool
        _state["pool"] = ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) - 1),
                                            thread_name_prefix="explorer-par")
        _state["pool_pid"] = pid
    return _state["pool"]


def _launch(task_addr: int, closure: int, ntasks: int) -> None:
    task = _TASK(task_addr)
    futures = [_pool().submit(task, closure, i, ntasks) for i in range(1, ntasks)]
    task(closure, 0, ntasks)
    for f in futures:
        f.result()
