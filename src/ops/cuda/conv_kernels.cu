// Conv's kernels (cuda/op_launchers.h): im2col and col2im of a block of
// images (index math in ops/math/conv_geometry.h, shared with the CPU), and
// the moves between a block's images [images, channels, plane] and its
// column layout [channels, images * plane] that the GEMMs take. col2im is a
// gather per input element: deterministic, no atomics.
#include "cuda/grid.cuh"
#include "cuda/op_launchers.h"
#include "ops/math/conv_geometry.h"

namespace dp::cuda {
namespace {

using namespace grid;  // NOLINT: the launch geometry every kernel here shares

// col [rows, images * out_plane]; x [images, C, H, W].
__global__ void Im2ColKernel(const float* x, math::ConvGeometry g, int64_t images, float* col) {
  const int64_t ld = images * g.out_plane(), n = g.rows() * ld, image_size = g.channels * g.in_plane();
  for (int64_t e = FirstIndex(); e < n; e += Stride()) {
    const int64_t row = e / ld, column = e % ld;
    const int64_t b = column / g.out_plane(), o = column % g.out_plane();
    col[e] = math::Im2ColValue(g, x + b * image_size, row, o);
  }
}

// dx [images, C, H, W], each element the sum of its taps' column entries.
__global__ void Col2ImKernel(const float* col, math::ConvGeometry g, int64_t images, float* dx) {
  const int64_t ld = images * g.out_plane(), image_size = g.channels * g.in_plane(), n = images * image_size;
  for (int64_t e = FirstIndex(); e < n; e += Stride()) {
    const int64_t b = e / image_size, r = e % image_size;
    const int64_t c = r / g.in_plane(), ih = (r % g.in_plane()) / g.width, iw = r % g.width;
    dx[e] = math::Col2ImValue(g, col + b * g.out_plane(), ld, c, ih, iw);
  }
}

// y [images, channels, plane] = cols [channels, images * plane] (0 when
// cols is null) + bias [channels] (when given).
__global__ void ColumnsToImagesKernel(const float* cols, const float* bias, int64_t images, int64_t channels,
                                      int64_t plane, float* y) {
  const int64_t n = images * channels * plane;
  for (int64_t e = FirstIndex(); e < n; e += Stride()) {
    const int64_t b = e / (channels * plane), c = (e / plane) % channels, o = e % plane;
    const float v = cols != nullptr ? cols[math::BlockColumnOffset(b, c, o, images, plane)] : 0.0f;
    y[e] = bias != nullptr ? v + bias[c] : v;
  }
}

// cols [channels, images * plane] = y [images, channels, plane] (reads
// coalesced, writes in runs of `plane`).
__global__ void ImagesToColumnsKernel(const float* y, int64_t images, int64_t channels, int64_t plane, float* cols) {
  const int64_t n = images * channels * plane;
  for (int64_t e = FirstIndex(); e < n; e += Stride()) {
    const int64_t b = e / (channels * plane), c = (e / plane) % channels, o = e % plane;
    cols[math::BlockColumnOffset(b, c, o, images, plane)] = y[e];
  }
}

}  // namespace

cudaError_t LaunchIm2Col(const float* x, math::ConvGeometry g, int64_t images, float* col, cudaStream_t stream) {
  const int64_t n = g.rows() * images * g.out_plane();
  if (n <= 0) return cudaSuccess;
  Im2ColKernel<<<Blocks(n), kThreads, 0, stream>>>(x, g, images, col);
  return cudaGetLastError();
}

cudaError_t LaunchCol2Im(const float* col, math::ConvGeometry g, int64_t images, float* dx, cudaStream_t stream) {
  const int64_t n = images * g.channels * g.in_plane();
  if (n <= 0) return cudaSuccess;
  Col2ImKernel<<<Blocks(n), kThreads, 0, stream>>>(col, g, images, dx);
  return cudaGetLastError();
}

cudaError_t LaunchColumnsToImages(const float* cols, const float* bias, int64_t images, int64_t channels, int64_t plane,
                                  float* y, cudaStream_t stream) {
  const int64_t n = images * channels * plane;
  if (n <= 0) return cudaSuccess;
  ColumnsToImagesKernel<<<Blocks(n), kThreads, 0, stream>>>(cols, bias, images, channels, plane, y);
  return cudaGetLastError();
}

cudaError_t LaunchImagesToColumns(const float* y, int64_t images, int64_t channels, int64_t plane, float* cols,
                                  cudaStream_t stream) {
  const int64_t n = images * channels * plane;
  if (n <= 0) return cudaSuccess;
  ImagesToColumnsKernel<<<Blocks(n), kThreads, 0, stream>>>(y, images, channels, plane, cols);
  return cudaGetLastError();
}

}  // namespace dp::cuda
