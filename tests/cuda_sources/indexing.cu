// A 3-D grid of 3-D blocks: every thread writes its linear id, the id of its warp's lane 0
// (lanes are consecutive linear thread ids: x fastest, then y, then z) and its block's
// linear id, so that the test can check the whole numbering.
extern "C" __global__ void __launch_bounds__(64)
numbering(int* __restrict__ Out) {
  const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int first = __shfl_sync(0xffffffffu, tid, 0);
  const int up = __shfl_up_sync(0xffffffffu, tid, 1);
  int* row = Out + (bid * 64 + tid) * 4;
  row[0] = tid;
  row[1] = first;
  row[2] = bid;
  row[3] = up;
}
