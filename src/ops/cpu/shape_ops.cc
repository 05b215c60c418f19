// Reshape and Flatten change only metadata: the output shares the input's
// storage (copy-on-write keeps that safe; see core/tensor.h). No kernel here
// touches element data, so the same classes serve CUDA (registered at the
// end); the one thing read is Reshape's shape tensor, on the host.
#include "ops/gradient_registry.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

// `what` names the input in messages ("X 'data'").
Dims FlattenDims(const Dims& in, int64_t axis_arg, const std::string& what) {
  int axis = CanonicalAxis(axis_arg, static_cast<int>(in.size()), what, true);
  return {DimProduct(in, 0, axis), DimProduct(in, axis, static_cast<int>(in.size()))};
}

// Reshape: shape from the `shape` argument, or from input 1 (1-D int64).
// Optional output 1 receives the old shape (int64), for the gradient. Both
// shape tensors live on the host whatever the op's device: the kernel reads
// the new shape when it runs, and a CUDA op reading it from the device would
// stall its stream; old_shape is made on the host so that the gradient,
// Reshape(dY, old_shape), reads it there too.
class ReshapeOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    std::vector<int64_t> shape;
    if (InputSize() > 1) {
      DP_ENFORCE(!args().Has("shape"), "give the new shape either as argument 'shape' or as input 1, not both");
      const Tensor& s = Input(1);  // on the host on every device (HostInputs)
      DP_ENFORCE_CODE(s.dtype() == DType::kInt64 && s.ndim() == 1, Code::kShape, InputDesc(1),
                      " must be a 1-D int64 tensor, got ", s.DebugString());
      shape.assign(s.data<int64_t>(), s.data<int64_t>() + s.numel());
    } else {
      DP_ENFORCE(args().Has("shape"), "needs argument 'shape' or a shape tensor as input 1");
      shape = args().Ints("shape");
    }
    Dims old = x.dims();
    Dims out = ReshapeDims(old, shape, InputDesc(0));
    Tensor* y = Output(0);
    if (y != &x) y->ShareData(x);
    y->Reshape(out);
    if (OutputSize() > 1) {
      Tensor* old_shape = Output(1);
      old_shape->Resize({static_cast<int64_t>(old.size())}, DType::kInt64, Host());
      std::copy(old.begin(), old.end(), old_shape->mutable_data<int64_t>());
    }
  }

  // The op's own device on the CPU, else cpu:0.
  DeviceOption Host() const { return device().type == DeviceType::kCPU ? device() : DeviceOption{}; }

};

class FlattenOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    Dims out = FlattenDims(x.dims(), args().Int("axis", 1), InputDesc(0));
    Tensor* y = Output(0);
    if (y != &x) y->ShareData(x);
    y->Reshape(out);
  }
};

// Alias: Y is X (shared storage, no copy); gradients pass through.
class AliasOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    Tensor* y = Output(0);
    if (y != &x) y->ShareData(x);
  }
};

// ReshapeLike: X's elements with `like`'s dims (gradient of Reshape/Flatten).
class ReshapeLikeOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Dims dims = Input(1).dims();
    DP_ENFORCE_CODE(NumElements(dims) == x.numel(), Code::kShape, InputDesc(0), " ", DimsString(x.dims()),
                    " cannot take the shape ", DimsString(dims), " of ", InputDesc(1));
    Tensor* y = Output(0);
    if (y != &x) y->ShareData(x);
    y->Reshape(dims);
  }
};

DP_OPERATOR_SCHEMA(Reshape)
    .NumInputs(1, 2)
    .NumOutputs(1, 2)
    .AllowInplace({{0, 0}})
    .Inputs({"data", "shape"})
    .Outputs({"reshaped", "old_shape"})
    .HostInputs({1})
    .Arg("shape", ArgKind::kInts, ArgDefault::Described("none: required without input 1, refused with it"),
         "new dims; 0 copies the input dim, one -1 is inferred")
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      std::vector<TensorInfo> out(op.outputs.size());
      if (op.outputs.size() > 1) out[1] = {{static_cast<int64_t>(in[0].dims.size())}, DType::kInt64};
      if (op.inputs.size() == 1)
        out[0] = {ReshapeDims(in[0].dims, args.Ints("shape"), StrCat("data '", op.inputs[0], "'")), in[0].dtype};
      return out;
    })
    .Doc("Same elements, new shape (no copy).");

DP_OPERATOR_SCHEMA(Flatten)
    .NumInputs(1)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"X"})
    .Outputs({"Y"})
    .Arg("axis", ArgKind::kInt, 1, "Y is [prod(dims[:axis]), prod(dims[axis:])]")
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      return std::vector<TensorInfo>{
          {FlattenDims(in[0].dims, args.Int("axis", 1), StrCat("X '", op.inputs[0], "'")), in[0].dtype}};
    })
    .Doc("Flattens X to 2-D at axis (no copy).");

DP_OPERATOR_SCHEMA(Alias)
    .NumInputs(1)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"X"})
    .Outputs({"Y"})
    .IdenticalTypeAndShape()
    .Doc("Y = X, sharing its storage (no copy).");

DP_OPERATOR_SCHEMA(ReshapeLike)
    .NumInputs(2)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"X", "like"})
    .Outputs({"Y"})
    .ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
      DP_ENFORCE_CODE(NumElements(in[0].dims) == NumElements(in[1].dims), Code::kShape, "X '", op.inputs[0], "' ",
                      DimsString(in[0].dims), " cannot take the shape ", DimsString(in[1].dims), " of '",
                      op.inputs[1], "'");
      return std::vector<TensorInfo>{{in[1].dims, in[0].dtype}};
    })
    .Doc("X's elements with like's dims (no copy).");

DP_REGISTER_CPU_OPERATOR(Reshape, ReshapeOp);
DP_REGISTER_CPU_OPERATOR(Flatten, FlattenOp);
DP_REGISTER_CPU_OPERATOR(Alias, AliasOp);
DP_REGISTER_CPU_OPERATOR(ReshapeLike, ReshapeLikeOp);
#if DP_WITH_CUDA
DP_REGISTER_CUDA_OPERATOR(Reshape, ReshapeOp);
DP_REGISTER_CUDA_OPERATOR(Flatten, FlattenOp);
DP_REGISTER_CUDA_OPERATOR(Alias, AliasOp);
DP_REGISTER_CUDA_OPERATOR(ReshapeLike, ReshapeLikeOp);
#endif

DP_SIMPLE_GRADIENT(Alias, { return {MakeOp("Alias", {GO(0)}, {GI(0)})}; });
DP_SIMPLE_GRADIENT(Flatten, { return {MakeOp("ReshapeLike", {GO(0), I(0)}, {GI(0)})}; });
// With its old_shape output, Reshape's gradient needs nothing else from the
// forward pass (so an in-place Reshape stays differentiable).
DP_SIMPLE_GRADIENT(Reshape, {
  if (NumOutputs() > 1) return {MakeOp("Reshape", {GO(0), O(1)}, {GI(0)})};
  return {MakeOp("ReshapeLike", {GO(0), I(0)}, {GI(0)})};
});

}  // namespace
}  // namespace dp
