"""The callable every backend returns: checks its arguments, then runs."""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from ..ir.stmt import PrimFunc


class Kernel:
    """A built function, called on numpy arrays (inputs and outputs, in parameter order).

    Outputs are written in place. Subclasses implement ``_run(arrays)``.
    """

    target_kind = "?"

    def __init__(self, func: PrimFunc, lowered: PrimFunc, source: str = ""):
        self.func = func
        self.lowered = lowered
        self.source = source
        self.compile_seconds = 0.0

    @property
    def params(self):
        return self.func.params

    def check_args(self, arrays) -> list:
        """``arrays`` as a list once each fits its parameter; ArgumentError saying why not."""
        params = self.func.params
        if len(arrays) != len(params):
            names = ", ".join(p.name for p in params)
            raise ArgumentError(f"{self.func.name} takes {len(params)} arrays ({names}) but got "
                                f"{len(arrays)}: pass inputs and outputs in that order")
        for p, a in zip(params, arrays):
            problem = array_problem(p, a) or _layout_problem(p, a)
            if problem:
                raise ArgumentError(problem)
        return list(arrays)

    def __call__(self, *arrays):
        arrays = self.check_args(arrays)
        self._run(arrays)

    def _run(self, arrays):  # pragma: no cover - abstract
        raise NotImplementedError


def array_problem(buf, a) -> str | None:
    """Why ``a`` cannot stand for buffer ``buf`` (not an array, another shape or dtype),
    or None: the one check of an argument, for kernels and ``Workload.check`` alike."""
    if not isinstance(a, np.ndarray):
        return f"argument {buf.name} must be a numpy array, not {type(a).__name__}"
    if tuple(a.shape) != tuple(buf.shape):
        return f"argument {buf.name} has shape {tuple(a.shape)}, expected {tuple(buf.shape)}"
    if a.dtype != np.dtype(buf.dtype):
        return (f"argument {buf.name} has dtype {a.dtype}, expected {buf.dtype}: use "
                f".astype(np.{buf.dtype})")
    return None


def _layout_problem(buf, a) -> str | None:
    """Why a kernel cannot write through ``a`` in place, or None."""
    if not a.flags.c_contiguous:
        return f"argument {buf.name} is not C-contiguous: pass np.ascontiguousarray(x)"
    if not a.flags.writeable:
        return f"argument {buf.name} is read-only: pass a writeable copy"
    return None
