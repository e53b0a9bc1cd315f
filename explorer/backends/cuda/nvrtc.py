"""NVRTC, the CUDA runtime compiler, where nvcc is missing: CUDA C -> cubin in a library.

A GPU machine with a driver but without the CUDA toolkit often has ``libnvrtc`` all
the same (the ``nvidia-cuda-nvrtc`` wheel that PyTorch, CuPy or cuda-python bring).
``compile_nvrtc`` compiles with it to a cubin for ``sm_XY``, with ``-Xptxas -v``
so that the log holds the same ptxas report nvcc prints. NVRTC runs in-process, so
the compile runs in a child process (``python -m explorer.backends.cuda.nvrtc``)
that a time-out can kill and a crash cannot take the caller with it.

libnvrtc is looked for in ``$CUDA_HOME``/``$CUDA_PATH``, ``/usr/local/cuda``
(``lib64``, ``targets/x86_64-linux/lib``), the ``nvidia`` wheels' ``lib`` folders
(``nvidia/cu13/lib``, ``nvidia/cuda_nvrtc/lib``) and the loader's path.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ...errors import BuildError

_LIB_DIRS = ("lib64", "targets/x86_64-linux/lib", "lib")


def _candidate_dirs() -> list:
    dirs = []
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            dirs += [Path(root) / d for d in _LIB_DIRS]
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        dirs += sorted(Path(base).glob("*/lib"))        # cu13/lib, cuda_nvrtc/lib
    return dirs


def find_nvrtc() -> str | None:
    """Path of libnvrtc (the newest found), or None."""
    for d in _candidate_dirs():
        libs = sorted(glob.glob(str(d / "libnvrtc.so*")), key=len)
        libs = [p for p in libs if ".alt." not in p]
        if libs:
            return libs[0]
    return ctypes.util.find_library("nvrtc")


@functools.lru_cache(maxsize=4)
def _load(path: str):
    """libnvrtc, with its builtins library loaded first (NVRTC opens it by name, which
    fails when its folder is not on the loader's path)."""
    folder = Path(path).parent
    for builtins in sorted(folder.glob("libnvrtc-builtins.so*"), key=lambda p: len(p.name)):
        if ".alt." not in builtins.name:
            ctypes.CDLL(str(builtins), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
            break
    lib = ctypes.CDLL(path)
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return lib


def nvrtc_version(path: str | None = None) -> str:
    """``NVRTC 13.0`` of the library at ``path`` (found when None)."""
    lib = _load(path or find_nvrtc())
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"NVRTC {major.value}.{minor.value}"


def compile_in_process(path: str, source: str, arch: str, options=()) -> tuple:
    """(status, log, cubin bytes) of compiling ``source`` for ``arch`` with libnvrtc
    (status 0: compiled; the log holds ptxas's report either way)."""
    lib = _load(path)
    prog = ctypes.c_void_p()
    lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None, None)
    opts = [f"-arch={arch}".encode(), b"-Xptxas", b"-v", *(o.encode() for o in options)]
    status = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    cubin = b""
    if status == 0:
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetCUBIN(prog, buf)
        cubin = buf.raw
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return status, log.value.decode(errors="replace"), cubin


def compile_nvrtc(path: str, source: str, arch: str, options=(), timeout: float = 120.0) -> tuple:
    """(cubin, log) of ``source`` compiled for ``arch`` by the libnvrtc at ``path``, in a
    child process; BuildError with the first error lines, or on a time-out."""
    with tempfile.TemporaryDirectory(prefix="explorer-nvrtc-") as tmp:
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"lib": path, "source": source, "arch": arch,
                                   "options": list(options), "out": tmp}))
        try:
            proc = subprocess.run([sys.executable, "-m", __name__, str(job)],
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BuildError(f"NVRTC did not finish within {timeout:g} s compiling the CUDA "
                             "source: the kernel is too large to compile (smaller unroll "
                             "factors or tiles), or pass a longer timeout") from None
        log = (Path(tmp) / "log.txt").read_text() if (Path(tmp) / "log.txt").exists() else ""
        cubin = Path(tmp) / "kernel.cubin"
        if proc.returncode != 0 or not cubin.exists():
            raise BuildError(_failure(f"{log}\n{proc.stderr}", arch))
        return cubin.read_bytes(), log


def _failure(log: str, arch: str) -> str:
    from .resources import too_much_shared
    shared = too_much_shared(log)
    if shared:
        return shared
    lines = [ln.rstrip() for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln] or lines
    return f"NVRTC could not compile the CUDA source for {arch}:\n" + "\n".join(errors[:8])


def _main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    status, log, cubin = compile_in_process(job["lib"], job["source"], job["arch"],
                                            job["options"])
    message = _load(job["lib"]).nvrtcGetErrorString(status).decode()
    out = Path(job["out"])
    (out / "log.txt").write_text(log)
    if status == 0:
        (out / "kernel.cubin").write_bytes(cubin)
        return 0
    print(f"error: NVRTC status {status} ({message})", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1]))
