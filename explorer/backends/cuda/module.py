"""What the CUDA code generator hands to the parts that compile, emulate and run it.

A :class:`CudaModule` is one generated translation unit (``source``) plus the
host-side launch sequence that runs it: the contract between

- the code generator (``codegen.py``), which produces it from a lowered function;
- the compile checks (``nvcc.py``), which turn ``source`` into a cubin for an
  architecture and read back each kernel's registers, spills and shared memory;
- the host emulator (``emulate.py``), which compiles the *same* ``source`` as C++
  with ``shim.h`` and runs every thread of a block concurrently, blocks in turn;
- the runtime (``runtime.py``, pycuda), which loads the cubin and launches it.

Conventions of ``source`` (the generator keeps them, the others rely on them):

- Self-contained: no ``#include``; only CUDA built-ins from this list appear:
  ``threadIdx``, ``blockIdx``, ``blockDim``, ``gridDim``, ``__syncthreads()``,
  ``__shfl_down_sync``, ``__shfl_xor_sync``, ``__shfl_sync``, the vector types
  ``float2``/``float4``/``int2``/``int4`` with ``make_float2`` ... ``make_int4``,
  ``__global__``, ``__device__``, ``__forceinline__``, ``__launch_bounds__(n)``,
  ``__restrict__``, ``__shared__``, ``__align__(n)``, ``#pragma unroll``, and the
  float math functions of the C library with an ``f`` suffix (``expf``, ``logf``,
  ``sqrtf``, ``tanhf``, ``erff``, ``fmaxf``, ``fminf``, ``fabsf``), ``min``/``max``
  on ints, ``INFINITY``.
- Every kernel is ``extern "C" __global__ void <name>(...)``; its parameters are
  pointers only (``float* __restrict__ C``, ``const float* __restrict__ A``), in
  the order of :attr:`KernelLaunch.args`, each named as the buffer it stands for.
  Shapes are compile-time constants; there are no scalar parameters.
- Static shared memory is declared inside the kernel (``__shared__ float A_shared[512];``).
  Dynamic shared memory (above 48 KiB per block) is declared with the macro the
  source defines at its top, so that the emulator can give it its own meaning::

      #ifndef EXPLORER_DYNAMIC_SHARED
      #define EXPLORER_DYNAMIC_SHARED(T, name) extern __shared__ __align__(16) T name[]
      #endif

  and the launch's ``dynamic_shared_bytes`` says how much it needs. The generator
  declares at most one such pool per kernel (``unsigned char``) and carves its shared
  buffers out of it with pointer casts.
- Global buffers (parameters and scratch) start at a 16-byte aligned address: the
  generator emits ``float2``/``float4`` (``int2``/``int4``) accesses through them where
  the index is provably a multiple of the width (cudaMalloc gives 256 bytes; whoever
  runs the module on the host copies arrays into 16-byte aligned memory).
  Shared arrays are declared ``__align__(16)``.
- Besides the built-ins above the source may define its own ``__device__
  __forceinline__`` helpers (integer floor division and modulo, ``explorer_floordiv`` and
  ``explorer_floormod``), and float64 code uses the C library's double functions
  without a suffix (``exp``, ``log``, ``sqrt``, ``tanh``, ``fabs``, ``fmax``, ``fmin``).
"""
from __future__ import annotations

from dataclasses import dataclass

# numpy dtype name -> C type used for pointers to it
CTYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long",
          "int8": "signed char", "uint8": "unsigned char", "bool": "bool"}


@dataclass(frozen=True)
class BufferSpec:
    """A buffer of global memory the launches use: a parameter of the function, or a
    ``scratch`` intermediate between two launches (allocated by whoever runs the module)."""
    name: str
    dtype: str
    shape: tuple
    scratch: bool = False

    @property
    def ctype(self) -> str:
        return CTYPES[self.dtype]

    @property
    def nbytes(self) -> int:
        import numpy as np
        n = 1
        for d in self.shape:
            n *= int(d)
        return n * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class KernelLaunch:
    """One ``__global__`` kernel and how the host launches it."""
    name: str                      # the extern "C" function name in ``source``
    grid: tuple                    # (x, y, z) blocks
    block: tuple                   # (x, y, z) threads per block
    args: tuple                    # buffer names, in the kernel's parameter order
    dynamic_shared_bytes: int = 0  # 0: static shared memory only
    static_shared_bytes: int = 0   # what the generator declared statically (a lower bound
                                   # of what ptxas reports)

    @property
    def threads_per_block(self) -> int:
        x, y, z = self.block
        return x * y * z


@dataclass(frozen=True)
class CudaModule:
    """A generated CUDA C translation unit and the launches that run it, in order."""
    func_name: str
    source: str
    launches: tuple                # of KernelLaunch, run one after the other
    buffers: tuple                 # of BufferSpec: the function's parameters (in parameter
                                   # order) first, then scratch buffers

    @property
    def params(self) -> tuple:
        return tuple(b for b in self.buffers if not b.scratch)

    @property
    def scratch(self) -> tuple:
        return tuple(b for b in self.buffers if b.scratch)

    def buffer(self, name: str) -> BufferSpec:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)

    def check_args(self, arrays) -> list:
        """``arrays`` (one per parameter, in order) as a list once each fits its buffer;
        ArgumentError saying why not. The one check of whoever runs the module (the
        emulator, the pycuda runtime)."""
        from ...errors import ArgumentError
        from ..kernel import array_problem
        params = self.params
        if len(arrays) != len(params):
            names = ", ".join(p.name for p in params)
            raise ArgumentError(f"{self.func_name} takes {len(params)} arrays ({names}) but "
                                f"got {len(arrays)}: pass inputs and outputs in that order")
        for p, a in zip(params, arrays):
            problem = array_problem(p, a)
            if problem:
                raise ArgumentError(problem)
        return list(arrays)
