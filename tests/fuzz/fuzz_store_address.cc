// Fuzz target: store addresses from outside (dp_parallel_options.store,
// DP_STORE). Each input is the URL of a two-process job given to
// dp_model_parallelize (which checks it before any net runs; nothing
// connects until the init net does), and to the engine's parser directly:
// an accepted URL must print as a URL that parses to itself (the form
// messages and the store's keys use), and both paths must agree.
#include "comm/store_address.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace dp::fuzz;

const char kModel[] =
    "{\"init_net\": {\"ops\": [{\"type\": \"ConstantFill\", \"outputs\": [\"w\"], \"args\": ["
    "  {\"name\": \"shape\", \"ints\": [1, 2]}]}, {\"type\": \"ConstantFill\", \"outputs\": [\"b\"], \"args\": ["
    "  {\"name\": \"shape\", \"ints\": [1]}]}]},"
    " \"forward_net\": {\"ops\": [{\"type\": \"FC\", \"inputs\": [\"x\", \"w\", \"b\"], \"outputs\": [\"y\"]},"
    "  {\"type\": \"AveragedLoss\", \"inputs\": [\"y\"], \"outputs\": [\"loss\"]}]},"
    " \"params\": [\"w\", \"b\"], \"inputs\": [\"x\"], \"losses\": [\"loss\"],"
    " \"optimizer\": {\"type\": \"sgd\", \"lr\": 0.1}}";

const dp_model* Model() {
  static dp_model* model = [] {
    dp_model* m = nullptr;
    MustSucceed(dp_model_from_json(kModel, sizeof kModel - 1, &m), "the fuzz target's own model");
    return m;
  }();
  return model;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  bool engine_ok = true;
  try {
    const dp::StoreAddress a = dp::ParseStoreAddress(url);
    const std::string printed = a.ToString();
    if (dp::ParseStoreAddress(printed).ToString() != printed)
      Broken("an accepted store address does not print as itself:", printed.c_str());
  } catch (const dp::Error& e) {
    engine_ok = false;
    if (e.code() != dp::Code::kInvalidArgument || e.message().find("store address") == std::string::npos)
      Broken("a refused store address did not get INVALID_ARGUMENT naming it:", e.what());
  }
  if (url.find('\0') != std::string::npos) return 0;  // a C string ends there
  dp_parallel_options o;
  dp_parallel_options_init(&o, sizeof o);
  o.num_shards = 2;
  o.shard_id = 1;
  o.store = url.c_str();
  dp_parallel_model* pm = nullptr;
  const bool api_ok = Ok(dp_model_parallelize(Model(), &o, &pm));
  if (api_ok != engine_ok) Broken("dp_model_parallelize and the parser disagree on", url.c_str());
  if (api_ok && dp_parallel_model_num_shards(pm) != 2) Broken("an accepted job lost its shards");
  dp_parallel_model_free(pm);
  return 0;
}
