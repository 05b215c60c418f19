// GlooExchange: every rank sends one block of bytes to every other rank in a
// single step, over Gloo's pairs (its TCP transport, buffers registered
// once). It carries the collectives Debian's Gloo has no general form of: a
// reduce-scatter (its halving-doubling one wants a power of two of ranks)
// that sums in rank order, and an all-gather without a ring's n - 1 hops.
// Each rank sends and receives (n - 1) blocks, the bytes of a ring's
// reduce-scatter or all-gather, in one step instead of n - 1: meant for the
// few processes of a data-parallel job, not for thousands.
//
// A run ends with a notification round: when Run returns, every peer has
// consumed what this rank sent and nothing is on its way to this rank, so
// the next run may reuse every buffer (the send, the receive ones) and the
// exchange may be destroyed. Gloo's transport errors (a peer gone, the
// context's timeout) are thrown as Gloo's exceptions, for the communicator
// to turn into its own.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include <gloo/context.h>
#include <gloo/transport/buffer.h>

namespace dp {

class GlooExchange {
 public:
  // Peer p receives `block` bytes of `send` from send + send_offset[p]
  // (`send` spans send_bytes, registered whole), and this rank receives
  // peer p's block at recv[p]. Entries of this rank itself are unused. All
  // ranks construct their exchanges in the same order (Gloo's slots).
  GlooExchange(const std::shared_ptr<gloo::Context>& ctx, char* send, size_t send_bytes,
               std::vector<size_t> send_offset, size_t block, const std::vector<char*>& recv);

  // Sends, waits for every peer's block, calls consume() (the received
  // blocks and the send buffer are stable while it runs), then the
  // notification round.
  template <typename Consume>
  void Run(const Consume& consume) {
    if (!active()) {
      consume();
      return;
    }
    for (size_t p = 0; p < sends_.size(); ++p)
      if (sends_[p]) sends_[p]->send(send_offset_[p], block_);
    for (auto& r : recvs_)
      if (r) r->waitRecv();
    consume();
    for (auto& s : notify_out_)
      if (s) s->send();
    for (auto& r : notify_in_)
      if (r) r->waitRecv();
  }

 private:
  bool active() const { return block_ > 0 && sends_.size() > 1; }

  const std::vector<size_t> send_offset_;
  const size_t block_;
  // Per peer (null for this rank): its data buffers and notification
  // buffers, each notification on a word of its own.
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends_, recvs_, notify_out_, notify_in_;
  std::vector<int> notify_words_;
};

}  // namespace dp
