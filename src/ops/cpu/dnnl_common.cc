#include "ops/cpu/dnnl_common.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/error.h"

// The OpenMP calls SerialScope needs, declared here rather than through
// <omp.h>, which clang does not ship without libomp-dev (the sanitizer build
// uses clang); libgomp exports them with C linkage.
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
extern "C" {
int omp_get_max_threads(void);
void omp_set_num_threads(int);
}
#elif DNNL_CPU_RUNTIME != DNNL_RUNTIME_SEQ
#error "dp runs oneDNN on its own threads: it needs a oneDNN built with the OpenMP or sequential CPU runtime"
#endif

namespace dp::dnnl_cpu {
namespace {
std::atomic<bool> g_enabled{true};
}  // namespace

const dnnl::engine& Engine() {
  // Never destroyed: ops of static workspaces may outlive static destructors.
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
SerialScope::SerialScope() : saved_(omp_get_max_threads()) {
  if (saved_ != 1) omp_set_num_threads(1);
}
SerialScope::~SerialScope() {
  if (saved_ != 1) omp_set_num_threads(saved_);
}
#else
SerialScope::SerialScope() : saved_(1) {}
SerialScope::~SerialScope() = default;
#endif

bool Enabled() { return g_enabled.load(std::memory_order_relaxed); }
DisabledScope::DisabledScope() : saved_(g_enabled.exchange(false)) {}
DisabledScope::~DisabledScope() { g_enabled.store(saved_); }

void Execute(const dnnl::primitive& p, const dnnl::stream& s, const dnnl_exec_arg_t* args, int count,
             const char* what) {
  const dnnl_status_t st = dnnl_primitive_execute(p.get(), s.get(), count, args);
  DP_ENFORCE_CODE(st == dnnl_success, Code::kInternal, "oneDNN ", what, " failed (status ", static_cast<int>(st),
                  ")");
}

dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims, dnnl::memory::format_tag tag) {
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tag);
}

dnnl::memory Unbound(const dnnl::memory::desc& md) { return dnnl::memory(md, Engine(), DNNL_MEMORY_NONE); }

dnnl::primitive_attr UserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::reorder MakeReorder(const dnnl::memory::desc& a, const dnnl::memory::desc& b, size_t* pad_bytes) {
  dnnl::reorder::primitive_desc pd(Engine(), a, Engine(), b, UserScratchpad());
  *pad_bytes = std::max(*pad_bytes, pd.scratchpad_desc().get_size());
  return dnnl::reorder(pd);
}

bool IsReference(const dnnl::primitive_desc_base& pd) { return std::strncmp(pd.impl_info_str(), "ref", 3) == 0; }

}  // namespace dp::dnnl_cpu
