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
  CheckMemoryPlans(def, data, size);
  // As written, then sharing its temporaries' memory (the plan verified
  // when the net is made and again, sized, before its second run).
  for (int32_t memory : {DP_MEMORY_DEFAULT, DP_MEMORY_SHARE}) {
    dp_workspace* ws = CappedWorkspace();
    FeedSmallInputs(ws, def->def->external_inputs, data, size);
    CreateAndRun(ws, def, memory);
    dp_workspace_free(ws);
  }
  dp_netdef_free(def);
  return 0;
}
