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


def build(obj, target="llvm") -> Kernel:
    """Build a Schedule, Workload or PrimFunc for ``target`` ("llvm", "cuda", "interp")."""
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
        return _cuda_backend()(func, lowered, target)
    raise BuildError(f"no backend for target kind {target.kind!r}")


def _cuda_backend():
    """The CUDA code generator; this version has none, so a BuildError saying what to do."""
    raise BuildError("no CUDA backend in this version: run GPU schedules on the "
                     "interpreter with build(sch, 'interp'), or tune for 'llvm'")


def check_buildable(target) -> None:
    """Raise BuildError now if kernels for ``target`` cannot be built here."""
    target = as_target(target)
    if target.kind == "cuda":
        _cuda_backend()
    check_cpu(target)
