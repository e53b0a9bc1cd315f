"""The kernel ``build(sch, "cuda")`` returns: the generated CUDA C and a way to run it."""
from __future__ import annotations

from ...errors import BuildError
from ...ir.stmt import PrimFunc
from ..kernel import Kernel
from .module import CudaModule

PYCUDA_MISSING = ("pycuda is not installed: pip install -e '.[cuda]' (needs the CUDA toolkit "
                  "and an NVIDIA driver)")


class CudaKernel(Kernel):
    """A built CUDA function. ``.source`` is the CUDA C a person reads (and nvcc compiles),
    ``.module`` the :class:`CudaModule` (launches, grid and block sizes, buffers).

    Called on numpy arrays, it runs the same source through the host emulator when built
    with ``emulate=True`` (threads of a block as OS threads: a correctness check, never a
    measurement), otherwise on the GPU through pycuda, compiled with nvcc for the
    target's architecture on first use."""

    target_kind = "cuda"

    def __init__(self, func: PrimFunc, lowered: PrimFunc, module: CudaModule, target,
                 emulate: bool = False):
        super().__init__(func, lowered, module.source)
        self.module = module
        self.target = target
        self.emulated = emulate
        self._runner = None

    @property
    def launches(self) -> tuple:
        return self.module.launches

    def _run(self, arrays):
        if self._runner is None:
            self._runner = self._emulator() if self.emulated else self._device()
        self._runner.run(arrays)

    def _emulator(self):
        from .emulate import load
        runner = load(self.module)
        self.compile_seconds = getattr(runner, "compile_seconds", 0.0)
        return runner

    def _device(self):
        try:
            from . import runtime
        except ImportError:
            raise BuildError(PYCUDA_MISSING) from None
        runtime.driver()          # BuildError naming what is missing: pycuda, the driver
        from .nvcc import compile_cubin
        compiled = compile_cubin(self.module.source, self.target.arch or "sm_90")
        self.compile_seconds = getattr(compiled, "seconds", 0.0)
        return runtime.load(self.module, compiled)
