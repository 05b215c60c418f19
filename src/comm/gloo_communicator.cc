#include "comm/gloo_communicator.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include "comm/gloo_exchange.h"
#include "comm/sum_types.h"
#include "core/error.h"
#include "core/half_float.h"
#include "core/logging.h"

namespace dp {
namespace {

// How long a failing process waits for the other survivors' reports before
// it names the ranks that sent none. Survivors report within milliseconds of
// each other (the first one closes its connections, which fails the others'
// pending transfers), so this is only an upper bound.
constexpr auto kRollCallGrace = std::chrono::milliseconds(500);
// The longest a communicator's destructor waits for its peers to leave too.
constexpr auto kFarewellTimeout = std::chrono::milliseconds(10000);

// A peer that dies closes its sockets; writing to one raises SIGPIPE, whose
// default action kills the process. A library must turn that into an error,
// so SIGPIPE is ignored unless the program installed its own handler.
void IgnoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
      DP_LOG(kInfo, "dp: SIGPIPE is now ignored (a closed peer connection becomes an error, not a kill)");
    }
  });
}

// Gloo's algorithms count elements in an int: longer buffers run in pieces.
constexpr int64_t kMaxPiece = int64_t{1} << 30;
// Below this size an allreduce is latency-bound: "auto" and "ring" run
// Gloo's plain ring (the whole buffer passed along: fewest messages); from
// it on "ring" runs the chunked ring (reduce-scatter + allgather in chunks:
// 2 (n - 1) / n of the buffer per process) and "auto" dp's direct exchange
// (the same bytes in 2 steps instead of 2 (n - 1): 2 processes on loopback
// TCP, 64 KiB 89 us against the ring's 243, 1 MiB 0.79 ms against 0.87,
// 16 MiB 10.1 ms against 16.7; bench/README.md), up to kDirectMaxRanks
// processes (each then receives from all the others at once) and the
// chunked ring beyond. Halving-doubling and bcube measured no faster here
// (nor slower, since the pairs' send buffers are widened on connecting:
// WidenSendBuffers).
constexpr size_t kLargeBytes = size_t{64} << 10;
// The message each process sends every peer once on connecting, so that
// Gloo sizes the pairs' socket send buffers for it (WidenSendBuffers).
constexpr size_t kWideSendBuffer = size_t{1} << 20;
constexpr int kDirectMaxRanks = 8;

// A 16-bit float (BFloat16, Half) as Gloo's algorithms sum it: each pair in
// float, rounded to nearest even (a compressed gradient's bytes on the wire;
// Gloo has no bfloat16 of its own).
template <typename H>
struct Summed16 {
  H value;
};
template <typename H>
Summed16<H> operator+(Summed16<H> a, Summed16<H> b) {
  return {FromFloat<H>(ToFloat(a.value) + ToFloat(b.value))};
}
static_assert(sizeof(Summed16<BFloat16>) == 2 && sizeof(Summed16<Half>) == 2);

class GlooCommunicator;

// Gloo algorithm objects bound to a buffer (their pairs' buffers are
// registered once), run through the communicator's error handling. Gloo's
// algorithms on registered buffers run a small allreduce in ~0.1 ms here,
// where its newer unbound-buffer API (gloo::allreduce) took ~4 ms per call.
class GlooPrepared final : public PreparedCollective {
 public:
  // `allreduce_bytes`: what each run of an allreduce carries (0: another collective).
  GlooPrepared(GlooCommunicator* comm, const char* what, std::vector<std::unique_ptr<gloo::Algorithm>> pieces,
               size_t allreduce_bytes = 0)
      : comm_(comm), what_(what), pieces_(std::move(pieces)), allreduce_bytes_(allreduce_bytes) {}
  void Run() override;

 private:
  GlooCommunicator* comm_;  // outlives this (prepared collectives belong to ops holding the communicator)
  const char* what_;
  std::vector<std::unique_ptr<gloo::Algorithm>> pieces_;
  size_t allreduce_bytes_;
};

// A reduce-scatter over a GlooExchange: block p of the buffer goes to rank
// p, whose own block becomes the sum of every rank's in rank order (the
// shared-memory communicator's sums, bit for bit). On a caller's buffer
// (ReduceScatterSum) or its own (prepared once: the ZeRO buckets' hot path).
class GlooReduceScatter final : public BufferedCollective {
 public:
  GlooReduceScatter(GlooCommunicator* comm, const std::shared_ptr<gloo::Context>& ctx, char* data, int64_t count,
                    DType dtype)
      : comm_(comm), count_(count), dtype_(dtype), block_(static_cast<size_t>(count) * DTypeSize(dtype)),
        me_(ctx->rank), n_(ctx->size) {
    const auto n = static_cast<size_t>(n_), me = static_cast<size_t>(me_);
    if (data == nullptr) {
      own_.resize(block_ * n);
      data = own_.data();
    }
    data_ = data;
    inbox_.resize(block_ * (n - 1));
    std::vector<GlooExchange::Block> to(n), from(n);
    for (size_t p = 0; p < n; ++p) {
      to[p] = {data_ + block_ * p, block_};
      from[p] = {p == me ? nullptr : inbox_.data() + block_ * (p < me ? p : p - 1), block_};
      bufs_.push_back(p == me ? data_ + block_ * me : from[p].data);
    }
    exchange_ = std::make_unique<GlooExchange>(ctx, data_, block_ * n, to, from);
  }

  void* input() override { return data_; }
  void Run(const ResultSink& sink) override {
    Reduce();
    const size_t at = block_ * static_cast<size_t>(me_);
    sink(data_ + at, at, block_);
  }
  // This rank's block of the buffer summed (the other blocks as they were).
  void Reduce();

 private:
  GlooCommunicator* comm_;  // outlives this
  const int64_t count_;
  const DType dtype_;
  const size_t block_;
  const int me_, n_;
  char* data_;
  std::vector<char> own_, inbox_;  // own_: the buffer when it is not the caller's
  std::vector<char*> bufs_;        // the blocks summed, rank order (inboxes and this rank's own)
  std::unique_ptr<GlooExchange> exchange_;
};

// An all-gather over a GlooExchange on private buffers: every peer's block
// lands in its place of `out_`; this rank's is handed out from `in_`.
class GlooAllgather final : public BufferedCollective {
 public:
  GlooAllgather(GlooCommunicator* comm, const std::shared_ptr<gloo::Context>& ctx, size_t nbytes)
      : comm_(comm), nbytes_(nbytes), me_(ctx->rank), n_(ctx->size), in_(nbytes),
        out_(nbytes * static_cast<size_t>(ctx->size)) {
    std::vector<GlooExchange::Block> to, from;
    for (int p = 0; p < n_; ++p) {
      to.push_back({in_.data(), nbytes});
      from.push_back({out_.data() + nbytes * static_cast<size_t>(p), nbytes});
    }
    exchange_ = std::make_unique<GlooExchange>(ctx, in_.data(), nbytes, to, from);
  }

  void* input() override { return in_.data(); }
  // The sink reads the received blocks before the exchange's notification
  // round (after it, peers may send the next run's); its error waits for
  // the round, so that the peers still finish.
  void Run(const ResultSink& sink) override;

 private:
  GlooCommunicator* comm_;
  const size_t nbytes_;
  const int me_, n_;
  std::vector<char> in_, out_;
  std::unique_ptr<GlooExchange> exchange_;
};

// The allreduce of algorithm "direct": a GlooExchange reduce-scatter, then
// an all-gather into the same buffer. Block p (ceil(count / n) elements,
// the last ones shorter or empty) is summed by rank p in rank order and
// sent to every rank, so all hold the same bytes, shared memory's sums, in
// two steps (a ring takes 2 (n - 1)).
class GlooDirectAllreduce final : public PreparedCollective {
 public:
  GlooDirectAllreduce(GlooCommunicator* comm, const std::shared_ptr<gloo::Context>& ctx, char* data, int64_t count,
                      DType dtype)
      : comm_(comm), count_(count), dtype_(dtype), me_(ctx->rank), n_(ctx->size) {
    const auto n = static_cast<size_t>(n_), me = static_cast<size_t>(me_), item = DTypeSize(dtype);
    const auto total = static_cast<size_t>(count), per = (total + n - 1) / n;
    auto begin = [&](size_t p) { return std::min(total, p * per); };
    auto length = [&](size_t p) { return std::min(total, (p + 1) * per) - begin(p); };
    mine_ = static_cast<int64_t>(length(me));
    inbox_.resize(length(me) * item * (n - 1));
    std::vector<GlooExchange::Block> to(n), from(n), gather_to(n), gather_from(n);
    for (size_t p = 0; p < n; ++p) {
      char* inbox = p == me ? nullptr : inbox_.data() + length(me) * item * (p < me ? p : p - 1);
      to[p] = {data + begin(p) * item, length(p) * item};
      from[p] = {inbox, length(me) * item};
      gather_to[p] = {data + begin(me) * item, length(me) * item};
      gather_from[p] = {data + begin(p) * item, length(p) * item};
      bufs_.push_back(p == me ? data + begin(me) * item : inbox);
    }
    scatter_ = std::make_unique<GlooExchange>(ctx, data, total * item, to, from);
    gather_ = std::make_unique<GlooExchange>(ctx, data, total * item, gather_to, gather_from);
  }
  void Run() override;

 private:
  GlooCommunicator* comm_;  // outlives this
  const int64_t count_;
  const DType dtype_;
  const int me_, n_;
  int64_t mine_ = 0;        // elements of this rank's block
  std::vector<char> inbox_;  // the peers' parts of this rank's block
  std::vector<char*> bufs_;  // the block's parts summed, rank order
  std::unique_ptr<GlooExchange> scatter_, gather_;
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<Store> store, const GlooOptions& o) : store_(std::move(store)), o_(o) {}

  void Connect() {
    IgnoreSigpipeOnce();
    // Arrival first, so that a missing process is named (Gloo's own
    // rendezvous only says that a key is missing).
    store_->Set("arrived/" + std::to_string(o_.rank), "1");
    const std::vector<int> missing = store_->MissingRanks("arrived/", o_.size, o_.timeout);
    if (!missing.empty())
      DP_THROW(Code::kTimeout, "rendezvous at ", store_->url(), ": rank ", Me(), " of ", o_.size, " waited ",
               o_.timeout.count(), " ms, but ", RankList(missing, o_.names), " did not arrive");
    try {
      gloo::transport::tcp::attr attr;
      if (!o_.interface.empty()) attr.iface = o_.interface;
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto ctx = std::make_shared<gloo::rendezvous::Context>(o_.rank, o_.size);
      // Every peer has arrived: connecting takes the full timeout at most,
      // and the pairs keep it as the bound of every transfer.
      ctx->setTimeout(o_.timeout);
      ctx->connectFullMesh(store_->gloo(), device);
      ctx_ = std::move(ctx);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      DP_THROW(Code::kUnavailable, "rendezvous at ", store_->url(), ": rank ", Me(), " of ", o_.size,
               " could not connect to its peers", o_.interface.empty() ? "" : " on interface " + o_.interface,
               ": ", e.what());
    }
    Call("connection", [&] { WidenSendBuffers(ctx_); });  // a peer lost here is named as in any collective
  }

  // Gloo's TCP pair sizes its socket's send buffer to the largest message
  // it has sent (SO_SNDBUF, which also turns the kernel's tuning off) and
  // compares it with what the kernel reports, twice that: a message between
  // the last size and twice it finds a buffer of about its own size. On
  // loopback (a 64 KiB segment) that is one segment in flight, whose ACK
  // the receiver delays: each segment then waits up to the delayed-ACK
  // timer (a 128 KiB allreduce took 10-40 ms instead of 0.2). One message of
  // kWideSendBuffer to every peer once, here, sizes every pair's buffer for
  // many segments from the start. In n - 1 rounds (round k: to rank
  // me + k, from rank me - k), so that two buffers serve any number of
  // processes.
  static void WidenSendBuffers(const std::shared_ptr<gloo::Context>& ctx) {
    const auto n = static_cast<size_t>(ctx->size), me = static_cast<size_t>(ctx->rank);
    std::vector<char> out(n > 1 ? kWideSendBuffer : 0), in(out.size());
    for (size_t k = 1; k < n; ++k) {
      std::vector<GlooExchange::Block> to(n), from(n);
      to[(me + k) % n] = {out.data(), out.size()};
      from[(me + n - k) % n] = {in.data(), in.size()};
      GlooExchange(ctx, out.data(), out.size(), to, from).Run([] {});
    }
  }

  // Leaves together: a process that closes its sockets while a peer still
  // finishes the last collective can make the peer's kernel drop data that
  // had already arrived (the close turns into a reset when unread bytes are
  // left, such as the algorithms' trailing notifications), failing the
  // peer's collective. A bounded barrier first: every process has then
  // finished every collective, and nothing is in flight.
  ~GlooCommunicator() override {
    if (broken_ || !ctx_) return;
    try {
      gloo::BarrierOptions opts(ctx_);
      opts.setTimeout(std::min(o_.timeout, kFarewellTimeout));
      gloo::barrier(opts);
    } catch (...) {
      // A peer that is gone already: nothing to protect.
    }
  }

  int rank() const override { return o_.rank; }
  int size() const override { return o_.size; }
  std::chrono::milliseconds timeout() const override { return o_.timeout; }
  const char* backend() const override { return "gloo"; }

  void AllreduceSum(void* data, int64_t count, DType dtype) override {
    if (count > 0) PrepareAllreduceSum(data, count, dtype)->Run();
  }

  void Broadcast(void* data, size_t nbytes, int root) override {
    if (nbytes > 0) PrepareBroadcast(data, nbytes, root)->Run();
  }

  void Allgather(const void* in, void* out, size_t nbytes) override {
    if (nbytes == 0) return;
    auto gather = PrepareBufferedAllgather(nbytes);
    std::memcpy(gather->input(), in, nbytes);
    auto copy = [&](const void* piece, size_t offset, size_t n) {
      std::memcpy(static_cast<char*>(out) + offset, piece, n);
    };
    gather->Run(SinkOf(copy));
  }

  void ReduceScatterSum(void* data, int64_t count, DType dtype) override {
    CheckReduceScatter(count, dtype);
    Make<GlooReduceScatter>("reduce-scatter", static_cast<char*>(data), count, dtype)->Reduce();
  }

  std::unique_ptr<BufferedCollective> PrepareBufferedReduceScatterSum(int64_t count, DType dtype) override {
    CheckReduceScatter(count, dtype);
    return Make<GlooReduceScatter>("reduce-scatter", nullptr, count, dtype);
  }

  std::unique_ptr<BufferedCollective> PrepareBufferedAllgather(size_t nbytes) override {
    return Make<GlooAllgather>("allgather", nbytes);
  }

  void Barrier() override {
    Prepare("barrier", [&](Pieces& pieces) { pieces.push_back(std::make_unique<gloo::BarrierAllToAll>(ctx_)); })
        ->Run();
  }

  std::unique_ptr<PreparedCollective> PrepareAllreduceSum(void* data, int64_t count, DType dtype) override {
    DP_ENFORCE(count >= 0, "AllreduceSum: negative count ", count);
    const bool large = static_cast<size_t>(count) * DTypeSize(dtype) >= kLargeBytes;
    if (o_.algorithm == "direct" || (o_.algorithm == "auto" && large && o_.size <= kDirectMaxRanks)) {
      DP_ENFORCE_CODE(IsProcessSumType(dtype), Code::kDType,
                      "AllreduceSum across processes supports float32, float64, int32, int64, bfloat16 and float16, "
                      "got ", DTypeName(dtype));
      return Make<GlooDirectAllreduce>("allreduce", static_cast<char*>(data), count, dtype);
    }
    switch (dtype) {
      case DType::kFloat32: return PrepareSum<float>(data, count);
      case DType::kFloat64: return PrepareSum<double>(data, count);
      case DType::kInt32: return PrepareSum<int32_t>(data, count);
      case DType::kInt64: return PrepareSum<int64_t>(data, count);
      case DType::kBFloat16: return PrepareSum<Summed16<BFloat16>>(data, count);
      case DType::kFloat16: return PrepareSum<Summed16<Half>>(data, count);
      default:
        DP_THROW(Code::kDType,
                 "AllreduceSum across processes supports float32, float64, int32, int64, bfloat16 and float16, got ",
                 DTypeName(dtype));
    }
  }

  std::unique_ptr<PreparedCollective> PrepareBroadcast(void* data, size_t nbytes, int root) override {
    DP_ENFORCE(root >= 0 && root < o_.size, "Broadcast: root rank ", root, " is out of range for ", o_.size,
               " processes");
    return Prepare("broadcast", [&](Pieces& pieces) {
      for (size_t off = 0; off < nbytes; off += static_cast<size_t>(kMaxPiece)) {
        const size_t len = std::min(nbytes - off, static_cast<size_t>(kMaxPiece));
        pieces.push_back(std::make_unique<gloo::BroadcastOneToAll<char>>(
            ctx_, std::vector<char*>{static_cast<char*>(data) + off}, len, root, 0));
      }
    });
  }

  void Abort(const std::string& why) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_ || !ctx_) return;
    try {
      ctx_->closeConnections();  // peers blocked on this process fail now
    } catch (...) {
    }
    try {
      broken_ = std::make_unique<Error>(Code::kUnavailable, StrCat(why, "; the communicator is closed"));
    } catch (...) {
    }
  }

  // Runs fn (a collective's transfers) under the communicator's lock and
  // error handling: a failure breaks the communicator for good.
  template <typename Fn>
  void Call(const char* what, const Fn& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) throw *broken_;
    try {
      fn();
    } catch (const Error&) {
      throw;  // an argument error before any transfer: the communicator is fine
    } catch (const std::exception& e) {
      Fail(what, e.what());
    }
  }

 private:
  using Pieces = std::vector<std::unique_ptr<gloo::Algorithm>>;

  // Gloo's algorithm objects made by build(pieces) (their constructors
  // register buffers and take slots of the context: under the lock and the
  // error handling), ready to run.
  template <typename Build>
  std::unique_ptr<GlooPrepared> Prepare(const char* what, const Build& build, size_t allreduce_bytes = 0) {
    Pieces pieces;
    Call(what, [&] { build(pieces); });
    return std::make_unique<GlooPrepared>(this, what, std::move(pieces), allreduce_bytes);
  }

  friend class GlooPrepared;         // count their runs' bytes
  friend class GlooDirectAllreduce;

  static void CheckReduceScatter(int64_t count, DType dtype) {
    DP_ENFORCE(count >= 0, "ReduceScatterSum: negative count ", count);
    DP_ENFORCE_CODE(IsProcessSumType(dtype), Code::kDType,
                    "ReduceScatterSum across processes supports float32, float64, int32, int64, bfloat16 and "
                    "float16, got ", DTypeName(dtype));
  }

  // A collective object registering its buffers on the context (under the
  // lock and the error handling, as Prepare's).
  template <typename C, typename... Args>
  std::unique_ptr<C> Make(const char* what, Args&&... args) {
    std::unique_ptr<C> made;
    Call(what, [&] { made = std::make_unique<C>(this, ctx_, std::forward<Args>(args)...); });
    return made;
  }

  template <typename T>
  std::unique_ptr<PreparedCollective> PrepareSum(void* data, int64_t count) {
    return Prepare("allreduce", [&](Pieces& pieces) {
      for (int64_t off = 0; off < count; off += kMaxPiece) {
        const int len = static_cast<int>(std::min(count - off, kMaxPiece));
        std::vector<T*> ptrs{static_cast<T*>(data) + off};
        const bool small = static_cast<size_t>(len) * sizeof(T) < kLargeBytes;
        const std::string& a = o_.algorithm;
        if (a == "bcube") {
          pieces.push_back(std::make_unique<gloo::AllreduceBcube<T>>(ctx_, ptrs, len));
        } else if (a == "halving_doubling") {
          pieces.push_back(std::make_unique<gloo::AllreduceHalvingDoubling<T>>(ctx_, ptrs, len));
        } else if (small) {
          pieces.push_back(std::make_unique<gloo::AllreduceRing<T>>(ctx_, ptrs, len));
          // The plain ring sums on every rank in that rank's own order: with
          // three ranks or more, rounding gives floats different bits on
          // different ranks (replicas would drift apart). Rank 0's sum then
          // goes to all (a + b == b + a, so two ranks agree already).
          if (o_.size > 2 && !std::is_integral_v<T>)
            pieces.push_back(std::make_unique<gloo::BroadcastOneToAll<T>>(ctx_, ptrs, len, 0, 0));
        } else {
          pieces.push_back(std::make_unique<gloo::AllreduceRingChunked<T>>(ctx_, ptrs, len));
        }
      }
    }, static_cast<size_t>(count) * sizeof(T));
  }

  // This process's rank as messages name it.
  int Me() const { return o_.names.empty() ? o_.rank : o_.names[static_cast<size_t>(o_.rank)]; }

  // After a failed transfer: close, report, name the missing ranks, throw.
  [[noreturn]] void Fail(const char* what, const std::string& cause) {
    const auto started = std::chrono::steady_clock::now();
    const bool timed_out = cause.find("imed out") != std::string::npos || cause.find("imeout") != std::string::npos;
    try {
      ctx_->closeConnections();  // peers blocked on this process fail now, not at their timeout
    } catch (...) {
    }
    std::vector<int> missing;
    try {
      store_->Set("failed/" + std::to_string(o_.rank), cause);
      missing = store_->MissingRanks("failed/", o_.size, kRollCallGrace);
    } catch (const std::exception& e) {
      DP_LOG(kWarning, "dp: rank ", Me(), ": the failure roll call at ", store_->url(), " failed: ", e.what());
    }
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    std::string who = missing.empty()
                          ? std::string("every rank reported the failure (cause unknown)")
                          : StrCat(RankList(missing, o_.names), missing.size() > 1 ? " are" : " is",
                                   " missing (dead or stalled: no report within ", waited, " ms)");
    broken_ = std::make_unique<Error>(
        timed_out ? Code::kTimeout : Code::kUnavailable,
        StrCat("gloo ", what, " on rank ", Me(), " of ", o_.size, " failed",
               timed_out ? StrCat(" after the ", o_.timeout.count(), " ms timeout") : std::string(), ": ", who,
               "; the communicator is closed (", cause, ")"));
    throw *broken_;
  }

  std::shared_ptr<Store> store_;
  const GlooOptions o_;
  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  std::mutex mu_;
  std::unique_ptr<Error> broken_;
};

void GlooPrepared::Run() {
  comm_->Call(what_, [&] {
    for (auto& piece : pieces_) piece->run();
  });
  if (allreduce_bytes_ > 0) comm_->CountAllreduce(allreduce_bytes_);
}

void GlooReduceScatter::Reduce() {
  if (n_ == 1 || count_ == 0) return;
  comm_->Call("reduce-scatter", [&] {
    exchange_->Run([&] {
      WithProcessSumType(dtype_, "gloo reduce-scatter",
                         [&](auto zero) { ReduceInto<decltype(zero)>(bufs_.data(), n_, me_, 0, count_); });
    });
  });
}

void GlooDirectAllreduce::Run() {
  if (n_ == 1 || count_ == 0) return;
  comm_->Call("allreduce", [&] {
    scatter_->Run(
        [&] {
          if (mine_ > 0)
            WithProcessSumType(dtype_, "gloo allreduce",
                               [&](auto zero) { ReduceInto<decltype(zero)>(bufs_.data(), n_, me_, 0, mine_); });
        },
        false);  // the all-gather's round ends the run
    gather_->Run([] {});
  });
  comm_->CountAllreduce(static_cast<size_t>(count_) * DTypeSize(dtype_));
}

void GlooAllgather::Run(const ResultSink& sink) {
  std::exception_ptr error;
  auto hand_out = [&] {
    try {
      for (int p = 0; p < n_; ++p) {
        const size_t at = nbytes_ * static_cast<size_t>(p);
        sink(p == me_ ? in_.data() : out_.data() + at, at, nbytes_);
      }
    } catch (...) {
      error = std::current_exception();
    }
  };
  if (n_ == 1 || nbytes_ == 0)
    hand_out();
  else
    comm_->Call("allgather", [&] { exchange_->Run(hand_out); });
  if (error) std::rethrow_exception(error);
}

}  // namespace

std::unique_ptr<Communicator> ConnectGloo(std::shared_ptr<Store> store, const GlooOptions& options) {
  DP_ENFORCE(options.size >= 1, "world size ", options.size, " must be >= 1");
  DP_ENFORCE(options.rank >= 0 && options.rank < options.size, "rank ", options.rank, " is out of range for world size ",
             options.size);
  DP_ENFORCE(options.timeout.count() > 0, "timeout ", options.timeout.count(), " ms must be positive");
  DP_ENFORCE(IsGlooAlgorithm(options.algorithm),
             "unknown Gloo allreduce algorithm '", options.algorithm,
             "' (auto, ring, halving_doubling, bcube or direct)");
  DP_ENFORCE(options.names.empty() || options.names.size() == static_cast<size_t>(options.size), "gloo: ",
             options.names.size(), " rank names for ", options.size, " processes");
  DP_ENFORCE_CODE(store != nullptr, Code::kInvalidArgument, "no store to meet the other processes");
  auto comm = std::make_unique<GlooCommunicator>(std::move(store), options);
  comm->Connect();
  return comm;
}

}  // namespace dp
