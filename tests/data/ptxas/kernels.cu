#ifndef EXPLORER_DYNAMIC_SHARED
#define EXPLORER_DYNAMIC_SHARED(T, name) extern __shared__ __align__(16) T name[]
#endif
__device__ __noinline__ float helper(const float* p, int i) { float t[8]; for (int k = 0; k < 8; ++k) t[k] = p[i + k]; return t[i & 7]; }
extern "C" __global__ void __launch_bounds__(256) tile(float* __restrict__ C, const float* __restrict__ A) {
  __shared__ float A_shared[512];
  int t = threadIdx.x;
  A_shared[t] = A[blockIdx.x * 256 + t];
  A_shared[t+256] = A[blockIdx.x * 256 + t] * 2.0f;
  __syncthreads();
  C[blockIdx.x*256+t] = A_shared[(t*7)%512] + A_shared[511-t];
}
extern "C" __global__ void dyn(float* __restrict__ C, const float* __restrict__ A) {
  EXPLORER_DYNAMIC_SHARED(float, buf);
  __shared__ float small[64];
  int t = threadIdx.x;
  buf[t] = A[t]; small[t & 63] = A[t];
  __syncthreads();
  C[t] = buf[blockDim.x - 1 - t] + small[(t+1)&63] + helper(A, t);
}
__global__ void mangled(float* C) { C[threadIdx.x] = 1.0f; }
extern "C" __global__ void spill(float* __restrict__ C, const float* __restrict__ A) {
  float r[256];
  #pragma unroll
  for (int i = 0; i < 256; ++i) r[i] = A[i*threadIdx.x];
  float s = 0;
  for (int i = 0; i < 256; ++i) s += r[(i*threadIdx.x)&255];
  C[threadIdx.x] = s;
}
