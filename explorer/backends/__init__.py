"""Backends: turn a scheduled function into a callable kernel."""
from __future__ import annotations

from ..errors import BuildError
from ..ir.stmt import PrimFunc
from .kernel import Kernel
from ..target import Target, as_target, check_cpu


def _func_of(obj) -> PrimFunc:
    if isinstance(obj, PrimFunc):
        return obj
    func = getattr(obj, "func", None)
    if isinstance(func, PrimFunc):
        return func
    raise BuildError(f"build takes a Schedule, a Workload or a PrimFunc, not {type(obj).__name__}")


def build(obj, target="llvm", emulate: bool = False) -> Kernel:
    """Build a Schedule, Workload or PrimFunc for ``target`` ("llvm", "cuda", "interp").

    For "cuda" the kernel holds the generated CUDA C (``.source``, on every machine); it
    runs on the GPU through pycuda, or with ``emulate=True`` through the host emulator
    (the same source compiled as C++: a correctness check, not a measurement)."""
    from ..lower import lower
    func = _func_of(obj)
    target = as_target(target)
    lowered = lower(func)
    if target.kind == "interp":
        from .interp import build_interp
        return build_interp(func, lowered)
    if target.kind == "llvm":
        from .llvm import build_llvm
        check_cpu(target)        # an unknown -mcpu would abort this process inside LLVM
        return build_llvm(func, lowered, target)
    if target.kind == "cuda":
        from .cuda import build_cuda
        return build_cuda(func, lowered, target, emulate)
    raise BuildError(f"no backend for target kind {target.kind!r}")


def check_buildable(target) -> None:
    """Raise BuildError now if kernels for ``target`` cannot be built and run here: for
    "cuda", CUDA C generation works everywhere but running needs pycuda and a driver
    (the message says which is missing)."""
    target = as_target(target)
    if target.kind == "cuda":
        from .cuda.runtime import driver
        driver()
        return
    check_cpu(target)
