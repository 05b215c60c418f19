#include "core/cpu_plan.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <tuple>

namespace dp {
namespace {

bool OneDomain(const CpuTopology& t, const std::vector<size_t>& idx) {
  for (size_t i : idx)
    if (t.llc[i] != t.llc[idx.front()]) return false;
  return true;
}

}  // namespace

CpuPlan DivideCpus(const CpuTopology& t, int budget, int parts) {
  CpuPlan plan;
  parts = std::max(1, parts);
  const size_t n = t.cpus.size();
  const int threads = std::clamp(budget, 1, std::max(1, static_cast<int>(n)));
  std::vector<size_t> all(n);
  std::iota(all.begin(), all.end(), size_t{0});
  if (parts == 1 || threads < parts || n == 0) {
    plan.parts.assign(static_cast<size_t>(parts), CpuPart{{}, parts == 1 ? threads : 1, false});
    plan.one_cache = n == 0 || OneDomain(t, all);
    return plan;
  }
  const int share = threads / parts;

  // The order CPUs are handed out in: node, then cache domain, then - when
  // the threads are no more than the cores - each core's first hardware
  // thread before any second one (a thread per core is faster than two on
  // one), else a core's threads together (a part then owns whole cores, and
  // two parts never share one core's caches and FMA units).
  std::set<int> cores(t.core.begin(), t.core.end());
  const bool spread = threads <= static_cast<int>(cores.size());
  std::vector<int> sibling_rank(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < i; ++j)
      if (t.core[j] == t.core[i]) ++sibling_rank[i];
  std::vector<size_t> order = all;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int ra = spread ? sibling_rank[a] : 0, rb = spread ? sibling_rank[b] : 0;
    return std::tie(t.node[a], t.llc[a], ra, t.core[a], t.cpus[a]) <
           std::tie(t.node[b], t.llc[b], rb, t.core[b], t.cpus[b]);
  });

  // Parts that fit a domain's free CPUs go there, domain after domain.
  std::vector<bool> used(n, false);
  std::vector<std::vector<size_t>> chosen;
  for (size_t begin = 0; begin < n && static_cast<int>(chosen.size()) < parts;) {
    size_t end = begin;
    while (end < n && t.node[order[end]] == t.node[order[begin]] && t.llc[order[end]] == t.llc[order[begin]]) ++end;
    for (size_t k = begin; k + static_cast<size_t>(share) <= end && static_cast<int>(chosen.size()) < parts;
         k += static_cast<size_t>(share)) {
      chosen.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(k),
                          order.begin() + static_cast<std::ptrdiff_t>(k) + share);
      for (size_t i : chosen.back()) used[i] = true;
    }
    begin = end;
  }
  // The rest span domains: the leftovers in order (same node first).
  std::vector<size_t> left;
  for (size_t i : order)
    if (!used[i]) left.push_back(i);
  for (size_t k = 0; static_cast<int>(chosen.size()) < parts; k += static_cast<size_t>(share))
    chosen.emplace_back(left.begin() + static_cast<std::ptrdiff_t>(k),
                        left.begin() + static_cast<std::ptrdiff_t>(k) + share);

  plan.pinned = true;
  std::vector<size_t> every;
  for (auto& idx : chosen) {
    CpuPart part;
    part.threads = share;
    part.spans_domains = !OneDomain(t, idx);
    for (size_t i : idx) part.cpus.push_back(t.cpus[i]);
    std::sort(part.cpus.begin(), part.cpus.end());
    plan.parts.push_back(std::move(part));
    every.insert(every.end(), idx.begin(), idx.end());
  }
  plan.one_cache = OneDomain(t, every);
  return plan;
}

bool SharedModelPays(const CpuPlan& plan) { return plan.one_cache; }

}  // namespace dp
