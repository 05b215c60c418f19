#include "ops/cpu/dnnl_conv.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/parallel_for.h"
#include "ops/cpu/dnnl_common.h"

namespace dp::dnnl_cpu {
namespace {

using conv::ConvShape;
using dnnl::memory;
using tag = memory::format_tag;

std::atomic<int64_t> g_runs{0};

// What the primitives depend on: the shape, the outputs, the part count.
using Key = std::array<int64_t, 21>;
Key MakeKey(const ConvShape& s, int64_t flag_a, int64_t flag_b, int parts) {
  const conv::Window& k = s.win;
  return {s.n, s.c, s.h, s.w, s.m, s.group, k.kh, k.kw, k.sh, k.sw, k.pt, k.pl, k.pb, k.pr, k.dh, k.dw,
          s.oh, s.ow, flag_a, flag_b, parts};
}

// oneDNN indexes with int in places: every tensor (and the batch part sizes
// derived from them) stays below 2^31 elements, and nothing is empty.
bool Eligible(const ConvShape& s) {
  for (int64_t d : {s.n, s.c, s.h, s.w, s.m, s.oh, s.ow, s.win.kh, s.win.kw})
    if (d <= 0) return false;
  constexpr double kMax = static_cast<double>(std::numeric_limits<int32_t>::max());
  const double n = static_cast<double>(s.n);
  return n * static_cast<double>(s.c * s.h * s.w) < kMax && n * static_cast<double>(s.m * s.oh * s.ow) < kMax &&
         static_cast<double>(s.m) * static_cast<double>(s.k()) < kMax;
}

// The batch part sizes of ParallelForChunks(n, parts, 1): n / parts rounded
// down and up (one size when it divides).
std::vector<int64_t> PartSizes(int64_t n, int parts) {
  std::vector<int64_t> sizes;
  const int64_t lo = n / parts, hi = (n + parts - 1) / parts;
  if (lo > 0) sizes.push_back(lo);
  if (hi != lo) sizes.push_back(hi);
  return sizes;
}

// oneDNN's view of dp's convolution arguments.
struct Geometry {
  memory::dims strides, dilates, pad_l, pad_r;
  memory::desc w, b;  // dp's W (grouped: [g, M/g, C/g, kh, kw]) and b [M]
};

Geometry GeometryOf(const ConvShape& s) {
  const conv::Window& k = s.win;
  Geometry g;
  g.strides = {k.sh, k.sw};
  g.dilates = {k.dh - 1, k.dw - 1};  // oneDNN counts the gaps
  g.pad_l = {k.pt, k.pl};
  g.pad_r = {k.pb, k.pr};
  g.w = s.group == 1 ? PlainDesc({s.m, s.cg, k.kh, k.kw}, tag::oihw)
                     : PlainDesc({s.group, s.mg, s.cg, k.kh, k.kw}, tag::goihw);
  g.b = PlainDesc({s.m}, tag::x);
  return g;
}

memory::desc XPlain(const ConvShape& s, int64_t nb) { return PlainDesc({nb, s.c, s.h, s.w}, tag::nchw); }
memory::desc YPlain(const ConvShape& s, int64_t nb) { return PlainDesc({nb, s.m, s.oh, s.ow}, tag::nchw); }
memory::desc AnyLike(const memory::desc& md) {
  return memory::desc(md.dims(), memory::data_type::f32, tag::any);
}

// One tensor as dp holds it and as a primitive takes it, with the reorder
// between them when they differ.
struct Port {
  memory::desc user, inner;
  bool reorder = false;
  dnnl::reorder prim;
};

// Into the primitive (dp's layout -> oneDNN's).
Port In(const memory::desc& user, const memory::desc& inner, size_t* pad) {
  Port p{user, inner, user != inner, {}};
  if (p.reorder) p.prim = MakeReorder(user, inner, pad);
  return p;
}
// Out of the primitive.
Port Out(const memory::desc& user, const memory::desc& inner, size_t* pad) {
  Port p{user, inner, user != inner, {}};
  if (p.reorder) p.prim = MakeReorder(inner, user, pad);
  return p;
}

// A port's memory objects: the user's buffer and the primitive's.
struct PortMem {
  memory user, inner;
  // A port the plan does not use (no dX wanted) has no memory objects.
  explicit PortMem(const Port& p) {
    if (p.user.is_zero()) return;
    user = Unbound(p.user);
    inner = Unbound(p.inner);
  }
  // Binds the user's buffer and, when reordered, the inner one at `buf`
  // (otherwise the primitive reads or writes the user's buffer directly).
  void BindTo(const Port& p, const void* user_ptr, void* buf) {
    Bind(user, user_ptr);
    Bind(inner, p.reorder ? buf : user_ptr);
  }
};

memory PadMemory(size_t bytes) {
  return Unbound(memory::desc({static_cast<memory::dim>(std::max<size_t>(bytes, 64))}, memory::data_type::u8,
                              tag::x));
}

// Per-part buffer offsets in the op's scratch (per-part region + shared region).
struct PartLayout {
  size_t stride = 0;  // bytes per part
  size_t shared = 0;  // start of the shared region (after every part)
};

// The weights are reordered once per run, before the parts start, into a
// buffer per layout: plans (part sizes) whose kernels take W in the same
// layout share one. Sets each plan's offset in `shared` and whether the plan
// does the reorder (false: no reorder, or an earlier plan's buffer).
template <typename Plan, typename WeightPort>
void ShareWeights(WeightPort port, const std::vector<Plan>& plans, Carver* shared, std::vector<size_t>* offsets,
                  std::vector<bool>* reorders) {
  offsets->assign(plans.size(), 0);
  reorders->assign(plans.size(), false);
  for (size_t i = 0; i < plans.size(); ++i) {
    const Port& p = port(plans[i]);
    if (!p.reorder) continue;
    size_t j = 0;
    while (j < i && !(port(plans[j]).reorder && port(plans[j]).inner == p.inner)) ++j;
    (*reorders)[i] = j == i;
    (*offsets)[i] = j == i ? shared->Take(p.inner.get_size()) : (*offsets)[j];
  }
}

// Finds the plan made for a part of nb images.
template <typename Plan>
size_t PlanIndex(const std::vector<Plan>& plans, int64_t nb) {
  for (size_t i = 0; i < plans.size(); ++i)
    if (plans[i].nb == nb) return i;
  DP_THROW(Code::kInternal, "oneDNN convolution: no primitive for a batch part of ", nb, " images");
}

// Binds W for every part and plan, and reorders it into the shared buffers
// (ShareWeights) once per run, before the parts start: set_data_handle
// zero-pads a buffer, which must not happen while another part reads it.
// port(plan) and mem(mem) pick the weights' Port and PortMem.
template <typename Plan, typename Mem, typename PortOf, typename MemOf>
void BindWeights(const std::vector<Plan>& plans, std::vector<std::vector<Mem>>& mems, PortOf port, MemOf mem,
                 const std::vector<size_t>& offsets, const std::vector<bool>& reorders, const float* w,
                 uint8_t* shared, uint8_t* pad, const dnnl::stream& stream) {
  SerialScope serial;
  for (size_t i = 0; i < plans.size(); ++i) {
    const Port& p = port(plans[i]);
    for (auto& row : mems) mem(row[i]).BindTo(p, w, shared + offsets[i]);
    if (!reorders[i]) continue;
    Mem& m = mems[0][i];
    Bind(m.pad, pad);
    Execute(p.prim, stream,
            {Arg(DNNL_ARG_FROM, mem(m).user), Arg(DNNL_ARG_TO, mem(m).inner), Arg(DNNL_ARG_SCRATCHPAD, m.pad)},
            "weights reorder");
  }
}

// What Prepare does for either op: the part count clamped to the batch
// (every part holds an image, so ParallelForChunks cuts N into parts of N /
// parts images rounded down or up), and the primitives rebuilt only when the
// key changes, under SerialScope (kernels are made for the thread count they
// run with). set(d) records the op's own flags. False when oneDNN does not
// take the convolution: the op then runs its im2col kernel.
template <typename Impl, typename Set>
bool Reprepare(Impl& d, const ConvShape& s, int parts, int64_t flag_a, int64_t flag_b, Set set) {
  parts = static_cast<int>(std::clamp<int64_t>(parts, 1, std::max<int64_t>(1, s.n)));
  const Key key = MakeKey(s, flag_a, flag_b, parts);
  if (d.key == key) return d.ok;
  d.key = key;
  d.ok = false;
  d.s = s;
  d.parts = parts;
  set(d);
  if (!Eligible(s)) return false;
  SerialScope serial;
  try {
    d.ok = d.Build();
  } catch (const dnnl::error&) {
    d.ok = false;  // not implemented for these arguments
  }
  return d.ok;
}

}  // namespace

int64_t ConvRuns() { return g_runs.load(std::memory_order_relaxed); }

// ---- forward ---------------------------------------------------------------

struct ConvForward::Impl {
  struct Plan {
    int64_t nb;
    dnnl::convolution_forward conv;
    Port x, w, y;
    std::string impl;
  };
  // Memory objects of one part for one plan (parts run concurrently, and
  // set_data_handle changes the object).
  struct Mem {
    PortMem x, w, y;
    memory b, pad;
  };
  // Per-part offsets: reordered X and Y, the scratchpad; shared: W per plan.
  struct Offsets {
    size_t x = 0, y = 0, pad = 0;
    std::vector<size_t> w;  // per plan
  };

  std::optional<Key> key;
  bool ok = false;
  ConvShape s;
  bool bias = false;
  int parts = 1;
  std::vector<Plan> plans;
  std::vector<std::vector<Mem>> mems;  // [part][plan]
  std::vector<dnnl::stream> streams;   // per part
  Offsets off;
  std::vector<bool> w_reorder;  // per plan: reorders W into its shared buffer each run
  PartLayout layout;
  size_t total = 0;

  bool Build() {
    plans.clear();
    mems.clear();
    const Geometry g = GeometryOf(s);
    const memory::desc none;  // no bias
    size_t pad = 0;
    for (int64_t nb : PartSizes(s.n, parts)) {
      const memory::desc xu = XPlain(s, nb), yu = YPlain(s, nb);
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                        AnyLike(xu), AnyLike(g.w), bias ? g.b : none, AnyLike(yu), g.strides,
                                        g.dilates, g.pad_l, g.pad_r);
      dnnl::convolution_forward::primitive_desc pd(d, UserScratchpad(), Engine());
      if (IsReference(pd)) return false;
      pad = std::max(pad, pd.scratchpad_desc().get_size());
      plans.push_back(Plan{nb, dnnl::convolution_forward(pd), In(xu, pd.src_desc(), &pad),
                           In(g.w, pd.weights_desc(), &pad), Out(yu, pd.dst_desc(), &pad), pd.impl_info_str()});
    }
    // Part buffers sized for the largest plan.
    Carver part;
    size_t xb = 0, yb = 0;
    for (const Plan& p : plans) {
      if (p.x.reorder) xb = std::max(xb, p.x.inner.get_size());
      if (p.y.reorder) yb = std::max(yb, p.y.inner.get_size());
    }
    off.x = part.Take(xb);
    off.y = part.Take(yb);
    off.pad = part.Take(std::max<size_t>(pad, 64));
    layout.stride = part.total();
    layout.shared = layout.stride * static_cast<size_t>(parts);
    Carver shared;
    ShareWeights([](const Plan& p) -> const Port& { return p.w; }, plans, &shared, &off.w, &w_reorder);
    total = layout.shared + shared.total();
    for (int c = 0; c < parts; ++c) {
      std::vector<Mem> row;
      for (const Plan& p : plans)
        row.push_back(Mem{PortMem(p.x), PortMem(p.w), PortMem(p.y), Unbound(g.b), PadMemory(pad)});
      mems.push_back(std::move(row));
    }
    while (streams.size() < static_cast<size_t>(parts)) streams.emplace_back(Engine());
    return true;
  }

  void Run(const float* x, const float* w, const float* b, float* y, uint8_t* scratch) {
    const int64_t chw = s.c * s.h * s.w, mohw = s.m * s.oh * s.ow;
    uint8_t* shared = scratch + layout.shared;
    BindWeights(
        plans, mems, [](const Plan& p) -> const Port& { return p.w; }, [](Mem& m) -> PortMem& { return m.w; }, off.w,
        w_reorder, w, shared, scratch + off.pad, streams[0]);
    ParallelForChunks(s.n, parts, 1, [&](int c, int64_t first, int64_t last) {
      SerialScope serial;
      const size_t i = PlanIndex(plans, last - first);
      const Plan& p = plans[i];
      Mem& m = mems[static_cast<size_t>(c)][i];
      const dnnl::stream& st = streams[static_cast<size_t>(c)];
      uint8_t* base = scratch + layout.stride * static_cast<size_t>(c);
      Bind(m.pad, base + off.pad);
      m.x.BindTo(p.x, x + first * chw, base + off.x);
      if (p.x.reorder)
        Execute(p.x.prim, st,
                {Arg(DNNL_ARG_FROM, m.x.user), Arg(DNNL_ARG_TO, m.x.inner), Arg(DNNL_ARG_SCRATCHPAD, m.pad)},
                "input reorder");
      m.y.BindTo(p.y, y + first * mohw, base + off.y);
      // The bias, last, only when there is one.
      if (b) Bind(m.b, b);
      const dnnl_exec_arg_t args[] = {Arg(DNNL_ARG_SRC, m.x.inner), Arg(DNNL_ARG_WEIGHTS, m.w.inner),
                                      Arg(DNNL_ARG_DST, m.y.inner), Arg(DNNL_ARG_SCRATCHPAD, m.pad),
                                      Arg(DNNL_ARG_BIAS, m.b)};
      Execute(p.conv, st, args, b ? 5 : 4, "convolution");
      if (p.y.reorder)
        Execute(p.y.prim, st,
                {Arg(DNNL_ARG_FROM, m.y.inner), Arg(DNNL_ARG_TO, m.y.user), Arg(DNNL_ARG_SCRATCHPAD, m.pad)},
                "output reorder");
    });
    g_runs.fetch_add(1, std::memory_order_relaxed);
  }
};

ConvForward::ConvForward() : impl_(std::make_unique<Impl>()) {}
ConvForward::~ConvForward() = default;

bool ConvForward::Prepare(const ConvShape& s, bool bias, int parts) {
  return Reprepare(*impl_, s, parts, bias, 0, [&](Impl& d) { d.bias = bias; });
}

size_t ConvForward::scratch_bytes() const { return impl_->total; }

void ConvForward::Run(const float* x, const float* w, const float* b, float* y, void* scratch) {
  DP_ENFORCE_CODE(impl_->ok, Code::kInternal, "oneDNN convolution run without a successful Prepare");
  impl_->Run(x, w, impl_->bias ? b : nullptr, y, static_cast<uint8_t*>(scratch));
}

std::string ConvForward::impl() const { return impl_->plans.empty() ? std::string() : impl_->plans[0].impl; }

// ---- backward --------------------------------------------------------------

struct ConvBackward::Impl {
  struct Plan {
    int64_t nb;
    dnnl::convolution_backward_weights bw;
    dnnl::convolution_backward_data bd;  // when dX is wanted
    Port x, dy_w, dw;                    // backward weights: X, dY in; dW out
    Port dy_d, w_d, dx;                  // backward data: dY, W in; dX out
    bool dy_shared = false;              // both take dY in one layout: reordered once
    std::string impl;
  };
  struct Mem {
    PortMem x, dy_w, dw, dy_d, w_d, dx;
    memory db, pad;
  };
  struct Offsets {
    size_t x = 0, dy_w = 0, dy_d = 0, dw = 0, dx = 0, dw_part = 0, db_part = 0, pad = 0;
    std::vector<size_t> w;  // shared, per plan
  };

  std::optional<Key> key;
  bool ok = false;
  ConvShape s;
  bool want_db = false, want_dx = false;
  int parts = 1;
  std::vector<Plan> plans;
  std::vector<std::vector<Mem>> mems;
  std::vector<dnnl::stream> streams;
  Offsets off;
  std::vector<bool> w_reorder;
  PartLayout layout;
  size_t total = 0;

  bool Build() {
    plans.clear();
    mems.clear();
    const Geometry g = GeometryOf(s);
    const memory::desc none;
    size_t pad = 0;
    const auto direct = dnnl::algorithm::convolution_direct;
    for (int64_t nb : PartSizes(s.n, parts)) {
      const memory::desc xu = XPlain(s, nb), yu = YPlain(s, nb);
      // The forward primitive that the backward ones are made for (never run).
      dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, direct, AnyLike(xu), AnyLike(g.w),
                                         want_db ? g.b : none, AnyLike(yu), g.strides, g.dilates, g.pad_l, g.pad_r);
      dnnl::convolution_forward::primitive_desc fpd(fd, UserScratchpad(), Engine());
      dnnl::convolution_backward_weights::desc wd(direct, AnyLike(xu), AnyLike(g.w), want_db ? g.b : none,
                                                  AnyLike(yu), g.strides, g.dilates, g.pad_l, g.pad_r);
      dnnl::convolution_backward_weights::primitive_desc wpd(wd, UserScratchpad(), Engine(), fpd);
      if (IsReference(wpd)) return false;
      pad = std::max(pad, wpd.scratchpad_desc().get_size());
      Plan p{nb, dnnl::convolution_backward_weights(wpd), {}, In(xu, wpd.src_desc(), &pad),
             In(yu, wpd.diff_dst_desc(), &pad), Out(g.w, wpd.diff_weights_desc(), &pad), {}, {}, {}, false,
             StrCat("bwd_w ", wpd.impl_info_str())};
      if (want_dx) {
        dnnl::convolution_backward_data::desc dd(direct, AnyLike(xu), AnyLike(g.w), AnyLike(yu), g.strides,
                                                 g.dilates, g.pad_l, g.pad_r);
        dnnl::convolution_backward_data::primitive_desc dpd(dd, UserScratchpad(), Engine(), fpd);
        if (IsReference(dpd)) return false;
        pad = std::max(pad, dpd.scratchpad_desc().get_size());
        p.bd = dnnl::convolution_backward_data(dpd);
        p.dy_d = In(yu, dpd.diff_dst_desc(), &pad);
        p.w_d = In(g.w, dpd.weights_desc(), &pad);
        p.dx = Out(xu, dpd.diff_src_desc(), &pad);
        p.dy_shared = p.dy_d.inner == p.dy_w.inner;
        p.impl += StrCat(", bwd_d ", dpd.impl_info_str());
      }
      plans.push_back(std::move(p));
    }
    size_t xb = 0, dywb = 0, dydb = 0, dwb = 0, dxb = 0;
    for (const Plan& p : plans) {
      if (p.x.reorder) xb = std::max(xb, p.x.inner.get_size());
      if (p.dy_w.reorder) dywb = std::max(dywb, p.dy_w.inner.get_size());
      if (p.dw.reorder) dwb = std::max(dwb, p.dw.inner.get_size());
      if (want_dx && p.dy_d.reorder && !p.dy_shared) dydb = std::max(dydb, p.dy_d.inner.get_size());
      if (want_dx && p.dx.reorder) dxb = std::max(dxb, p.dx.inner.get_size());
    }
    Carver part;
    off.x = part.Take(xb);
    off.dy_w = part.Take(dywb);
    off.dy_d = part.Take(dydb);
    off.dw = part.Take(dwb);
    off.dx = part.Take(dxb);
    // Parts after the first write their dW and db here, summed in part order.
    off.dw_part = part.Take(g.w.get_size());
    off.db_part = part.Take(want_db ? g.b.get_size() : 0);
    off.pad = part.Take(std::max<size_t>(pad, 64));
    layout.stride = part.total();
    layout.shared = layout.stride * static_cast<size_t>(parts);
    Carver shared;
    off.w.assign(plans.size(), 0);
    w_reorder.assign(plans.size(), false);
    if (want_dx) ShareWeights([](const Plan& p) -> const Port& { return p.w_d; }, plans, &shared, &off.w, &w_reorder);
    total = layout.shared + shared.total();
    for (int c = 0; c < parts; ++c) {
      std::vector<Mem> row;
      for (const Plan& p : plans)
        row.push_back(Mem{PortMem(p.x), PortMem(p.dy_w), PortMem(p.dw), PortMem(p.dy_d), PortMem(p.w_d),
                          PortMem(p.dx), Unbound(g.b), PadMemory(pad)});
      mems.push_back(std::move(row));
    }
    while (streams.size() < static_cast<size_t>(parts)) streams.emplace_back(Engine());
    return true;
  }

  void Run(const float* x, const float* w, const float* dy, float* dw, float* db, float* dx, uint8_t* scratch) {
    const int64_t chw = s.c * s.h * s.w, mohw = s.m * s.oh * s.ow;
    uint8_t* shared = scratch + layout.shared;
    if (want_dx)
      BindWeights(
          plans, mems, [](const Plan& p) -> const Port& { return p.w_d; }, [](Mem& m) -> PortMem& { return m.w_d; },
          off.w, w_reorder, w, shared, scratch + off.pad, streams[0]);
    ParallelForChunks(s.n, parts, 1, [&](int c, int64_t first, int64_t last) {
      SerialScope serial;
      const size_t i = PlanIndex(plans, last - first);
      const Plan& p = plans[i];
      Mem& m = mems[static_cast<size_t>(c)][i];
      const dnnl::stream& st = streams[static_cast<size_t>(c)];
      uint8_t* base = scratch + layout.stride * static_cast<size_t>(c);
      auto reorder = [&](const Port& port, const PortMem& pm, bool into, const char* what) {
        if (!port.reorder) return;
        Execute(port.prim, st,
                {Arg(DNNL_ARG_FROM, into ? pm.user : pm.inner), Arg(DNNL_ARG_TO, into ? pm.inner : pm.user),
                 Arg(DNNL_ARG_SCRATCHPAD, m.pad)},
                what);
      };
      Bind(m.pad, base + off.pad);
      m.x.BindTo(p.x, x + first * chw, base + off.x);
      reorder(p.x, m.x, true, "input reorder");
      m.dy_w.BindTo(p.dy_w, dy + first * mohw, base + off.dy_w);
      reorder(p.dy_w, m.dy_w, true, "gradient reorder");
      // The first part writes dW and db in place, the others their partials.
      float* dw_to = c == 0 ? dw : reinterpret_cast<float*>(base + off.dw_part);
      float* db_to = c == 0 ? db : reinterpret_cast<float*>(base + off.db_part);
      m.dw.BindTo(p.dw, dw_to, base + off.dw);
      // db, last, only when wanted.
      if (want_db) Bind(m.db, db_to);
      const dnnl_exec_arg_t args[] = {Arg(DNNL_ARG_SRC, m.x.inner), Arg(DNNL_ARG_DIFF_DST, m.dy_w.inner),
                                      Arg(DNNL_ARG_DIFF_WEIGHTS, m.dw.inner), Arg(DNNL_ARG_SCRATCHPAD, m.pad),
                                      Arg(DNNL_ARG_DIFF_BIAS, m.db)};
      Execute(p.bw, st, args, want_db ? 5 : 4, "convolution backward weights");
      reorder(p.dw, m.dw, false, "weight gradient reorder");
      if (!want_dx) return;
      if (p.dy_shared) {
        Bind(m.dy_d.inner, p.dy_w.reorder ? base + off.dy_w : static_cast<const void*>(dy + first * mohw));
      } else {
        m.dy_d.BindTo(p.dy_d, dy + first * mohw, base + off.dy_d);
        reorder(p.dy_d, m.dy_d, true, "gradient reorder");
      }
      m.dx.BindTo(p.dx, dx + first * chw, base + off.dx);
      Execute(p.bd, st,
              {Arg(DNNL_ARG_DIFF_DST, m.dy_d.inner), Arg(DNNL_ARG_WEIGHTS, m.w_d.inner),
               Arg(DNNL_ARG_DIFF_SRC, m.dx.inner), Arg(DNNL_ARG_SCRATCHPAD, m.pad)},
              "convolution backward data");
      reorder(p.dx, m.dx, false, "input gradient reorder");
    });
    // Partials summed into the first part's in part order: deterministic.
    const int64_t wsize = s.m * s.k();
    for (int c = 1; c < parts; ++c) {
      const uint8_t* base = scratch + layout.stride * static_cast<size_t>(c);
      const float* pw = reinterpret_cast<const float*>(base + off.dw_part);
      for (int64_t j = 0; j < wsize; ++j) dw[j] += pw[j];
      if (!want_db) continue;
      const float* pb = reinterpret_cast<const float*>(base + off.db_part);
      for (int64_t j = 0; j < s.m; ++j) db[j] += pb[j];
    }
    g_runs.fetch_add(1, std::memory_order_relaxed);
  }
};

ConvBackward::ConvBackward() : impl_(std::make_unique<Impl>()) {}
ConvBackward::~ConvBackward() = default;

bool ConvBackward::Prepare(const ConvShape& s, bool db, bool dx, int parts) {
  return Reprepare(*impl_, s, parts, db, dx, [&](Impl& d) {
    d.want_db = db;
    d.want_dx = dx;
  });
}

size_t ConvBackward::scratch_bytes() const { return impl_->total; }

void ConvBackward::Run(const float* x, const float* w, const float* dy, float* dw, float* db, float* dx,
                       void* scratch) {
  const Impl& d = *impl_;
  DP_ENFORCE_CODE(d.ok && (db != nullptr) == d.want_db && (dx != nullptr) == d.want_dx, Code::kInternal,
                  "oneDNN convolution gradient run without a matching Prepare");
  impl_->Run(x, w, dy, dw, db, dx, static_cast<uint8_t*>(scratch));
}

std::string ConvBackward::impl() const { return impl_->plans.empty() ? std::string() : impl_->plans[0].impl; }

}  // namespace dp::dnnl_cpu
