// GlooExchange: every rank sends one block of bytes to every other rank in a
// single step, over Gloo's pairs (its TCP transport, buffers registered
// once). It carries the collectives Debian's Gloo has no general form of: a
// reduce-scatter (its halving-doubling one wants a power of two of ranks)
// that sums in rank order, an all-gather without a ring's n - 1 hops, and
// the two together as the "direct" allreduce. Each rank sends and receives
// (n - 1) blocks, the bytes of a ring's reduce-scatter or all-gather, in one
// step instead of n - 1: meant for the few processes of a data-parallel
// job, not for thousands.
//
// A run may end with a notification round: when such a run returns, every
// peer has consumed what this rank sent and nothing is on its way to this
// rank, so the next run may reuse every buffer (the send, the receive ones)
// and the exchange may be destroyed. A run without it must be followed by
// one with it (of an exchange between the same ranks, later in the same
// collective) before its buffers are reused. Gloo's transport errors (a peer
// gone, the context's timeout) are thrown as Gloo's exceptions, for the
// communicator to turn into its own.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include <gloo/context.h>
#include <gloo/transport/buffer.h>

namespace dp {

class GlooExchange {
 public:
  struct Block {
    char* data = nullptr;
    size_t bytes = 0;
  };

  // Peer p receives to[p] (bytes inside `send`, which spans send_bytes and
  // is registered whole); this rank receives peer p's block into from[p]
  // (its bytes: what p sends). Entries of this rank itself are unused, and
  // empty blocks are not sent. All ranks construct their exchanges in the
  // same order (Gloo's slots).
  GlooExchange(const std::shared_ptr<gloo::Context>& ctx, char* send, size_t send_bytes, const std::vector<Block>& to,
               const std::vector<Block>& from);

  // Sends, waits for every peer's block, calls consume() (the received
  // blocks and the send buffer are stable while it runs), then, with
  // `notify`, the notification round.
  template <typename Consume>
  void Run(const Consume& consume, bool notify = true) {
    for (size_t p = 0; p < sends_.size(); ++p)
      if (sends_[p]) sends_[p]->send(send_offset_[p], send_bytes_[p]);
    for (auto& r : recvs_)
      if (r) r->waitRecv();
    consume();
    if (!notify) return;
    for (auto& s : notify_out_)
      if (s) s->send();
    for (auto& r : notify_in_)
      if (r) r->waitRecv();
  }

 private:
  std::vector<size_t> send_offset_, send_bytes_;
  // Per peer (null for this rank and empty blocks): its data buffers and
  // notification buffers, each notification on a word of its own.
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends_, recvs_, notify_out_, notify_in_;
  std::vector<int> notify_words_;
};

}  // namespace dp
