// C[M, N] = A[M, K] @ B[K, N], 16x16 shared tiles, one output per thread, guards for
// shapes that do not divide (M, N, K are substituted by the test).
extern "C" __global__ void __launch_bounds__(256) gemm_tiled(
    float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B) {
  __shared__ __align__(16) float A_shared[16 * 16];
  __shared__ __align__(16) float B_shared[16 * 16];
  int row = blockIdx.y * 16 + threadIdx.y;
  int col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < (K + 15) / 16; ++k0) {
    int ka = k0 * 16 + threadIdx.x;
    int kb = k0 * 16 + threadIdx.y;
    A_shared[threadIdx.y * 16 + threadIdx.x] = (row < M && ka < K) ? A[row * K + ka] : 0.0f;
    B_shared[threadIdx.y * 16 + threadIdx.x] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      acc += A_shared[threadIdx.y * 16 + k] * B_shared[k * 16 + threadIdx.x];
    }
    __syncthreads();
  }
  if (row < M && col < N) {
    C[row * N + col] = acc;
  }
}
