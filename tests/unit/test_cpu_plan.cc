// How dp divides a machine's CPUs between CPU replicas and between the
// processes of a host (core/cpu_topology.h, core/cpu_plan.h), on fake sysfs
// trees of servers: 8, 16, 64 and 96 CPUs, with and without SMT, one or
// several last-level caches and NUMA nodes, whole or under a CPU quota.
#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/cache_probe.h"
#include "core/cpu_plan.h"
#include "core/cpu_topology.h"

namespace {

using dp::CpuPlan;
using dp::CpuTopology;

std::string List(const std::vector<int>& cpus) {
  std::string s;
  for (int c : cpus) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s + "\n";
}

// A fake /sys/devices/system of `nodes` NUMA nodes, each of `llcs` cache
// domains of `cores` cores with `smt` hardware threads; numbered as Linux
// does (a core's second thread is CPU core + total cores).
struct FakeMachine {
  std::map<std::string, std::string> files;
  std::vector<int> cpus;
  int cores_total = 0;
  dp::SysfsReader reader() const {
    return [this](const std::string& path) -> std::optional<std::string> {
      auto it = files.find(path);
      if (it == files.end()) return std::nullopt;
      return it->second;
    };
  }
  CpuTopology topology() const { return dp::ReadCpuTopology(cpus, reader()); }
};

FakeMachine Machine(int nodes, int llcs, int cores, int smt) {
  FakeMachine m;
  m.cores_total = nodes * llcs * cores;
  std::vector<int> node_list;
  for (int nd = 0; nd < nodes; ++nd) {
    node_list.push_back(nd);
    std::vector<int> node_cpus;
    for (int l = 0; l < llcs; ++l) {
      std::vector<int> llc_cpus;
      for (int c = 0; c < cores; ++c)
        for (int t = 0; t < smt; ++t) llc_cpus.push_back((nd * llcs + l) * cores + c + t * m.cores_total);
      std::sort(llc_cpus.begin(), llc_cpus.end());
      for (int c = 0; c < cores; ++c) {
        const int core = (nd * llcs + l) * cores + c;
        std::vector<int> siblings;
        for (int t = 0; t < smt; ++t) siblings.push_back(core + t * m.cores_total);
        for (int cpu : siblings) {
          const std::string d = "cpu/cpu" + std::to_string(cpu) + "/";
          m.files[d + "topology/core_cpus_list"] = List(siblings);
          // L1 data and instruction and L2 per core, L3 per domain, as Linux lists them.
          const struct {
            const char* level;
            const char* type;
            const std::vector<int>& shared;
          } caches[] = {{"1", "Data", siblings}, {"1", "Instruction", siblings}, {"2", "Unified", siblings},
                        {"3", "Unified", llc_cpus}};
          for (size_t i = 0; i < std::size(caches); ++i) {
            const std::string index = d + "cache/index" + std::to_string(i) + "/";
            m.files[index + "level"] = std::string(caches[i].level) + "\n";
            m.files[index + "type"] = std::string(caches[i].type) + "\n";
            m.files[index + "shared_cpu_list"] = List(caches[i].shared);
          }
          m.cpus.push_back(cpu);
        }
      }
      node_cpus.insert(node_cpus.end(), llc_cpus.begin(), llc_cpus.end());
    }
    std::sort(node_cpus.begin(), node_cpus.end());
    m.files["node/node" + std::to_string(nd) + "/cpulist"] = List(node_cpus);
  }
  m.files["node/online"] = "0-" + std::to_string(nodes - 1) + "\n";
  std::sort(m.cpus.begin(), m.cpus.end());
  return m;
}

size_t IndexOf(const CpuTopology& t, int cpu) {
  return static_cast<size_t>(std::lower_bound(t.cpus.begin(), t.cpus.end(), cpu) - t.cpus.begin());
}

std::set<int> Domains(const CpuTopology& t, const std::vector<int>& cpus, const std::vector<int>& of) {
  std::set<int> d;
  for (int c : cpus) d.insert(of[IndexOf(t, c)]);
  return d;
}

// What every plan must hold: R parts of equal threads within the budget;
// pinned parts own disjoint CPUs of the topology, as many as their threads.
void CheckInvariants(const CpuTopology& t, const CpuPlan& plan, int budget, int parts) {
  const int usable = std::min(budget, static_cast<int>(t.cpus.size()));
  REQUIRE(plan.parts.size() == static_cast<size_t>(parts));
  if (parts == 1) {
    CHECK_FALSE(plan.pinned);
    CHECK(plan.parts[0].threads == usable);
    return;
  }
  if (parts > usable) {
    CHECK_FALSE(plan.pinned);
    for (const auto& p : plan.parts) CHECK(p.threads == 1);
    return;
  }
  CHECK(plan.pinned);
  std::set<int> seen;
  bool all_one = true;
  std::set<int> domains;
  for (const auto& p : plan.parts) {
    CHECK(p.threads == usable / parts);
    CHECK(p.cpus.size() == static_cast<size_t>(p.threads));
    for (int c : p.cpus) {
      CHECK(std::binary_search(t.cpus.begin(), t.cpus.end(), c));
      CHECK(seen.insert(c).second);  // disjoint
    }
    CHECK(p.spans_domains == (Domains(t, p.cpus, t.llc).size() > 1));
    for (int d : Domains(t, p.cpus, t.llc)) domains.insert(d);
  }
  all_one = domains.size() == 1;
  CHECK(plan.one_cache == all_one);
  CHECK(dp::SharedModelPays(plan) == plan.one_cache);
}

}  // namespace

TEST_CASE("cpu lists parse as Linux writes them; malformed ones are refused") {
  CHECK(dp::ParseCpuList("0-3,8,10-11\n") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(dp::ParseCpuList("5") == std::vector<int>{5});
  CHECK(dp::ParseCpuList("") == std::vector<int>{});
  CHECK(dp::ParseCpuList("3,1,1-2") == std::vector<int>{1, 2, 3});
  CHECK(dp::ParseCpuList("3-1") == std::nullopt);
  CHECK(dp::ParseCpuList("a") == std::nullopt);
  CHECK(dp::ParseCpuList("1,,2") == std::nullopt);
  CHECK(dp::ParseCpuList("-1") == std::nullopt);
  CHECK(dp::ParseCpuList("0-99999999") == std::nullopt);
}

TEST_CASE("topology: cache domains, NUMA nodes and cores from sysfs; what it hides is one domain") {
  // 96 CPUs: 2 nodes x 6 cache domains (an AMD CCX) x 4 cores x 2 threads.
  const FakeMachine m = Machine(2, 6, 4, 2);
  const CpuTopology t = m.topology();
  REQUIRE(t.cpus.size() == 96);
  CHECK(t.num_llc == 12);
  CHECK(t.num_nodes == 2);
  // CPU 1 and CPU 49 are one core's threads, in domain 0, node 0.
  CHECK(t.core[IndexOf(t, 49)] == 1);
  CHECK(t.llc[IndexOf(t, 49)] == t.llc[IndexOf(t, 1)]);
  CHECK(t.llc[IndexOf(t, 4)] != t.llc[IndexOf(t, 3)]);    // the next CCX
  CHECK(t.node[IndexOf(t, 23)] == 0);
  CHECK(t.node[IndexOf(t, 24)] == 1);
  CHECK(t.node[IndexOf(t, 95)] == 1);

  // A process restricted to some CPUs sees only those.
  const CpuTopology part = dp::ReadCpuTopology({4, 5, 52, 53, 8}, m.reader());
  CHECK(part.cpus == std::vector<int>{4, 5, 8, 52, 53});
  CHECK(part.num_llc == 2);
  CHECK(part.num_nodes == 1);

  // Nothing readable (a container hiding sysfs): one domain, one node, a core per CPU.
  const CpuTopology bare = dp::ReadCpuTopology({0, 1, 2, 3}, [](const std::string&) { return std::nullopt; });
  CHECK(bare.num_llc == 1);
  CHECK(bare.num_nodes == 1);
  CHECK(bare.core == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("division holds its invariants on 8, 16, 64 and 96 CPUs, 1-16 parts, with and without quotas") {
  struct Case {
    const char* name;
    FakeMachine m;
  };
  std::vector<Case> machines = {
      {"8 CPUs: 4 cores x 2 threads, one cache", Machine(1, 1, 4, 2)},
      {"16 CPUs: one socket, 8 cores x 2 threads", Machine(1, 1, 8, 2)},
      {"64 CPUs: 2 nodes x 4 CCX x 8 cores", Machine(2, 4, 8, 1)},
      {"96 CPUs: 2 nodes x 6 CCX x 4 cores x 2 threads", Machine(2, 6, 4, 2)},
  };
  for (const Case& c : machines) {
    CAPTURE(c.name);
    const CpuTopology t = c.m.topology();
    const int n = static_cast<int>(t.cpus.size());
    for (int budget : {n, n / 2, 3, 1, 4 * n}) {
      for (int parts = 1; parts <= 16; ++parts) {
        CAPTURE(budget);
        CAPTURE(parts);
        CheckInvariants(t, dp::DivideCpus(t, budget, parts), budget, parts);
      }
    }
  }
}

TEST_CASE("division follows the topology: parts inside cache domains, whole cores, nodes kept apart") {
  SUBCASE("16 CPUs, one cache, SMT: 4 replicas own whole cores and may share a model") {
    const CpuTopology t = Machine(1, 1, 8, 2).topology();
    const CpuPlan plan = dp::DivideCpus(t, 16, 4);
    REQUIRE(plan.pinned);
    for (const auto& p : plan.parts) {
      CHECK(p.threads == 4);
      CHECK(Domains(t, p.cpus, t.core).size() == 2);  // two cores, both threads of each
      CHECK_FALSE(p.spans_domains);
    }
    CHECK(dp::SharedModelPays(plan));
  }
  SUBCASE("16 CPUs under a quota of 8: a thread per core before a second one") {
    const CpuTopology t = Machine(1, 1, 8, 2).topology();
    const CpuPlan plan = dp::DivideCpus(t, 8, 2);
    REQUIRE(plan.pinned);
    std::set<int> cores;
    for (const auto& p : plan.parts) {
      CHECK(p.cpus.size() == 4);
      for (int d : Domains(t, p.cpus, t.core)) CHECK(cores.insert(d).second);
    }
    CHECK(cores.size() == 8);
  }
  SUBCASE("64 CPUs in 8 CCX: 8 replicas get a CCX each, 16 two per CCX; copies, not a shared model") {
    const CpuTopology t = Machine(2, 4, 8, 1).topology();
    for (int parts : {8, 16}) {
      const CpuPlan plan = dp::DivideCpus(t, 64, parts);
      for (const auto& p : plan.parts) CHECK_FALSE(p.spans_domains);
      CHECK_FALSE(dp::SharedModelPays(plan));
    }
    // Two replicas under a quota of 16: a CCX each (nothing fits both in one).
    const CpuPlan two = dp::DivideCpus(t, 16, 2);
    CHECK(Domains(t, two.parts[0].cpus, t.llc).size() == 1);
    CHECK(Domains(t, two.parts[1].cpus, t.llc).size() == 1);
    CHECK_FALSE(two.one_cache);
    // Under a quota of 8, two replicas of 4 fit one CCX: they may share.
    CHECK(dp::SharedModelPays(dp::DivideCpus(t, 8, 2)));
  }
  SUBCASE("96 CPUs, 16 replicas of 6: 12 fit a CCX, 4 span two, none spans nodes") {
    const CpuTopology t = Machine(2, 6, 4, 2).topology();
    const CpuPlan plan = dp::DivideCpus(t, 96, 16);
    int spanning = 0;
    for (const auto& p : plan.parts) {
      spanning += p.spans_domains;
      CHECK(Domains(t, p.cpus, t.node).size() == 1);
    }
    CHECK(spanning == 4);
    // 4 replicas of 24: each spans 3 CCX of one node.
    for (const auto& p : dp::DivideCpus(t, 96, 4).parts) {
      CHECK(Domains(t, p.cpus, t.node).size() == 1);
      CHECK(Domains(t, p.cpus, t.llc).size() == 3);
    }
  }
  SUBCASE("more parts than threads: one thread each, nobody pinned") {
    const CpuTopology t = Machine(1, 1, 4, 2).topology();
    const CpuPlan plan = dp::DivideCpus(t, 8, 12);
    CHECK_FALSE(plan.pinned);
    for (const auto& p : plan.parts) CHECK(p.cpus.empty());
  }
  SUBCASE("the 2-vCPU development VM: one CPU per replica") {
    const CpuTopology t = Machine(1, 1, 2, 1).topology();
    const CpuPlan plan = dp::DivideCpus(t, 2, 2);
    REQUIRE(plan.pinned);
    CHECK(plan.parts[0].cpus == std::vector<int>{0});
    CHECK(plan.parts[1].cpus == std::vector<int>{1});
    CHECK(dp::SharedModelPays(plan));
  }
}

TEST_CASE("processes of a host split it the same way, then each splits its share between its replicas") {
  // dp-run's 2 processes on 16 CPUs, each with 4 CPU replicas.
  const FakeMachine m = Machine(1, 1, 8, 2);
  const CpuPlan hosts = dp::DivideCpus(m.topology(), 16, 2);
  REQUIRE(hosts.pinned);
  std::set<int> all;
  for (const auto& proc : hosts.parts) {
    REQUIRE(proc.cpus.size() == 8);
    const CpuTopology mine = dp::ReadCpuTopology(proc.cpus, m.reader());
    const CpuPlan replicas = dp::DivideCpus(mine, 8, 4);
    REQUIRE(replicas.pinned);
    for (const auto& r : replicas.parts) {
      CHECK(r.cpus.size() == 2);
      for (int c : r.cpus) {
        CHECK(std::binary_search(proc.cpus.begin(), proc.cpus.end(), c));
        CHECK(all.insert(c).second);
      }
    }
  }
  CHECK(all.size() == 16);
  // Processes on the 64-CPU, 8-CCX machine: 4 processes get 2 CCX each.
  const FakeMachine big = Machine(2, 4, 8, 1);
  for (const auto& proc : dp::DivideCpus(big.topology(), 64, 4).parts) {
    const CpuTopology mine = dp::ReadCpuTopology(proc.cpus, big.reader());
    CHECK(mine.num_llc == 2);
    CHECK(mine.num_nodes == 1);
  }
}

TEST_CASE("the cache probe answers only what it measured; plans it need not measure are answered from sysfs") {
  CHECK(dp::CpusShareCache(0, 0) == std::optional<bool>(true));  // one CPU shares its own cache
  // A CPU the process may not run on: no answer (not a wrong one).
  CHECK(dp::CpusShareCache(0, (1 << 20) - 1) == std::nullopt);
  // Parts in different domains never share a model; unpinned parts (one, or
  // more than CPUs) run where the kernel puts them: the topology decides.
  const FakeMachine m = Machine(2, 4, 8, 1);
  CHECK_FALSE(dp::PartsShareCache(dp::DivideCpus(m.topology(), 64, 8)));
  CHECK(dp::PartsShareCache(dp::DivideCpus(Machine(1, 1, 4, 1).topology(), 4, 1)));
  CHECK(dp::PartsShareCache(dp::DivideCpus(Machine(1, 1, 4, 1).topology(), 4, 9)));
}
