// XXH3-64 (seed 0), the checksum of checkpoint files: fast enough (tens of
// GB/s) that verifying costs little next to the disk. xxHash is inlined into
// checksum.cc, so the library has no run-time dependency on libxxhash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace dp {

uint64_t Xxh3(const void* data, size_t size);

// The same checksum over bytes that arrive in pieces.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void Update(const void* data, size_t size);
  uint64_t Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dp
