"""Host emulation of a generated :class:`CudaModule`: the exact CUDA C it holds,
compiled for the CPU as C++ and run on numpy arrays.

This checks the code that would run on the GPU, not a model of it. The source is
compiled unchanged with ``shim.h`` force-included (``g++ -x c++ -std=c++20 -O1
-shared -fPIC -pthread -include shim.h``) and a driver appended after it: one
``extern "C"`` entry per :class:`KernelLaunch` that casts the buffers to the kernel's
parameter types and runs the launch. The shared object is cached by a hash of the
source, the shim, the compiler's version and the flags, in
``$XDG_CACHE_HOME/schedule-explorer/cuda-emu`` (``~/.cache/...`` without it).

How a launch runs:

- all threads of a block (up to 1024) are alive at once: by default each is a fiber
  (its own stack, switched at barriers and shuffles, on one OS thread), or, with
  ``executor="threads"``, an OS thread. Blocks run one after the other on the same
  threads, each ending at a barrier, so races *between blocks* are not seen (the
  interpreter's race check covers them). OS threads were the first design, but every
  barrier costs two context switches per thread: on a loaded 2-core machine a
  128x128x64 tiled gemm (64 blocks of 256 threads, 576 barriers) ran in 7.8 s on
  threads and 0.27 s on fibers (``benchmarks/cuda_emulate.py``);
- ``threadIdx``/``blockIdx`` are per thread, ``__shared__`` memory one copy per block,
  the dynamic pool (``EXPLORER_DYNAMIC_SHARED``) the launch's ``dynamic_shared_bytes``
  (none when 0: using it then faults), filled with 0xff bytes (NaN for floats);
- ``__syncthreads()`` is a barrier among the block's threads; warp shuffles exchange
  through a per-warp slot array and a barrier among the lanes of the mask (lane =
  linear thread id % 32). Lanes do not run in lockstep: warp-synchronous code that
  relies on it without a shuffle or ``__syncwarp`` gives wrong results here;
- a barrier not every thread reaches (some threads wait at another ``__syncthreads``
  or a shuffle, or finished the kernel) is found as soon as the threads disagree or all
  of them wait, and raises :class:`RaceError` naming the kernel, the block and where
  each group of threads waits; a thread that loops forever hangs, as on a GPU;
- a fault in a kernel thread (SIGSEGV from an out-of-bounds access, SIGFPE from an
  integer division by zero, a stack overflow) is caught by a signal handler installed
  for the emulator's threads, stops the launch and raises :class:`KernelFault` naming
  the kernel, block, thread and address. The buffers may then be partly written. A
  wild write that corrupts memory without faulting is not caught: run untrusted
  candidates in the measurement workers, where a dead process is a result.

The source is compiled with a precompiled copy of the shim kept beside the modules
(about 1 s a module instead of 4). The shim needs Linux (futexes, ``ucontext``, POSIX
signals) and a C++20 compiler (``$CXX``, ``g++`` or ``c++``).

Timings of an emulated run are not GPU timings: they measure fibers or OS threads on
the host CPU, and are never recorded as measurements.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from ...errors import BuildError, KernelFault, RaceError
from .module import CudaModule, KernelLaunch
from .resources import MAX_BLOCK_DIMS, MAX_GRID_DIMS

SHIM = Path(__file__).with_name("shim.h")
FLAGS = ("-x", "c++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread",
         "-fvisibility=hidden", "-fno-strict-aliasing", "-Wno-unknown-pragmas")
EXECUTORS = {"threads": (), "fibers": ("-DEXPLORER_EMU_FIBERS",)}
MAX_THREADS = 1024                     # the shim's threads (or fibers) per block
MAX_DYNAMIC_SHARED = 227 * 1024        # the most any GPU gives a block (sm_90)
ALIGN = 64                             # buffers handed to kernels start at this boundary
_ERRLEN = 4096
_LOCK = threading.Lock()               # shared memory is static: one launch at a time


def find_compiler() -> str:
    """The C++ compiler to use: ``$CXX``, else ``g++``, else ``c++``; BuildError if none."""
    env = os.environ.get("CXX")
    if env:
        path = shutil.which(env)
        if not path:
            raise BuildError(f"CXX is {env!r}, which is not an executable here: point it to a "
                             "C++20 compiler (g++ or clang++) or unset it")
        return path
    for name in ("g++", "c++"):
        path = shutil.which(name)
        if path:
            return path
    raise BuildError("the CUDA emulator needs a C++20 compiler and found none (looked at $CXX, "
                     "g++, c++): install g++ (apt-get install g++) or set CXX")


@functools.lru_cache(maxsize=None)
def compiler_version(cxx: str) -> str:
    """``cxx --version``'s first line (part of the cache key)."""
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    return (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else cxx


def cache_dir() -> Path:
    """Where compiled emulator modules are kept."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "schedule-explorer" / "cuda-emu"


def driver_source(module: CudaModule) -> str:
    """The C++ appended after the generated source: one entry per launch."""
    lines = ["", "// ---- emulator driver (explorer.backends.cuda.emulate) ----"]
    for i, launch in enumerate(module.launches):
        gx, gy, gz = launch.grid
        bx, by, bz = launch.block
        types = [module.buffer(n).ctype for n in launch.args]
        described = ", ".join(f"{t}* {n}" for t, n in zip(types, launch.args))
        lines += [
            f"static_assert(::explorer_emu::params_are<{', '.join(types)}>({launch.name}), "
            f"\"kernel {launch.name} must take ({described}) as its launch passes them\");",
            f"EXPLORER_EMU_EXPORT int explorer_emu_launch_{i}(void** args, char* err, int errlen) {{",
            f"  return ::explorer_emu::launch(\"{launch.name}\", dim3{{{gx}u, {gy}u, {gz}u}}, "
            f"dim3{{{bx}u, {by}u, {bz}u}}, {launch.dynamic_shared_bytes}u,",
            f"      [](void** a) {{ ::explorer_emu::call({launch.name}, a); }}, args, err, errlen);",
            "}"]
    return module.source + "\n".join(lines) + "\n"


def check_launches(module: CudaModule) -> None:
    """BuildError unless every launch is one the emulator (and a GPU) can run."""
    names = {b.name for b in module.buffers}
    for launch in module.launches:
        _check_dims(launch, "block", launch.block, MAX_BLOCK_DIMS)
        _check_dims(launch, "grid", launch.grid, MAX_GRID_DIMS)
        if launch.threads_per_block > MAX_THREADS:
            raise BuildError(f"kernel {launch.name}: {launch.threads_per_block} threads per block, "
                             f"at most {MAX_THREADS}: split the thread loops")
        if not 0 <= launch.dynamic_shared_bytes <= MAX_DYNAMIC_SHARED:
            raise BuildError(f"kernel {launch.name}: {launch.dynamic_shared_bytes} bytes of dynamic "
                             f"shared memory, at most {MAX_DYNAMIC_SHARED} (sm_90's limit)")
        unknown = [a for a in launch.args if a not in names]
        if unknown:
            raise BuildError(f"kernel {launch.name} takes {unknown}, which are not buffers of "
                             f"{module.func_name} ({sorted(names)})")
        if not re.search(rf"\b{re.escape(launch.name)}\s*\(", module.source):
            raise BuildError(f"kernel {launch.name} is launched but not defined in the source "
                             f"of {module.func_name}")


def _check_dims(launch: KernelLaunch, what: str, dims, limits) -> None:
    if len(dims) != 3 or any(not isinstance(d, int) or d < 1 for d in dims):
        raise BuildError(f"kernel {launch.name}: {what} {dims} must be three positive ints")
    for d, lim, axis in zip(dims, limits, "xyz"):
        if d > lim:
            raise BuildError(f"kernel {launch.name}: {what}.{axis} = {d}, at most {lim}")


def load(module: CudaModule, executor: str = "fibers",
         cache: Path | str | None = None) -> "EmulatedModule":
    """Compile ``module`` for the host (or find it in the cache) and load it.

    ``executor`` is how a block's CUDA threads run: ``"fibers"`` (default), one fiber
    each on a single OS thread, switched at barriers and shuffles (deterministic, and
    fast); ``"threads"``, one OS thread each, preempted anywhere by the OS (other
    interleavings, but every barrier costs a context switch per thread: 10-50x slower).
    """
    if executor not in EXECUTORS:
        raise BuildError(f"unknown emulator executor {executor!r}: use one of {sorted(EXECUTORS)}")
    check_launches(module)
    cxx = find_compiler()
    text = driver_source(module)
    flags = FLAGS + EXECUTORS[executor]
    version = compiler_version(cxx)
    folder = Path(cache) if cache is not None else cache_dir()
    so = folder / f"{module.func_name[:40]}-{_key(text, SHIM.read_text(), version, *flags)}.so"
    if so.exists():
        return EmulatedModule(module, so, 0.0)
    start = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    header = _precompiled_shim(cxx, flags, version, folder)
    _compile([cxx, *flags, "-include", str(header)], text, so, module.func_name)
    return EmulatedModule(module, so, time.perf_counter() - start)


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def _precompiled_shim(cxx: str, flags: tuple, version: str, folder: Path) -> Path:
    """A copy of shim.h in ``folder`` with its precompiled header beside it, which the
    compiler reads instead (a module then compiles about 4x faster); shim.h itself when
    the compiler cannot precompile it."""
    text = SHIM.read_text()
    header = folder / f"shim-{_key(text, version, *flags)}.h"
    gch = Path(str(header) + ".gch")
    if gch.exists():
        return header
    _write_atomic(header, text)
    options = [f for f in flags if f not in ("-x", "c++", "-shared")]
    fd, tmp = tempfile.mkstemp(prefix=gch.name + ".", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        out = subprocess.run([cxx, "-x", "c++-header", *options, "-o", tmp, str(header)],
                             capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            return SHIM
        os.replace(tmp, gch)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return header


def _write_atomic(path: Path, text: str) -> None:
    if path.exists():
        return
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _compile(cmd: list, text: str, so: Path, name: str) -> None:
    """Compile ``text`` into ``so`` atomically (temporary file, then rename): two processes
    may compile the same source at once."""
    fd, tmp = tempfile.mkstemp(prefix=so.stem + ".", suffix=".tmp", dir=so.parent)
    os.close(fd)
    src = Path(tmp[:-4] + ".cu")
    src.write_text(text)
    try:
        out = subprocess.run([*cmd, "-o", tmp, str(src)], capture_output=True, text=True,
                             timeout=600, env={**os.environ, "LC_ALL": "C"})
        if out.returncode != 0:
            kept = so.with_suffix(".failed.cu")
            os.replace(src, kept)
            errors = _first_errors(out.stderr.replace(str(src), str(kept)))
            raise BuildError(f"the emulator could not compile the CUDA source of {name} "
                             f"(kept in {kept}):\n{errors}")
        os.replace(tmp, so)
    finally:
        for leftover in (tmp, src):
            if os.path.exists(leftover):
                os.unlink(leftover)


def _first_errors(stderr: str, count: int = 12) -> str:
    lines = stderr.splitlines()
    first = next((i for i, l in enumerate(lines) if "error" in l), 0)
    return "\n".join(lines[first:first + count])


class EmulatedModule:
    """A loaded emulation of a :class:`CudaModule`; :meth:`run` runs its launches in order.

    ``compile_seconds`` is what this load spent compiling (0.0 when the cache had it).
    """

    def __init__(self, module: CudaModule, path: Path, compile_seconds: float):
        self.module = module
        self.path = path
        self.compile_seconds = compile_seconds
        self.from_cache = compile_seconds == 0.0
        lib = ctypes.CDLL(str(path))
        self._entries = []
        for i in range(len(module.launches)):
            fn = getattr(lib, f"explorer_emu_launch_{i}")
            fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_int]
            fn.restype = ctypes.c_int
            self._entries.append(fn)

    def run(self, arrays) -> None:
        """Run every launch on ``arrays`` (numpy, in ``module.params`` order); outputs are
        written in place (read-only arrays are taken as inputs: a copy is handed to the
        kernel, as pycuda's runtime does). Scratch buffers are allocated here, filled with
        NaN (floats) or -1 (integers), so that a read before a write shows."""
        arrays = self.module.check_args(arrays)
        staged = {b.name: _aligned_copy(a) for b, a in zip(self.module.params, arrays)}
        for b in self.module.scratch:
            staged[b.name] = _poisoned(b)
        err = ctypes.create_string_buffer(_ERRLEN)
        with _LOCK:
            for launch, entry in zip(self.module.launches, self._entries):
                ptrs = (ctypes.c_void_p * max(1, len(launch.args)))(
                    *[staged[n].ctypes.data for n in launch.args])
                status = entry(ptrs, err, _ERRLEN)
                if status:
                    _raise(launch, status, err.value.decode(errors="replace"))
        for a, b in zip(arrays, self.module.params):
            if staged[b.name] is not a and a.flags.writeable:
                a[...] = staged[b.name]


def _aligned_empty(dtype, shape) -> np.ndarray:
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(n + ALIGN, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGN
    return raw[offset:offset + n].view(dtype).reshape(shape)


def _aligned_copy(a: np.ndarray) -> np.ndarray:
    """``a`` itself when writeable, C-contiguous and aligned (CUDA's allocations are),
    else a copy that is."""
    if a.flags.c_contiguous and a.flags.writeable and a.ctypes.data % ALIGN == 0:
        return a
    out = _aligned_empty(a.dtype, a.shape)
    out[...] = a
    return out


def _poisoned(b) -> np.ndarray:
    out = _aligned_empty(b.dtype, b.shape)
    out.fill(np.nan if np.dtype(b.dtype).kind == "f" else -1)
    return out


_ERRORS = {1: RaceError, 2: BuildError, 3: KernelFault}   # the shim's launch status


def _raise(launch: KernelLaunch, status: int, message: str):
    error = _ERRORS.get(status, KernelFault)
    raise error(message or f"kernel {launch.name} stopped with status {status} and no message")
