// Save and Load: checkpoint files as operators, so that a net can write its
// own state (everything is an operator). Both run on the CPU: Save reads
// host tensors, Load writes them (Copy ops move them to a GPU).
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "ops/gradient_registry.h"
#include "ops/operator.h"

namespace dp {
namespace {

// The names in the file: the `names` argument (one per blob), or the blobs'
// own names.
std::vector<std::string> FileNames(const ArgReader& args, const std::vector<std::string>& blobs,
                                   const std::string& label) {
  std::vector<std::string> names = args.Strings("names", blobs);
  DP_ENFORCE_CODE(names.size() == blobs.size(), Code::kInvalidArgument, label, ": 'names' has ", names.size(),
                  " entries for ", blobs.size(), " blobs");
  return names;
}

class SaveOp final : public Operator {
 public:
  explicit SaveOp(const OpInit& init)
      : Operator(init),
        path_(args().String("path")),
        names_(FileNames(args(), def().inputs, label())),
        model_name_(args().String("model_name", std::string())),
        iteration_(args().Int("iteration", -1)) {
    CheckIteration(iteration_, Code::kInvalidArgument, StrCat(label(), ": argument 'iteration'"));
  }

 private:
  void RunOnDevice() override {
    std::vector<std::pair<std::string, Tensor>> tensors;
    tensors.reserve(names_.size());
    for (int i = 0; i < InputSize(); ++i) {
      const Tensor& t = Input(i);
      Tensor host;  // a device tensor is copied to the host (waiting for its device) first
      if (t.device().type == DeviceType::kCPU) {
        host = t;
      } else {
        host.CopyFrom(t);
      }
      tensors.emplace_back(names_[static_cast<size_t>(i)], std::move(host));
    }
    CheckpointMeta meta;
    meta.model_name = model_name_;
    meta.iteration = iteration_;
    WriteCheckpoint(path_, std::move(tensors), meta);
  }

  const std::string path_;
  const std::vector<std::string> names_;
  const std::string model_name_;
  const int64_t iteration_;
};

class LoadOp final : public Operator {
 public:
  explicit LoadOp(const OpInit& init)
      : Operator(init),
        path_(args().String("path")),
        names_(FileNames(args(), def().outputs, label())),
        verify_(args().Int("verify", 1) != 0),
        mapped_(args().Int("mmap", 0) != 0) {}

 private:
  void RunOnDevice() override {
    CheckpointReader reader(path_);
    // Every tensor read, verified and checked against its output first: a
    // failure leaves every output as it was.
    std::vector<Tensor> loaded;
    loaded.reserve(names_.size());
    for (int o = 0; o < OutputSize(); ++o) {
      const std::string& name = names_[static_cast<size_t>(o)];
      const int i = reader.Find(name);
      DP_ENFORCE_CODE(i >= 0, Code::kNotFound, "checkpoint '", path_, "' has no tensor '", name, "' for ",
                      OutputDesc(o));
      const CheckpointEntry& e = reader.entries()[static_cast<size_t>(i)];
      const Blob* b = output_blobs()[static_cast<size_t>(o)];
      if (b->IsType<Tensor>() && b->Get<Tensor>().defined()) {
        const Tensor& have = b->Get<Tensor>();
        DP_ENFORCE_CODE(have.dtype() == e.dtype && have.dims() == e.dims,
                        have.dtype() != e.dtype ? Code::kDType : Code::kShape, "checkpoint '", path_, "', tensor '",
                        name, "' is ", DTypeName(e.dtype), DimsString(e.dims), " but ", OutputDesc(o), " is ",
                        have.DebugString());
      }
      loaded.push_back(reader.Load(static_cast<size_t>(i), verify_, mapped_, budget()));
    }
    for (int o = 0; o < OutputSize(); ++o) *Output(o) = std::move(loaded[static_cast<size_t>(o)]);
  }

  const std::string path_;
  const std::vector<std::string> names_;
  const bool verify_;
  const bool mapped_;
};

}  // namespace

DP_OPERATOR_SCHEMA(Save)
    .NumInputs(1, std::numeric_limits<int>::max())
    .NumOutputs(0)
    .RequiredArg("path", ArgKind::kString, "the checkpoint file, written atomically (temporary file, fsync, rename)")
    .Arg("names", ArgKind::kStrings, ArgDefault::Described("the input blobs' names"),
         "the name of each input in the file")
    .Arg("model_name", ArgKind::kString, "", "recorded in the file")
    .Arg("iteration", ArgKind::kInt, -1, "the training iteration recorded in the file (-1: unknown)")
    .InputsCanCrossDevices()
    .HostOp("writes a file; device inputs are copied to the host first")
    .Doc("Writes its input tensors (any device) to a checkpoint file (docs/CHECKPOINT.md).");

DP_OPERATOR_SCHEMA(Load)
    .NumInputs(0)
    .NumOutputs(1, std::numeric_limits<int>::max())
    .RequiredArg("path", ArgKind::kString, "the checkpoint file")
    .Arg("names", ArgKind::kStrings, ArgDefault::Described("the output blobs' names"),
         "the name in the file of each output")
    .Arg("verify", ArgKind::kInt, 1, "1: check each tensor's checksum")
    .Arg("mmap", ArgKind::kInt, 0, "1: outputs are read-only views of the mapped file (copy-on-write)")
    .HostOp("reads a file into host tensors; device readers get copies")
    .Doc("Reads tensors of a checkpoint file into its outputs (CPU), all verified before any output changes; an "
         "output that already holds a tensor must have the file's dtype and shape.");

DP_REGISTER_CPU_OPERATOR(Save, SaveOp);
DP_REGISTER_CPU_OPERATOR(Load, LoadOp);
DP_NO_GRADIENT(Save);
DP_NO_GRADIENT(Load);

}  // namespace dp
