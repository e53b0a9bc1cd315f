"""Hand-written CudaModules that follow the code generator's contract
(``explorer/backends/cuda/module.py``), for the nvcc and runtime tests until the
generator produces real ones, each with its numpy reference."""
from __future__ import annotations

import numpy as np

from explorer.backends.cuda.module import BufferSpec, CudaModule, KernelLaunch

DYNAMIC_MACRO = """\
#ifndef EXPLORER_DYNAMIC_SHARED
#define EXPLORER_DYNAMIC_SHARED(T, name) extern __shared__ __align__(16) T name[]
#endif
"""

N = 4096
THREADS = 256

# Two launches through a scratch buffer: T = 2 * A through a shared tile read in
# reverse (a barrier needed), then C = T + B.
SCALE_ADD = DYNAMIC_MACRO + f"""
extern "C" __global__ void __launch_bounds__({THREADS}) scale_add_k0(float* __restrict__ T,
                                                               const float* __restrict__ A) {{
  __shared__ float A_shared[{THREADS}];
  A_shared[threadIdx.x] = A[blockIdx.x * {THREADS} + threadIdx.x];
  __syncthreads();
  T[blockIdx.x * {THREADS} + threadIdx.x] = 2.0f * A_shared[{THREADS - 1} - threadIdx.x];
}}

extern "C" __global__ void __launch_bounds__({THREADS}) scale_add_k1(float* __restrict__ C,
                                                               const float* __restrict__ T,
                                                               const float* __restrict__ B) {{
  int i = blockIdx.x * {THREADS} + threadIdx.x;
  C[i] = T[i] + B[i];
}}
"""


def scale_add_module(block=THREADS) -> CudaModule:
    """A, B -> C (one scratch buffer T between the two launches)."""
    grid = (N // THREADS, 1, 1)
    return CudaModule(
        "scale_add", SCALE_ADD,
        (KernelLaunch("scale_add_k0", grid, (block, 1, 1), ("T", "A"),
                      static_shared_bytes=THREADS * 4),
         KernelLaunch("scale_add_k1", grid, (block, 1, 1), ("C", "T", "B"))),
        (BufferSpec("A", "float32", (N,)), BufferSpec("B", "float32", (N,)),
         BufferSpec("C", "float32", (N,)), BufferSpec("T", "float32", (N,), scratch=True)))


def scale_add_reference(a, b):
    rev = a.reshape(-1, THREADS)[:, ::-1].reshape(-1)
    return 2 * rev + b


# A block reverses 16384 floats (64 KiB) in dynamic shared memory: above the 48 KiB
# default, so the launch must opt in.
DYN_FLOATS = 16384
DYNAMIC = DYNAMIC_MACRO + f"""
extern "C" __global__ void __launch_bounds__(1024) reverse_k0(float* __restrict__ C,
                                                        const float* __restrict__ A) {{
  EXPLORER_DYNAMIC_SHARED(float, A_shared);
  #pragma unroll
  for (int k = 0; k < {DYN_FLOATS // 1024}; ++k) {{
    A_shared[k * 1024 + threadIdx.x] = A[blockIdx.x * {DYN_FLOATS} + k * 1024 + threadIdx.x];
  }}
  __syncthreads();
  #pragma unroll
  for (int k = 0; k < {DYN_FLOATS // 1024}; ++k) {{
    int j = k * 1024 + threadIdx.x;
    C[blockIdx.x * {DYN_FLOATS} + j] = A_shared[{DYN_FLOATS - 1} - j];
  }}
}}
"""


def dynamic_module(blocks=4, dynamic_bytes=DYN_FLOATS * 4) -> CudaModule:
    n = blocks * DYN_FLOATS
    return CudaModule(
        "reverse", DYNAMIC,
        (KernelLaunch("reverse_k0", (blocks, 1, 1), (1024, 1, 1), ("C", "A"),
                      dynamic_shared_bytes=dynamic_bytes),),
        (BufferSpec("A", "float32", (n,)), BufferSpec("C", "float32", (n,))))


def dynamic_reference(a):
    return a.reshape(-1, DYN_FLOATS)[:, ::-1].reshape(-1)


# 64 KiB of static shared memory: ptxas refuses it (48 KiB is the static limit).
BIG_STATIC = """
extern "C" __global__ void big_k0(float* __restrict__ C, const float* __restrict__ A) {
  __shared__ float A_shared[16384];
  A_shared[threadIdx.x] = A[threadIdx.x];
  __syncthreads();
  C[threadIdx.x] = A_shared[1023 - threadIdx.x];
}
"""

# Writes through a null pointer: an illegal address on the device.
FAULT = """
extern "C" __global__ void fault_k0(float* __restrict__ C, const float* __restrict__ A) {
  float* p = (float*)(unsigned long long)(A[0] == 12345.0f ? 1 : 0);
  p[threadIdx.x] = A[threadIdx.x];
  C[threadIdx.x] = 0.0f;
}
"""


def fault_module() -> CudaModule:
    return CudaModule(
        "fault", FAULT, (KernelLaunch("fault_k0", (1, 1, 1), (32, 1, 1), ("C", "A")),),
        (BufferSpec("A", "float32", (32,)), BufferSpec("C", "float32", (32,))))


def random_inputs(module: CudaModule, seed: int = 0) -> list:
    """Random inputs (the buffers named A and B) and NaN-filled outputs, in parameter
    order."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in module.params:
        if spec.name in ("A", "B"):
            out.append(rng.standard_normal(spec.shape).astype(spec.dtype))
        else:
            out.append(np.full(spec.shape, np.nan, dtype=spec.dtype))
    return out
