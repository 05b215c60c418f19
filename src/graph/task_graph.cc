#include "graph/task_graph.h"

#include <algorithm>
#include <sstream>
#include <unordered_map>

namespace dp {
namespace {

void SortUnique(std::vector<int>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

size_t TaskGraph::num_edges() const {
  size_t n = 0;
  for (const auto& c : children) n += c.size();
  return n;
}

TaskGraph BuildTaskGraph(const NetDef& net, const std::vector<DeviceOption>& devices) {
  const int n = static_cast<int>(net.ops.size());
  TaskGraph g;
  g.parents.resize(static_cast<size_t>(n));
  g.children.resize(static_cast<size_t>(n));
  struct Access {
    int writer = -1;
    std::vector<int> readers;  // since the last write
  };
  std::unordered_map<std::string, Access> blobs;
  for (int i = 0; i < n; ++i) {
    const OperatorDef& op = net.ops[static_cast<size_t>(i)];
    auto& parents = g.parents[static_cast<size_t>(i)];
    for (const auto& in : op.inputs) {
      auto it = blobs.find(in);
      if (it != blobs.end() && it->second.writer >= 0) parents.push_back(it->second.writer);  // RAW
    }
    for (const auto& c : op.control_inputs) {
      auto it = blobs.find(c);
      if (it != blobs.end() && it->second.writer >= 0) parents.push_back(it->second.writer);
    }
    for (const auto& out : op.outputs) {
      auto it = blobs.find(out);
      if (it == blobs.end()) continue;
      if (it->second.writer >= 0) parents.push_back(it->second.writer);  // WAW
      for (int r : it->second.readers)
        if (r != i) parents.push_back(r);  // WAR
    }
    SortUnique(parents);
    for (int p : parents) g.children[static_cast<size_t>(p)].push_back(i);
    for (const auto& in : op.inputs) blobs[in].readers.push_back(i);
    for (const auto& out : op.outputs) {
      Access& a = blobs[out];
      a.writer = i;
      a.readers.clear();
    }
  }
  for (auto& c : g.children) SortUnique(c);

  // List order is a topological order (validation rejects reads of later
  // writes), so one forward pass forms the chains.
  g.chain_of.assign(static_cast<size_t>(n), -1);
  for (int i = 0; i < n; ++i) {
    const auto& ps = g.parents[static_cast<size_t>(i)];
    if (ps.size() == 1) {
      int p = ps[0];
      if (g.children[static_cast<size_t>(p)].size() == 1 && devices[static_cast<size_t>(p)] == devices[static_cast<size_t>(i)] &&
          g.chains[static_cast<size_t>(g.chain_of[static_cast<size_t>(p)])].back() == p) {
        int c = g.chain_of[static_cast<size_t>(p)];
        g.chains[static_cast<size_t>(c)].push_back(i);
        g.chain_of[static_cast<size_t>(i)] = c;
        continue;
      }
    }
    g.chain_of[static_cast<size_t>(i)] = static_cast<int>(g.chains.size());
    g.chains.push_back({i});
    g.chain_device.push_back(devices[static_cast<size_t>(i)]);
  }
  const size_t nc = g.chains.size();
  g.chain_parents.resize(nc);
  g.chain_children.resize(nc);
  for (size_t c = 0; c < nc; ++c) {
    for (int p : g.parents[static_cast<size_t>(g.chains[c].front())])
      g.chain_parents[c].push_back(g.chain_of[static_cast<size_t>(p)]);
    for (int ch : g.children[static_cast<size_t>(g.chains[c].back())])
      g.chain_children[c].push_back(g.chain_of[static_cast<size_t>(ch)]);
    SortUnique(g.chain_parents[c]);
    SortUnique(g.chain_children[c]);
  }
  return g;
}

std::string TaskGraphToDot(const NetDef& net, const TaskGraph& g, const std::vector<DeviceOption>& devices) {
  std::ostringstream os;
  os << "digraph \"" << Escape(net.name.empty() ? "net" : net.name) << "\" {\n  rankdir=TB;\n  node [shape=box];\n";
  for (size_t c = 0; c < g.chains.size(); ++c) {
    os << "  subgraph cluster_" << c << " {\n    label=\"chain " << c << " on " << DeviceName(g.chain_device[c])
       << "\";\n";
    for (int i : g.chains[c]) {
      const OperatorDef& op = net.ops[static_cast<size_t>(i)];
      os << "    op" << i << " [label=\"" << i << ": " << Escape(op.type);
      if (!op.name.empty()) os << "\\n" << Escape(op.name);
      os << "\\n" << DeviceName(devices[static_cast<size_t>(i)]) << "\"];\n";
    }
    os << "  }\n";
  }
  for (size_t i = 0; i < g.children.size(); ++i)
    for (int c : g.children[i]) os << "  op" << i << " -> op" << c << ";\n";
  os << "}\n";
  return os.str();
}

std::string NetDefToDot(const NetDef& net) {
  std::vector<DeviceOption> devices;
  for (const auto& op : net.ops) devices.push_back(net.OpDevice(op));
  return TaskGraphToDot(net, BuildTaskGraph(net, devices), devices);
}

}  // namespace dp
