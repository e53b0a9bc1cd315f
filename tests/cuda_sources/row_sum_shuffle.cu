// B[i] = sum_j A[i, j] for A of ROWS x COLS: two warp-shuffle reductions.
// row_sum_warps: a block of 64 threads (two warps) per row, __shfl_down_sync over a full
// warp, the two warp sums through shared memory.
// row_sum_groups: a block of 32 threads for 4 rows, one group of 8 lanes per row, each
// group shuffling with its own mask (as the code generator does for small extents).
extern "C" __global__ void __launch_bounds__(64)
row_sum_warps(const float* __restrict__ A, float* __restrict__ B) {
  __shared__ float warp_sums[2];
  float v = 0.0f;
  for (int j = threadIdx.x; j < COLS; j += 64) v += A[blockIdx.x * COLS + j];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) B[blockIdx.x] = warp_sums[0] + warp_sums[1];
}

extern "C" __global__ void __launch_bounds__(32)
row_sum_groups(const float* __restrict__ A, float* __restrict__ B) {
  const int row = blockIdx.x * 4 + (threadIdx.x >> 3);
  const unsigned mask = 0xffu << (threadIdx.x & 24);
  float v = 0.0f;
  for (int j = threadIdx.x & 7; j < COLS; j += 8) v += A[row * COLS + j];
#pragma unroll
  for (int off = 4; off > 0; off >>= 1) v += __shfl_xor_sync(mask, v, off);
  if ((threadIdx.x & 7) == 0) B[row] = v;
}
