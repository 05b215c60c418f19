// Conv and ConvGradient through oneDNN (float32, builds with DP_HAVE_DNNL):
// oneDNN's blocked JIT kernels, about twice the speed of im2col + GEMM on
// the CNN sample's shapes.
//
// The batch is split as in dp's own kernel (ParallelForChunks over parts of
// the batch, `parts` from the caller) and oneDNN runs each part
// single-threaded (dnnl_common.h): dp owns the threads. The convolution's
// tensors take the layouts oneDNN picks (format_tag::any: blocked nChw16c and
// friends), reordered from and to dp's NCHW / [M, C/group, kh, kw] inside
// each part. The weights are reordered once per run; ConvGradient's dW and db
// are computed per part and summed in part order, so results repeat bitwise
// for a given part count.
//
// Primitives are made by Prepare for the part sizes of one shape and kept
// until the shape (or the part count) changes; a rerun with the same shape
// allocates nothing in dp (oneDNN's execute still builds a small argument
// map inside). Prepare returns false when oneDNN does not take a
// convolution (an empty tensor, sizes past its int indexing, only a
// reference kernel available): the op then runs its im2col kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ops/cpu/conv_utils.h"

namespace dp::dnnl_cpu {

class ConvForward {
 public:
  ConvForward();
  ~ConvForward();
  ConvForward(const ConvForward&) = delete;
  ConvForward& operator=(const ConvForward&) = delete;

  // Readies Y = conv(X, W) (+ b) of shape s with the batch in `parts` parts.
  bool Prepare(const conv::ConvShape& s, bool bias, int parts);
  // What Run needs of the op's scratch (after Prepare returned true).
  size_t scratch_bytes() const;
  // x [N, C, H, W], w [M, C/group, kh, kw], b [M] or null, y [N, M, OH, OW];
  // scratch: scratch_bytes(), 64-byte aligned.
  void Run(const float* x, const float* w, const float* b, float* y, void* scratch);
  // oneDNN's kernel for the prepared shape ("jit:avx512_core"), for tests.
  std::string impl() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class ConvBackward {
 public:
  ConvBackward();
  ~ConvBackward();
  ConvBackward(const ConvBackward&) = delete;
  ConvBackward& operator=(const ConvBackward&) = delete;

  // Readies dW (and db, dX when asked for) of shape s with `parts` parts.
  bool Prepare(const conv::ConvShape& s, bool db, bool dx, int parts);
  size_t scratch_bytes() const;
  // dw, db, dx are written (not accumulated); db / dx null when not prepared for.
  void Run(const float* x, const float* w, const float* dy, float* dw, float* db, float* dx, void* scratch);
  // "bwd_w <kernel>, bwd_d <kernel>" for the prepared shape, for tests.
  std::string impl() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Convolutions (forward or backward) run through oneDNN in this process, for
// tests that must know which path ran.
int64_t ConvRuns();

}  // namespace dp::dnnl_cpu
