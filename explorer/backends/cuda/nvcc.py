"""Compile checks without a GPU: generated CUDA C -> cubin with nvcc, resources read back.

``compile_cubin(source, "sm_90")`` runs ``nvcc -cubin -arch=sm_90 -Xptxas -v`` and
returns the cubin with each kernel's registers, spills, shared and local memory
(``Resources``, parsed from ptxas's report); ``check_resources`` rejects a launch
the device could not run, before anyone measures it. Cubins are cached by the
sha256 of (source, arch, options, nvcc version) under ``$XDG_CACHE_HOME`` (or
``~/.cache``) ``/schedule-explorer/cubin``, written atomically, so the same
candidate is compiled once per machine. nvcc is looked for in ``$CUDA_HOME/bin``,
``/usr/local/cuda/bin``, then ``PATH``; without it NVRTC compiles where a libnvrtc
is there (``nvrtc.py``: the same cubins, the same ptxas report); without either,
code generation and emulation still work and only these checks say what is missing.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import BuildError
from .resources import Resources, check_resources, parse_ptxas, too_much_shared

__all__ = ["Compiled", "Resources", "check_resources", "compile_cubin", "find_nvcc",
           "nvcc_version", "cache_dir", "parse_ptxas"]

DEFAULT_TIMEOUT = 120.0
STANDARD_ROOT = "/usr/local/cuda"
_ARCH = re.compile(r"sm_\d{2,3}[af]?$")
_ERROR_LINES = 8


@dataclass(frozen=True)
class Compiled:
    """A cubin and what ptxas reported for each of its kernels."""
    cubin: bytes = field(repr=False)
    arch: str
    resources: dict          # kernel name -> Resources
    log: str = field(repr=False, default="")
    nvcc_version: str = ""
    cached: bool = False     # True when read back from the cache instead of compiled
    seconds: float = 0.0     # wall time of this call (nvcc's run, or the cache read)


def find_nvcc() -> str | None:
    """Path of nvcc: ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, ``/usr/local/cuda/bin``,
    then ``PATH``; None when there is none."""
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), STANDARD_ROOT):
        if root:
            cand = Path(root) / "bin" / "nvcc"
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    return shutil.which("nvcc")


def require_nvcc() -> str:
    """Path of nvcc, or a BuildError saying what is missing and what still works."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise BuildError(_MISSING)
    return nvcc


_MISSING = ("nvcc (the CUDA toolkit's compiler) was not found in $CUDA_HOME/bin, "
            "/usr/local/cuda/bin or on PATH, nor NVRTC (libnvrtc, the runtime compiler: pip "
            "install nvidia-cuda-nvrtc), so CUDA kernels cannot be compiled or checked "
            "against the device's limits here: install the CUDA toolkit or set CUDA_HOME. "
            "Code generation (the CUDA source), host emulation and the interpreter still "
            "work without it.")


def _compiler(nvcc: str | None) -> tuple:
    """(version, compile(source, arch, options, timeout) -> (cubin, log)) of nvcc, or of
    NVRTC where there is no nvcc; BuildError when there is neither."""
    nvcc = nvcc or find_nvcc()
    if nvcc is not None:
        return nvcc_version(nvcc), functools.partial(_run_nvcc, nvcc)
    from . import nvrtc
    lib = nvrtc.find_nvrtc()
    if lib is None:
        raise BuildError(_MISSING)
    return nvrtc.nvrtc_version(lib), functools.partial(nvrtc.compile_nvrtc, lib)


@functools.lru_cache(maxsize=8)
def _version_of(nvcc: str, mtime: float) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildError(f"{nvcc} --version failed ({e}): is the CUDA toolkit installed "
                         "completely?") from None
    m = re.search(r"release [\d.]+, (V[\d.]+)", out.stdout)
    return m.group(1) if m else out.stdout.strip().splitlines()[-1] if out.stdout else "?"


def nvcc_version(nvcc: str | None = None) -> str:
    """nvcc's version (``V13.0.88``)."""
    nvcc = nvcc or require_nvcc()
    return _version_of(nvcc, os.path.getmtime(nvcc))


def cache_dir() -> Path:
    """Where compiled cubins are kept: ``$XDG_CACHE_HOME`` or ``~/.cache``, then
    ``schedule-explorer/cubin``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "schedule-explorer" / "cubin"


def check_arch(arch) -> str:
    """``arch`` as an ``sm_XY`` string (a cuda Target's arch is taken too)."""
    arch = getattr(arch, "arch", arch)
    if not isinstance(arch, str) or not _ARCH.match(arch):
        raise BuildError(f"unknown CUDA architecture {arch!r}: give it as sm_XY, e.g. sm_80 "
                         "or sm_90")
    return arch


def compile_cubin(source: str, arch="sm_90", *, options=(), timeout: float = DEFAULT_TIMEOUT,
                  cache: bool | str | Path = True, nvcc: str | None = None) -> Compiled:
    """Compile ``source`` (CUDA C) for ``arch`` to a cubin and read back each kernel's
    Resources, with nvcc (``nvcc``: its path; found when None) or, where there is none,
    NVRTC. ``cache``: True for ``cache_dir()``, a folder, or False for none. BuildError
    with the compiler's first error lines when it fails or takes over ``timeout`` seconds."""
    t0 = time.perf_counter()
    arch = check_arch(arch)
    version, run = _compiler(nvcc)
    options = tuple(options)
    folder = (cache_dir() if cache is True else Path(cache)) if cache else None
    key = _key(source, arch, options, version)
    hit = _read_cache(folder, key) if folder else None
    if hit is not None:
        cubin, log = hit
        return Compiled(cubin, arch, parse_ptxas(log), log, version, True,
                        time.perf_counter() - t0)
    cubin, log = run(source, arch, options, timeout)
    if folder:
        _write_cache(folder, key, cubin, log)
    return Compiled(cubin, arch, parse_ptxas(log), log, version, False, time.perf_counter() - t0)


def _key(source: str, arch: str, options: tuple, version: str) -> str:
    h = hashlib.sha256()
    for part in (source, arch, "\x1f".join(options), version):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _run_nvcc(nvcc: str, source: str, arch: str, options: tuple, timeout: float) -> tuple:
    with tempfile.TemporaryDirectory(prefix="explorer-nvcc-") as tmp:
        src, out = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.cubin"
        src.write_text(source)
        cmd = [nvcc, "-cubin", f"-arch={arch}", "-Xptxas", "-v", *options, "-o", str(out),
               str(src)]
        rc, log = _run(cmd, timeout, tmp)
        if rc != 0 or not out.is_file():
            raise BuildError(_failure(log, arch, rc))
        return out.read_bytes(), log


def _run(cmd: list, timeout: float, cwd: str) -> tuple:
    """(exit status, stdout + stderr) of ``cmd``; its whole process group is killed on a
    time-out (nvcc runs cicc and ptxas as children)."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:      # it ended on its own meanwhile
            pass
        proc.communicate()
        raise BuildError(f"nvcc did not finish within {timeout:g} s compiling the CUDA "
                         "source: the kernel is too large to compile (smaller unroll factors "
                         "or tiles), or pass a longer timeout") from None
    return proc.returncode, out


def _failure(log: str, arch: str, rc: int) -> str:
    shared = too_much_shared(log)
    if shared:
        return shared
    lines = [ln.rstrip() for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"\berror\b|\bfatal\b", ln)] or lines
    first = "\n".join(errors[:_ERROR_LINES]) or f"(no output, exit status {rc})"
    return f"nvcc could not compile the CUDA source for {arch}:\n{first}"


def _read_cache(folder: Path, key: str) -> tuple | None:
    cubin, log = folder / f"{key}.cubin", folder / f"{key}.ptxas.txt"
    try:
        return cubin.read_bytes(), log.read_text()
    except OSError:
        return None


def _write_cache(folder: Path, key: str, cubin: bytes, log: str) -> None:
    """Write the log, then the cubin (whose presence marks a complete entry), each through a
    temporary file renamed into place; a cache that cannot be written is skipped."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _atomic_write(folder / f"{key}.ptxas.txt", log.encode())
        _atomic_write(folder / f"{key}.cubin", cubin)
    except OSError:
        pass


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
