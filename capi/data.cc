// dp_tensor_from_idx_file: IDX files (the MNIST format) into tensors.
#include "capi/handles.h"
#include "data/idx_reader.h"

extern "C" {

dp_status* dp_tensor_from_idx_file(const char* path, dp_tensor** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(path);
  DP_CHECK_NOT_NULL(out);
  DP_CHECK_ARG(path[0] != '\0', "path is empty");
  auto h = std::make_unique<dp_tensor>();
  h->tensor = dp::ReadIdx(path);
  *out = h.release();
  DP_API_END
}

}  // extern "C"
