"""The CUDA backend: CUDA C generation, compile checks with nvcc, host emulation, pycuda runtime.

``build_cuda`` turns a lowered, thread-bound function into a :class:`CudaKernel`: the
generated source (``codegen.generate``) is available on every machine; running it
needs either the host emulator (``emulate=True``: g++) or a GPU with pycuda."""
from __future__ import annotations


def build_cuda(func, lowered, target, emulate: bool = False):
    """The CUDA kernel of ``lowered`` (from ``explorer.lower``) for ``target``."""
    from .codegen import generate
    from .kernel import CudaKernel
    return CudaKernel(func, lowered, generate(lowered, target), target, emulate)
