// Fuzz target: an ONNX model from outside (protobuf bytes, as
// dp_model_from_onnx_buffer takes them). An accepted model must be a valid dp
// model (its binary form reloads; its nets' memory plans verify); its init
// net and its inference net then run in a capped workspace on inputs of the
// dims the graph declares (small ones where it does not say, or says big),
// and it is exported: export never fails as a bug of dp's (DP_ERR_INTERNAL:
// an ONNX model the checker rejects), and what it writes imports without a
// crash. The same bytes are imported with the softmax cross-entropy head too.
#include "onnx_io/onnx_proto.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace dp::fuzz;

// Elements of one input at most: the graph's dims are used when their
// product stays within it.
constexpr int64_t kMaxInputElements = 4096;

// Feeds each model input a float32 tensor of the dims the graph declares
// for it (a symbolic or missing dim is 2), from `seed` bytes; [2, 8] when
// those would be too many elements or the graph says nothing.
void FeedDeclaredInputs(dp_workspace* ws, const dp_model* model, const onnx::ModelProto& proto, const uint8_t* seed,
                        size_t seed_size) {
  for (const std::string& name : model->def->inputs) {
    std::vector<int64_t> dims{2, 8};
    for (const auto& info : proto.graph().input()) {
      if (info.name() != name || !info.type().tensor_type().has_shape()) continue;
      std::vector<int64_t> declared;
      int64_t n = 1;
      for (const auto& d : info.type().tensor_type().shape().dim()) {
        const int64_t v = d.has_dim_value() && d.dim_value() > 0 ? d.dim_value() : 2;
        declared.push_back(v);
        n = v > kMaxInputElements ? kMaxInputElements + 1 : n * v;
        if (n > kMaxInputElements) break;
      }
      if (n <= kMaxInputElements && declared.size() <= 6) dims = declared;
    }
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> values(static_cast<size_t>(n));
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = seed_size ? static_cast<float>(seed[i % seed_size]) / 64.0f - 2.0f : 0.0f;
    dp_tensor* t = nullptr;
    MustSucceed(dp_tensor_create(DP_DTYPE_FLOAT32, dims.data(), dims.size(), values.data(), values.size() * 4, &t),
                "creating an input tensor");
    Ok(dp_workspace_feed(ws, name.c_str(), t));
    dp_tensor_free(t);
  }
}

void RunAndExport(const dp_model* model, const onnx::ModelProto& proto, const uint8_t* data, size_t size) {
  dp_netdef* init = nullptr;
  MustSucceed(dp_model_net(model, DP_MODEL_INIT_NET, &init), "reading a model's init net");
  CheckMemoryPlans(init, data, size);
  dp_workspace* ws = CappedWorkspace();
  dp_netdef* inference = nullptr;
  if (CreateAndRun(ws, init) && Ok(dp_model_build_inference(model, nullptr, 0, nullptr, &inference))) {
    CheckMemoryPlans(inference, data, size);
    FeedDeclaredInputs(ws, model, proto, data, size);
    if (CreateAndRun(ws, inference)) {
      dp_buffer* onnx = nullptr;
      dp_status* s = dp_model_to_onnx(model, ws, nullptr, &onnx);
      if (dp_status_code(s) == DP_ERR_INTERNAL) Broken("exporting an imported model:", dp_status_message(s));
      if (Ok(s)) {
        dp_model* again = nullptr;
        if (Ok(dp_model_from_onnx_buffer(dp_buffer_data(onnx), dp_buffer_size(onnx), nullptr, &again)))
          dp_model_free(again);
        dp_buffer_free(onnx);
      }
    }
  }
  dp_netdef_free(inference);
  dp_workspace_free(ws);
  dp_netdef_free(init);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dp_model* model = nullptr;
  if (!Ok(dp_model_from_onnx_buffer(data, size, nullptr, &model))) return 0;
  // Accepted: a valid dp model, which reloads from its own binary form.
  dp_buffer* b = nullptr;
  MustSucceed(dp_model_to_buffer(model, &b), "serialising an imported model");
  dp_model* again = nullptr;
  MustSucceed(dp_model_from_buffer(dp_buffer_data(b), dp_buffer_size(b), &again), "reloading an imported model");
  dp_model_free(again);
  dp_buffer_free(b);
  onnx::ModelProto proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) Broken("dp accepted bytes protobuf does not parse");
  RunAndExport(model, proto, data, size);
  dp_model_free(model);
  dp_onnx_import_options head;
  dp_onnx_import_options_init(&head, sizeof head);
  head.head = DP_ONNX_HEAD_SOFTMAX_CROSS_ENTROPY;
  if (Ok(dp_model_from_onnx_buffer(data, size, &head, &model))) dp_model_free(model);
  return 0;
}
