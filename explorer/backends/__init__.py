"""Backends: turn a scheduled function into a callable kernel."""
from __future__ import annotations

from ..errors import BuildError
from ..ir.stmt import PrimFunc
from .kernel import Kernel
from .target import Target, as_target


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
        return build_llvm(func, lowered, target)
    if target.kind == "cuda":
        from .cuda import build_cuda
        return build_cuda(func, lowered, target)
    raise BuildError(f"no backend for target kind {target.kind!r}")
