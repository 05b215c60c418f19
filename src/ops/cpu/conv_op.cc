// Conv (2-D, NCHW) and ConvGradient on the CPU: im2col + GEMM (OpenBLAS) per
// group over blocks of images.
//
//   Conv:          X [N, C, H, W], W [M, C/group, kh, kw], optional b [M] -> Y [N, M, OH, OW]
//                  Y_g = W_g col(X_g) + b
//   ConvGradient:  X, W, dY -> dW, db (unless no_bias = 1), dX (when a last output is present)
//                  dW_g += dY_g col(X_g)^T, db = sum of dY over N, OH, OW,
//                  dX_g = col2im(W_g^T dY_g)
//
// The batch is split across the op's threads (core/parallel_for.h), and each
// thread puts the columns of several images side by side so that one GEMM
// covers them ([K, images * OH * OW]): one small image's GEMM runs BLAS at
// about half speed. BLAS is single-threaded in each part.
//
// The gradient op's outputs are positional: dW first, then db when the
// forward op had a bias (the maker sets no_bias = 1 when it had none), then
// dX only when it is wanted (the maker leaves it out otherwise: the first
// layer's dX is a wasted GEMM). So the output count decides whether dX is
// computed: 1 + (no_bias ? 0 : 1) outputs without dX, one more with it.
//
// Window arguments and the output-size rule live in conv_utils.h, shared
// with shape inference and the pooling operators.
//
// Builds with oneDNN (DP_HAVE_DNNL) run float32 convolutions through its
// kernels instead (ops/cpu/dnnl_conv.h, the same split of the batch); the
// im2col kernels below take what oneDNN does not (float64, empty tensors,
// arguments it has only a reference kernel for).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/parallel_for.h"
#include "ops/cpu/gemm.h"
#include "ops/gradient_registry.h"
#include "ops/cpu/conv_utils.h"
#include "ops/op_utils.h"
#include "ops/operator.h"
#if DP_HAVE_DNNL
#include "ops/cpu/dnnl_common.h"
#include "ops/cpu/dnnl_conv.h"
#endif

namespace dp {
namespace {

using conv::ConvShape;

// One image's GEMMs run single-threaded: the images are what is split
// across threads (ImageChunks).
template <typename T>
void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  GemmSerial(ta, tb, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc);
}

// How many parts the batch is split into: one per thread the op may use, as
// long as each part has an image and enough multiply-adds to be worth a
// thread (a tiny convolution runs on the caller alone).
int ImageChunks(const ConvShape& s) {
  const int64_t macs_per_image = s.m * s.k() * s.out_hw();
  const int64_t min_images = std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(1, macs_per_image));
  return ParallelChunks(s.n, min_images);
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }  // a >= 0, b > 0

// Images whose columns one GEMM takes side by side: enough for ~2048 GEMM
// columns (a single 14x14 image gives 196, which BLAS runs at about half its
// speed), at most ~4M elements of column matrix per block.
int64_t BlockImages(const ConvShape& s) {
  const int64_t ohw = std::max<int64_t>(1, s.out_hw()), k = std::max<int64_t>(1, s.k());
  const int64_t want = CeilDiv(2048, ohw), fit = std::max<int64_t>(1, (int64_t{4} << 20) / (k * ohw));
  return std::max<int64_t>(1, std::min({want, fit, s.n}));
}

// Walks the column matrix [C/group * kh * kw, OH * OW] of one image's group
// X_g [C/group, H, W]: fn(row of the column matrix, row of X or null when the
// kernel row falls in the padding, offset of output column 0 in that row,
// first valid output column, end of the valid output columns). Output column
// ow reads X row element ow * sw + offset for ow in [lo, hi); outside, pads.
// ColT and XT are T or const T: Im2Col writes col, Col2Im writes x. Rows of
// the column matrix are `ld` apart (several images' columns side by side).
template <typename ColT, typename XT, typename Fn>
void ForEachColumnRow(const ConvShape& s, ColT* col, int64_t ld, XT* x, Fn&& fn) {
  const conv::Window& k = s.win;
  for (int64_t c = 0; c < s.cg; ++c) {
    XT* xc = x + c * s.h * s.w;
    for (int64_t i = 0; i < k.kh; ++i) {
      for (int64_t j = 0; j < k.kw; ++j) {
        ColT* rowp = col + ((c * k.kh + i) * k.kw + j) * ld;
        const int64_t off = math::TapInputCoord(0, j, k.sw, k.pl, k.dw);  // input column of output column 0
        const int64_t lo = std::min(s.ow, off >= 0 ? 0 : CeilDiv(-off, k.sw));
        const int64_t hi = std::max(lo, std::min(s.ow, s.w - off <= 0 ? 0 : CeilDiv(s.w - off, k.sw)));
        for (int64_t oh = 0; oh < s.oh; ++oh) {
          const int64_t ih = math::TapInputCoord(oh, i, k.sh, k.pt, k.dh);
          XT* xr = ih >= 0 && ih < s.h ? xc + ih * s.w : nullptr;
          fn(rowp + oh * s.ow, xr, off, lo, hi);
        }
      }
    }
  }
}

template <typename T>
void Im2Col(const ConvShape& s, const T* x, T* col, int64_t ld) {
  const int64_t sw = s.win.sw, ow = s.ow;
  ForEachColumnRow(s, col, ld, x, [&](T* out, const T* xr, int64_t off, int64_t lo, int64_t hi) {
    if (xr == nullptr) {
      std::fill(out, out + ow, T(0));
      return;
    }
    std::fill(out, out + lo, T(0));
    if (sw == 1) {
      std::copy(xr + (lo + off), xr + (hi + off), out + lo);
    } else {
      for (int64_t o = lo; o < hi; ++o) out[o] = xr[o * sw + off];
    }
    std::fill(out + hi, out + ow, T(0));
  });
}

// Adds the column matrix back into dx [C/group, H, W] (which the caller zeroed).
template <typename T>
void Col2Im(const ConvShape& s, const T* col, int64_t ld, T* dx) {
  const int64_t sw = s.win.sw;
  ForEachColumnRow(s, col, ld, dx, [&](const T* in, T* dr, int64_t off, int64_t lo, int64_t hi) {
    if (dr == nullptr) return;
    for (int64_t o = lo; o < hi; ++o) dr[o * sw + off] += in[o];
  });
}

class ConvOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& w = Input(1);
    const bool has_bias = InputSize() > 2;
    const Tensor* b = has_bias ? &Input(2) : nullptr;
    CheckSameDtype(x, InputDesc(0), w, InputDesc(1));
    if (b) CheckSameDtype(x, InputDesc(0), *b, InputDesc(2));
    const ConvShape s = conv::ComputeConvShape(def(), args(), x.dims(), w.dims(), b ? &b->dims() : nullptr);
#if DP_HAVE_DNNL
    if (RunDnnl(x, w, b, s)) return;
#endif
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const T* wp = w.data<T>();
      const T* bp = b ? b->data<T>() : nullptr;
      T* yp = Output(0, s.y, x.dtype())->template mutable_data<T>();
      const int64_t K = s.k(), ohw = s.out_hw(), chw = s.c * s.in_hw();
      if (ohw == 0 || s.n == 0) return;  // Y has no elements
      if (K == 0 || s.mg == 0) {
        // No inputs per output: Y is the bias (or zero).
        for (int64_t n = 0; n < s.n; ++n)
          for (int64_t m = 0; m < s.m; ++m)
            std::fill(yp + (n * s.m + m) * ohw, yp + (n * s.m + m + 1) * ohw, bp ? bp[m] : T(0));
        return;
      }
      // Each part of the batch, in blocks of `bi` images: their columns side by
      // side [K, bi * ohw], one GEMM per group into [mg, bi * ohw], then each
      // image's rows moved to Y (+ bias).
      const int chunks = ImageChunks(s);
      const int64_t bi = BlockImages(s), cols = K * bi * ohw, outs = s.mg * bi * ohw;
      T* scratch = Scratch<T>((cols + outs) * chunks);
      ParallelForChunks(s.n, chunks, 1, [&](int chunk, int64_t first, int64_t last) {
        T* col = scratch + chunk * (cols + outs);
        T* out = col + cols;
        for (int64_t n0 = first; n0 < last; n0 += bi) {
          const int64_t nb = std::min(bi, last - n0), ld = nb * ohw;
          for (int64_t g = 0; g < s.group; ++g) {
            for (int64_t j = 0; j < nb; ++j) Im2Col(s, xp + (n0 + j) * chw + g * s.cg * s.in_hw(), col + j * ohw, ld);
            Gemm(CblasNoTrans, CblasNoTrans, s.mg, ld, K, wp + g * s.mg * K, K, col, ld, T(0), out, ld);
            for (int64_t j = 0; j < nb; ++j)
              for (int64_t m = 0; m < s.mg; ++m) {
                const T* src = out + m * ld + j * ohw;
                T* dst = yp + ((n0 + j) * s.m + g * s.mg + m) * ohw;
                const T bias = bp ? bp[g * s.mg + m] : T(0);
                for (int64_t i = 0; i < ohw; ++i) dst[i] = src[i] + bias;
              }
          }
        }
      });
    });
  }

#if DP_HAVE_DNNL
  // float32 through oneDNN; false when it does not take this convolution.
  bool RunDnnl(const Tensor& x, const Tensor& w, const Tensor* b, const ConvShape& s) {
    if (x.dtype() != DType::kFloat32 || !dnnl_cpu::Enabled() || !dnnl_.Prepare(s, b != nullptr, ImageChunks(s)))
      return false;
    float* y = Output(0, s.y, x.dtype())->mutable_data<float>();
    dnnl_.Run(x.data<float>(), w.data<float>(), b ? b->data<float>() : nullptr, y,
              Scratch<uint8_t>(static_cast<int64_t>(dnnl_.scratch_bytes())));
    return true;
  }
  dnnl_cpu::ConvForward dnnl_;
#endif
};

class ConvGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& w = Input(1);
    const Tensor& dy = Input(2);
    CheckSameDtype(x, InputDesc(0), w, InputDesc(1));
    CheckSameDtype(x, InputDesc(0), dy, InputDesc(2));
    const conv::ConvGradOutputs outs = conv::GradOutputs(def(), args());
    const ConvShape s = conv::GradShape(def(), args(), x.dims(), w.dims(), dy.dims());
#if DP_HAVE_DNNL
    if (RunDnnl(x, w, dy, outs, s)) return;
#endif
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const T* wp = w.data<T>();
      const T* dyp = dy.data<T>();
      T* dwp = Output(0, w.dims(), x.dtype())->template mutable_data<T>();
      T* dbp = outs.db ? Output(1, {s.m}, x.dtype())->template mutable_data<T>() : nullptr;
      T* dxp = outs.dx ? Output(outs.db ? 2 : 1, x.dims(), x.dtype())->template mutable_data<T>() : nullptr;
      const int64_t K = s.k(), ohw = s.out_hw(), chw = s.c * s.in_hw();
      std::fill(dwp, dwp + w.numel(), T(0));
      if (dxp) std::fill(dxp, dxp + x.numel(), T(0));
      if (dbp) {
        for (int64_t m = 0; m < s.m; ++m) {
          T acc = 0;
          for (int64_t n = 0; n < s.n; ++n) {
            const T* r = dyp + (n * s.m + m) * ohw;
            for (int64_t i = 0; i < ohw; ++i) acc += r[i];
          }
          dbp[m] = acc;
        }
      }
      if (K == 0 || s.mg == 0 || ohw == 0 || s.n == 0) return;  // dW and dX stay zero
      // Each part of the batch, in blocks of `bi` images side by side (see
      // ConvOp): dY's rows gathered into [mg, bi * ohw]; dW_g += dY_b col^T,
      // one GEMM over the block's bi * ohw columns; dcol = W_g^T dY_b, then
      // col2im per image. Parts but the first accumulate their own dW,
      // summed into dW in part order once all are done.
      const int chunks = ImageChunks(s);
      const int64_t bi = BlockImages(s), cols = K * bi * ohw, dys = s.mg * bi * ohw;
      const int64_t wsize = w.numel(), per_chunk = cols * (dxp ? 2 : 1) + dys;
      T* scratch = Scratch<T>(per_chunk * chunks + wsize * (chunks - 1));
      T* partials = scratch + per_chunk * chunks;
      ParallelForChunks(s.n, chunks, 1, [&](int chunk, int64_t first, int64_t last) {
        T* col = scratch + chunk * per_chunk;
        T* dyb = col + cols;
        T* dcol = dyb + dys;
        T* dw = chunk == 0 ? dwp : partials + (chunk - 1) * wsize;
        if (chunk > 0) std::fill(dw, dw + wsize, T(0));
        for (int64_t n0 = first; n0 < last; n0 += bi) {
          const int64_t nb = std::min(bi, last - n0), ld = nb * ohw;
          for (int64_t g = 0; g < s.group; ++g) {
            for (int64_t j = 0; j < nb; ++j) {
              Im2Col(s, xp + (n0 + j) * chw + g * s.cg * s.in_hw(), col + j * ohw, ld);
              for (int64_t m = 0; m < s.mg; ++m) {
                const T* src = dyp + ((n0 + j) * s.m + g * s.mg + m) * ohw;
                std::copy(src, src + ohw, dyb + m * ld + j * ohw);
              }
            }
            Gemm(CblasNoTrans, CblasTrans, s.mg, K, ld, dyb, ld, col, ld, T(1), dw + g * s.mg * K, K);
            if (!dxp) continue;
            Gemm(CblasTrans, CblasNoTrans, K, ld, s.mg, wp + g * s.mg * K, K, dyb, ld, T(0), dcol, ld);
            for (int64_t j = 0; j < nb; ++j) Col2Im(s, dcol + j * ohw, ld, dxp + (n0 + j) * chw + g * s.cg * s.in_hw());
          }
        }
      });
      for (int c = 1; c < chunks; ++c) {
        const T* part = partials + (c - 1) * wsize;
        for (int64_t i = 0; i < wsize; ++i) dwp[i] += part[i];
      }
    });
  }

#if DP_HAVE_DNNL
  bool RunDnnl(const Tensor& x, const Tensor& w, const Tensor& dy, conv::ConvGradOutputs outs, const ConvShape& s) {
    if (x.dtype() != DType::kFloat32 || !dnnl_cpu::Enabled() || !dnnl_.Prepare(s, outs.db, outs.dx, ImageChunks(s)))
      return false;
    float* dw = Output(0, w.dims(), x.dtype())->mutable_data<float>();
    float* db = outs.db ? Output(1, {s.m}, x.dtype())->mutable_data<float>() : nullptr;
    float* dx = outs.dx ? Output(outs.db ? 2 : 1, x.dims(), x.dtype())->mutable_data<float>() : nullptr;
    dnnl_.Run(x.data<float>(), w.data<float>(), dy.data<float>(), dw, db, dx,
              Scratch<uint8_t>(static_cast<int64_t>(dnnl_.scratch_bytes())));
    return true;
  }
  dnnl_cpu::ConvBackward dnnl_;
#endif
};

// The forward op's arguments for its gradient op, with no_bias set.
std::vector<Argument> GradArgs(const std::vector<Argument>& fwd, bool has_bias) {
  std::vector<Argument> out;
  for (const Argument& a : fwd)
    if (a.name != "no_bias") out.push_back(a);
  out.push_back(MakeArg("no_bias", has_bias ? 0 : 1));
  return out;
}

// dX only when wanted. dW (and db when the forward op has a bias) are
// positional outputs of ConvGradient: when one of them is not wanted but
// another gradient is, it goes to a scratch blob "<Y>__conv_unused_dW" /
// "<Y>__conv_unused_db" that nothing reads.
struct ConvGradientMaker final : GradientMaker {
  using GradientMaker::GradientMaker;
  std::vector<OperatorDef> Get() override {
    const bool has_bias = NumInputs() > 2;
    const bool want_w = NeedsGI(1), want_b = has_bias && NeedsGI(2), want_x = NeedsGI(0);
    if (!want_w && !want_b && !want_x) return {};
    std::vector<std::string> outs;
    outs.push_back(want_w ? GI(1) : StrCat(def().outputs[0], "__conv_unused_dW"));
    if (has_bias) outs.push_back(want_b ? GI(2) : StrCat(def().outputs[0], "__conv_unused_db"));
    if (want_x) outs.push_back(GI(0));
    return {MakeOp("ConvGradient", {I(0), I(1), GO(0)}, std::move(outs), GradArgs(Args(), has_bias))};
  }
};

DP_OPERATOR_SCHEMA(Conv)
    .NumInputs(2, 3)
    .NumOutputs(1)
    .Inputs({"X", "W", "b"})
    .Outputs({"Y"})
    DP_CONV_WINDOW_SCHEMA_ARGS
    .Arg("kernel", ArgKind::kInt, ArgDefault::Described("W's spatial dims [kh, kw]"),
         "kernel size (both axes, must match W), or kernel_h and kernel_w")
    .Arg("dilation", ArgKind::kInt, 1, "kernel dilation (both axes), or dilation_h / dilation_w")
    .Arg("dilation_h", ArgKind::kInt, ArgDefault::Described("dilation, else 1"), "vertical dilation")
    .Arg("dilation_w", ArgKind::kInt, ArgDefault::Described("dilation, else 1"), "horizontal dilation")
    .Arg("group", ArgKind::kInt, 1, "channel groups: C and M must be divisible by it")
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      conv::CheckInferDtypes(op, in);
      ConvShape s = conv::ComputeConvShape(op, args, in[0].dims, in[1].dims, in.size() > 2 ? &in[2].dims : nullptr);
      return std::vector<TensorInfo>{{s.y, in[0].dtype}};
    })
    .Doc("2-D convolution, NCHW: Y = W * X + b, X [N, C, H, W], W [M, C/group, kh, kw], b [M] optional.");

DP_OPERATOR_SCHEMA(ConvGradient)
    .NumInputs(3)
    .NumOutputs(1, 3)
    .Inputs({"X", "W", "dY"})
    .Outputs({"dW", "db or dX", "dX"})
    DP_CONV_WINDOW_SCHEMA_ARGS
    .Arg("kernel", ArgKind::kInt, ArgDefault::Described("W's spatial dims [kh, kw]"), "as Conv")
    .Arg("dilation", ArgKind::kInt, 1, "as Conv")
    .Arg("dilation_h", ArgKind::kInt, ArgDefault::Described("dilation, else 1"), "as Conv")
    .Arg("dilation_w", ArgKind::kInt, ArgDefault::Described("dilation, else 1"), "as Conv")
    .Arg("group", ArgKind::kInt, 1, "as Conv")
    .Arg("no_bias", ArgKind::kInt, 0, "1: the forward op had no bias, so there is no db output")
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      conv::CheckInferDtypes(op, in);
      conv::ConvGradOutputs o = conv::GradOutputs(op, args);
      ConvShape s = conv::GradShape(op, args, in[0].dims, in[1].dims, in[2].dims);
      std::vector<TensorInfo> out{{in[1].dims, in[0].dtype}};
      if (o.db) out.push_back({{s.m}, in[0].dtype});
      if (o.dx) out.push_back({in[0].dims, in[0].dtype});
      return out;
    })
    .Doc("Gradients of Conv: outputs dW, then db unless no_bias = 1, then dX when present.");

DP_REGISTER_CPU_OPERATOR(Conv, ConvOp);
DP_REGISTER_CPU_OPERATOR(ConvGradient, ConvGradientOp);

}  // namespace

DP_REGISTER_GRADIENT(Conv, ConvGradientMaker);

}  // namespace dp
