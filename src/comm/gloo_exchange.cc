#include "comm/gloo_exchange.h"

#include <gloo/transport/pair.h>

#include "core/error.h"

namespace dp {

GlooExchange::GlooExchange(const std::shared_ptr<gloo::Context>& ctx, char* send, size_t send_bytes,
                           std::vector<size_t> send_offset, size_t block, const std::vector<char*>& recv)
    : send_offset_(std::move(send_offset)), block_(block) {
  const auto n = static_cast<size_t>(ctx->size), me = static_cast<size_t>(ctx->rank);
  DP_ENFORCE(send_offset_.size() == n && recv.size() == n, "GlooExchange: ", send_offset_.size(), " offsets and ",
             recv.size(), " receive buffers for ", n, " ranks");
  for (size_t p = 0; p < n; ++p)
    DP_ENFORCE(p == me || block == 0 || send_offset_[p] + block <= send_bytes, "GlooExchange: block ", block,
               " at ", send_offset_[p], " lies outside the ", send_bytes, " bytes sent");
  sends_.resize(n);
  recvs_.resize(n);
  notify_out_.resize(n);
  notify_in_.resize(n);
  notify_words_.assign(2 * n, 0);
  // Every rank takes its two slots in the same order, whether it sends or
  // not, so that later algorithms' slots still match.
  const int slot = ctx->nextSlot(2);
  if (block == 0 || n == 1) return;
  for (size_t p = 0; p < n; ++p) {
    if (p == me) continue;
    auto& pair = ctx->getPair(static_cast<int>(p));
    sends_[p] = pair->createSendBuffer(slot, send, send_bytes);
    recvs_[p] = pair->createRecvBuffer(slot, recv[p], block);
    notify_out_[p] = pair->createSendBuffer(slot + 1, &notify_words_[2 * p], sizeof(int));
    notify_in_[p] = pair->createRecvBuffer(slot + 1, &notify_words_[2 * p + 1], sizeof(int));
  }
}

}  // namespace dp
