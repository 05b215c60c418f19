// DP_HD marks a function that both compilers build: nvcc for the device
// (dp's CUDA kernels) and the host compiler for the CPU kernels and tests.
// The math a CPU kernel and its CUDA twin share (index arithmetic, update
// formulas, the counter-based random numbers) lives in such functions, so
// that the CPU tests cover the arithmetic every CUDA kernel runs.
#pragma once

#if defined(__CUDACC__)
#define DP_HD __host__ __device__
#else
#define DP_HD
#endif
