#include "graph/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <unordered_set>

#include "core/error.h"

namespace dp {
namespace {

// What the net does to one blob, in list order.
struct BlobUse {
  int first = -1;               // first op touching it
  bool first_is_pure_write = false;
  bool partial = false;         // some op writes only a part of it
  int last_write = -1;
  int last_read = -1;
  std::vector<int> accessors;   // ascending, unique
};

std::unordered_map<std::string, BlobUse> UsesOf(const NetDef& net) {
  std::unordered_map<std::string, BlobUse> uses;
  for (int i = 0; i < static_cast<int>(net.ops.size()); ++i) {
    const OperatorDef& op = net.ops[static_cast<size_t>(i)];
    const bool partial = PartialWriteOf(op).parts > 1;
    auto touch = [&](const std::string& name) -> BlobUse& {
      BlobUse& u = uses[name];
      if (u.accessors.empty() || u.accessors.back() != i) u.accessors.push_back(i);
      return u;
    };
    for (const auto& in : op.inputs) {
      BlobUse& u = touch(in);
      if (u.first < 0) u.first = i;  // read first: it holds something from before the run
      u.last_read = i;
    }
    for (const auto& out : op.outputs) {
      BlobUse& u = touch(out);
      if (u.first < 0) {
        u.first = i;
        u.first_is_pure_write = !partial;  // no input of this op names it (else first was set above)
      }
      if (partial) u.partial = true;
      u.last_write = i;
    }
  }
  return uses;
}

std::set<std::string> KeptBlobs(const NetDef& net, const std::set<std::string>& keep) {
  std::set<std::string> kept = keep;
  kept.insert(net.external_inputs.begin(), net.external_inputs.end());
  kept.insert(net.external_outputs.begin(), net.external_outputs.end());
  return kept;
}

bool IsTemporary(const BlobUse& u, bool kept) {
  return !kept && u.first_is_pure_write && !u.partial && u.last_read > u.last_write;
}

// Per op, the set of its strict ancestors, as bits (ops are in a topological
// order: every edge goes from an earlier op to a later one).
class Ancestors {
 public:
  explicit Ancestors(const TaskGraph& g) : n_(g.parents.size()), words_((n_ + 63) / 64), bits_(n_ * words_) {
    for (size_t i = 0; i < n_; ++i)
      for (int p : g.parents[i]) {
        uint64_t* row = &bits_[i * words_];
        const uint64_t* prow = &bits_[static_cast<size_t>(p) * words_];
        for (size_t w = 0; w < words_; ++w) row[w] |= prow[w];
        row[static_cast<size_t>(p) / 64] |= uint64_t{1} << (static_cast<size_t>(p) % 64);
      }
  }
  bool Before(int a, int b) const {  // a is a strict ancestor of b
    const size_t ua = static_cast<size_t>(a);
    return (bits_[static_cast<size_t>(b) * words_ + ua / 64] >> (ua % 64)) & 1;
  }

 private:
  size_t n_, words_;
  std::vector<uint64_t> bits_;
};

// "blob 'h'", "the scratch of op 4": how the verifier names a temporary.
std::string Describe(const MemoryPlan::Temporary& t) {
  return t.scratch ? StrCat("the scratch of op ", t.first_write) : StrCat("blob '", t.blob, "'");
}

}  // namespace

TaskGraph ListOrderGraph(size_t num_ops) {
  TaskGraph g;
  g.parents.resize(num_ops);
  g.children.resize(num_ops);
  for (size_t i = 1; i < num_ops; ++i) {
    g.parents[i] = {static_cast<int>(i - 1)};
    g.children[i - 1] = {static_cast<int>(i)};
  }
  return g;
}

MemoryPlan PlanMemory(const NetDef& net, const TaskGraph& graph, const std::vector<DeviceOption>& devices,
                      MemoryMode mode, const std::set<std::string>& keep,
                      const std::unordered_map<std::string, size_t>* sizes,
                      const std::vector<size_t>* scratch_sizes) {
  MemoryPlan plan;
  if (mode == MemoryMode::kDefault) mode = MemoryMode::kKeep;
  plan.op_temporaries.resize(net.ops.size());
  plan.op_scratch_slot.assign(net.ops.size(), -1);
  if (mode == MemoryMode::kKeep || net.ops.size() > kMaxPlannedOps) return plan;
  DP_ENFORCE_CODE(graph.parents.size() == net.ops.size() && devices.size() == net.ops.size(), Code::kInternal,
                  "memory plan: the graph and devices do not match the net's ", net.ops.size(), " ops");
  plan.mode = mode;
  const std::set<std::string> kept = KeptBlobs(net, keep);
  const auto uses = UsesOf(net);
  for (const auto& [name, u] : uses) {
    if (!IsTemporary(u, kept.count(name) > 0)) continue;
    MemoryPlan::Temporary t;
    t.blob = name;
    t.first_write = u.first;
    t.accessors = u.accessors;
    t.device = devices[static_cast<size_t>(u.first)];
    plan.temporaries.push_back(std::move(t));
  }
  if (mode == MemoryMode::kShare && scratch_sizes != nullptr)
    for (size_t i = 0; i < net.ops.size() && i < scratch_sizes->size(); ++i)
      if ((*scratch_sizes)[i] > 0) {
        MemoryPlan::Temporary t;
        t.scratch = true;
        t.first_write = static_cast<int>(i);
        t.accessors = {static_cast<int>(i)};
        t.device = devices[i];
        plan.temporaries.push_back(std::move(t));
      }
  std::sort(plan.temporaries.begin(), plan.temporaries.end(), [](const auto& a, const auto& b) {
    if (a.first_write != b.first_write) return a.first_write < b.first_write;
    return a.scratch != b.scratch ? b.scratch : a.blob < b.blob;  // an op's scratch after its outputs
  });
  for (int t = 0; t < static_cast<int>(plan.temporaries.size()); ++t)
    if (!plan.temporaries[static_cast<size_t>(t)].scratch)
      for (int op : plan.temporaries[static_cast<size_t>(t)].accessors)
        plan.op_temporaries[static_cast<size_t>(op)].push_back(t);
  if (mode != MemoryMode::kShare) return plan;

  // Slots, each a chain of temporaries in which each is dead (every accessor
  // a strict ancestor of the next one's first write) before the next is born.
  const Ancestors anc(graph);
  auto dead_before = [&](const MemoryPlan::Temporary& a, const MemoryPlan::Temporary& b) {
    return std::all_of(a.accessors.begin(), a.accessors.end(), [&](int op) { return anc.Before(op, b.first_write); });
  };
  struct Slot {
    std::vector<int> members;  // temporaries
    size_t bytes = 0;
  };
  std::vector<Slot> slots;
  auto place = [&](int ti, int s, size_t need) {
    if (s < 0) {
      s = static_cast<int>(slots.size());
      slots.emplace_back();
    }
    Slot& slot = slots[static_cast<size_t>(s)];
    slot.members.push_back(ti);
    slot.bytes = std::max(slot.bytes, need);
    MemoryPlan::Temporary& t = plan.temporaries[static_cast<size_t>(ti)];
    t.slot = s;
    if (t.scratch) plan.op_scratch_slot[static_cast<size_t>(t.first_write)] = s;
  };
  const bool sized = sizes != nullptr || scratch_sizes != nullptr;
  if (!sized) {
    // First fit in order of birth: a blob follows a slot's last one when that
    // one is dead before it is born.
    for (int ti = 0; ti < static_cast<int>(plan.temporaries.size()); ++ti) {
      const MemoryPlan::Temporary& t = plan.temporaries[static_cast<size_t>(ti)];
      int chosen = -1;
      for (int s = 0; s < static_cast<int>(slots.size()) && chosen < 0; ++s) {
        const MemoryPlan::Temporary& last = plan.temporaries[static_cast<size_t>(slots[static_cast<size_t>(s)].members.back())];
        if (SameMemory(last.device, t.device) && dead_before(last, t)) chosen = s;
      }
      place(ti, chosen, 0);
    }
  } else {
    // Greedy: each temporary in turn into the tightest slot whose every
    // member it is ordered with (dead before it is born, or born after it
    // is dead), else into a slot of its own, so that small blobs fill the
    // gaps between large ones and the slots' sizes add up to little. Which
    // order works best depends on the net (XLA's heap simulator tries
    // several too): the largest first; the most size x span (a long-lived
    // blob placed late finds no slot free for its whole life); the most size
    // x blobs it may be alive with. The plan of least bytes wins, the first
    // on a tie (so the same net always gets the same plan). On the sample's
    // CNN over two replicas the second and third order need a sixth less
    // than the first (docs/MEMORY.md).
    const int n = static_cast<int>(plan.temporaries.size());
    auto size_of = [&](const MemoryPlan::Temporary& t) -> size_t {
      if (t.scratch) return scratch_sizes ? (*scratch_sizes)[static_cast<size_t>(t.first_write)] : 0;
      if (sizes == nullptr) return 0;
      auto it = sizes->find(t.blob);
      return it == sizes->end() ? 0 : it->second;
    };
    std::vector<size_t> bytes(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) bytes[static_cast<size_t>(i)] = size_of(plan.temporaries[static_cast<size_t>(i)]);
    auto may_share = [&](int i, int j) {
      const MemoryPlan::Temporary &a = plan.temporaries[static_cast<size_t>(i)],
                                  &b = plan.temporaries[static_cast<size_t>(j)];
      return SameMemory(a.device, b.device) && (dead_before(a, b) || dead_before(b, a));
    };
    // Up to kMaxTriedTemporaries, which pairs may share is worked out once
    // (n^2 / 8 bytes) for all three orders; past it only the first order
    // runs, asking as it goes.
    const bool tries = n <= kMaxTriedTemporaries;
    std::vector<bool> shares(tries ? static_cast<size_t>(n) * static_cast<size_t>(n) : 0);
    std::vector<size_t> overlaps(static_cast<size_t>(n));  // temporaries each may be alive with
    if (tries)
      for (int i = 0; i < n; ++i)
        for (int j = i + 1; j < n; ++j) {
          const bool ok = may_share(i, j);
          shares[static_cast<size_t>(i) * static_cast<size_t>(n) + static_cast<size_t>(j)] = ok;
          shares[static_cast<size_t>(j) * static_cast<size_t>(n) + static_cast<size_t>(i)] = ok;
          if (!ok) ++overlaps[static_cast<size_t>(i)], ++overlaps[static_cast<size_t>(j)];
        }
    auto assign = [&](const std::vector<int>& order, size_t* total) {
      std::vector<Slot> out;
      for (int ti : order) {
        // The slot it grows least, of those the least; a slot that already
        // holds it does not grow.
        const size_t need = bytes[static_cast<size_t>(ti)];
        auto cost = [&](const Slot& slot) {
          return std::make_pair(need > slot.bytes ? need - slot.bytes : 0, slot.bytes);
        };
        int chosen = -1;
        for (int s = 0; s < static_cast<int>(out.size()); ++s) {
          const Slot& slot = out[static_cast<size_t>(s)];
          if (chosen >= 0 && cost(slot) >= cost(out[static_cast<size_t>(chosen)])) continue;
          const bool fits = std::all_of(slot.members.begin(), slot.members.end(), [&](int m) {
            return tries ? shares[static_cast<size_t>(ti) * static_cast<size_t>(n) + static_cast<size_t>(m)]
                         : may_share(ti, m);
          });
          if (fits) chosen = s;
        }
        if (chosen < 0) {
          chosen = static_cast<int>(out.size());
          out.emplace_back();
        }
        Slot& slot = out[static_cast<size_t>(chosen)];
        slot.members.push_back(ti);
        slot.bytes = std::max(slot.bytes, need);
      }
      *total = 0;
      for (const Slot& slot : out) *total += slot.bytes;
      return out;
    };
    // The orders' keys, the largest placed first.
    std::vector<std::vector<double>> keys(tries ? 3 : 1, std::vector<double>(static_cast<size_t>(n)));
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      const double b = static_cast<double>(bytes[i]);
      keys[0][i] = b;
      if (!tries) continue;
      const auto& acc = plan.temporaries[i].accessors;
      keys[1][i] = b * static_cast<double>(acc.back() - acc.front() + 1);
      keys[2][i] = b * static_cast<double>(overlaps[i]);
    }
    size_t best_total = SIZE_MAX;
    std::vector<Slot> best_slots;
    for (const std::vector<double>& key : keys) {
      std::vector<int> order(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](int x, int y) { return key[static_cast<size_t>(x)] > key[static_cast<size_t>(y)]; });
      size_t total = 0;
      std::vector<Slot> candidate = assign(order, &total);
      if (total < best_total) best_total = total, best_slots = std::move(candidate);
    }
    for (const Slot& slot : best_slots) {
      int s = -1;  // a new slot for the first member, the rest follow it
      for (int ti : slot.members) {
        place(ti, s, bytes[static_cast<size_t>(ti)]);
        s = plan.temporaries[static_cast<size_t>(ti)].slot;
      }
    }
  }
  plan.num_slots = static_cast<int>(slots.size());
  return plan;
}

void VerifyMemoryPlan(const NetDef& net, const TaskGraph& graph, const std::vector<DeviceOption>& devices,
                      const MemoryPlan& plan) {
  auto fail = [&](auto&&... what) { DP_THROW(Code::kInternal, "memory plan of net '", net.name, "': ", what...); };
  if (plan.mode == MemoryMode::kKeep) {
    if (!plan.temporaries.empty()) fail("a plan that keeps every blob lists temporaries");
    return;
  }
  if (plan.op_temporaries.size() != net.ops.size() || plan.op_scratch_slot.size() != net.ops.size())
    fail("it covers ", plan.op_temporaries.size(), " ops, not ", net.ops.size());
  // Which blobs are temporaries, and who touches them, recomputed here.
  const auto uses = UsesOf(net);
  std::unordered_set<std::string> seen;
  for (size_t ti = 0; ti < plan.temporaries.size(); ++ti) {
    const MemoryPlan::Temporary& t = plan.temporaries[ti];
    if (t.scratch) {  // the scratch of one op, alive while it runs
      const size_t op = static_cast<size_t>(t.first_write);
      if (plan.mode != MemoryMode::kShare || t.first_write < 0 || op >= net.ops.size() ||
          t.accessors != std::vector<int>{t.first_write} || plan.op_scratch_slot[op] != t.slot ||
          !seen.insert("\n" + std::to_string(op)).second)
        fail("the scratch of op ", t.first_write, " is not planned as that op's alone");
      if (!(t.device == devices.at(op))) fail("the scratch of op ", op, " is placed on another device than the op");
      if (t.slot < 0 || t.slot >= plan.num_slots) fail("the scratch of op ", op, " has no slot");
      continue;
    }
    if (!seen.insert(t.blob).second) fail("blob '", t.blob, "' is listed twice");
    auto it = uses.find(t.blob);
    if (it == uses.end() || !IsTemporary(it->second, false))
      fail("blob '", t.blob, "' is not a temporary (read before it is written, written in parts, or not read after its last write)");
    for (const auto& kept : {&net.external_inputs, &net.external_outputs})
      if (std::find(kept->begin(), kept->end(), t.blob) != kept->end())
        fail("blob '", t.blob, "' is an external input or output of the net");
    if (t.first_write != it->second.first || t.accessors != it->second.accessors)
      fail("blob '", t.blob, "': its first write or accessors differ from the net's");
    for (int op : t.accessors) {
      const auto& list = plan.op_temporaries[static_cast<size_t>(op)];
      if (std::find(list.begin(), list.end(), static_cast<int>(ti)) == list.end())
        fail("op ", op, " accesses blob '", t.blob, "' but would not count it down");
    }
    if (!(t.device == devices.at(static_cast<size_t>(t.first_write))))
      fail("blob '", t.blob, "' is placed on ", DeviceName(t.device), ", its first writer on ",
           DeviceName(devices.at(static_cast<size_t>(t.first_write))));
    if (plan.mode == MemoryMode::kShare && (t.slot < 0 || t.slot >= plan.num_slots))
      fail("blob '", t.blob, "' has no slot");
  }
  size_t counted = 0;
  for (const auto& list : plan.op_temporaries) counted += list.size();
  size_t accesses = 0;
  for (const auto& t : plan.temporaries)
    if (!t.scratch) accesses += t.accessors.size();
  for (size_t op = 0; op < net.ops.size(); ++op)
    if (plan.op_scratch_slot[op] >= 0 && !seen.count("\n" + std::to_string(op)))
      fail("op ", op, " has a scratch slot but no scratch temporary");
  if (counted != accesses) fail("ops count down ", counted, " accesses, the temporaries have ", accesses);
  if (plan.mode != MemoryMode::kShare) return;

  // Every pair in a slot: one is dead, in every order the graph allows,
  // before the other's first write. Ancestors by a walk of the parents (not
  // the planner's bit sets), once per temporary.
  std::vector<std::vector<int>> by_slot(static_cast<size_t>(plan.num_slots));
  for (size_t ti = 0; ti < plan.temporaries.size(); ++ti)
    by_slot[static_cast<size_t>(plan.temporaries[ti].slot)].push_back(static_cast<int>(ti));
  std::vector<char> mark(net.ops.size());
  for (const auto& members : by_slot)
    for (size_t j = 1; j < members.size(); ++j) {
      const MemoryPlan::Temporary& later = plan.temporaries[static_cast<size_t>(members[j])];
      std::fill(mark.begin(), mark.end(), 0);
      std::vector<int> stack(graph.parents[static_cast<size_t>(later.first_write)]);
      while (!stack.empty()) {
        int op = stack.back();
        stack.pop_back();
        if (mark[static_cast<size_t>(op)]) continue;
        mark[static_cast<size_t>(op)] = 1;
        for (int p : graph.parents[static_cast<size_t>(op)]) stack.push_back(p);
      }
      for (size_t i = 0; i < j; ++i) {
        const MemoryPlan::Temporary& earlier = plan.temporaries[static_cast<size_t>(members[i])];
        if (!SameMemory(earlier.device, later.device))
          fail(Describe(earlier), " (", DeviceName(earlier.device), ") and ", Describe(later), " (",
               DeviceName(later.device), ") share slot ", later.slot, " across memories");
        for (int a : earlier.accessors)
          if (!mark[static_cast<size_t>(a)])
            fail(Describe(earlier), " and ", Describe(later), " share slot ", later.slot, " but op ", a, " (",
                 net.ops[static_cast<size_t>(a)].type, ") may use ", Describe(earlier), " after op ",
                 later.first_write, " (", net.ops[static_cast<size_t>(later.first_write)].type, ") writes ",
                 Describe(later));
      }
    }
}

}  // namespace dp
