#include "graph/task_graph.h"

#include <algorithm>
#include <sstream>
#include <variant>
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

PartialWrite PartialWriteOf(const OperatorDef& op) {
  const Argument* parts = op.FindArg("parts");
  const Argument* part = op.FindArg("part");
  const int64_t* np = parts ? std::get_if<int64_t>(&parts->value) : nullptr;
  const int64_t* k = part ? std::get_if<int64_t>(&part->value) : nullptr;
  if (np == nullptr || *np <= 1) return {};
  return {*np, k ? *k : 0};
}

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
  // A write is one op, or a group of ops writing disjoint parts of the blob
  // (PartialWrite): the group's members depend on what came before the
  // group, not on one another; a later access depends on every member.
  struct Access {
    std::vector<int> writers;  // the last write
    std::vector<int> readers;  // since the last write
    int64_t parts = 0;         // > 1: the last write is a group of parts ...
    std::vector<int64_t> parts_written;
    std::vector<int> before_writers, before_readers;  // ... and what it followed
  };
  std::unordered_map<std::string, Access> blobs;
  auto joins_group = [](const Access& a, const PartialWrite& w) {
    return w.parts > 1 && a.parts == w.parts && a.readers.empty() &&
           std::find(a.parts_written.begin(), a.parts_written.end(), w.part) == a.parts_written.end();
  };
  for (int i = 0; i < n; ++i) {
    const OperatorDef& op = net.ops[static_cast<size_t>(i)];
    const PartialWrite part = PartialWriteOf(op);
    auto& parents = g.parents[static_cast<size_t>(i)];
    // Blobs this op writes as one more part of the last write: it depends on
    // what that write depended on.
    std::vector<std::string> joined;
    for (const auto& out : op.outputs) {
      auto it = blobs.find(out);
      if (it != blobs.end() && joins_group(it->second, part)) joined.push_back(out);
    }
    auto is_joined = [&](const std::string& b) { return std::find(joined.begin(), joined.end(), b) != joined.end(); };
    for (const auto& b : joined) {
      const Access& a = blobs[b];
      parents.insert(parents.end(), a.before_writers.begin(), a.before_writers.end());
      for (int r : a.before_readers)
        if (r != i) parents.push_back(r);
    }
    for (const auto& in : op.inputs) {
      auto it = blobs.find(in);
      if (it != blobs.end() && !is_joined(in))
        parents.insert(parents.end(), it->second.writers.begin(), it->second.writers.end());  // RAW
    }
    for (const auto& c : op.control_inputs) {
      auto it = blobs.find(c);
      if (it != blobs.end()) parents.insert(parents.end(), it->second.writers.begin(), it->second.writers.end());
    }
    for (const auto& out : op.outputs) {
      auto it = blobs.find(out);
      if (it == blobs.end() || is_joined(out)) continue;
      parents.insert(parents.end(), it->second.writers.begin(), it->second.writers.end());  // WAW
      for (int r : it->second.readers)
        if (r != i) parents.push_back(r);  // WAR
    }
    SortUnique(parents);
    for (int p : parents) g.children[static_cast<size_t>(p)].push_back(i);
    for (const auto& in : op.inputs)
      if (!is_joined(in)) blobs[in].readers.push_back(i);
    for (const auto& out : op.outputs) {
      Access& a = blobs[out];
      if (is_joined(out)) {
        a.writers.push_back(i);
        a.parts_written.push_back(part.part);
        continue;
      }
      // A new write (of a whole blob or a group's first part).
      a.before_writers = std::move(a.writers);
      a.before_readers = std::move(a.readers);
      a.before_readers.erase(std::remove(a.before_readers.begin(), a.before_readers.end(), i), a.before_readers.end());
      a.writers.assign(1, i);
      a.readers.clear();
      a.parts = part.parts;
      a.parts_written.assign(1, part.part);
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
