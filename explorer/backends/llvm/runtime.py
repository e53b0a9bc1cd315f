"""The thread runtime behind parallel loops.

Two runtimes run the outlined task functions (``parallel.py``):

- ``gomp`` (the default): the generated code calls libgomp's ``GOMP_parallel``
  directly. It works wherever the parallel loop sits (inside serial loops,
  several per kernel) without a trip through Python, and it is cheap: on the
  2-core development machine a 2-thread launch of a trivial loop took 2-5 us,
  against 20-50 us for the pool below (which also holds the GIL while it hands
  out tasks); a tuner measures many small kernels, where that difference shows.
  libgomp is loaded once with ``load_library_permanently``.
- ``pool`` (fallback where libgomp is missing): the generated code calls
  ``explorer_parallel_launch``, a ctypes callback that hands the tasks to a
  Python thread pool; each worker calls the task through ctypes, which releases
  the GIL, so the tasks run truly in parallel.

A parallel loop that gets one thread (one core, or extent 1) calls its task
directly: no runtime at all.

libgomp's thread team does not survive ``fork``: a child that enters
``GOMP_parallel`` after its parent did hangs forever. So generated code calls
``GOMP_parallel`` through a pointer (``explorer_gomp_launcher``) that an
at-fork hook redirects, in the child, to a serial launcher: kernels in a forked
child stay correct, on one thread. Worker processes that should use every core
are best started with ``spawn``.
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


# How idle team threads wait, unless the user chose. They spin a short while, then
# sleep. Spinning for good (libgomp's active policy, or its default 300000 spins) cost
# 8 ms per call for a 0.03 ms kernel on a shared 2-core machine: a spinning thread
# waited a whole time slice for a descheduled one. Sleeping at once (passive, no spin)
# made every call wake its team: on a quiet 2-core Zen 5 the 0.1 ms kernels ran at
# half speed (ResNet-18 C11 0.128 -> 0.081 ms, attention scores 0.145 -> 0.075 ms
# with 30000 spins; 300000 spins no faster; ``benchmarks/omp_wait.py``).
GOMP_ENV = {"OMP_WAIT_POLICY": "passive", "GOMP_SPINCOUNT": "30000"}
OWN_ENV: dict = {}    # what _load_gomp set itself (library baselines run without it)


def _load_gomp() -> bool:
    for name, value in GOMP_ENV.items():
        if name not in os.environ:
            os.environ[name] = OWN_ENV[name] = value
    return load_library("gomp", "libgomp.so.1")


def load_library(short: str, soname: str) -> bool:
    """Make a shared library's symbols visible to JIT-compiled code (found by its short
    name, else its soname); False when neither loads."""
    for name in (ctypes.util.find_library(short), soname):
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


GOMP_LAUNCHER = "explorer_gomp_launcher"
_launcher_slot = ctypes.c_void_p(0)   # what generated code calls: GOMP_parallel or serial
_SERIAL_LAUNCHER_IR = """
define void @explorer_serial_launch(ptr %fn, ptr %data, i32 %n, i32 %flags) {
  call void %fn(ptr %data)
  ret void
}
"""


def _prepare_gomp() -> None:
    if not gomp_available():
        from ...errors import BuildError
        raise BuildError("the gomp runtime needs libgomp (libgomp.so.1), which was not "
                         "found: install it or build with runtime='pool'")
    with _lock:
        if "serial" in _state:
            return
        from .jit import JitModule
        from ...target import Target
        serial = JitModule(_SERIAL_LAUNCHER_IR, "explorer_serial_launch", Target("llvm"))
        _state["serial"] = serial   # outside a team, omp_get_num_threads() is 1: one task
        _launcher_slot.value = llvm.address_of_symbol("GOMP_parallel")
        llvm.add_symbol(GOMP_LAUNCHER, ctypes.addressof(_launcher_slot))
        os.register_at_fork(after_in_child=_serial_after_fork)


def _serial_after_fork() -> None:
    _launcher_slot.value = _state["serial"].address


def prepare(runtime: str) -> None:
    """Make the symbols a module built for ``runtime`` calls resolvable in MCJIT."""
    if runtime == "gomp":
        _prepare_gomp()
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


# Why a timed kernel's team is bound to cores (``bound_team``): on a 2-core VM the
# scheduler now and then woke libgomp's team thread on the core where the master
# thread was spinning for it (the other core idle). The master spun out its
# GOMP_SPINCOUNT, the woken thread waited behind it, and every call of a 5 us gemm
# took about 1 ms (the master at 100% CPU, the team thread queued behind it) until
# the load balancer moved one of them, 5-20 ms later. In a tuner's run of 8
# candidates 1-3 were timed 200x too slow in 4 runs of 10; a 1 ms kernel read up to
# 2x slow. One thread a core cannot queue behind its own master.
_OMP_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _gomp_lib():
    if "gomp_lib" not in _state:
        name = ctypes.util.find_library("gomp") or "libgomp.so.1"
        lib = ctypes.CDLL(name)   # the copy load_library_permanently loaded
        lib.GOMP_parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint,
                                      ctypes.c_uint]
        lib.GOMP_parallel.restype = None
        lib.omp_get_thread_num.restype = ctypes.c_int
        _state["gomp_lib"] = lib
    return _state["gomp_lib"]


class bound_team:
    """``with bound_team(threads):`` pins the threads of libgomp's team, the calling
    (master) thread included, one to a core of this process's affinity, for the
    ``with`` block; the master gets its whole affinity back after it (the team's other
    threads stay where they were put: they run only team work). A no-op where the
    kernels do not run on a libgomp team: one core or one thread, the pool runtime,
    a forked child (serial launcher), or an affinity call the system refuses."""

    def __init__(self, threads: int):
        self.threads = threads
        self.bound = False
        self._cpus: list = []

    def __enter__(self) -> "bound_team":
        try:
            self._cpus = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            return self
        if self.threads < 2 or len(self._cpus) < 2 or not self._team_runs():
            return self
        lib, cpus, failed = _gomp_lib(), self._cpus, []

        def pin(_data):
            try:
                os.sched_setaffinity(0, {cpus[lib.omp_get_thread_num() % len(cpus)]})
            except OSError as e:
                failed.append(e)
        fn = _OMP_FN(pin)
        lib.GOMP_parallel(ctypes.cast(fn, ctypes.c_void_p), None, self.threads, 0)
        self.bound = not failed
        return self

    def __exit__(self, *exc) -> None:
        if self._cpus and self.bound:
            os.sched_setaffinity(0, self._cpus)

    @staticmethod
    def _team_runs() -> bool:
        """True where generated code launches parallel loops on libgomp's team."""
        if "serial" not in _state or not gomp_available():
            return False
        return _launcher_slot.value == llvm.address_of_symbol("GOMP_parallel")
