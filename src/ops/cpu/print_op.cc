// Print: logs its inputs (name, dtype, shape and the first `limit` values)
// through dp's log sink (Caffe2's PrintOp). It makes a net's intermediate
// values visible while it runs, on whatever thread runs it: with the async
// executor that is a worker thread, so the log callback of an embedding
// program (and of each binding) is reached from threads dp started.
#include <algorithm>
#include <limits>
#include <sstream>
#include <string>

#include "core/logging.h"
#include "ops/gradient_registry.h"
#include "ops/operator.h"

namespace dp {
namespace {

template <typename T>
void AppendValues(std::ostringstream& os, const Tensor& t, int64_t n) {
  const T* p = t.data<T>();
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) os << ", ";
    if constexpr (sizeof(T) == 1) {
      os << static_cast<int>(p[i]);
    } else {
      os << p[i];
    }
  }
}

class PrintOp final : public Operator {
 public:
  explicit PrintOp(const OpInit& init)
      : Operator(init), limit_(args().Int("limit", 10)), level_(args().Int("level", 1)) {
    DP_ENFORCE_CODE(limit_ >= 0, Code::kInvalidArgument, label(), ": 'limit' must be >= 0, got ", limit_);
    DP_ENFORCE_CODE(level_ >= 0 && level_ <= 3, Code::kInvalidArgument, label(),
                    ": 'level' must be 0 (debug) to 3 (error), got ", level_);
  }

 private:
  void RunOnDevice() override {
    const auto level = static_cast<LogLevel>(level_);
    if (!LogEnabled(level)) return;
    for (int i = 0; i < InputSize(); ++i) {
      const Tensor& t = Input(i);
      std::ostringstream os;
      os << label() << ": '" << def().inputs[static_cast<size_t>(i)] << "' " << DTypeName(t.dtype()) << ' '
         << DimsString(t.dims());
      const int64_t n = std::min<int64_t>(limit_, t.numel());
      // A device tensor's first values are copied to the host (this waits for
      // its device: Print is for debugging, not for the hot path).
      Tensor shown;
      if (n > 0 && t.device().type != DeviceType::kCPU) shown.CopyFrom(t);
      const Tensor& v = t.device().type == DeviceType::kCPU ? t : shown;
      if (n > 0) {
        os << " = [";
        switch (t.dtype()) {
          case DType::kFloat32: AppendValues<float>(os, v, n); break;
          case DType::kFloat64: AppendValues<double>(os, v, n); break;
          case DType::kInt32: AppendValues<int32_t>(os, v, n); break;
          case DType::kInt64: AppendValues<int64_t>(os, v, n); break;
          case DType::kUInt8: AppendValues<uint8_t>(os, v, n); break;
          case DType::kBool: AppendValues<bool>(os, v, n); break;
          default: os << "values not shown"; break;
        }
        os << (n < t.numel() ? ", ...]" : "]");
      }
      LogMessage(level, os.str());
    }
  }

  const int64_t limit_;
  const int64_t level_;
};

}  // namespace

DP_OPERATOR_SCHEMA(Print)
    .NumInputs(1, std::numeric_limits<int>::max())
    .NumOutputs(0)
    .Arg("limit", ArgKind::kInt, 10, "values shown per tensor (0: only dtype and shape)")
    .Arg("level", ArgKind::kInt, 1, "the log level: 0 debug, 1 info, 2 warning, 3 error")
    .InputsCanCrossDevices()
    .HostOp("logs on the host; device inputs' first values are copied there")
    .Doc("Logs each input's name, dtype, shape and first values through dp's log sink (dp_log_set_callback).");

DP_REGISTER_CPU_OPERATOR(Print, PrintOp);
DP_NO_GRADIENT(Print);

}  // namespace dp
