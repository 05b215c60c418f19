#include "comm/process_group.h"

#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "comm/gloo_communicator.h"
#include "comm/hierarchical_communicator.h"
#include "comm/shm_communicator.h"
#include "comm/shm_segment.h"
#include "core/error.h"
#include "core/logging.h"

namespace dp {
namespace {

struct Announcement {
  std::string transport;
  std::string domain;  // "" : shares memory with nobody
};

// Every process's announcement, after waiting (bounded) for all of them.
std::vector<Announcement> Announce(Store& store, const ProcessGroupOptions& o, const std::string& domain) {
  store.Set(StrCat("host/", o.rank), StrCat(o.local_transport, "\n", domain));
  const std::vector<int> missing = store.MissingRanks("host/", o.size, o.timeout);
  if (!missing.empty())
    DP_THROW(Code::kTimeout, "rendezvous at ", store.url(), ": rank ", o.rank, " of ", o.size, " waited ",
             o.timeout.count(), " ms, but ", RankList(missing), " did not arrive");
  std::vector<Announcement> all(static_cast<size_t>(o.size));
  for (int r = 0; r < o.size; ++r) {
    const std::string value = store.Get(StrCat("host/", r));
    const size_t nl = value.find('\n');
    all[static_cast<size_t>(r)].transport = value.substr(0, nl);
    if (nl != std::string::npos) all[static_cast<size_t>(r)].domain = value.substr(nl + 1);
  }
  return all;
}

// Hosts in the order of their lowest rank, ranks in order inside each.
HostLayout LayoutOf(const std::vector<Announcement>& all) {
  HostLayout layout;
  const int size = static_cast<int>(all.size());
  layout.host_of.resize(static_cast<size_t>(size));
  layout.local_of.resize(static_cast<size_t>(size));
  std::map<std::string, int> host_of_domain;
  for (int r = 0; r < size; ++r) {
    const std::string& d = all[static_cast<size_t>(r)].domain;
    int host;
    if (d.empty()) {
      host = static_cast<int>(layout.ranks_of.size());
      layout.ranks_of.emplace_back();
    } else {
      auto it = host_of_domain.find(d);
      if (it == host_of_domain.end()) {
        it = host_of_domain.emplace(d, static_cast<int>(layout.ranks_of.size())).first;
        layout.ranks_of.emplace_back();
      }
      host = it->second;
    }
    layout.host_of[static_cast<size_t>(r)] = host;
    layout.local_of[static_cast<size_t>(r)] = static_cast<int>(layout.ranks_of[static_cast<size_t>(host)].size());
    layout.ranks_of[static_cast<size_t>(host)].push_back(r);
  }
  return layout;
}

// Gloo between `size` of the processes, this one being `rank` among them.
GlooOptions GlooFor(const ProcessGroupOptions& o, int rank, int size) {
  GlooOptions g;
  g.rank = rank;
  g.size = size;
  g.timeout = o.timeout;
  g.interface = o.interface;
  g.algorithm = o.algorithm;
  return g;
}

std::unique_ptr<Communicator> AllOverGloo(const std::shared_ptr<Store>& store, const ProcessGroupOptions& o) {
  return ConnectGloo(store->Sub("gloo"), GlooFor(o, o.rank, o.size));
}

}  // namespace

std::unique_ptr<Communicator> ConnectProcesses(std::shared_ptr<Store> store, const ProcessGroupOptions& o) {
  DP_ENFORCE(o.size >= 1, "world size ", o.size, " must be >= 1");
  DP_ENFORCE(o.rank >= 0 && o.rank < o.size, "rank ", o.rank, " is out of range for world size ", o.size);
  DP_ENFORCE(o.timeout.count() > 0, "timeout ", o.timeout.count(), " ms must be positive");
  DP_ENFORCE(IsGlooAlgorithm(o.algorithm),
             "unknown Gloo allreduce algorithm '", o.algorithm,
             "' (auto, ring, halving_doubling, bcube or direct)");
  DP_ENFORCE(IsLocalTransport(o.local_transport), "unknown local transport '", o.local_transport, "' (auto, shm or tcp)");
  DP_ENFORCE_CODE(store != nullptr, Code::kInvalidArgument, "no store to meet the other processes");
  const std::string domain = o.local_transport == "tcp" ? std::string() : ShmDomain();
  DP_ENFORCE_CODE(!domain.empty() || o.local_transport != "shm", Code::kUnavailable,
                  "local transport \"shm\" was asked for, but this process cannot use shared memory (no /dev/shm)");
  const std::vector<Announcement> all = Announce(*store, o, domain);
  for (int r = 0; r < o.size; ++r)
    DP_ENFORCE(all[static_cast<size_t>(r)].transport == o.local_transport, "rank ", r, " asked for local transport '",
               all[static_cast<size_t>(r)].transport.substr(0, 16), "' but rank ", o.rank, " for '",
               o.local_transport, "': every process must pass the same");
  HostLayout layout = LayoutOf(all);
  const size_t hosts = layout.ranks_of.size();
  const size_t per_host = layout.ranks_of[0].size();
  bool even = true;
  for (const auto& h : layout.ranks_of) even = even && h.size() == per_host;
  const bool report = o.rank == 0;
  if (per_host == 1 && even) {
    if (report && o.size > 1)
      DP_LOG(kInfo, "dp: ", o.size, " processes", hosts > 1 ? StrCat(" on ", hosts, " hosts") : std::string(),
             o.local_transport == "tcp" ? " (local transport tcp)" : "", ": Gloo over TCP between them");
    return AllOverGloo(store, o);
  }
  if (!even) {
    DP_ENFORCE_CODE(o.local_transport != "shm", Code::kFailedPrecondition, "local transport \"shm\": the hosts ",
                    "run different numbers of processes (", hosts, " hosts for ", o.size, " processes); the ",
                    "hierarchical collectives need the same number on each");
    if (report)
      DP_LOG(kInfo, "dp: ", o.size, " processes on ", hosts, " hosts with different numbers of processes each: ",
             "Gloo over TCP between all of them");
    return AllOverGloo(store, o);
  }
  const int host = layout.host_of[static_cast<size_t>(o.rank)];
  const int local = layout.local_of[static_cast<size_t>(o.rank)];
  ShmOptions s;
  s.rank = local;
  s.size = static_cast<int>(per_host);
  s.names = layout.ranks_of[static_cast<size_t>(host)];
  s.timeout = o.timeout;
  // "auto": a collective that /dev/shm cannot hold runs over TCP instead.
  s.tcp_fallback = o.local_transport == "auto";
  s.tcp = GlooFor(o, local, static_cast<int>(per_host));
  auto shm = ShmCommunicator::Connect(store->Sub(StrCat("shm/", host)), s);
  if (hosts == 1) {
    if (report) DP_LOG(kInfo, "dp: ", o.size, " processes on one host: shared memory between them");
    return shm;
  }
  GlooOptions g = GlooFor(o, host, static_cast<int>(hosts));
  for (const auto& ranks : layout.ranks_of) g.names.push_back(ranks[static_cast<size_t>(local)]);
  auto across = ConnectGloo(store->Sub(StrCat("gloo/column/", local)), g);
  if (report)
    DP_LOG(kInfo, "dp: ", o.size, " processes on ", hosts, " hosts (", per_host, " each): shared memory inside ",
           "each host, Gloo over TCP across them");
  return MakeHierarchical(o.rank, std::move(layout), std::move(shm), std::move(across));
}

}  // namespace dp
