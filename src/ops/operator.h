// Operator: one node of a net bound to its blobs, plus per-device registries
// of kernels. Everything a net does is an operator: math, gradients,
// optimizer updates, collectives.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/math_mode.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "graph/net_def.h"
#include "ops/op_schema.h"

namespace dp {

struct OpInit {
  const OperatorDef& def;
  size_t index;            // position in its net
  DeviceOption device;     // resolved device (op's own or the net's default)
  Workspace* ws;
  MathMode math = MathMode::kDefault;  // the net's (NetOptions::math): how CUDA GEMMs compute
};

// Told by Operator::Run when a kernel has returned, while the op's stream is
// still current: a net's memory plan (exec/net_memory.h) then frees or parks
// the blobs whose last access this was. Called from the thread that ran the
// op; never throws.
class OpObserver {
 public:
  virtual void OpFinished(size_t op_index) noexcept = 0;

 protected:
  ~OpObserver() = default;
};

class Operator {
 public:
  // Names ("input 0 'X'"), dims and dtypes of some inputs (DescribeInputs).
  struct InputInfos {
    std::vector<std::string> names;
    std::vector<const Dims*> dims;
    std::vector<DType> dtypes;
  };

  explicit Operator(const OpInit& init);
  virtual ~Operator() = default;
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  // Runs the kernel on ctx. Errors come out as dp::Error whose message starts
  // with this op's label and device, whatever the kernel threw:
  // std::bad_alloc and std::length_error become kOutOfMemory, other
  // exceptions kInternal.
  void Run(DeviceContext& ctx);

  const OperatorDef& def() const { return def_; }
  const std::string& label() const { return label_; }
  DeviceOption device() const { return device_; }
  size_t index() const { return index_; }
  MathMode math_mode() const { return math_; }
  const std::vector<Blob*>& input_blobs() const { return inputs_; }
  const std::vector<Blob*>& output_blobs() const { return outputs_; }

  // Set by the net between runs: whom Run tells when the kernel returned
  // (nullptr: nobody), and the memory plan's slot of output i (nullptr: none;
  // Output(i) puts it on the tensor, see Tensor::set_slot).
  void set_observer(OpObserver* observer) { observer_ = observer; }
  // A replayed CUDA graph did this op's work without running it: tells the
  // observer as Run would have (the net's memory plan lets go of the blobs
  // this op used last, as after any run).
  void Replayed() noexcept {
    if (observer_) observer_->OpFinished(index_);
  }
  void set_output_slot(int i, std::shared_ptr<StorageSlot> slot);
  std::shared_ptr<StorageSlot> output_slot(int i) const {
    return output_slots_.empty() ? nullptr : output_slots_[static_cast<size_t>(i)];
  }
  // The slot the op's scratch is lent from while it runs and given back to
  // when its kernel returns (nullptr: the op keeps its scratch), and the
  // bytes of scratch it holds now.
  void set_scratch_slot(std::shared_ptr<StorageSlot> slot);
  size_t scratch_bytes() const { return scratch_.storage() ? scratch_.storage()->nbytes() : 0; }
  const void* scratch_data() const { return scratch_.raw_data(); }

  // Why this op's kernel may not be recorded into a CUDA graph
  // (exec/graph_capture.h), or nullptr when it may: it only queues work on
  // its context's stream (no host synchronisation, no value read on the
  // host, no host-side state that changes from run to run, no allocation
  // once its outputs have their sizes). Kernels say so once checked.
  virtual const char* GraphCaptureObstacle() const { return "its kernel is not known to be safe to capture"; }

 protected:
  virtual void RunOnDevice() = 0;

  int InputSize() const { return static_cast<int>(inputs_.size()); }
  int OutputSize() const { return static_cast<int>(outputs_.size()); }
  // Input i as a tensor; kNotFound if never fed or produced, kDType if not a tensor.
  const Tensor& Input(int i) const;
  // Output i as a tensor (created empty when the blob holds nothing). Its
  // allocations (Resize, CopyFrom, copy-on-write) are charged to the
  // workspace's budget.
  Tensor* Output(int i);
  // Output i resized on this op's device; kOutOfMemory naming the output when
  // the workspace's limit (or the device) refuses the memory.
  Tensor* Output(int i, Dims dims, DType dtype);
  // Scratch memory for this run of the op, at least n elements of T, on the
  // op's device; what it held at the end of an earlier run is undefined (a
  // net's memory plan lends the block to other ops between runs of this
  // one). An op never runs concurrently with itself. Charged to
  // the workspace's budget like outputs: scratch sized from input shapes and
  // arguments (im2col columns) must not escape the cap. kOutOfMemory naming
  // the op when refused.
  template <typename T>
  T* Scratch(int64_t n) {
    size_t bytes;
    if (n < 0 || __builtin_mul_overflow(static_cast<uint64_t>(n), sizeof(T), &bytes))
      DP_THROW(Code::kOutOfMemory, "scratch of ", n, " elements of ", sizeof(T), " bytes does not fit in memory");
    return static_cast<T*>(ScratchBytes(bytes));
  }
  // "input 1 'W'" for messages.
  std::string InputDesc(int i) const;
  // Descriptions, dims and dtypes of inputs [begin, end): what the checks a
  // kernel shares with its shape inference take.
  InputInfos DescribeInputs(int begin, int end) const;
  std::string OutputDesc(int i) const;
  const ArgReader& args() const { return args_; }
  DeviceContext& context() const { return *ctx_; }
  // The workspace's budget, for tensors an op makes before they become its
  // outputs (a Load verifies every tensor before writing any output).
  const std::shared_ptr<MemoryBudget>& budget() const { return budget_; }

 private:
  const OperatorDef def_;
  const OpSchema* const schema_;  // validated nets always have one
  const size_t index_;
  const DeviceOption device_;
  const MathMode math_;
  const std::string label_;
  const ArgReader args_;
  std::vector<Blob*> inputs_;
  std::vector<Blob*> outputs_;
  void* ScratchBytes(size_t bytes);

  std::shared_ptr<MemoryBudget> budget_;  // the workspace's
  std::vector<std::shared_ptr<StorageSlot>> output_slots_;  // empty: none planned
  OpObserver* observer_ = nullptr;
  std::shared_ptr<StorageSlot> scratch_slot_;  // null: scratch_ is the op's own
  void ReturnScratch() noexcept;
  Tensor scratch_;                        // Scratch(); grows, never shrinks (unless lent: set_scratch_slot)
  DeviceContext* ctx_ = nullptr;
};

using OperatorFactory = std::function<std::unique_ptr<Operator>(const OpInit&)>;

// Kernels per device type, keyed by op type ("FC") or by type and engine
// ("FC_ENGINE_CUBLASLT"); an op with an engine falls back to the plain type.
class OperatorRegistry {
 public:
  static void Register(DeviceType device, const std::string& key, OperatorFactory factory);
  static bool Has(DeviceType device, const std::string& type, const std::string& engine = {});
  static std::unique_ptr<Operator> Create(const OpInit& init);  // kInvalidNet if no kernel
  static std::vector<std::string> Keys(DeviceType device);
  // The engines registered for `type` on `device` ("CUBLASLT" for
  // "FC_ENGINE_CUBLASLT"), sorted.
  static std::vector<std::string> Engines(DeviceType device, const std::string& type);
};

template <typename Op>
struct OperatorRegistration {
  OperatorRegistration(DeviceType device, const char* key) {
    OperatorRegistry::Register(device, key, [](const OpInit& init) { return std::make_unique<Op>(init); });
  }
};

}  // namespace dp

#define DP_REGISTER_OPERATOR(device, key, Class)                                               \
  [[maybe_unused]] static ::dp::OperatorRegistration<Class> DP_SCHEMA_CONCAT(dp_op_reg_, __COUNTER__)( \
      ::dp::DeviceType::device, #key)
#define DP_REGISTER_CPU_OPERATOR(key, Class) DP_REGISTER_OPERATOR(kCPU, key, Class)
#define DP_REGISTER_CUDA_OPERATOR(key, Class) DP_REGISTER_OPERATOR(kCUDA, key, Class)
