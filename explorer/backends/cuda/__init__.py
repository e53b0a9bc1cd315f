"""The CUDA backend: CUDA C generation, compile checks with nvcc, host emulation, pycuda runtime."""
