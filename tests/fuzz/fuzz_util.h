// What the fuzz targets share: drive the public C API as an embedder would,
// in a workspace with a memory cap (so that hostile shapes end in
// DP_ERR_OUT_OF_MEMORY, not in the fuzzer's malloc limit), and check the
// API's own promises. A broken promise aborts: libFuzzer reports it as a
// finding with its input.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <string>
#include <unordered_map>
#include <vector>

#include "capi/handles.h"  // to read a definition's external inputs
#include "core/error.h"
#include "dp/dp.h"
#include "graph/memory_plan.h"
#include "graph/task_graph.h"

namespace dp::fuzz {

// Small enough that no op of a fuzzed net can run for long either.
constexpr uint64_t kWorkspaceBytes = 1u << 20;

[[noreturn]] inline void Broken(const char* what, const char* detail = "") {
  std::fprintf(stderr, "dp fuzz: broken promise: %s %s\n", what, detail);
  std::abort();
}

// True on success; a failure must carry a known code and a message.
inline bool Ok(dp_status* s) {
  if (s == nullptr) return true;
  const int32_t code = dp_status_code(s);
  const char* msg = dp_status_message(s);
  if (code <= 0 || msg == nullptr || msg[0] == '\0' || std::string(dp_status_code_name(code)).empty())
    Broken("a failed call returned a status without a code or message");
  dp_status_free(s);
  return false;
}

// A call that must succeed on what the library itself produced.
inline void MustSucceed(dp_status* s, const char* what) {
  if (s != nullptr) Broken(what, dp_status_message(s));
}

// One file per process and tag ("idx", "checkpoint"), in the temporary
// directory: where targets of file parsers put their input.
inline std::string TempPath(const char* tag) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/dp_fuzz_" + tag + "_" + std::to_string(::getpid());
}

// Writes `size` bytes to `path` (a broken promise if it cannot).
inline void WriteBytes(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size)) Broken("cannot write", path.c_str());
  std::fclose(f);
}

inline dp_workspace* CappedWorkspace() {
  dp_workspace_options o;
  dp_workspace_options_init(&o, sizeof o);
  o.max_bytes = kWorkspaceBytes;
  dp_workspace* ws = nullptr;
  MustSucceed(dp_workspace_create_with_options(&o, &ws), "creating a workspace");
  return ws;
}

// Feeds each name a small tensor: int32 labels for names that look like
// labels, float32 [2, 8] otherwise, with values from `seed` bytes.
inline void FeedSmallInputs(dp_workspace* ws, const std::vector<std::string>& names, const uint8_t* seed,
                            size_t seed_size) {
  for (size_t n = 0; n < names.size(); ++n) {
    const bool label = names[n].find("label") != std::string::npos;
    const int64_t dims_f[] = {2, 8};
    const int64_t dims_l[] = {2};
    float f[16];
    int32_t l[2];
    for (size_t i = 0; i < 16; ++i) {
      uint8_t b = seed_size ? seed[(n * 16 + i) % seed_size] : 0;
      f[i] = static_cast<float>(b) / 64.0f - 2.0f;
      if (i < 2) l[i] = b % 4;
    }
    dp_tensor* t = nullptr;
    MustSucceed(label ? dp_tensor_create(DP_DTYPE_INT32, dims_l, 1, l, sizeof l, &t)
                      : dp_tensor_create(DP_DTYPE_FLOAT32, dims_f, 2, f, sizeof f, &t),
                "creating an input tensor");
    Ok(dp_workspace_feed(ws, names[n].c_str(), t));
    dp_tensor_free(t);
  }
}

// Creates and runs `def` in `ws` (twice: re-runs take another path), then
// fetches its outputs. Returns whether the runs succeeded.
// Every memory plan of an accepted net passes the verifier: sharing and
// freeing, against the dependency graph (the async executor's orders) and
// the list order (the simple executor's), first fit and, with sizes drawn
// from the input, best fit with scratch.
inline void CheckMemoryPlans(const dp_netdef* def, const uint8_t* data, size_t size) {
  const NetDef& net = *def->def;
  std::vector<DeviceOption> devices;
  for (const auto& op : net.ops) devices.push_back(net.OpDevice(op));
  const TaskGraph dag = BuildTaskGraph(net, devices);
  const TaskGraph list = ListOrderGraph(net.ops.size());
  std::unordered_map<std::string, size_t> sizes;
  std::vector<size_t> scratch;
  size_t k = 0;
  auto draw = [&]() -> size_t {
    if (size == 0) return 0;
    const size_t byte = data[k % size];
    ++k;
    return byte << (k % 13);
  };
  for (const auto& op : net.ops) {
    for (const auto& out : op.outputs) sizes[out] = draw();
    scratch.push_back(k % 3 == 0 ? 0 : draw());
  }
  for (const TaskGraph* order : {&dag, &list})
    for (MemoryMode mode : {MemoryMode::kShare, MemoryMode::kFree})
      for (bool sized : {false, true}) {
        try {
          const MemoryPlan plan =
              PlanMemory(net, *order, devices, mode, {}, sized ? &sizes : nullptr, sized ? &scratch : nullptr);
          VerifyMemoryPlan(net, *order, devices, plan);
        } catch (const Error& e) {
          Broken("the memory plan of an accepted net failed its verifier:", e.what());
        }
      }
}

inline bool CreateAndRun(dp_workspace* ws, const dp_netdef* def, int32_t memory = DP_MEMORY_DEFAULT) {
  dp_net* net = nullptr;
  dp_net_options options;
  dp_net_options_init(&options, sizeof options);
  options.memory = memory;
  if (!Ok(dp_net_create(ws, def, &options, &net))) return false;
  bool ok = Ok(dp_net_run(net)) && Ok(dp_net_run(net));
  for (const std::string& name : def->def->external_outputs) {
    dp_tensor* t = nullptr;
    if (Ok(dp_workspace_fetch(ws, name.c_str(), &t))) dp_tensor_free(t);
  }
  dp_net_free(net);
  return ok;
}

inline bool SameBytes(const dp_buffer* a, const dp_buffer* b) {
  return dp_buffer_size(a) == dp_buffer_size(b) &&
         std::memcmp(dp_buffer_data(a), dp_buffer_data(b), dp_buffer_size(a)) == 0;
}

// What the library writes, it reads back to the same bytes, from binary and
// from JSON (every number printed reads back bit for bit).
inline void CheckNetRoundTrip(const dp_netdef* def) {
  dp_buffer* b1 = nullptr;
  MustSucceed(dp_netdef_to_buffer(def, &b1), "serialising an accepted net");
  dp_netdef* again = nullptr;
  MustSucceed(dp_netdef_from_buffer(dp_buffer_data(b1), dp_buffer_size(b1), &again), "reloading a written net");
  dp_buffer* b2 = nullptr;
  MustSucceed(dp_netdef_to_buffer(again, &b2), "serialising a reloaded net");
  if (!SameBytes(b1, b2)) Broken("a net written, read and written again changed");
  dp_buffer* json = nullptr;
  MustSucceed(dp_netdef_to_json(def, &json), "printing an accepted net as JSON");
  dp_netdef* from_json = nullptr;
  MustSucceed(dp_netdef_from_json(static_cast<const char*>(dp_buffer_data(json)), dp_buffer_size(json), &from_json),
              "reloading a net's JSON");
  dp_buffer* b3 = nullptr;
  MustSucceed(dp_netdef_to_buffer(from_json, &b3), "serialising a net reloaded from JSON");
  if (!SameBytes(b1, b3)) Broken("a net printed as JSON and read back changed");
  dp_buffer_free(b3);
  dp_netdef_free(from_json);
  dp_buffer_free(json);
  dp_buffer_free(b2);
  dp_netdef_free(again);
  dp_buffer_free(b1);
}

}  // namespace dp::fuzz
