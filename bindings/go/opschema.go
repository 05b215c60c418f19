package dp

/*
#include <dp/dp.h>
*/
import "C"

import "unsafe"

// OpTypes lists every operator type this library knows (gradient ops such as
// ReluGradient included), sorted (dp_opschema_list_types).
func OpTypes() ([]string, error) {
	var out *C.dp_string_list
	if err := statusErr(C.dp_opschema_list_types(&out)); err != nil {
		return nil, err
	}
	return goStrings(out), nil
}

// InplaceRule says whether an output may or must be written in place of an
// input (DP_INPLACE_*).
type InplaceRule int32

const (
	InplaceAllowed  InplaceRule = C.DP_INPLACE_ALLOWED
	InplaceEnforced InplaceRule = C.DP_INPLACE_ENFORCED
)

// InplacePair is one in-place rule: Output may (or must) name the same blob
// as Input.
type InplacePair struct {
	Input, Output int
	Rule          InplaceRule
}

// GradientKind is how AddGradients treats an op type (DP_GRADIENT_*).
type GradientKind int32

const (
	GradientUndeclared        GradientKind = C.DP_GRADIENT_UNDECLARED
	GradientDifferentiable    GradientKind = C.DP_GRADIENT_DIFFERENTIABLE
	GradientNotDifferentiable GradientKind = C.DP_GRADIENT_NOT_DIFFERENTIABLE
	GradientStop              GradientKind = C.DP_GRADIENT_STOP
)

// OpArg is an argument an op type accepts.
type OpArg struct {
	Name     string
	Kind     ArgKind
	Doc      string
	Required bool
	// Default is the value the kernel uses when an op leaves the argument
	// out, typed by Kind: float64, int64, string, []float64, []int64 or
	// []string. nil when the argument is required or its default is not one
	// value (DefaultText then describes it).
	Default any
	// DefaultText is the default as text: the value as JSON ("0.9",
	// "\"fixed\"", "[]") or a description; "" when required.
	DefaultText string
}

// OpSchema is what an operator type accepts, copied from the op catalogue
// (dp_opschema_*): plain data, safe to share between goroutines.
type OpSchema struct {
	Type string
	Doc  string
	// Input and output counts, Min to Max inclusive; Max is math.MaxInt32
	// when there is no limit.
	MinInputs, MaxInputs   int
	MinOutputs, MaxOutputs int
	// The names of the leading inputs and outputs ("X", "W", "b").
	InputNames, OutputNames []string
	Args                    []OpArg
	// Pairs that may or must name the same blob (enforced ones first); any
	// other input and output naming one blob fails validation.
	Inplace []InplacePair
	// -1, or s >= 0 when every output k must be written in place of input
	// k + s (collectives).
	InplaceShift int
	// The device types with a kernel for this type, and the engines (kernel
	// variants) registered on each; a device without engines has no entry.
	Kernels  []DeviceType
	Engines  map[DeviceType][]string
	Gradient GradientKind
}

// Arg is the argument named name, or nil.
func (s *OpSchema) Arg(name string) *OpArg {
	for i := range s.Args {
		if s.Args[i].Name == name {
			return &s.Args[i]
		}
	}
	return nil
}

// OpSchemaOf is the schema of op type opType (case-sensitive: "Relu").
// ErrNotFound for an unknown type, naming the nearest known one ("did you
// mean 'Relu'?").
func OpSchemaOf(opType string) (*OpSchema, error) {
	ct, err := cString("dp.OpSchemaOf: op type", opType)
	if err != nil {
		return nil, err
	}
	defer freeStr(ct)
	var h *C.dp_opschema
	if err := statusErr(C.dp_opschema_from_type(ct, &h)); err != nil {
		return nil, err
	}
	defer C.dp_opschema_free(h)
	s := &OpSchema{
		Type:         C.GoString(C.dp_opschema_type(h)),
		Doc:          C.GoString(C.dp_opschema_doc(h)),
		MinInputs:    int(C.dp_opschema_min_inputs(h)),
		MaxInputs:    int(C.dp_opschema_max_inputs(h)),
		MinOutputs:   int(C.dp_opschema_min_outputs(h)),
		MaxOutputs:   int(C.dp_opschema_max_outputs(h)),
		InplaceShift: int(C.dp_opschema_inplace_shift(h)),
		Gradient:     GradientKind(C.dp_opschema_gradient(h)),
		Engines:      map[DeviceType][]string{},
	}
	for i := C.size_t(0); i < C.dp_opschema_num_named_inputs(h); i++ {
		s.InputNames = append(s.InputNames, C.GoString(C.dp_opschema_input_name(h, i)))
	}
	for i := C.size_t(0); i < C.dp_opschema_num_named_outputs(h); i++ {
		s.OutputNames = append(s.OutputNames, C.GoString(C.dp_opschema_output_name(h, i)))
	}
	for i := C.size_t(0); i < C.dp_opschema_num_args(h); i++ {
		a := OpArg{
			Name:        C.GoString(C.dp_opschema_arg_name(h, i)),
			Kind:        ArgKind(C.dp_opschema_arg_kind(h, i)),
			Doc:         C.GoString(C.dp_opschema_arg_doc(h, i)),
			Required:    C.dp_opschema_arg_required(h, i) != 0,
			DefaultText: C.GoString(C.dp_opschema_arg_default_text(h, i)),
		}
		if d := C.dp_opschema_arg_default(h, i); d != nil {
			v, err := argValue(d)
			if err != nil {
				return nil, err
			}
			a.Default = v
		}
		s.Args = append(s.Args, a)
	}
	for i := C.size_t(0); i < C.dp_opschema_num_inplace(h); i++ {
		var in, out C.int32_t
		rule := InplaceRule(C.dp_opschema_inplace_at(h, i, &in, &out))
		s.Inplace = append(s.Inplace, InplacePair{Input: int(in), Output: int(out), Rule: rule})
	}
	for _, d := range []DeviceType{DeviceCPU, DeviceCUDA} {
		if C.dp_opschema_has_kernel(h, C.int32_t(d)) == 0 {
			continue
		}
		s.Kernels = append(s.Kernels, d)
		var l *C.dp_string_list
		if err := statusErr(C.dp_opschema_engines(h, C.int32_t(d), &l)); err != nil {
			return nil, err
		}
		if e := goStrings(l); len(e) > 0 {
			s.Engines[d] = e
		}
	}
	return s, nil
}

// argValue is the value of a dp_argdef of a scalar or list kind, as a Go
// value (nets are never defaults).
func argValue(p *C.dp_argdef) (any, error) {
	switch ArgKind(C.dp_argdef_kind(p)) {
	case ArgFloat:
		var v C.double
		err := statusErr(C.dp_argdef_get_float(p, &v))
		return float64(v), err
	case ArgInt:
		var v C.int64_t
		err := statusErr(C.dp_argdef_get_int(p, &v))
		return int64(v), err
	case ArgString:
		var v *C.char
		err := statusErr(C.dp_argdef_get_string(p, &v))
		return C.GoString(v), err
	case ArgFloats:
		var data *C.double
		var n C.size_t
		if err := statusErr(C.dp_argdef_get_floats(p, &data, &n)); err != nil {
			return nil, err
		}
		v := make([]float64, int(n))
		if n > 0 {
			copy(v, unsafe.Slice((*float64)(unsafe.Pointer(data)), int(n)))
		}
		return v, nil
	case ArgInts:
		var data *C.int64_t
		var n C.size_t
		if err := statusErr(C.dp_argdef_get_ints(p, &data, &n)); err != nil {
			return nil, err
		}
		return goDims(data, int(n)), nil
	case ArgStrings:
		n := C.dp_argdef_num_values(p)
		v := make([]string, 0, int(n))
		for i := C.size_t(0); i < n; i++ {
			var s *C.char
			if err := statusErr(C.dp_argdef_get_string_at(p, i, &s)); err != nil {
				return nil, err
			}
			v = append(v, C.GoString(s))
		}
		return v, nil
	}
	return nil, argErr("dp: an argument default of kind %d", int(C.dp_argdef_kind(p)))
}
