package dp

/*
#include <dp/dp.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Model is an immutable model definition (init net, forward net, blob
// lists, optimizer): every method may be called from any number of
// goroutines at once.
type Model struct {
	r ref[C.dp_model]
}

func newModel(p *C.dp_model) *Model {
	m := &Model{}
	m.r.set(p, "Model", func(p *C.dp_model) { C.dp_model_free(p) })
	runtime.SetFinalizer(m, func(m *Model) { m.r.close() })
	return m
}

func (m *Model) get() (*C.dp_model, func(), error) {
	if m == nil {
		return nil, noop, nil
	}
	p, err := m.r.acquire()
	if err != nil {
		return nil, nil, err
	}
	return p, m.r.release, nil
}

// Close releases the model (nets derived from it stay valid). Idempotent.
func (m *Model) Close() {
	if m != nil {
		m.r.close()
	}
}

// ModelFromJSON parses a JSON model definition.
func ModelFromJSON(json []byte) (*Model, error) {
	var p *C.char
	if len(json) > 0 {
		p = (*C.char)(unsafe.Pointer(&json[0]))
	}
	var out *C.dp_model
	if err := statusErr(C.dp_model_from_json(p, C.size_t(len(json)), &out)); err != nil {
		return nil, err
	}
	return newModel(out), nil
}

// ModelFromBuffer parses a binary FlatBuffer model (read during the call).
func ModelFromBuffer(buf []byte) (*Model, error) {
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
	}
	var out *C.dp_model
	if err := statusErr(C.dp_model_from_buffer(p, C.size_t(len(buf)), &out)); err != nil {
		return nil, err
	}
	return newModel(out), nil
}

// ModelFromFile reads a model file (JSON or FlatBuffer).
func ModelFromFile(path string) (*Model, error) {
	cp, err := cString("dp.ModelFromFile: path", path)
	if err != nil {
		return nil, err
	}
	defer freeStr(cp)
	var out *C.dp_model
	if err := statusErr(C.dp_model_from_file(cp, &out)); err != nil {
		return nil, err
	}
	return newModel(out), nil
}

// ToJSON serialises the model as JSON.
func (m *Model) ToJSON() (string, error) {
	p, done, err := m.get()
	if err != nil {
		return "", err
	}
	defer done()
	var out *C.dp_buffer
	if err := statusErr(C.dp_model_to_json(p, &out)); err != nil {
		return "", err
	}
	return string(goBytes(out)), nil
}

// ToBuffer serialises the model as a binary FlatBuffer.
func (m *Model) ToBuffer() ([]byte, error) {
	p, done, err := m.get()
	if err != nil {
		return nil, err
	}
	defer done()
	var out *C.dp_buffer
	if err := statusErr(C.dp_model_to_buffer(p, &out)); err != nil {
		return nil, err
	}
	return goBytes(out), nil
}

// ModelBlobList selects one of a model's blob lists (DP_MODEL_*).
type ModelBlobList int32

const (
	ModelParams         ModelBlobList = C.DP_MODEL_PARAMS
	ModelComputedParams ModelBlobList = C.DP_MODEL_COMPUTED_PARAMS
	ModelInputs         ModelBlobList = C.DP_MODEL_INPUTS
	ModelLosses         ModelBlobList = C.DP_MODEL_LOSSES
	ModelMetrics        ModelBlobList = C.DP_MODEL_METRICS
)

// Blobs is one of the model's blob lists.
func (m *Model) Blobs(which ModelBlobList) ([]string, error) {
	p, done, err := m.get()
	if err != nil {
		return nil, err
	}
	defer done()
	var out *C.dp_string_list
	if err := statusErr(C.dp_model_blobs(p, C.int32_t(which), &out)); err != nil {
		return nil, err
	}
	return goStrings(out), nil
}

// CheckpointBlobs are the blobs holding the model's training state
// (params, computed params, optimizer state and "optimizer/iter").
func (m *Model) CheckpointBlobs() ([]string, error) {
	p, done, err := m.get()
	if err != nil {
		return nil, err
	}
	defer done()
	var out *C.dp_string_list
	if err := statusErr(C.dp_model_checkpoint_blobs(p, &out)); err != nil {
		return nil, err
	}
	return goStrings(out), nil
}

// Name is the model's name ("" when unnamed or closed).
func (m *Model) Name() string {
	p, done, err := m.get()
	if err != nil {
		return ""
	}
	defer done()
	return C.GoString(C.dp_model_name(p))
}

// ModelNetKind selects the init or the forward net (DP_MODEL_*_NET).
type ModelNetKind int32

const (
	ModelInitNet    ModelNetKind = C.DP_MODEL_INIT_NET
	ModelForwardNet ModelNetKind = C.DP_MODEL_FORWARD_NET
)

// Net is the model's own init or forward net as a new NetDef (it may
// outlive the model).
func (m *Model) Net(which ModelNetKind) (*NetDef, error) {
	p, done, err := m.get()
	if err != nil {
		return nil, err
	}
	defer done()
	var out *C.dp_netdef
	if err := statusErr(C.dp_model_net(p, C.int32_t(which), &out)); err != nil {
		return nil, err
	}
	return newNetDef(out), nil
}

// HasOptimizer reports whether the model has an optimizer.
func (m *Model) HasOptimizer() bool {
	p, done, err := m.get()
	if err != nil {
		return false
	}
	defer done()
	return C.dp_model_has_optimizer(p) != 0
}

// OptimizerInfo is a model's optimizer (dp_optimizer_info).
type OptimizerInfo struct {
	Type              string // "sgd", "momentum", "adam", "adagrad"
	LR                float64
	Momentum          float64
	Nesterov          bool
	Beta1, Beta2      float64
	Epsilon           float64
	WeightDecay       float64
	LRPolicy          string // "fixed", "step", "exp", "inv", "cosine"
	Gamma             float64
	StepSize          int64
	Power             float64
	MaxIter           int64
	WarmupIters       int64
	WarmupStartFactor float64
}

// Optimizer is the model's optimizer; ErrNotFound when it has none.
func (m *Model) Optimizer() (*OptimizerInfo, error) {
	p, done, err := m.get()
	if err != nil {
		return nil, err
	}
	defer done()
	var c C.dp_optimizer_info
	c.struct_size = C.uint32_t(C.sizeof_dp_optimizer_info)
	if err := statusErr(C.dp_model_get_optimizer(p, &c)); err != nil {
		return nil, err
	}
	return &OptimizerInfo{
		Type: C.GoString(c._type), LR: float64(c.lr), Momentum: float64(c.momentum), Nesterov: c.nesterov != 0,
		Beta1: float64(c.beta1), Beta2: float64(c.beta2), Epsilon: float64(c.epsilon),
		WeightDecay: float64(c.weight_decay), LRPolicy: C.GoString(c.lr_policy), Gamma: float64(c.gamma),
		StepSize: int64(c.stepsize), Power: float64(c.power), MaxIter: int64(c.max_iter),
		WarmupIters: int64(c.warmup_iters), WarmupStartFactor: float64(c.warmup_start_factor),
	}, nil
}

// TrainingOptions: the zero value asks for every default.
type TrainingOptions struct {
	LossScale float64 // seed of the loss gradients; 0 means 1
	LR        float64 // > 0 replaces the optimizer's base learning rate
	Memory    Memory  // the train net's; MemoryDefault is MemoryShare. Since 0.6.
	// Dynamic loss scaling (for MathFP16); its state ("optimizer/loss_scale",
	// "optimizer/loss_scale_good_steps") belongs in checkpoints. Since 0.6.
	LossScaling      LossScaling
	InitialLossScale float64 // its first scale; 0: 65536 (2^16). Since 0.6.
}

// TrainingNets are the nets that train a model on one device; all run in
// one workspace. Close closes the three.
type TrainingNets struct {
	Init, Train, Eval *NetDef
}

// Close closes the three definitions.
func (t *TrainingNets) Close() {
	t.Init.Close()
	t.Train.Close()
	t.Eval.Close()
}

// BuildTraining derives the init, train-step and eval nets; opts nil means
// defaults.
func (m *Model) BuildTraining(opts *TrainingOptions) (*TrainingNets, error) {
	p, done, err := m.get()
	if err != nil {
		return nil, err
	}
	defer done()
	var c C.dp_training_options
	var cp *C.dp_training_options
	if opts != nil {
		C.dp_training_options_init(&c, C.sizeof_dp_training_options)
		c.loss_scale = C.double(opts.LossScale)
		c.lr = C.double(opts.LR)
		c.memory = C.int32_t(opts.Memory)
		c.loss_scaling = C.int32_t(opts.LossScaling)
		c.initial_loss_scale = C.double(opts.InitialLossScale)
		cp = &c
	}
	var i, t, e *C.dp_netdef
	if err := statusErr(C.dp_model_build_training(p, cp, &i, &t, &e)); err != nil {
		return nil, err
	}
	return &TrainingNets{newNetDef(i), newNetDef(t), newNetDef(e)}, nil
}

// InferenceOptions: the zero value asks for every default.
type InferenceOptions struct {
	NoFuse bool // keep FC and Relu separate (default: fused, as the training nets fuse them)
}

// BuildInference derives the model's inference net (dp_model_build_inference):
// the forward ops that outputs need, in inference mode, without losses,
// metrics or labels; nil or empty outputs ask for the default ones (the
// blobs the losses and metrics are computed from: "logits", "softmax").
// It reads the params under the model's names: run it in a workspace
// holding them, e.g. one per goroutine, each fed the same param tensors
// (Workspace.Fetch from the trained workspace, then Feed: shared, not
// copied). opts nil means defaults. ErrNotFound names an output the
// forward net does not write.
func (m *Model) BuildInference(outputs []string, opts *InferenceOptions) (*NetDef, error) {
	p, done, err := m.get()
	if err != nil {
		return nil, err
	}
	defer done()
	var c C.dp_inference_options
	var cp *C.dp_inference_options
	if opts != nil {
		C.dp_inference_options_init(&c, C.sizeof_dp_inference_options)
		if opts.NoFuse {
			c.no_fuse = 1
		}
		cp = &c
	}
	names, err := newCStringArray("dp.Model.BuildInference: output", outputs)
	if err != nil {
		return nil, err
	}
	defer names.free()
	var out *C.dp_netdef
	if err := statusErr(C.dp_model_build_inference(p, names.ptr, C.size_t(names.n), cp, &out)); err != nil {
		return nil, err
	}
	return newNetDef(out), nil
}
