package dp

/*
#include <stdlib.h>
#include <dp/dp.h>
*/
import "C"

import "unsafe"

// ONNXHead is what ONNX import adds after the graph (DP_ONNX_HEAD_*).
type ONNXHead int32

const (
	// ONNXHeadNone: the graph as it is, a model that serves (no loss).
	ONNXHeadNone ONNXHead = C.DP_ONNX_HEAD_NONE
	// ONNXHeadSoftmaxCrossEntropy: the graph's first output is logits
	// [N, classes]; adds SoftmaxWithLoss against int32 labels (a new model
	// input, ONNXImportOptions.Labels) writing "softmax" and the loss "loss",
	// and Accuracy writing the metric "accuracy" (each name suffixed "_1",
	// ... if the graph has it).
	ONNXHeadSoftmaxCrossEntropy ONNXHead = C.DP_ONNX_HEAD_SOFTMAX_CROSS_ENTROPY
)

// ONNXImportOptions (dp_onnx_import_options): the zero value asks for every
// default (the graph as it is, no optimizer).
type ONNXImportOptions struct {
	Head ONNXHead
	// Labels is the head's labels input; "": "label".
	Labels string
	// Optimizer is the model's optimizer, read during the call; nil: none,
	// so the model serves but BuildTraining refuses it. Type is required;
	// any other field left zero ("" for LRPolicy) takes the model format's
	// default (LR 0.01, Momentum 0.9, Beta2 0.999, LRPolicy "fixed", ...), so
	// &OptimizerInfo{Type: "adam", LR: 0.001} is Adam with its defaults.
	Optimizer *OptimizerInfo
}

// toC converts; nil gives NULL (defaults). The struct and what it points to
// are C memory (dp reads the optimizer through a pointer, which Go memory
// passed to C must not hold); the returned func frees them after the call.
// `fn` names the calling function in argument errors.
func (o *ONNXImportOptions) toC(fn string) (*C.dp_onnx_import_options, func(), error) {
	if o == nil {
		return nil, noop, nil
	}
	var frees []func()
	free := func() {
		for i := len(frees) - 1; i >= 0; i-- {
			frees[i]()
		}
	}
	labels, err := cStringOrNull(fn+": ONNXImportOptions.Labels", o.Labels)
	if err != nil {
		return nil, nil, err
	}
	frees = append(frees, func() { freeStr(labels) })
	c := (*C.dp_onnx_import_options)(C.calloc(1, C.sizeof_dp_onnx_import_options))
	frees = append(frees, func() { C.free(unsafe.Pointer(c)) })
	C.dp_onnx_import_options_init(c, C.sizeof_dp_onnx_import_options)
	c.head = C.int32_t(o.Head)
	c.labels = labels
	if opt := o.Optimizer; opt != nil {
		typ, err := cString(fn+": ONNXImportOptions.Optimizer.Type", opt.Type)
		if err != nil {
			free()
			return nil, nil, err
		}
		frees = append(frees, func() { freeStr(typ) })
		policy, err := cStringOrNull(fn+": ONNXImportOptions.Optimizer.LRPolicy", opt.LRPolicy)
		if err != nil {
			free()
			return nil, nil, err
		}
		frees = append(frees, func() { freeStr(policy) })
		oc := (*C.dp_optimizer_info)(C.calloc(1, C.sizeof_dp_optimizer_info))
		frees = append(frees, func() { C.free(unsafe.Pointer(oc)) })
		oc.struct_size = C.uint32_t(C.sizeof_dp_optimizer_info)
		oc._type = typ
		oc.lr = C.double(opt.LR)
		oc.momentum = C.double(opt.Momentum)
		if opt.Nesterov {
			oc.nesterov = 1
		}
		oc.beta1 = C.double(opt.Beta1)
		oc.beta2 = C.double(opt.Beta2)
		oc.epsilon = C.double(opt.Epsilon)
		oc.weight_decay = C.double(opt.WeightDecay)
		oc.lr_policy = policy
		oc.gamma = C.double(opt.Gamma)
		oc.stepsize = C.int64_t(opt.StepSize)
		oc.power = C.double(opt.Power)
		oc.max_iter = C.int64_t(opt.MaxIter)
		oc.warmup_iters = C.int64_t(opt.WarmupIters)
		oc.warmup_start_factor = C.double(opt.WarmupStartFactor)
		c.optimizer = oc
	}
	return c, free, nil
}

// ONNXExportOptions (dp_onnx_export_options): the zero value asks for every
// default.
type ONNXExportOptions struct {
	// Opset is the default domain's opset written, 11 to 17; 0: 13.
	Opset int32
	// Outputs are the graph's outputs, as BuildInference's; nil: its
	// defaults.
	Outputs []string
	// ParamPrefix says where the params are in the workspace: blob
	// ParamPrefix + name ("cpu_0/" for replica 0 of a parallel model); "":
	// the model's names.
	ParamPrefix string
}

// toC: as ONNXImportOptions.toC.
func (o *ONNXExportOptions) toC(fn string) (*C.dp_onnx_export_options, func(), error) {
	if o == nil {
		return nil, noop, nil
	}
	names, err := newCStringArray(fn+": ONNXExportOptions.Outputs", o.Outputs)
	if err != nil {
		return nil, nil, err
	}
	prefix, err := cStringOrNull(fn+": ONNXExportOptions.ParamPrefix", o.ParamPrefix)
	if err != nil {
		names.free()
		return nil, nil, err
	}
	c := &C.dp_onnx_export_options{}
	C.dp_onnx_export_options_init(c, C.sizeof_dp_onnx_export_options)
	c.opset = C.int32_t(o.Opset)
	c.outputs = names.ptr
	c.num_outputs = C.size_t(names.n)
	c.param_prefix = prefix
	return c, func() {
		names.free()
		freeStr(prefix)
	}, nil
}

// ModelFromONNX imports an ONNX model (a serialised ModelProto, read during
// the call; opsets 9 to 17): its initializers become the init net, its
// nodes the forward net, all named as in the graph (see
// dp_model_from_onnx_buffer). opts nil means defaults. ErrParse for bytes
// that are not an ONNX model, ErrUnimplemented for what dp cannot import
// (and in a build without ONNX, BuildInfo.ONNX false), ErrInvalidNet for a
// graph that breaks ONNX's rules.
func ModelFromONNX(data []byte, opts *ONNXImportOptions) (*Model, error) {
	c, free, err := opts.toC("dp.ModelFromONNX")
	if err != nil {
		return nil, err
	}
	defer free()
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	var out *C.dp_model
	if err := statusErr(C.dp_model_from_onnx_buffer(p, C.size_t(len(data)), c, &out)); err != nil {
		return nil, err
	}
	return newModel(out), nil
}

// ModelFromONNXFile imports the ONNX model in a file (see ModelFromONNX;
// ErrNotFound and ErrIO for a file that is missing or unreadable).
func ModelFromONNXFile(path string, opts *ONNXImportOptions) (*Model, error) {
	const fn = "dp.ModelFromONNXFile"
	cp, err := cString(fn+": path", path)
	if err != nil {
		return nil, err
	}
	defer freeStr(cp)
	c, free, err := opts.toC(fn)
	if err != nil {
		return nil, err
	}
	defer free()
	var out *C.dp_model
	if err := statusErr(C.dp_model_from_onnx_file(cp, c, &out)); err != nil {
		return nil, err
	}
	return newModel(out), nil
}

// ToONNX exports the model's inference net (BuildInference with
// opts.Outputs, unfused) as an ONNX model, with the params it reads from ws
// as initializers. ws must hold an example batch of each model input the
// net reads (its dtype and dims give the graph input's, the first dim named
// "N"): run the init net and feed a batch first. Not while a net that
// writes the params runs on ws. opts nil means defaults. ErrNotFound for a
// param or input ws does not hold, ErrUnimplemented listing every op that
// has no ONNX form, ErrInvalidArgument for an opset outside 11..17.
func (m *Model) ToONNX(ws *Workspace, opts *ONNXExportOptions) ([]byte, error) {
	p, done, err := m.get()
	if err != nil {
		return nil, err
	}
	defer done()
	wp, wdone, err := ws.get()
	if err != nil {
		return nil, err
	}
	defer wdone()
	c, free, err := opts.toC("dp.Model.ToONNX")
	if err != nil {
		return nil, err
	}
	defer free()
	var out *C.dp_buffer
	if err := statusErr(C.dp_model_to_onnx(p, wp, c, &out)); err != nil {
		return nil, err
	}
	return goBytes(out), nil
}

// SaveONNX writes ToONNX's model to path atomically (a temporary file
// beside it, renamed over it): ErrIO naming the file when it cannot be
// written, and then nothing is left at path that was not there before.
func (m *Model) SaveONNX(ws *Workspace, path string, opts *ONNXExportOptions) error {
	p, done, err := m.get()
	if err != nil {
		return err
	}
	defer done()
	wp, wdone, err := ws.get()
	if err != nil {
		return err
	}
	defer wdone()
	const fn = "dp.Model.SaveONNX"
	c, free, err := opts.toC(fn)
	if err != nil {
		return err
	}
	defer free()
	cp, err := cString(fn+": path", path)
	if err != nil {
		return err
	}
	defer freeStr(cp)
	return statusErr(C.dp_model_save_onnx(p, wp, c, cp))
}
