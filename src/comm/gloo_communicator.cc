#include "comm/gloo_communicator.h"

#include <csignal>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include "core/error.h"
#include "core/logging.h"

namespace dp {
namespace {

// How long a failing process waits for the other survivors' reports before
// it names the ranks that sent none. Survivors report within milliseconds of
// each other (the first one closes its connections, which fails the others'
// pending transfers), so this is only an upper bound.
constexpr auto kRollCallGrace = std::chrono::milliseconds(500);

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

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

template <typename T>
void SetSum(gloo::AllreduceOptions& opts) {
  opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>));
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<Store> store, const GlooOptions& o) : store_(std::move(store)), o_(o) {}

  void Connect() {
    IgnoreSigpipeOnce();
    const auto deadline = std::chrono::steady_clock::now() + o_.timeout;
    // Arrival first, so that a missing process is named (Gloo's own
    // rendezvous only says that a key is missing).
    store_->Set("arrived/" + std::to_string(o_.rank), "1");
    std::vector<std::string> keys;
    for (int r = 0; r < o_.size; ++r) keys.push_back("arrived/" + std::to_string(r));
    if (!store_->WaitFor(keys, o_.timeout)) {
      std::vector<int> missing;
      for (int r = 0; r < o_.size; ++r)
        if (!store_->Has({keys[static_cast<size_t>(r)]})) missing.push_back(r);
      DP_THROW(Code::kTimeout, "rendezvous at ", store_->url(), ": rank ", o_.rank, " of ", o_.size,
               " waited ", o_.timeout.count(), " ms, but rank", missing.size() > 1 ? "s " : " ", RankList(missing),
               " did not arrive");
    }
    try {
      gloo::transport::tcp::attr attr;
      if (!o_.interface.empty()) attr.iface = o_.interface;
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto ctx = std::make_shared<gloo::rendezvous::Context>(o_.rank, o_.size);
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      ctx->setTimeout(std::max(left, std::chrono::milliseconds(1000)));
      ctx->connectFullMesh(store_->gloo(), device);
      ctx->setTimeout(o_.timeout);
      ctx_ = std::move(ctx);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      DP_THROW(Code::kUnavailable, "rendezvous at ", store_->url(), ": rank ", o_.rank, " of ", o_.size,
               " could not connect to its peers", o_.interface.empty() ? "" : " on interface " + o_.interface,
               ": ", e.what());
    }
  }

  ~GlooCommunicator() override = default;

  int rank() const override { return o_.rank; }
  int size() const override { return o_.size; }
  std::chrono::milliseconds timeout() const override { return o_.timeout; }
  const char* backend() const override { return "gloo"; }

  void AllreduceSum(void* data, int64_t count, DType dtype) override {
    DP_ENFORCE(count >= 0, "AllreduceSum: negative count ", count);
    Call("allreduce", [&] {
      if (count == 0) return;
      gloo::AllreduceOptions opts(ctx_);
      opts.setTag(NextTag());
      opts.setTimeout(o_.timeout);
      if (o_.algorithm == "bcube") opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
      const auto n = static_cast<size_t>(count);
      switch (dtype) {
        case DType::kFloat32: opts.setOutput(static_cast<float*>(data), n); SetSum<float>(opts); break;
        case DType::kFloat64: opts.setOutput(static_cast<double*>(data), n); SetSum<double>(opts); break;
        case DType::kInt32: opts.setOutput(static_cast<int32_t*>(data), n); SetSum<int32_t>(opts); break;
        case DType::kInt64: opts.setOutput(static_cast<int64_t*>(data), n); SetSum<int64_t>(opts); break;
        default:
          DP_THROW(Code::kDType, "AllreduceSum across processes supports float32, float64, int32 and int64, got ",
                   DTypeName(dtype));
      }
      gloo::allreduce(opts);
    });
  }

  void Broadcast(void* data, size_t nbytes, int root) override {
    DP_ENFORCE(root >= 0 && root < o_.size, "Broadcast: root rank ", root, " is out of range for ", o_.size,
               " processes");
    Call("broadcast", [&] {
      if (nbytes == 0) return;
      gloo::BroadcastOptions opts(ctx_);
      opts.setTag(NextTag());
      opts.setTimeout(o_.timeout);
      opts.setRoot(root);
      opts.setOutput(static_cast<char*>(data), nbytes);
      gloo::broadcast(opts);
    });
  }

  void Allgather(const void* in, void* out, size_t nbytes) override {
    Call("allgather", [&] {
      if (nbytes == 0) return;
      gloo::AllgatherOptions opts(ctx_);
      opts.setTag(NextTag());
      opts.setTimeout(o_.timeout);
      opts.setInput(const_cast<char*>(static_cast<const char*>(in)), nbytes);
      opts.setOutput(static_cast<char*>(out), nbytes * static_cast<size_t>(o_.size));
      gloo::allgather(opts);
    });
  }

  void ReduceScatterSum(void* data, int64_t count, DType dtype) override {
    // Gloo 0.5 has no reduce-scatter in its bounded (options) API: the
    // allreduce of all blocks leaves this rank's block summed too.
    DP_ENFORCE(count >= 0, "ReduceScatterSum: negative count ", count);
    AllreduceSum(data, count * o_.size, dtype);
  }

  void Barrier() override {
    Call("barrier", [&] {
      gloo::BarrierOptions opts(ctx_);
      opts.setTag(NextTag());
      opts.setTimeout(o_.timeout);
      gloo::barrier(opts);
    });
  }

 private:
  uint32_t NextTag() { return tag_++; }

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
      std::vector<std::string> keys;
      for (int r = 0; r < o_.size; ++r) keys.push_back("failed/" + std::to_string(r));
      store_->WaitFor(keys, kRollCallGrace);
      for (int r = 0; r < o_.size; ++r)
        if (!store_->Has({keys[static_cast<size_t>(r)]})) missing.push_back(r);
    } catch (const std::exception& e) {
      DP_LOG(kWarning, "dp: rank ", o_.rank, ": the failure roll call at ", store_->url(), " failed: ", e.what());
    }
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    std::string who = missing.empty()
                          ? std::string("every rank reported the failure (cause unknown)")
                          : StrCat("rank", missing.size() > 1 ? "s " : " ", RankList(missing),
                                   missing.size() > 1 ? " are" : " is", " missing (dead or stalled: no report within ",
                                   waited, " ms)");
    broken_ = std::make_unique<Error>(
        timed_out ? Code::kTimeout : Code::kUnavailable,
        StrCat("gloo ", what, " on rank ", o_.rank, " of ", o_.size, " failed",
               timed_out ? StrCat(" after the ", o_.timeout.count(), " ms timeout") : std::string(), ": ", who,
               "; the communicator is closed (", cause, ")"));
    throw *broken_;
  }

  std::shared_ptr<Store> store_;
  const GlooOptions o_;
  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  std::mutex mu_;
  uint32_t tag_ = 0;
  std::unique_ptr<Error> broken_;
};

}  // namespace

std::unique_ptr<Communicator> ConnectGloo(std::shared_ptr<Store> store, const GlooOptions& options) {
  DP_ENFORCE(options.size >= 1, "world size ", options.size, " must be >= 1");
  DP_ENFORCE(options.rank >= 0 && options.rank < options.size, "rank ", options.rank, " is out of range for world size ",
             options.size);
  DP_ENFORCE(options.timeout.count() > 0, "timeout ", options.timeout.count(), " ms must be positive");
  DP_ENFORCE(options.algorithm == "ring" || options.algorithm == "bcube", "unknown Gloo allreduce algorithm '",
             options.algorithm, "' (ring or bcube)");
  DP_ENFORCE_CODE(store != nullptr, Code::kInvalidArgument, "no store to meet the other processes");
  auto comm = std::make_unique<GlooCommunicator>(std::move(store), options);
  comm->Connect();
  return comm;
}

}  // namespace dp
