// int32 with int4 accesses: C = 3 * A + B (4 elements per thread).
extern "C" __global__ void __launch_bounds__(64)
int_axpy(int* __restrict__ C, const int* __restrict__ A, const int* __restrict__ B) {
  const int i = (blockIdx.x * 64 + threadIdx.x) * 4;
  int4 a = *(const int4*)(A + i);
  int4 b = *(const int4*)(B + i);
  *(int4*)(C + i) = make_int4(3 * a.x + b.x, 3 * a.y + b.y, 3 * a.z + b.z, 3 * a.w + b.w);
}

// float64: Y = exp(X) * 2 - sqrt(fabs(X)), with a guard for the last block.
extern "C" __global__ void __launch_bounds__(128)
double_math(double* __restrict__ Y, const double* __restrict__ X) {
  const int i = blockIdx.x * 128 + threadIdx.x;
  if (i < N) {
    Y[i] = exp(X[i]) * 2.0 - sqrt(fabs(X[i]));
  }
}

// float32 with float2 accesses and max: Z = fmaxf(X, 0) for pairs.
extern "C" __global__ void __launch_bounds__(32)
relu_float2(float* __restrict__ Z, const float* __restrict__ X) {
  const int i = (blockIdx.x * 32 + threadIdx.x) * 2;
  float2 x = *(const float2*)(X + i);
  *(float2*)(Z + i) = make_float2(fmaxf(x.x, 0.0f), fmaxf(x.y, 0.0f));
}
