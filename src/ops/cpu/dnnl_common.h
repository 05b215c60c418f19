// What the oneDNN kernels (DP_HAVE_DNNL builds) share: the CPU engine, dp's
// thread policy for oneDNN, and allocation-free execution.
//
// dp owns the threads (core/parallel_for.h): an op splits its batch across
// its share of the compute team, and oneDNN runs single-threaded inside each
// part. The Debian libdnnl is built on OpenMP, whose threads would compete
// with dp's helpers for the same cores, so every oneDNN call (primitive
// creation included: a kernel fixes its thread count when it is created)
// runs under a SerialScope, which sets this thread's OpenMP thread count to
// 1 (a per-thread ICV) and restores it afterwards; oneDNN then never opens a
// parallel region and no OpenMP thread is started.
//
// Memory: primitives use the user-mode scratchpad, and every buffer they need
// (reordered tensors, scratchpads) is carved from the op's own scratch
// (Operator::Scratch, charged to the workspace's budget); dnnl::memory
// objects made once wrap dp's pointers through set_data_handle.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace dp::dnnl_cpu {

// The process's oneDNN CPU engine (made on first use, never destroyed).
const dnnl::engine& Engine();

// oneDNN single-threaded on this thread while it lives (see above).
class SerialScope {
 public:
  SerialScope();
  ~SerialScope();
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  int saved_;
};

// Whether ops use oneDNN (true unless a DisabledScope lives). Tests compare
// the oneDNN paths with dp's own kernels in one process through it.
bool Enabled();
class DisabledScope {
 public:
  DisabledScope();
  ~DisabledScope();
  DisabledScope(const DisabledScope&) = delete;
  DisabledScope& operator=(const DisabledScope&) = delete;

 private:
  bool saved_;
};

// Runs p on s with these arguments through the C API (the C++ execute builds
// a map and a vector per call). kInternal naming `what` on failure.
void Execute(const dnnl::primitive& p, const dnnl::stream& s, const dnnl_exec_arg_t* args, int count,
             const char* what);
inline void Execute(const dnnl::primitive& p, const dnnl::stream& s, std::initializer_list<dnnl_exec_arg_t> args,
                    const char* what) {
  Execute(p, s, args.begin(), static_cast<int>(args.size()), what);
}
inline dnnl_exec_arg_t Arg(int name, const dnnl::memory& m) { return {name, m.get()}; }

// A plain (dp-layout) descriptor of float32 dims.
dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims, dnnl::memory::format_tag tag);

// A memory object over no buffer yet (set_data_handle before each use).
dnnl::memory Unbound(const dnnl::memory::desc& md);

// User-mode scratchpad attributes.
dnnl::primitive_attr UserScratchpad();

// A reorder from a to b with a user-mode scratchpad; its scratchpad bytes added to *pad_bytes (max).
dnnl::reorder MakeReorder(const dnnl::memory::desc& a, const dnnl::memory::desc& b, size_t* pad_bytes);

// True for oneDNN's reference kernels, slower than dp's im2col + GEMM.
bool IsReference(const dnnl::primitive_desc_base& pd);

// Offsets of 64-byte aligned buffers carved one after another from a block.
class Carver {
 public:
  size_t Take(size_t bytes) {
    const size_t at = total_;
    total_ += (bytes + 63) / 64 * 64;
    return at;
  }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
};

// Sets m's buffer to p (a dp pointer; oneDNN's API takes non-const handles).
inline void Bind(const dnnl::memory& m, const void* p) { m.set_data_handle(const_cast<void*>(p)); }

}  // namespace dp::dnnl_cpu
