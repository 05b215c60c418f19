// dp_tensor and dp_workspace.
#include <cstdint>
#include <cstring>

#include "capi/handles.h"

namespace {

dp::Dims CheckedDims(const char* fn, const int64_t* dims, size_t ndim) {
  DP_ENFORCE_CODE(ndim == 0 || dims != nullptr, dp::Code::kInvalidArgument, fn, ": dims is NULL but ndim is ",
                  ndim);
  DP_ENFORCE_CODE(ndim <= 64, dp::Code::kInvalidArgument, fn, ": ndim ", ndim, " exceeds 64");
  dp::Dims out(dims, dims + ndim);
  for (size_t i = 0; i < ndim; ++i)
    DP_ENFORCE_CODE(out[i] >= 0, dp::Code::kShape, fn, ": dims[", i, "] is negative (", out[i], ")");
  return out;
}

dp::DType CheckedDType(const char* fn, int32_t dtype) {
  dp::DType t;
  DP_ENFORCE_CODE(dp::DTypeFromInt(dtype, &t), dp::Code::kDType, fn, ": unknown dtype ", dtype);
  return t;
}

// Byte size of a tensor; element counts whose size overflows size_t (a
// wrapped size would let a huge tensor pass as a small one) give kShape.
size_t CheckedBytes(const char* fn, dp::DType dtype, const dp::Dims& dims) {
  try {
    return dp::TensorBytes(dims, dtype);
  } catch (dp::Error& e) {
    throw e.Prepend(fn);
  }
}

size_t ExpectedBytes(const char* fn, dp::DType dtype, const dp::Dims& dims, size_t nbytes) {
  size_t want = CheckedBytes(fn, dtype, dims);
  DP_ENFORCE_CODE(nbytes == want, dp::Code::kShape, fn, ": nbytes is ", nbytes, " but a ", dp::DTypeName(dtype),
                  dp::DimsString(dims), " tensor has ", want);
  return want;
}

// Checks caller memory for a tensor: dtype, dims, size and alignment.
void CheckCallerMemory(const char* fn, int32_t dtype, const int64_t* dims, size_t ndim,
                                              const void* data, size_t nbytes, dp::Dims* out_dims,
                                              dp::DType* out_dtype) {
  *out_dtype = CheckedDType(fn, dtype);
  *out_dims = CheckedDims(fn, dims, ndim);
  ExpectedBytes(fn, *out_dtype, *out_dims, nbytes);
  DP_ENFORCE_CODE(nbytes == 0 || data != nullptr, dp::Code::kInvalidArgument, fn, ": data is NULL");
  DP_ENFORCE_CODE(reinterpret_cast<uintptr_t>(data) % dp::DTypeSize(*out_dtype) == 0, dp::Code::kInvalidArgument,
                  fn, ": data is not aligned to its element size ", dp::DTypeSize(*out_dtype));
}

}  // namespace

extern "C" {

size_t dp_dtype_size(int32_t dtype) {
  dp::DType t;
  return dp::DTypeFromInt(dtype, &t) ? dp::DTypeSize(t) : 0;
}

dp_status* dp_tensor_create(int32_t dtype, const int64_t* dims, size_t ndim, const void* data, size_t nbytes,
                            dp_tensor** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  dp::DType t = CheckedDType(__func__, dtype);
  dp::Dims d = CheckedDims(__func__, dims, ndim);
  CheckedBytes(__func__, t, d);
  auto h = std::make_unique<dp_tensor>();
  if (data != nullptr) {
    ExpectedBytes(__func__, t, d, nbytes);
    h->tensor.Resize(d, t);
    if (nbytes) std::memcpy(h->tensor.raw_mutable_data(), data, nbytes);
  } else {
    h->tensor = dp::Tensor::Zeros(d, t);  // large ones: zero pages, taking memory only once written
  }
  *out = h.release();
  DP_API_END
}

dp_status* dp_tensor_create_borrowed(int32_t dtype, const int64_t* dims, size_t ndim, const void* data,
                                     size_t nbytes, dp_tensor** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  dp::Dims d;
  dp::DType t;
  CheckCallerMemory(__func__, dtype, dims, ndim, data, nbytes, &d, &t);
  auto h = std::make_unique<dp_tensor>();
  h->tensor = dp::Tensor::FromStorage(std::move(d), t, dp::Storage::Borrow({}, const_cast<void*>(data), nbytes));
  *out = h.release();
  DP_API_END
}

dp_status* dp_tensor_create_owned(int32_t dtype, const int64_t* dims, size_t ndim, void* data, size_t nbytes,
                                  dp_deleter deleter, void* user_data, dp_tensor** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  dp::Dims d;
  dp::DType t;
  CheckCallerMemory(__func__, dtype, dims, ndim, data, nbytes, &d, &t);
  auto h = std::make_unique<dp_tensor>();  // allocate before taking ownership
  auto storage = dp::Storage::Adopt({}, data, nbytes, dp::ExternalDeleter{deleter, user_data});
  h->tensor = dp::Tensor::FromStorage(std::move(d), t, std::move(storage));  // cannot fail: sizes checked
  *out = h.release();
  DP_API_END
}

int32_t dp_tensor_dtype(const dp_tensor* tensor) {
  return tensor ? static_cast<int32_t>(tensor->tensor.dtype()) : 0;
}

size_t dp_tensor_ndim(const dp_tensor* tensor) { return tensor ? tensor->tensor.dims().size() : 0; }

const int64_t* dp_tensor_dims(const dp_tensor* tensor) {
  return tensor && !tensor->tensor.dims().empty() ? tensor->tensor.dims().data() : nullptr;
}

int64_t dp_tensor_numel(const dp_tensor* tensor) { return tensor ? tensor->tensor.numel() : 0; }

size_t dp_tensor_nbytes(const dp_tensor* tensor) { return tensor ? tensor->tensor.nbytes() : 0; }

const void* dp_tensor_data(const dp_tensor* tensor) { return tensor ? tensor->tensor.raw_data() : nullptr; }

dp_status* dp_tensor_copy_to(const dp_tensor* tensor, void* dst, size_t nbytes) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(tensor);
  const dp::Tensor& t = tensor->tensor;
  DP_ENFORCE_CODE(nbytes == t.nbytes(), dp::Code::kShape, __func__, ": nbytes is ", nbytes,
                  " but the tensor ", t.DebugString(), " has ", t.nbytes(), " bytes");
  DP_CHECK_ARG(nbytes == 0 || dst != nullptr, "dst is NULL");
  dp::CopyBytes(nbytes, t.raw_data(), t.device(), dst, dp::DeviceOption{});
  DP_API_END
}

void dp_tensor_free(dp_tensor* tensor) { delete tensor; }

dp_status* dp_workspace_create(dp_workspace** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  *out = new dp_workspace{std::make_shared<dp::Workspace>()};
  DP_API_END
}

void dp_workspace_options_init(dp_workspace_options* options, size_t struct_size) {
  dp::capi::InitOptions(options, struct_size);
}

dp_status* dp_workspace_create_with_options(const dp_workspace_options* options, dp_workspace** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  dp::WorkspaceOptions o;
  if (options != nullptr) {
    DP_CHECK_OPTIONS_SIZE(options, max_bytes);
    o.max_bytes = options->max_bytes;
  }
  auto h = std::make_unique<dp_workspace>();
  h->ws = std::make_shared<dp::Workspace>(o);
  *out = h.release();
  DP_API_END
}

void dp_workspace_free(dp_workspace* workspace) { delete workspace; }

dp_status* dp_workspace_feed(dp_workspace* workspace, const char* name, const dp_tensor* tensor) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(workspace);
  DP_CHECK_NOT_NULL(name);
  DP_CHECK_NOT_NULL(tensor);
  DP_CHECK_ARG(name[0] != '\0', "blob name is empty");
  // Noted: the next run reports it if no net reads it.
  workspace->ws->feeds().NoteFed(workspace->ws->Feed(name, tensor->tensor));
  DP_API_END
}

dp_status* dp_workspace_fetch(dp_workspace* workspace, const char* name, dp_tensor** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(workspace);
  DP_CHECK_NOT_NULL(name);
  DP_CHECK_NOT_NULL(out);
  dp::Tensor t = workspace->ws->GetTensor(name);  // under the blob's lock: feeds may race with it
  DP_ENFORCE_CODE(t.defined(), dp::Code::kNotFound, __func__, ": blob '", name, "' holds an empty tensor");
  auto h = std::make_unique<dp_tensor>();
  if (t.device().type == dp::DeviceType::kCPU) {
    h->tensor = std::move(t);  // shares storage; later writes to the blob get fresh storage
  } else {
    h->tensor.Resize(t.dims(), t.dtype());  // device tensors come back to the host
    h->tensor.CopyFrom(t);
  }
  *out = h.release();
  DP_API_END
}

dp_status* dp_workspace_has_blob(const dp_workspace* workspace, const char* name, int32_t* out_has) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(workspace);
  DP_CHECK_NOT_NULL(name);
  DP_CHECK_NOT_NULL(out_has);
  const dp::Blob* b = workspace->ws->GetBlob(name);
  *out_has = (b != nullptr && !b->empty()) ? 1 : 0;
  DP_API_END
}

dp_status* dp_workspace_list_blobs(const dp_workspace* workspace, const char* prefix, dp_string_list** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(workspace);
  DP_CHECK_NOT_NULL(out);
  *out = new dp_string_list{workspace->ws->Blobs(prefix ? prefix : "")};
  DP_API_END
}

size_t dp_string_list_size(const dp_string_list* list) { return list ? list->items.size() : 0; }

const char* dp_string_list_get(const dp_string_list* list, size_t i) {
  return list && i < list->items.size() ? list->items[i].c_str() : nullptr;
}

void dp_string_list_free(dp_string_list* list) { delete list; }

}  // extern "C"
