#ifndef EXPLORER_DYNAMIC_SHARED
#define EXPLORER_DYNAMIC_SHARED(T, name) extern __shared__ __align__(16) T name[]
#endif
// Each block reverses 16384 floats (64 KiB, above the 48 KiB of static shared memory)
// through a dynamic shared pool: C[b, i] = A[b, 16383 - i].
extern "C" __global__ void __launch_bounds__(1024)
reverse_dynamic(float* __restrict__ C, const float* __restrict__ A) {
  EXPLORER_DYNAMIC_SHARED(unsigned char, pool);
  float* tile = (float*)pool;
  for (int i = threadIdx.x; i < 16384; i += 1024) tile[i] = A[blockIdx.x * 16384 + i];
  __syncthreads();
  for (int i = threadIdx.x; i < 16384; i += 1024) C[blockIdx.x * 16384 + i] = tile[16383 - i];
}
