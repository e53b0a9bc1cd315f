// Two launches through a scratch buffer T: T = 2 * A reversed within each block of 256
// (through shared memory, a barrier needed), then C = T + B.
extern "C" __global__ void __launch_bounds__(256)
scale_rev(float* __restrict__ T, const float* __restrict__ A) {
  __shared__ __align__(16) float A_shared[256];
  A_shared[threadIdx.x] = A[blockIdx.x * 256 + threadIdx.x];
  __syncthreads();
  T[blockIdx.x * 256 + threadIdx.x] = 2.0f * A_shared[255 - threadIdx.x];
}

extern "C" __global__ void __launch_bounds__(256)
add(float* __restrict__ C, const float* __restrict__ T, const float* __restrict__ B) {
  const int i = blockIdx.x * 256 + threadIdx.x;
  C[i] = T[i] + B[i];
}
