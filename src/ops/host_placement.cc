#include "ops/host_placement.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "ops/gradient_registry.h"  // MakeOperatorDef
#include "ops/op_schema.h"

namespace dp {
namespace {

// Runs on the host in a CUDA net: a host op, unless its schema lets a
// definition that places it on a device keep it there.
bool IsHostOp(const OperatorDef& op) {
  const OpSchema* s = OpSchemaRegistry::Find(op.type);
  return s != nullptr && s->host_op() && !(s->host_unless_placed() && op.device.has_value());
}

// The op reads inputs of other devices itself (Copy, Print, collectives).
bool ReadsAcrossDevices(const OperatorDef& op) {
  const OpSchema* s = OpSchemaRegistry::Find(op.type);
  return s != nullptr && (s->inputs_can_cross_devices() || s->inputs_on_replica_devices());
}

}  // namespace

std::string HostOutputCopyName(const std::string& blob, DeviceOption device) {
  return StrCat(blob, "@", DeviceName(device));
}

std::shared_ptr<const NetDef> PlaceHostOps(const NetDef& def) {
  bool any_cuda = false;
  for (const auto& op : def.ops) any_cuda = any_cuda || def.OpDevice(op).type == DeviceType::kCUDA;
  if (!any_cuda) return nullptr;

  auto out = std::make_shared<NetDef>(def);
  out->ops.clear();
  bool changed = false;
  // Blob -> position in out->ops of the op on the host that last wrote it,
  // and the copies already made of that write per device.
  std::map<std::string, size_t> host_written;
  std::map<std::pair<std::string, std::string>, std::string> copies;
  std::vector<std::pair<size_t, OperatorDef>> inserts;  // after out->ops[first]
  for (const auto& original : def.ops) {
    OperatorDef op = original;
    DeviceOption device = def.OpDevice(op);
    if (device.type == DeviceType::kCUDA && IsHostOp(op)) {
      device = DeviceOption{DeviceType::kCPU, 0};
      op.device = device;
      changed = true;
    } else if (device.type == DeviceType::kCUDA && !ReadsAcrossDevices(op)) {
      const OpSchema* schema = OpSchemaRegistry::Find(op.type);
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        std::string& in = op.inputs[i];
        if (schema != nullptr && schema->host_input(static_cast<int>(i))) continue;  // read on the host
        auto w = host_written.find(in);
        if (w == host_written.end()) continue;
        const std::string name = HostOutputCopyName(in, device);
        if (copies.emplace(std::make_pair(in, DeviceName(device)), name).second) {
          OperatorDef copy = MakeOperatorDef("Copy", {in}, {name});
          copy.device = device;
          inserts.emplace_back(w->second, std::move(copy));
        }
        in = name;
        changed = true;
      }
    }
    for (const auto& o : op.outputs) {
      // A new write: earlier copies are stale for later readers.
      for (auto it = copies.begin(); it != copies.end();) it = it->first.first == o ? copies.erase(it) : std::next(it);
      if (device.type == DeviceType::kCPU) {
        host_written[o] = out->ops.size();
      } else {
        host_written.erase(o);
      }
    }
    out->ops.push_back(std::move(op));
  }
  if (!changed) return nullptr;
  // Each copy goes right after the op whose output it reads. Inserted from
  // the last position back, so that earlier positions stay valid; copies
  // after one op keep the order they were found in.
  std::stable_sort(inserts.begin(), inserts.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto it = inserts.rbegin(); it != inserts.rend(); ++it)
    out->ops.insert(out->ops.begin() + static_cast<std::ptrdiff_t>(it->first + 1), std::move(it->second));
  return out;
}

}  // namespace dp
