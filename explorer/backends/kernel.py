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
        params = self.func.params
        if len(arrays) != len(params):
            names = ", ".join(p.name for p in params)
            raise ArgumentError(f"{self.func.name} takes {len(params)} arrays ({names}) but got "
                                f"{len(arrays)}: pass inputs and outputs in that order")
        out = []
        for p, a in zip(params, arrays):
            if not isinstance(a, np.ndarray):
                raise ArgumentError(f"argument {p.name} must be a numpy array, not "
                                    f"{type(a).__name__}")
            if tuple(a.shape) != tuple(p.shape):
                raise ArgumentError(f"argument {p.name} has shape {tuple(a.shape)} but "
                                    f"{self.func.name} expects {tuple(p.shape)}")
            if a.dtype != np.dtype(p.dtype):
                raise ArgumentError(f"argument {p.name} has dtype {a.dtype} but "
                                    f"{self.func.name} expects {p.dtype}: use .astype"
                                    f"(np.{p.dtype})")
            if not a.flags.c_contiguous:
                raise ArgumentError(f"argument {p.name} is not C-contiguous: pass "
                                    "np.ascontiguousarray(x)")
            if not a.flags.writeable:
                raise ArgumentError(f"argument {p.name} is read-only: pass a writeable copy")
            out.append(a)
        return out

    def __call__(self, *arrays):
        arrays = self.check_args(arrays)
        self._run(arrays)

    def _run(self, arrays):  # pragma: no cover - abstract
        raise NotImplementedError
