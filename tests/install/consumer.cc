// Built against an installed dp through CMake alone: find_package(dp 0.5
// REQUIRED) and target_link_libraries(... dp::dp) (tests/install/CMakeLists.txt).
#include <dp/dp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace {

// Each handle owned once, released by the library.
struct Free {
  void operator()(dp_workspace* p) const { dp_workspace_free(p); }
  void operator()(dp_netdef* p) const { dp_netdef_free(p); }
  void operator()(dp_net* p) const { dp_net_free(p); }
  void operator()(dp_tensor* p) const { dp_tensor_free(p); }
};
template <typename T>
using Owned = std::unique_ptr<T, Free>;

// Throws nothing: a failed call prints its status and ends the program.
void Check(dp_status* st, const char* what) {
  if (st == nullptr) return;
  std::fprintf(stderr, "consumer: %s: %s\n", what, dp_status_message(st));
  dp_status_free(st);
  std::exit(1);
}

}  // namespace

int main() {
  const std::string json =
      R"({"external_inputs":["x"],"ops":[{"type":"Relu","inputs":["x"],"outputs":["y"]}]})";
  const float x[3] = {1.5f, -2.0f, 0.25f};
  const int64_t dims[1] = {3};
  dp_workspace* ws = nullptr;
  dp_netdef* def = nullptr;
  dp_net* net = nullptr;
  dp_tensor* t = nullptr;
  dp_tensor* y = nullptr;
  Check(dp_workspace_create(&ws), "dp_workspace_create");
  Owned<dp_workspace> ws_owner(ws);
  Check(dp_netdef_from_json(json.data(), json.size(), &def), "dp_netdef_from_json");
  Owned<dp_netdef> def_owner(def);
  Check(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 1, x, sizeof x, &t), "dp_tensor_create");
  Owned<dp_tensor> t_owner(t);
  Check(dp_workspace_feed(ws, "x", t), "dp_workspace_feed");
  Check(dp_net_create(ws, def, nullptr, &net), "dp_net_create");
  Owned<dp_net> net_owner(net);
  Check(dp_net_run(net), "dp_net_run");
  Check(dp_workspace_fetch(ws, "y", &y), "dp_workspace_fetch");
  Owned<dp_tensor> y_owner(y);
  const auto* p = static_cast<const float*>(dp_tensor_data(y));
  std::printf("installed dp %s via CMake: relu = [%g, %g, %g]\n", dp_version(), p[0], p[1], p[2]);
  return p[0] == 1.5f && p[1] == 0.0f && p[2] == 0.25f && dp_version_number() == DP_VERSION_NUMBER ? 0 : 1;
}
