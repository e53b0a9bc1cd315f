// Kernels that are wrong on purpose: the emulator must say so, not hang or die.

// Only threads 0-15 reach the barrier; the others finish the kernel.
extern "C" __global__ void barrier_some(float* __restrict__ C) {
  if (threadIdx.x < 16) {
    __syncthreads();
  }
  C[blockIdx.x * 64 + threadIdx.x] = 1.0f;
}

// Each thread loops threadIdx.x / 32 + 1 times around a barrier: the first warp stops
// after one trip while the second waits for it at the same barrier.
extern "C" __global__ void barrier_in_uneven_loop(float* __restrict__ C) {
  for (int t = 0; t <= (int)(threadIdx.x / 32); ++t) {
    __syncthreads();
  }
  C[blockIdx.x * 64 + threadIdx.x] = 2.0f;
}

// Half a warp shuffles with a mask naming all 32 lanes.
extern "C" __global__ void shuffle_half_warp(float* __restrict__ C) {
  float v = (float)threadIdx.x;
  if (threadIdx.x < 16) {
    v = __shfl_down_sync(0xffffffffu, v, 1);
  }
  C[blockIdx.x * 64 + threadIdx.x] = v;
}

// Reads A at an index from idx: a huge one is far outside every mapping.
extern "C" __global__ void gather(float* __restrict__ C, const float* __restrict__ A,
                                  const long long* __restrict__ idx) {
  C[threadIdx.x] = A[idx[threadIdx.x]];
}
