// CpuRelax(): the body of a spin-wait loop (x86 `pause`: lets the sibling
// hyper-thread run and avoids a memory-order flush on exit; elsewhere a yield).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#else
#include <thread>
#endif

namespace dp {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace dp
