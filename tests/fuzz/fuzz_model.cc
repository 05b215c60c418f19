// Fuzz target: a model definition from outside (binary, or JSON with
// DP_FUZZ_JSON), which must read back to the same bytes from its binary and
// its JSON; then its one-device training nets are built, created and
// run for one step with small inputs, its inference net (default outputs) is
// built and run on the trained params, and it is parallelized over two CPU
// replicas.
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace dp::fuzz;

void TrainOneStep(const dp_model* model, const uint8_t* data, size_t size) {
  dp_netdef* init = nullptr;
  dp_netdef* train = nullptr;
  dp_netdef* eval = nullptr;
  if (!Ok(dp_model_build_training(model, nullptr, &init, &train, &eval))) return;
  dp_workspace* ws = CappedWorkspace();
  if (CreateAndRun(ws, init)) {
    FeedSmallInputs(ws, model->def->inputs, data, size);
    if (CreateAndRun(ws, train)) CreateAndRun(ws, eval);
    dp_netdef* inference = nullptr;
    if (Ok(dp_model_build_inference(model, nullptr, 0, nullptr, &inference))) {
      CheckNetRoundTrip(inference);
      CreateAndRun(ws, inference);
      dp_netdef_free(inference);
    }
  }
  dp_workspace_free(ws);
  dp_netdef_free(eval);
  dp_netdef_free(train);
  dp_netdef_free(init);
}

void ParallelizeOverTwoCpus(const dp_model* model) {
  const int32_t ids[] = {0, 1};
  dp_parallel_options o;
  dp_parallel_options_init(&o, sizeof o);  // (the INIT macro is for C: -Wextra flags it in C++)
  o.device_ids = ids;
  o.num_devices = 2;
  o.uneven_split = 1;
  dp_parallel_model* pm = nullptr;
  if (!Ok(dp_model_parallelize(model, &o, &pm))) return;
  dp_netdef* nets[3] = {nullptr, nullptr, nullptr};
  MustSucceed(dp_parallel_model_nets(pm, &nets[0], &nets[1], &nets[2]), "reading a parallel model's nets");
  for (dp_netdef* n : nets) {
    CheckNetRoundTrip(n);
    dp_netdef_free(n);
  }
  dp_parallel_model_free(pm);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dp_model* model = nullptr;
#ifdef DP_FUZZ_JSON
  if (!Ok(dp_model_from_json(reinterpret_cast<const char*>(data), size, &model))) return 0;
#else
  if (!Ok(dp_model_from_buffer(data, size, &model))) return 0;
#endif
  dp_buffer* b = nullptr;
  MustSucceed(dp_model_to_buffer(model, &b), "serialising an accepted model");
  dp_model* again = nullptr;
  MustSucceed(dp_model_from_buffer(dp_buffer_data(b), dp_buffer_size(b), &again), "reloading a written model");
  dp_model_free(again);
  // Its JSON reads back to the same model (every number bit for bit).
  dp_buffer* json = nullptr;
  MustSucceed(dp_model_to_json(model, &json), "printing an accepted model as JSON");
  dp_model* from_json = nullptr;
  MustSucceed(dp_model_from_json(static_cast<const char*>(dp_buffer_data(json)), dp_buffer_size(json), &from_json),
              "reloading a model's JSON");
  dp_buffer* b2 = nullptr;
  MustSucceed(dp_model_to_buffer(from_json, &b2), "serialising a model reloaded from JSON");
  if (!SameBytes(b, b2)) Broken("a model printed as JSON and read back changed");
  dp_buffer_free(b2);
  dp_model_free(from_json);
  dp_buffer_free(json);
  dp_buffer_free(b);
  TrainOneStep(model, data, size);
  ParallelizeOverTwoCpus(model);
  dp_model_free(model);
  return 0;
}
