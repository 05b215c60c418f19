#include "comm/shm_communicator.h"

#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include "comm/sum_types.h"
#include "core/cpu_relax.h"
#include "core/logging.h"

namespace dp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kShmMagic = 0x647073686d303031ull;  // "dpshm001"
constexpr uint32_t kAbortWriting = 0xffffffffu;
constexpr size_t kReasonBytes = 1024;
constexpr size_t kPage = 4096;
// A waiter spins this long before it sleeps: peers of one step arrive within
// microseconds of each other, and a futex wake-up costs tens of them; longer
// spins would take the core from the process's other threads (backward).
constexpr auto kSpin = std::chrono::microseconds(10);
// How much longer than the timeout a process waits on a peer whose step
// includes a collective across hosts: that peer's own (Gloo) failure, which
// names the missing rank, comes within the timeout plus its roll call
// (0.5 s), and is then published here; waiting less would blame the peer.
constexpr auto kAcrossGrace = std::chrono::milliseconds(750);

size_t AlignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

bool Reached(uint32_t value, uint32_t target) { return static_cast<int32_t>(value - target) >= 0; }

long Futex(uint32_t* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

int PidfdOpen(int pid) {
#ifdef SYS_pidfd_open
  const long fd = syscall(SYS_pidfd_open, pid, 0);
  return fd < 0 ? -1 : static_cast<int>(fd);
#else
  (void)pid;
  return -1;
#endif
}

// Without a pidfd: gone when the pid is free or a zombie.
bool ProcessGone(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

}  // namespace

// ---- the shared layout ----------------------------------------------------------

// Words of shared memory are plain integers that every access reaches
// through std::atomic_ref: the kernel zero-fills the segment, and no
// process constructs objects in it that another would read.
using Word = std::atomic_ref<uint32_t>;

// One per process, on its own cache line: only its owner writes seq.
struct alignas(64) ShmSlot {
  uint32_t seq_word;      // the last phase this process posted (a futex word)
  uint32_t waiters_word;  // processes sleeping on seq (the poster wakes them)
  uint32_t left_word;     // 1: it closed its communicator
  Word seq() { return Word(seq_word); }
  Word waiters() { return Word(waiters_word); }
  Word left() { return Word(left_word); }
};

struct ShmCommunicator::Shared {
  // Written by local rank 0 before it publishes the segment's name, magic last.
  uint64_t magic;
  uint64_t nonce;
  uint32_t size;
  // 0; kAbortWriting while the first failing process writes its error;
  // then 1 + its local rank, with abort_code and abort_reason.
  alignas(64) uint32_t abort_word;
  int32_t abort_code;
  char abort_reason[kReasonBytes];

  static size_t SlotsOffset() { return AlignUp(sizeof(Shared), 64); }
  static size_t ScratchOffset(int size) {
    return AlignUp(SlotsOffset() + sizeof(ShmSlot) * static_cast<size_t>(size), kPage);
  }
  static size_t Bytes(int size) { return ScratchOffset(size) + kScratchBytes * static_cast<size_t>(size); }
  Word abort_state() { return Word(abort_word); }
  ShmSlot& slot(int r) { return reinterpret_cast<ShmSlot*>(reinterpret_cast<char*>(this) + SlotsOffset())[r]; }
  // Process r's scratch region, of `size` processes.
  char* scratch(int size, int r) {
    return reinterpret_cast<char*>(this) + ScratchOffset(size) + kScratchBytes * static_cast<size_t>(r);
  }
};

struct ShmCommunicator::Regions {
  ShmSegment segment;          // empty for the scratch regions (in the control segment)
  std::vector<char*> base;     // per local rank
  bool used = false;
  uint32_t released = 0;       // the phase that releases the last run's reads of these regions
};

// ---- connecting ---------------------------------------------------------------

std::unique_ptr<ShmCommunicator> ShmCommunicator::Connect(std::shared_ptr<Store> store, const ShmOptions& options) {
  DP_ENFORCE(options.size >= 1, "shm: size ", options.size, " must be >= 1");
  DP_ENFORCE(options.rank >= 0 && options.rank < options.size, "shm: rank ", options.rank, " is out of range for ",
             options.size, " processes");
  DP_ENFORCE(options.names.empty() || options.names.size() == static_cast<size_t>(options.size),
             "shm: ", options.names.size(), " rank names for ", options.size, " processes");
  DP_ENFORCE(options.timeout.count() > 0, "shm: timeout ", options.timeout.count(), " ms must be positive");
  DP_ENFORCE_CODE(store != nullptr, Code::kInvalidArgument, "shm: no store to meet the other processes");
  std::unique_ptr<ShmCommunicator> comm(new ShmCommunicator(std::move(store), options));
  comm->Rendezvous();
  return comm;
}

ShmCommunicator::ShmCommunicator(std::shared_ptr<Store> store, const ShmOptions& options)
    : store_(std::move(store)), o_(options) {}

std::string ShmCommunicator::Name(int r) const {
  return StrCat("rank ", o_.names.empty() ? r : o_.names[static_cast<size_t>(r)]);
}

void ShmCommunicator::Rendezvous() {
  const size_t bytes = Shared::Bytes(o_.size);
  std::string name;
  uint64_t nonce = 0;
  if (o_.rank == 0) {
    control_ = ShmSegment::Create(bytes);
    std::random_device rd;
    nonce = (uint64_t{rd()} << 32) ^ rd();
    auto* s = reinterpret_cast<Shared*>(control_.data());  // zero-filled
    std::atomic_ref<uint32_t>(s->size).store(static_cast<uint32_t>(o_.size), std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(s->nonce).store(nonce, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(s->magic).store(kShmMagic, std::memory_order_release);
    store_->Set("control", StrCat(control_.name(), " ", nonce));
  } else {
    if (!store_->WaitFor({"control"}, o_.timeout))
      DP_THROW(Code::kTimeout, "shm rendezvous at ", store_->url(), ": ", Name(o_.rank), " waited ",
               o_.timeout.count(), " ms, but ", Name(0), " did not arrive");
    std::istringstream in(store_->Get("control"));
    in >> name >> nonce;
    control_ = ShmSegment::Open(name, bytes);
    auto* s = reinterpret_cast<Shared*>(control_.data());
    const bool same = std::atomic_ref<uint64_t>(s->magic).load(std::memory_order_acquire) == kShmMagic &&
                      std::atomic_ref<uint64_t>(s->nonce).load(std::memory_order_relaxed) == nonce &&
                      std::atomic_ref<uint32_t>(s->size).load(std::memory_order_relaxed) ==
                          static_cast<uint32_t>(o_.size);
    DP_ENFORCE_CODE(same,
                    Code::kUnavailable, "shm rendezvous: ", name, " is not the segment ", Name(0),
                    " made (another job's, or processes on different hosts)");
  }
  shared_ = reinterpret_cast<Shared*>(control_.data());
  store_->Set(StrCat("attached/", o_.rank), std::to_string(getpid()));
  const std::vector<int> missing = store_->MissingRanks("attached/", o_.size, o_.timeout);
  if (!missing.empty())
    DP_THROW(Code::kTimeout, "shm rendezvous at ", store_->url(), ": ", Name(o_.rank), " waited ",
             o_.timeout.count(), " ms, but ", RankList(missing, o_.names), " did not arrive");
  control_.Unlink();  // every process has it mapped
  pids_.resize(static_cast<size_t>(o_.size));
  pidfds_.assign(static_cast<size_t>(o_.size), -1);
  for (int r = 0; r < o_.size; ++r) {
    const int pid = std::stoi(store_->Get(StrCat("attached/", r)));
    pids_[static_cast<size_t>(r)] = pid;
    if (pid != getpid()) pidfds_[static_cast<size_t>(r)] = PidfdOpen(pid);
  }
  scratch_ = std::make_unique<Regions>();
  for (int r = 0; r < o_.size; ++r) scratch_->base.push_back(shared_->scratch(o_.size, r));
}

ShmCommunicator::~ShmCommunicator() {
  if (shared_ != nullptr) {
    ShmSlot& mine = shared_->slot(o_.rank);
    mine.left().store(1, std::memory_order_seq_cst);
    // Peers sleeping on this process's word look again and see it left.
    Futex(&mine.seq_word, FUTEX_WAKE, INT_MAX, nullptr);
  }
  for (int fd : pidfds_)
    if (fd >= 0) close(fd);
}

// ---- waiting and failing ----------------------------------------------------------

void ShmCommunicator::Post(uint32_t value) {
  ShmSlot& mine = shared_->slot(o_.rank);
  mine.seq().store(value, std::memory_order_seq_cst);
  // Pairs with a waiter's increment of `waiters` before it loads seq: either
  // it sees the new value or this sees it waiting.
  if (mine.waiters().load(std::memory_order_seq_cst) > 0) Futex(&mine.seq_word, FUTEX_WAKE, INT_MAX, nullptr);
}

bool ShmCommunicator::PeerGone(int peer, std::string* why) {
  if (shared_->slot(peer).left().load(std::memory_order_acquire) != 0) {
    *why = "it closed its communicator";
    return true;
  }
  const int pid = pids_[static_cast<size_t>(peer)];
  const int fd = pidfds_[static_cast<size_t>(peer)];
  bool gone = false;
  if (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    gone = poll(&p, 1, 0) > 0;
  } else if (pid != getpid()) {
    gone = ProcessGone(pid);
  }
  if (gone) *why = StrCat("its process ", pid, " exited");
  return gone;
}

void ShmCommunicator::CheckAborted(const char* what) {
  uint32_t state = shared_->abort_state().load(std::memory_order_acquire);
  if (state == 0) return;
  // The first failing process is writing its reason: a few microseconds.
  for (auto until = Clock::now() + std::chrono::milliseconds(10); state == kAbortWriting && Clock::now() < until;)
    state = shared_->abort_state().load(std::memory_order_acquire);
  Code code = Code::kUnavailable;
  std::string reason = "no reason recorded";
  std::string who = "a process";
  if (state != kAbortWriting) {
    code = static_cast<Code>(shared_->abort_code);
    reason.assign(shared_->abort_reason, strnlen(shared_->abort_reason, kReasonBytes));
    who = Name(static_cast<int>(state) - 1);
  }
  broken_ = std::make_unique<Error>(code, StrCat("shm ", what, " on ", Name(o_.rank), " failed: ", who,
                                                 " failed first: ", reason));
  throw *broken_;
}

void ShmCommunicator::Publish(Code code, const std::string& message) noexcept {
  uint32_t expected = 0;
  if (!shared_->abort_state().compare_exchange_strong(expected, kAbortWriting)) return;  // someone was first
  shared_->abort_code = static_cast<int32_t>(code);
  const size_t n = std::min(message.size(), kReasonBytes - 1);
  std::memcpy(shared_->abort_reason, message.data(), n);
  shared_->abort_reason[n] = '\0';
  shared_->abort_state().store(static_cast<uint32_t>(o_.rank) + 1, std::memory_order_release);
  WakeAll();
}

void ShmCommunicator::WakeAll() noexcept {
  for (int r = 0; r < o_.size; ++r) Futex(&shared_->slot(r).seq_word, FUTEX_WAKE, INT_MAX, nullptr);
}

void ShmCommunicator::Fail(Code code, const std::string& message) {
  const std::string full = StrCat(message, "; the communicator is closed");
  Publish(code, full);
  broken_ = std::make_unique<Error>(code, full);
  throw *broken_;
}

void ShmCommunicator::WaitFor(int peer, uint32_t target, const char* what, std::chrono::milliseconds grace) {
  ShmSlot& slot = shared_->slot(peer);
  Word seq = slot.seq();
  if (Reached(seq.load(std::memory_order_acquire), target)) return;
  const auto start = Clock::now();
  const auto spin_until = start + kSpin;
  for (int i = 1;; ++i) {
    CpuRelax();
    if (Reached(seq.load(std::memory_order_acquire), target)) return;
    if ((i & 63) == 0 && Clock::now() >= spin_until) break;
  }
  const auto deadline = start + o_.timeout + grace;
  Word waiters = slot.waiters();
  for (;;) {
    CheckAborted(what);
    std::string why;
    if (PeerGone(peer, &why)) {
      if (Reached(seq.load(std::memory_order_acquire), target)) return;  // posted before it went
      Fail(Code::kUnavailable, StrCat("shm ", what, " on ", Name(o_.rank), " failed: ", Name(peer),
                                      " is missing (", why, ")"));
    }
    const auto now = Clock::now();
    if (now >= deadline)
      Fail(Code::kTimeout, StrCat("shm ", what, " on ", Name(o_.rank), " failed after the ", o_.timeout.count(),
                                  " ms timeout: ", Name(peer), " is missing (alive, but it did not arrive: ",
                                  "stalled)"));
    const auto slice = std::min<Clock::duration>(deadline - now, kWaitSlice);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count();
    timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = seq.load(std::memory_order_seq_cst);
    if (!Reached(seen, target)) Futex(&slot.seq_word, FUTEX_WAIT, seen, &ts);
    waiters.fetch_sub(1, std::memory_order_release);
    if (Reached(seq.load(std::memory_order_acquire), target)) return;
  }
}

void ShmCommunicator::WaitAll(uint32_t target, const char* what, std::chrono::milliseconds grace) {
  for (int r = 0; r < o_.size; ++r)
    if (r != o_.rank) WaitFor(r, target, what, grace);
}

void ShmCommunicator::Acquire(Regions& regions, const char* what) {
  if (regions.used) WaitAll(regions.released, what);
}

template <typename Body>
void ShmCommunicator::Call(const char* what, const Body& body) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) throw *broken_;
  in_collective_ = false;
  try {
    body();
  } catch (const std::exception& e) {
    // A failure after the peers were involved: they cannot finish this
    // collective, so they must fail too (argument errors come before).
    if (in_collective_ && !broken_) {
      const auto* err = dynamic_cast<const Error*>(&e);
      const Code code = err != nullptr ? err->code() : Code::kUnavailable;
      const std::string message = StrCat("shm ", what, " on ", Name(o_.rank), " failed: ", e.what());
      Publish(code, message);
      broken_ = std::make_unique<Error>(code, message);
      throw *broken_;
    }
    throw;
  }
}

// ---- the collectives over regions (mu_ held) ------------------------------------------

void ShmCommunicator::SliceOf(int64_t count, size_t itemsize, int parts, int r, int64_t* lo, int64_t* hi) {
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(64 / itemsize));
  int64_t per = (count + parts - 1) / parts;
  per = (per + grain - 1) / grain * grain;
  *lo = std::min(count, per * r);
  *hi = std::min(count, *lo + per);
}

ShmCommunicator::Regions ShmCommunicator::ShareRegions(size_t per_process, const char* what) {
  Regions regions;
  const size_t stride = AlignUp(std::max<size_t>(per_process, 1), kPage);
  const size_t total = stride * static_cast<size_t>(o_.size);
  const std::string key = StrCat("segment/", segments_++);
  if (o_.rank == 0) {
    try {
      DP_ENFORCE_CODE(o_.max_bytes == 0 || (total <= o_.max_bytes && shared_bytes_ <= o_.max_bytes - total),
                      Code::kOutOfMemory, "shared memory: the collectives of this host's processes would hold ",
                      ByteSize(static_cast<double>(shared_bytes_ + total)), ", over their limit of ",
                      ByteSize(static_cast<double>(o_.max_bytes)));
      regions.segment = ShmSegment::Create(total);
      shared_bytes_ += total;
    } catch (const Error& e) {
      // The others fail with the same error, not with a timeout.
      store_->Set(key, StrCat("error ", static_cast<int>(e.code()), " ", e.message()));
      throw;
    }
    store_->Set(key, "ok " + regions.segment.name());
  } else {
    if (!store_->WaitFor({key}, o_.timeout))
      Fail(Code::kTimeout, StrCat("shm ", what, " on ", Name(o_.rank), ": ", Name(0), " did not share the ",
                                  "collective's memory within the ", o_.timeout.count(), " ms timeout"));
    const std::string value = store_->Get(key);
    if (value.rfind("error ", 0) == 0) {
      std::istringstream in(value.substr(6));
      int code = static_cast<int>(Code::kUnavailable);
      in >> code;
      std::string message;
      std::getline(in, message);
      throw Error(static_cast<Code>(code), message.empty() ? message : message.substr(1));
    }
    regions.segment = ShmSegment::Open(value.substr(3), total);
  }
  // Unlinked once every process has it mapped: nothing stays in /dev/shm.
  store_->Set(StrCat(key, "/open/", o_.rank), "1");
  if (o_.rank == 0) {
    const std::vector<int> missing = store_->MissingRanks(StrCat(key, "/open/"), o_.size, o_.timeout);
    if (!missing.empty())
      Fail(Code::kTimeout, StrCat("shm ", what, " on ", Name(o_.rank), ": ", RankList(missing, o_.names),
                                  " did not map the collective's memory within the ", o_.timeout.count(),
                                  " ms timeout"));
    regions.segment.Unlink();
  }
  for (int r = 0; r < o_.size; ++r) regions.base.push_back(regions.segment.data() + stride * static_cast<size_t>(r));
  return regions;
}

void ShmCommunicator::AllreduceLocked(Regions& rg, int64_t count, DType dtype, const SliceStep* across,
                                      PreparedCollective* across_prepared, const ResultSink& sink,
                                      const char* what) {
  const size_t item = DTypeSize(dtype);
  const int me = o_.rank, parts = o_.size;
  CountAllreduce(static_cast<size_t>(count) * item);
  const uint32_t base = 3 * ++op_;
  const bool hosts = across != nullptr || across_prepared != nullptr;
  in_collective_ = true;
  Post(base + 1);  // this process's part is in its region
  WaitAll(base + 1, what);
  int64_t lo, hi;
  SliceOf(count, item, parts, me, &lo, &hi);
  if (parts > 1 && hi > lo)
    WithProcessSumType(dtype, "shm allreduce", [&](auto zero) {
      ReduceInto<decltype(zero)>(rg.base.data(), parts, me, lo, hi);
    });
  char* mine = rg.base[static_cast<size_t>(me)] + static_cast<size_t>(lo) * item;
  if (across != nullptr) (*across)(mine, lo, hi - lo);
  if (across_prepared != nullptr) across_prepared->Run();
  Post(base + 2);  // slice `me` is final
  WaitAll(base + 2, what, hosts ? kAcrossGrace : std::chrono::milliseconds(0));
  HandOut(rg, base, [&] {
    for (int s = 0; s < parts; ++s) {
      SliceOf(count, item, parts, s, &lo, &hi);
      sink(rg.base[static_cast<size_t>(s)] + static_cast<size_t>(lo) * item, static_cast<size_t>(lo) * item,
           static_cast<size_t>(hi - lo) * item);
    }
  });
}

template <typename Read>
void ShmCommunicator::HandOut(Regions& rg, uint32_t base, const Read& read) {
  rg.used = true;
  rg.released = base + 3;
  in_collective_ = false;  // complete: an error of `read` (a caller's sink) is the caller's alone
  std::exception_ptr error;
  try {
    read();
  } catch (...) {
    error = std::current_exception();
  }
  Post(base + 3);  // done reading the others' regions
  if (error) std::rethrow_exception(error);
}

void ShmCommunicator::BroadcastLocked(Regions& rg, size_t nbytes, int root, const RootStep* across,
                                      PreparedCollective* across_prepared, const ResultSink& sink,
                                      const char* what) {
  const uint32_t base = 3 * ++op_;
  const bool hosts = across != nullptr || across_prepared != nullptr;
  char* data = rg.base[static_cast<size_t>(root)];
  in_collective_ = true;
  if (o_.rank == root) {
    if (across != nullptr) (*across)(data, nbytes);
    if (across_prepared != nullptr) across_prepared->Run();
  }
  Post(base + 1);  // the root: its data is in its region
  if (o_.rank != root) WaitFor(root, base + 1, what, hosts ? kAcrossGrace : std::chrono::milliseconds(0));
  HandOut(rg, base, [&] { sink(data, 0, nbytes); });
}

// ---- prepared collectives -----------------------------------------------------------

class ShmCommunicator::BufferedAllreduce final : public BufferedCollective {
 public:
  BufferedAllreduce(ShmCommunicator* comm, Regions regions, int64_t count, DType dtype,
                    std::unique_ptr<PreparedCollective> across)
      : comm_(comm), regions_(std::move(regions)), count_(count), dtype_(dtype), across_(std::move(across)) {}

  void* input() override {
    comm_->Call("allreduce", [&] { comm_->Acquire(regions_, "allreduce"); });
    return regions_.base[static_cast<size_t>(comm_->o_.rank)];
  }
  void Run(const ResultSink& sink) override {
    comm_->Call("allreduce", [&] {
      comm_->AllreduceLocked(regions_, count_, dtype_, nullptr, across_.get(), sink, "allreduce");
    });
  }

 private:
  ShmCommunicator* comm_;  // outlives this (prepared collectives belong to ops holding the communicator)
  Regions regions_;
  const int64_t count_;
  const DType dtype_;
  std::unique_ptr<PreparedCollective> across_;  // this process's slice across hosts, or null
};

class ShmCommunicator::BufferedBroadcast final : public BufferedCollective {
 public:
  BufferedBroadcast(ShmCommunicator* comm, Regions regions, size_t nbytes, int root,
                    std::unique_ptr<PreparedCollective> across)
      : comm_(comm), regions_(std::move(regions)), nbytes_(nbytes), root_(root), across_(std::move(across)) {}

  void* input() override {
    // Only the root writes (its region); the others' input is unused.
    if (comm_->o_.rank == root_) comm_->Call("broadcast", [&] { comm_->Acquire(regions_, "broadcast"); });
    return regions_.base[static_cast<size_t>(comm_->o_.rank)];
  }
  void Run(const ResultSink& sink) override {
    comm_->Call("broadcast", [&] {
      comm_->BroadcastLocked(regions_, nbytes_, root_, nullptr, across_.get(), sink, "broadcast");
    });
  }

 private:
  ShmCommunicator* comm_;
  Regions regions_;
  const size_t nbytes_;
  const int root_;
  std::unique_ptr<PreparedCollective> across_;
};

// Each process sums its own block of the regions (rank order: the
// allreduce's sums) and is handed only that; nobody waits for the others'.
class ShmCommunicator::BufferedReduceScatter final : public BufferedCollective {
 public:
  BufferedReduceScatter(ShmCommunicator* comm, Regions regions, int64_t count, DType dtype)
      : comm_(comm), regions_(std::move(regions)), count_(count), dtype_(dtype) {}

  void* input() override {
    comm_->Call("reduce-scatter", [&] { comm_->Acquire(regions_, "reduce-scatter"); });
    return regions_.base[static_cast<size_t>(comm_->o_.rank)];
  }
  void Run(const ResultSink& sink) override {
    comm_->Call("reduce-scatter", [&] {
      const int me = comm_->o_.rank, parts = comm_->o_.size;
      const size_t item = DTypeSize(dtype_), block = static_cast<size_t>(count_) * item;
      const uint32_t base = 3 * ++comm_->op_;
      comm_->in_collective_ = true;
      comm_->Post(base + 1);  // this process's blocks are in its region
      comm_->WaitAll(base + 1, "reduce-scatter");
      if (parts > 1 && count_ > 0)
        WithProcessSumType(dtype_, "shm reduce-scatter", [&](auto zero) {
          ReduceInto<decltype(zero)>(regions_.base.data(), parts, me, me * count_, (me + 1) * count_);
        });
      comm_->Post(base + 2);
      comm_->HandOut(regions_, base, [&] {
        sink(regions_.base[static_cast<size_t>(me)] + block * static_cast<size_t>(me), block * static_cast<size_t>(me),
             block);
      });
    });
  }

 private:
  ShmCommunicator* comm_;
  Regions regions_;
  const int64_t count_;
  const DType dtype_;
};

// Every process's region, read in place.
class ShmCommunicator::BufferedAllgather final : public BufferedCollective {
 public:
  BufferedAllgather(ShmCommunicator* comm, Regions regions, size_t nbytes)
      : comm_(comm), regions_(std::move(regions)), nbytes_(nbytes) {}

  void* input() override {
    comm_->Call("allgather", [&] { comm_->Acquire(regions_, "allgather"); });
    return regions_.base[static_cast<size_t>(comm_->o_.rank)];
  }
  void Run(const ResultSink& sink) override {
    comm_->Call("allgather", [&] {
      const uint32_t base = 3 * ++comm_->op_;
      comm_->in_collective_ = true;
      comm_->Post(base + 1);
      comm_->WaitAll(base + 1, "allgather");
      comm_->HandOut(regions_, base, [&] {
        for (int s = 0; s < comm_->o_.size; ++s)
          sink(regions_.base[static_cast<size_t>(s)], nbytes_ * static_cast<size_t>(s), nbytes_);
      });
    });
  }

 private:
  ShmCommunicator* comm_;
  Regions regions_;
  const size_t nbytes_;
};

std::unique_ptr<BufferedCollective> ShmCommunicator::PrepareBufferedReduceScatterSum(int64_t count, DType dtype) {
  DP_ENFORCE(count >= 0, "ReduceScatterSum: negative count ", count);
  DP_ENFORCE_CODE(IsProcessSumType(dtype), Code::kDType,
                  "ReduceScatterSum across processes supports float32, float64, int32, int64, bfloat16 and float16, "
                  "got ", DTypeName(dtype));
  const size_t bytes = static_cast<size_t>(count) * DTypeSize(dtype) * static_cast<size_t>(o_.size);
  return SharedOrTcp(
      "reduce-scatter", false,
      [&]() -> std::unique_ptr<BufferedCollective> {
        return std::make_unique<BufferedReduceScatter>(this, ShareRegions(bytes, "reduce-scatter"), count, dtype);
      },
      [&](Communicator& tcp) { return tcp.PrepareBufferedReduceScatterSum(count, dtype); });
}

std::unique_ptr<BufferedCollective> ShmCommunicator::PrepareBufferedAllgather(size_t nbytes) {
  return SharedOrTcp(
      "allgather", false,
      [&]() -> std::unique_ptr<BufferedCollective> {
        return std::make_unique<BufferedAllgather>(this, ShareRegions(nbytes, "allgather"), nbytes);
      },
      [&](Communicator& tcp) { return tcp.PrepareBufferedAllgather(nbytes); });
}

std::unique_ptr<BufferedCollective> ShmCommunicator::PrepareBufferedAllreduceSum(int64_t count, DType dtype) {
  return PrepareBufferedAllreduceSum(count, dtype, SliceStepFactory());
}

Communicator& ShmCommunicator::Fallback(const std::string& why) {
  if (!fallback_) {
    if (o_.rank == 0) DP_LOG(kWarning, "dp: ", why, "; these collectives fall back to TCP between the processes");
    GlooOptions g = o_.tcp;
    g.rank = o_.rank;
    g.size = o_.size;
    g.timeout = o_.timeout;
    g.names = o_.names;
    fallback_ = ConnectGloo(store_->Sub("tcp"), g);
  }
  return *fallback_;
}

std::unique_ptr<BufferedCollective> ShmCommunicator::PrepareBufferedAllreduceSum(int64_t count, DType dtype,
                                                                                 const SliceStepFactory& across) {
  DP_ENFORCE(count >= 0, "AllreduceSum: negative count ", count);
  DP_ENFORCE_CODE(IsProcessSumType(dtype), Code::kDType,
                  "AllreduceSum across processes supports float32, float64, int32, int64, bfloat16 and float16, got ",
                  DTypeName(dtype));
  const size_t item = DTypeSize(dtype);
  return SharedOrTcp(
      "allreduce", static_cast<bool>(across),
      [&]() -> std::unique_ptr<BufferedCollective> {
        Regions regions = ShareRegions(static_cast<size_t>(count) * item, "allreduce");
        std::unique_ptr<PreparedCollective> step;
        if (across) {
          int64_t lo, hi;
          SliceOf(count, item, o_.size, o_.rank, &lo, &hi);
          step = across(regions.base[static_cast<size_t>(o_.rank)] + static_cast<size_t>(lo) * item, lo, hi - lo);
        }
        return std::make_unique<BufferedAllreduce>(this, std::move(regions), count, dtype, std::move(step));
      },
      [&](Communicator& tcp) { return tcp.PrepareBufferedAllreduceSum(count, dtype); });
}

template <typename Share, typename Tcp>
std::unique_ptr<BufferedCollective> ShmCommunicator::SharedOrTcp(const char* what, bool across, const Share& share,
                                                                const Tcp& tcp) {
  std::unique_ptr<BufferedCollective> out;
  try {
    Call(what, [&] { out = share(); });
  } catch (const Error& e) {
    // Every process of the host got the same error from local rank 0.
    if (e.code() != Code::kOutOfMemory || !o_.tcp_fallback || across) throw;
    out = tcp(Fallback(e.message()));
  }
  return out;
}

std::unique_ptr<BufferedCollective> ShmCommunicator::PrepareBufferedBroadcast(size_t nbytes, int root) {
  return PrepareBufferedBroadcast(nbytes, root, RootStepFactory());
}

std::unique_ptr<BufferedCollective> ShmCommunicator::PrepareBufferedBroadcast(size_t nbytes, int root,
                                                                              const RootStepFactory& across) {
  DP_ENFORCE(root >= 0 && root < o_.size, "Broadcast: root rank ", root, " is out of range for ", o_.size,
             " processes");
  return SharedOrTcp(
      "broadcast", static_cast<bool>(across),
      [&]() -> std::unique_ptr<BufferedCollective> {
        Regions regions = ShareRegions(nbytes, "broadcast");
        std::unique_ptr<PreparedCollective> step;
        if (across && o_.rank == root) step = across(regions.base[static_cast<size_t>(root)], nbytes);
        return std::make_unique<BufferedBroadcast>(this, std::move(regions), nbytes, root, std::move(step));
      },
      [&](Communicator& tcp) { return tcp.PrepareBufferedBroadcast(nbytes, root); });
}

std::unique_ptr<PreparedCollective> ShmCommunicator::PrepareAllreduceSum(void* data, int64_t count, DType dtype) {
  auto buffered = PrepareBufferedAllreduceSum(count, dtype);
  return InPlaceThrough(std::move(buffered), data, static_cast<size_t>(count) * DTypeSize(dtype), true);
}

std::unique_ptr<PreparedCollective> ShmCommunicator::PrepareBroadcast(void* data, size_t nbytes, int root) {
  auto buffered = PrepareBufferedBroadcast(nbytes, root);
  return InPlaceThrough(std::move(buffered), data, nbytes, rank() == root);
}

// ---- calls that are not prepared: through the scratch regions, in pieces ------------------

void ShmCommunicator::AllreduceSum(void* data, int64_t count, DType dtype) {
  AllreduceSum(data, count, dtype, SliceStep());
}

void ShmCommunicator::AllreduceSum(void* data, int64_t count, DType dtype, const SliceStep& across) {
  DP_ENFORCE(count >= 0, "AllreduceSum: negative count ", count);
  DP_ENFORCE_CODE(IsProcessSumType(dtype), Code::kDType,
                  "AllreduceSum across processes supports float32, float64, int32, int64, bfloat16 and float16, got ",
                  DTypeName(dtype));
  const size_t item = DTypeSize(dtype);
  const int64_t per = static_cast<int64_t>(kScratchBytes / item);
  char* out = static_cast<char*>(data);
  for (int64_t off = 0; off < count; off += per) {
    const int64_t n = std::min(per, count - off);
    char* chunk = out + static_cast<size_t>(off) * item;
    auto copy = [chunk](const void* piece, size_t at, size_t len) { std::memcpy(chunk + at, piece, len); };
    SliceStep shifted;
    if (across) shifted = [&](void* slice, int64_t lo, int64_t len) { across(slice, off + lo, len); };
    Call("allreduce", [&] {
      Acquire(*scratch_, "allreduce");
      std::memcpy(scratch_->base[static_cast<size_t>(o_.rank)], chunk, static_cast<size_t>(n) * item);
      AllreduceLocked(*scratch_, n, dtype, across ? &shifted : nullptr, nullptr, SinkOf(copy), "allreduce");
    });
  }
}

void ShmCommunicator::Broadcast(void* data, size_t nbytes, int root) { Broadcast(data, nbytes, root, RootStep()); }

void ShmCommunicator::Broadcast(void* data, size_t nbytes, int root, const RootStep& across) {
  DP_ENFORCE(root >= 0 && root < o_.size, "Broadcast: root rank ", root, " is out of range for ", o_.size,
             " processes");
  char* bytes = static_cast<char*>(data);
  const bool sender = o_.rank == root;
  for (size_t off = 0; off < nbytes; off += kScratchBytes) {
    const size_t n = std::min(kScratchBytes, nbytes - off);
    auto copy = [&](const void* piece, size_t at, size_t len) {
      if (!sender || across) std::memcpy(bytes + off + at, piece, len);
    };
    Call("broadcast", [&] {
      if (sender) {
        Acquire(*scratch_, "broadcast");
        std::memcpy(scratch_->base[static_cast<size_t>(root)], bytes + off, n);
      }
      BroadcastLocked(*scratch_, n, root, across ? &across : nullptr, nullptr, SinkOf(copy), "broadcast");
    });
  }
}

void ShmCommunicator::Allgather(const void* in, void* out, size_t nbytes) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  for (size_t off = 0; off < nbytes; off += kScratchBytes) {
    const size_t n = std::min(kScratchBytes, nbytes - off);
    Call("allgather", [&] {
      Acquire(*scratch_, "allgather");
      std::memcpy(scratch_->base[static_cast<size_t>(o_.rank)], src + off, n);
      const uint32_t base = 3 * ++op_;
      in_collective_ = true;
      Post(base + 1);
      WaitAll(base + 1, "allgather");
      HandOut(*scratch_, base, [&] {
        for (int s = 0; s < o_.size; ++s)
          std::memcpy(dst + static_cast<size_t>(s) * nbytes + off, scratch_->base[static_cast<size_t>(s)], n);
      });
    });
  }
}

// Each process sums its own block alone, over the regions in rank order
// (the allreduce's sums, bit for bit), and reads back only that: a piece of
// every block at a time through the scratch regions. Half an allreduce's
// memory traffic, and no wait for the others' sums.
void ShmCommunicator::ReduceScatterSum(void* data, int64_t count, DType dtype) {
  DP_ENFORCE(count >= 0, "ReduceScatterSum: negative count ", count);
  DP_ENFORCE_CODE(IsProcessSumType(dtype), Code::kDType,
                  "ReduceScatterSum across processes supports float32, float64, int32, int64, bfloat16 and float16, "
                  "got ", DTypeName(dtype));
  const size_t item = DTypeSize(dtype);
  const int parts = o_.size, me = o_.rank;
  const int64_t per = std::max<int64_t>(1, static_cast<int64_t>(kScratchBytes / item) / parts);
  char* bytes = static_cast<char*>(data);
  for (int64_t off = 0; off < count; off += per) {
    const int64_t n = std::min(per, count - off);
    const size_t piece = static_cast<size_t>(n) * item;
    Call("reduce-scatter", [&] {
      Acquire(*scratch_, "reduce-scatter");
      char* region = scratch_->base[static_cast<size_t>(me)];
      for (int q = 0; q < parts; ++q)
        std::memcpy(region + static_cast<size_t>(q) * piece,
                    bytes + static_cast<size_t>(static_cast<int64_t>(q) * count + off) * item, piece);
      const uint32_t base = 3 * ++op_;
      in_collective_ = true;
      Post(base + 1);  // this process's blocks are in its region
      WaitAll(base + 1, "reduce-scatter");
      WithProcessSumType(dtype, "shm reduce-scatter", [&](auto zero) {
        ReduceInto<decltype(zero)>(scratch_->base.data(), parts, me, me * n, (me + 1) * n);
      });
      Post(base + 2);  // (the others read nothing of this sum)
      HandOut(*scratch_, base, [&] {
        std::memcpy(bytes + static_cast<size_t>(static_cast<int64_t>(me) * count + off) * item,
                    region + static_cast<size_t>(me) * piece, piece);
      });
    });
  }
}

void ShmCommunicator::Barrier() {
  Call("barrier", [&] {
    const uint32_t base = 3 * ++op_;
    in_collective_ = true;
    Post(base + 3);
    WaitAll(base + 3, "barrier");
  });
}

void ShmCommunicator::Abort(const std::string& why) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (fallback_) fallback_->Abort(why);
  if (broken_ || shared_ == nullptr) return;
  const std::string message = StrCat(why, "; the communicator is closed");
  Publish(Code::kUnavailable, message);
  try {
    broken_ = std::make_unique<Error>(Code::kUnavailable, message);
  } catch (...) {
  }
}

}  // namespace dp
