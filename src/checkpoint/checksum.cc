#include "checkpoint/checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <new>

namespace dp {

uint64_t Xxh3(const void* data, size_t size) { return XXH3_64bits(data, size); }

struct Xxh3Stream::State {
  XXH3_state_t s;
};

Xxh3Stream::Xxh3Stream() : state_(new State) { XXH3_64bits_reset(&state_->s); }
Xxh3Stream::~Xxh3Stream() = default;
void Xxh3Stream::Update(const void* data, size_t size) { XXH3_64bits_update(&state_->s, data, size); }
uint64_t Xxh3Stream::Digest() const { return XXH3_64bits_digest(&state_->s); }

}  // namespace dp
