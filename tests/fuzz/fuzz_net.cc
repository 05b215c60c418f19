// Fuzz target: a net definition from outside (binary FlatBuffer, or JSON text
// when built with DP_FUZZ_JSON), then created and run with small inputs.
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dp::fuzz;
  dp_netdef* def = nullptr;
#ifdef DP_FUZZ_JSON
  if (!Ok(dp_netdef_from_json(reinterpret_cast<const char*>(data), size, &def))) return 0;
#else
  if (!Ok(dp_netdef_from_buffer(data, size, &def))) return 0;
#endif
  CheckNetRoundTrip(def);
  dp_workspace* ws = CappedWorkspace();
  FeedSmallInputs(ws, def->def->external_inputs, data, size);
  CreateAndRun(ws, def);
  dp_workspace_free(ws);
  dp_netdef_free(def);
  return 0;
}
