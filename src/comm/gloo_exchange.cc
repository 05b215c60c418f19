#include "comm/gloo_exchange.h"

#include <gloo/transport/pair.h>

#include "core/error.h"

namespace dp {

GlooExchange::GlooExchange(const std::shared_ptr<gloo::Context>& ctx, char* send, size_t send_bytes,
                           const std::vector<Block>& to, const std::vector<Block>& from) {
  const auto n = static_cast<size_t>(ctx->size), me = static_cast<size_t>(ctx->rank);
  DP_ENFORCE(to.size() == n && from.size() == n, "GlooExchange: ", to.size(), " blocks to send and ", from.size(),
             " to receive for ", n, " ranks");
  send_offset_.assign(n, 0);
  send_bytes_.assign(n, 0);
  for (size_t p = 0; p < n; ++p) {
    if (p == me || to[p].bytes == 0) continue;
    const bool inside = to[p].data >= send && to[p].bytes <= send_bytes &&
                        static_cast<size_t>(to[p].data - send) <= send_bytes - to[p].bytes;
    DP_ENFORCE(inside, "GlooExchange: the block for rank ", p, " lies outside the ", send_bytes, " bytes sent");
    send_offset_[p] = static_cast<size_t>(to[p].data - send);
    send_bytes_[p] = to[p].bytes;
  }
  sends_.resize(n);
  recvs_.resize(n);
  notify_out_.resize(n);
  notify_in_.resize(n);
  notify_words_.assign(2 * n, 0);
  // Every rank takes its two slots in the same order, whether it sends or
  // not, so that later algorithms' slots still match.
  const int slot = ctx->nextSlot(2);
  for (size_t p = 0; p < n; ++p) {
    if (p == me) continue;
    auto& pair = ctx->getPair(static_cast<int>(p));
    if (send_bytes_[p] > 0) sends_[p] = pair->createSendBuffer(slot, send, send_bytes);
    if (from[p].bytes > 0) recvs_[p] = pair->createRecvBuffer(slot, from[p].data, from[p].bytes);
    notify_out_[p] = pair->createSendBuffer(slot + 1, &notify_words_[2 * p], sizeof(int));
    notify_in_[p] = pair->createRecvBuffer(slot + 1, &notify_words_[2 * p + 1], sizeof(int));
  }
}

}  // namespace dp
