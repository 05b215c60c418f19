// Index math of a 2-D NCHW convolution's column matrix (im2col), shared by
// the CPU kernels (ops/cpu/conv_utils.h, conv_op.cc) and the CUDA ones
// (ops/cuda/conv_kernels.cu): the output-size rule, where each kernel tap of
// an output reads its input, and, the other way round, which output each tap
// of an input feeds (col2im as a gather: every input element sums its own
// taps, in tap order, so the sum is deterministic and needs no atomics).
//
// The column matrix of a block of `images` images holds, for each image
// channel c and kernel tap (i, j), the row r = (c * kh + i) * kw + j, whose
// columns are the images' outputs side by side: column b * OH * OW + o is
// output o of image b (the layout the CPU's blocked GEMMs use too). A group's
// rows are contiguous (group g owns rows [g * K, (g + 1) * K), K = C/group * kh * kw).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace dp::math {

// Extent of the output along one axis: the floor rule (Caffe2, PyTorch) for
// an input padded to `padded` and a kernel spanning `dilated_kernel` (<= padded).
DP_HD inline int64_t ConvOutputExtent(int64_t padded, int64_t dilated_kernel, int64_t stride) {
  return (padded - dilated_kernel) / stride + 1;
}

// Input coordinate read by kernel tap `tap` of output coordinate `out` (may
// fall in the padding: < 0 or >= the input's extent).
DP_HD inline int64_t TapInputCoord(int64_t out, int64_t tap, int64_t stride, int64_t pad, int64_t dilation) {
  return out * stride + tap * dilation - pad;
}

// The output coordinate whose tap `tap` reads input coordinate `in`, or -1
// when none does (between strides, or outside [0, out_extent)).
DP_HD inline int64_t TapOutputCoord(int64_t in, int64_t tap, int64_t stride, int64_t pad, int64_t dilation,
                                    int64_t out_extent) {
  const int64_t t = in + pad - tap * dilation;
  if (t < 0 || t % stride != 0) return -1;
  const int64_t out = t / stride;
  return out < out_extent ? out : -1;
}

// Where element o (of `plane`) of channel `channel` of image `image` lies in
// a block of `images` images laid out as columns, [channels, images * plane]
// (the GEMMs' layout of Y and dY), counted from the block's start.
DP_HD inline int64_t BlockColumnOffset(int64_t image, int64_t channel, int64_t o, int64_t images, int64_t plane) {
  return (channel * images + image) * plane + o;
}

// One image's convolution geometry (all channels of all groups).
struct ConvGeometry {
  int64_t channels = 0, height = 0, width = 0;  // X per image [C, H, W]
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_t = 0, pad_l = 0;  // bottom and right pads only shape out_h / out_w
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t out_h = 0, out_w = 0;

  DP_HD int64_t taps() const { return kernel_h * kernel_w; }
  DP_HD int64_t rows() const { return channels * taps(); }  // of the column matrix
  DP_HD int64_t in_plane() const { return height * width; }
  DP_HD int64_t out_plane() const { return out_h * out_w; }
};

// The value of column-matrix row `row`, output `out` (of out_plane()) for one
// image `x` [C, H, W]: the input element its tap reads, or 0 in the padding.
template <typename T>
DP_HD T Im2ColValue(const ConvGeometry& g, const T* x, int64_t row, int64_t out) {
  const int64_t tap = row % g.taps(), c = row / g.taps();
  const int64_t ih = TapInputCoord(out / g.out_w, tap / g.kernel_w, g.stride_h, g.pad_t, g.dilation_h);
  const int64_t iw = TapInputCoord(out % g.out_w, tap % g.kernel_w, g.stride_w, g.pad_l, g.dilation_w);
  if (ih < 0 || ih >= g.height || iw < 0 || iw >= g.width) return T(0);
  return x[(c * g.height + ih) * g.width + iw];
}

// The gradient of input element (c, ih, iw) of one image: the sum of the
// column-matrix entries its taps were copied to, in tap order (rows top to
// bottom, each left to right; the order the CPU's col2im adds them in).
// `col` is the image's first column, rows `ld` apart.
template <typename T>
DP_HD T Col2ImValue(const ConvGeometry& g, const T* col, int64_t ld, int64_t c, int64_t ih, int64_t iw) {
  T sum = T(0);
  for (int64_t i = 0; i < g.kernel_h; ++i) {
    const int64_t oh = TapOutputCoord(ih, i, g.stride_h, g.pad_t, g.dilation_h, g.out_h);
    if (oh < 0) continue;
    for (int64_t j = 0; j < g.kernel_w; ++j) {
      const int64_t ow = TapOutputCoord(iw, j, g.stride_w, g.pad_l, g.dilation_w, g.out_w);
      if (ow < 0) continue;
      sum += col[((c * g.kernel_h + i) * g.kernel_w + j) * ld + oh * g.out_w + ow];
    }
  }
  return sum;
}

}  // namespace dp::math
