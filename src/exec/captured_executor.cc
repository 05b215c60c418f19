#include "exec/captured_executor.h"

#include <algorithm>
#include <exception>
#include <set>
#include <utility>

#include "core/error.h"
#include "core/logging.h"
#include "core/storage.h"

namespace dp {
namespace {

// The chains in dependency order (parents first; ties by index).
std::vector<int> ChainOrder(const TaskGraph& graph) {
  const size_t n = graph.chains.size();
  std::vector<int> pending(n);
  std::set<int> ready;
  for (size_t c = 0; c < n; ++c) {
    pending[c] = static_cast<int>(graph.chain_parents[c].size());
    if (pending[c] == 0) ready.insert(static_cast<int>(c));
  }
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int c = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(c);
    for (int child : graph.chain_children[static_cast<size_t>(c)])
      if (--pending[static_cast<size_t>(child)] == 0) ready.insert(child);
  }
  DP_ENFORCE_CODE(order.size() == n, Code::kInternal, "the chains of a net form a cycle");
  return order;
}

std::string MessageOf(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown error";
  }
}

bool IsCancelled(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return x.code() == Code::kCancelled;
  } catch (...) {
    return false;
  }
}

}  // namespace

CapturingExecutor::CapturingExecutor(const std::vector<std::unique_ptr<Operator>>& ops, const TaskGraph& graph,
                                     const CapturePlan& plan, StreamsExecutorFactory make_streams,
                                     CaptureOptions options)
    : make_streams_(std::move(make_streams)), memory_(options.memory), allocations_(std::move(options.allocations)) {
  DP_ENFORCE_CODE(plan.refusal.empty() && !plan.graph.empty(), Code::kInternal,
                  "a net that cannot be captured was given the graph executor");
  const size_t n = graph.chains.size();
  std::vector<char> is_transfer(ops.size(), 0);
  for (int i : plan.transfers) {
    is_transfer[static_cast<size_t>(i)] = 1;
    transfers_.push_back(ops[static_cast<size_t>(i)].get());
  }
  chain_ops_.resize(n);
  for (size_t c = 0; c < n; ++c)
    for (int i : graph.chains[c])
      if (!is_transfer[static_cast<size_t>(i)]) chain_ops_[c].push_back(ops[static_cast<size_t>(i)].get());
  chain_device_ = graph.chain_device;
  const DeviceOption gpu = graph.chain_device[static_cast<size_t>(plan.graph.front())];
  gpu_ = gpu;
  if (!allocations_) allocations_ = [gpu] { return LibraryAllocations(gpu); };
  const int streams = std::max(1, options.streams_per_gpu);
  for (int s = 0; s < streams; ++s) contexts_.push_back(options.make_context(gpu));
  auto new_event = [this] {
    events_.push_back(contexts_[0]->CreateEvent());
    return events_.back().get();
  };

  std::vector<char> in_graph(n, 0), is_before(n, 0), is_after(n, 0);
  for (int c : plan.graph) in_graph[static_cast<size_t>(c)] = 1;
  for (int c : plan.before) is_before[static_cast<size_t>(c)] = 1;
  for (int c : plan.after) is_after[static_cast<size_t>(c)] = 1;
  // Streams: a chain continues on the stream of its first graph parent that
  // no other chain continued yet; any other takes the next stream in turn.
  std::vector<int> stream_of(n, -1), step_of(n, -1);
  std::vector<char> continued(n, 0);
  int next_stream = 0;
  for (int c : ChainOrder(graph)) {
    const size_t cu = static_cast<size_t>(c);
    if (is_before[cu]) before_.push_back(c);
    if (is_after[cu]) after_.push_back(c);
    if (!in_graph[cu]) continue;
    Step step;
    step.chain = c;
    step.stream = -1;
    for (int p : graph.chain_parents[cu]) {
      const size_t pu = static_cast<size_t>(p);
      if (in_graph[pu] && !continued[pu]) {
        continued[pu] = 1;
        step.stream = stream_of[pu];
        break;
      }
    }
    if (step.stream < 0) {
      step.stream = next_stream;
      next_stream = (next_stream + 1) % streams;
    }
    stream_of[cu] = step.stream;
    for (int p : graph.chain_parents[cu]) {
      const size_t pu = static_cast<size_t>(p);
      if (!in_graph[pu] || stream_of[pu] == step.stream) continue;  // host parents are done before the graph
      Step& parent = steps_[static_cast<size_t>(step_of[pu])];
      if (parent.record == nullptr) parent.record = new_event();
      step.waits.push_back(parent.record);
    }
    step_of[cu] = static_cast<int>(steps_.size());
    steps_.push_back(std::move(step));
    for (Operator* op : chain_ops_[cu]) {
      graph_ops_.push_back(op);
      graph_op_indices_.push_back(op->index());
    }
  }
  std::set<int> used;
  for (const Step& s : steps_)
    if (s.stream != 0) used.insert(s.stream);
  fork_ = new_event();
  for (int s : used) joins_.emplace_back(s, new_event());
  done_ = new_event();
}

CapturingExecutor::~CapturingExecutor() = default;

void CapturingExecutor::ResetEvents() {
  for (auto& e : events_) e->Reset();
}

int64_t CapturingExecutor::Since(const RunControl& rc) const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - rc.start).count();
}

CaptureBindings CapturingExecutor::Bindings() const {
  if (memory_ == nullptr) return CaptureBindings::Of(graph_ops_, {}, 0, transfers_);
  return CaptureBindings::Of(graph_ops_, memory_->slots(gpu_), memory_->generation(), transfers_);
}

void CapturingExecutor::RunHost(const std::vector<int>& chains, RunControl& rc) {
  for (int c : chains) {
    CpuContext ctx(chain_device_[static_cast<size_t>(c)]);
    for (Operator* op : chain_ops_[static_cast<size_t>(c)]) RunOp(*op, ctx, rc, 0);
  }
}

void CapturingExecutor::Issue(RunControl& rc) {
  DeviceContext& first = *contexts_[0];
  first.SwitchToDevice();
  // The other streams start after what the first one holds (fed blobs
  // copied in; in a capture, this makes them part of it).
  if (!joins_.empty()) {
    fork_->Record(first);
    for (auto& [s, join] : joins_) fork_->Wait(*contexts_[static_cast<size_t>(s)]);
  }
  for (const Step& step : steps_) {
    DeviceContext& ctx = *contexts_[static_cast<size_t>(step.stream)];
    for (Event* e : step.waits) e->Wait(ctx);
    for (Operator* op : chain_ops_[static_cast<size_t>(step.chain)]) RunOp(*op, ctx, rc, step.stream + 1);
    if (step.record != nullptr) step.record->Record(ctx);
  }
  // ...and end before the first one goes on.
  for (auto& [s, join] : joins_) {
    join->Record(*contexts_[static_cast<size_t>(s)]);
    join->Wait(first);
  }
}

void CapturingExecutor::Launch(RunControl& rc) {
  rc.graph_ops = graph_ops_.size();
  rc.graph_kernels = graph_->kernel_nodes();
  // The graph's device current: a replay runs no op that would make it so,
  // and a profiled launch makes its timing events on the current device.
  contexts_[0]->SwitchToDevice();
  if (rc.timings == nullptr) {
    graph_->Launch(*contexts_[0]);
    return;
  }
  // Profiled: the device's own time for the graph too (its busy time, the
  // kernels running back to back), beside the host's span.
  rc.graph.start_ns = Since(rc);
  graph_->LaunchTimed(*contexts_[0]);
}

void CapturingExecutor::Capture(RunControl& rc) {
  std::unique_ptr<DeviceGraph> recorded;
  std::string failure;
  try {
    // Memory allocated while recorded is baked into the graph without being
    // bound to anything the next runs check (a temporary of a memory plan
    // may even free it after its last use): such a capture is not kept.
    const uint64_t made = allocations_();
    std::vector<DeviceContext*> joining;
    for (size_t s = 1; s < contexts_.size(); ++s) joining.push_back(contexts_[s].get());
    std::unique_ptr<GraphRecording> recording = contexts_[0]->BeginGraphCapture(joining);
    Issue(rc);
    recorded = recording->Finish();
    if (const uint64_t now = allocations_(); now != made)
      failure = StrCat("it allocated ", now - made, " blocks on ", DeviceName(gpu_), " while it was recorded");
  } catch (const Error& e) {
    if (e.code() == Code::kCancelled) throw;
    failure = e.what();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  policy_.AfterRun(decision_, failure.empty(), Bindings(), failure);
  policy_told_ = true;
  if (policy_.has_graph()) {
    graph_ = std::move(recorded);
    Launch(rc);
    return;
  }
  // Nothing recorded ran: this run's results come from the streams. The
  // memory plan counted the recorded issue's accesses; they count again.
  graph_.reset();
  DP_LOG(kInfo, "a net's CUDA graph was not kept: ", policy_.reason());
  if (memory_ != nullptr) memory_->CountAgain(graph_op_indices_);
  ResetEvents();
  Issue(rc);
}

void CapturingExecutor::RunOwn(RunControl& rc) {
  error_ = nullptr;
  policy_told_ = false;
  decision_ = {};
  rc.graph = OpTiming{};
  rc.graph_ops = 0;
  rc.graph_kernels = 0;
  rc.graph_device_us = -1;
  try {
    ResetEvents();
    // The host chains first, then the copies into the GPU: what they write
    // (a batch of another size) is part of the bindings the decision looks at.
    RunHost(before_, rc);
    for (Operator* op : transfers_) RunOp(*op, *contexts_[0], rc, 1);
    decision_ = policy_.BeforeRun(Bindings());
    switch (decision_.action) {
      case CapturePolicy::Action::kStreams:
        Issue(rc);
        break;
      case CapturePolicy::Action::kCapture:
        Capture(rc);
        break;
      case CapturePolicy::Action::kReplay:
        fed_ = CopyRefedInputs(policy_.graph(), decision_.check, *contexts_[0]);
        Launch(rc);
        // The memory plan's bookkeeping, as the capture's issue did it: the
        // blobs' last accesses are over (in the graph, in stream order).
        for (Operator* op : graph_ops_) op->Replayed();
        break;
    }
    // The host chains after the graph (and a profiled graph's span) wait
    // for the device; otherwise Finish does.
    const bool timed = rc.graph.start_ns >= 0;
    if (!after_.empty() || timed) {
      done_->Record(*contexts_[0]);
      done_->Finish();
      if (timed) {
        rc.graph.end_ns = Since(rc);
        rc.graph.thread = 1;
        rc.graph.bytes = rc.budget != nullptr ? rc.budget->used() : 0;
        rc.graph_device_us = graph_ != nullptr ? graph_->LastLaunchDeviceMicros() : -1;
      }
    }
    RunHost(after_, rc);
  } catch (...) {
    error_ = std::current_exception();
  }
}

void CapturingExecutor::Start(RunControl* rc) {
  delegated_ = policy_.given_up();
  if (delegated_) {
    graph_.reset();
    if (!streams_) streams_ = make_streams_();
    streams_->Start(rc);
    return;
  }
  RunOwn(*rc);
}

bool CapturingExecutor::WaitFor(std::chrono::milliseconds timeout) {
  return delegated_ ? streams_->WaitFor(timeout) : true;
}

void CapturingExecutor::Finish() {
  if (delegated_) {
    streams_->Finish();
    return;
  }
  // Even after an error: nothing may still be running when the run ends.
  for (auto& ctx : contexts_) {
    try {
      ctx->FinishDeviceComputation();
    } catch (...) {
      if (!error_) error_ = std::current_exception();
    }
  }
  fed_.clear();  // the copies from them are done
  const std::string message = error_ ? MessageOf(error_) : std::string();
  // A cancelled run says nothing about the graph; the next run's bindings
  // are checked against it all the same.
  const bool cancelled = error_ && IsCancelled(error_);
  try {
    if (!cancelled && !policy_told_) {
      policy_.AfterRun(decision_, !error_, Bindings(), message);
    } else if (!cancelled && error_ && policy_.has_graph()) {
      policy_.Discard(message);  // captured, then the launch failed
    }
  } catch (...) {
    if (!error_) error_ = std::current_exception();
  }
  if (!policy_.has_graph()) graph_.reset();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void CapturingExecutor::Run(RunControl* rc) {
  if (policy_.given_up()) {
    delegated_ = true;
    graph_.reset();
    if (!streams_) streams_ = make_streams_();
    streams_->Run(rc);
    return;
  }
  Start(rc);
  Finish();
}

CaptureStats CapturingExecutor::stats() const {
  CaptureStats s;
  s.runs = policy_.stats();
  s.graph_nodes = graph_ ? graph_->nodes() : 0;
  s.given_up = policy_.given_up();
  s.reason = policy_.reason();
  return s;
}

}  // namespace dp
