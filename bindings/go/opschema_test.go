package dp_test

import (
	"errors"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"

	"dp.dev/dp"
)

func schema(t *testing.T, opType string) *dp.OpSchema {
	t.Helper()
	s, err := dp.OpSchemaOf(opType)
	must(t, err)
	return s
}

func TestOpTypesHaveSchemasAndCPUKernels(t *testing.T) {
	types, err := dp.OpTypes()
	must(t, err)
	if len(types) < 70 || !sort.StringsAreSorted(types) {
		t.Fatalf("OpTypes: %d types, sorted %v", len(types), sort.StringsAreSorted(types))
	}
	want := map[string]bool{"Relu": false, "ReluGradient": false, "Sub": false, "Div": false, "SquaredL2Distance": false}
	for _, ty := range types {
		if _, ok := want[ty]; ok {
			want[ty] = true
		}
		s := schema(t, ty)
		if s.Type != ty || s.Doc == "" || len(s.Kernels) == 0 || s.Kernels[0] != dp.DeviceCPU {
			t.Errorf("%s: type %q, doc %q, kernels %v", ty, s.Type, s.Doc, s.Kernels)
		}
	}
	for ty, found := range want {
		if !found {
			t.Errorf("OpTypes lacks %s", ty)
		}
	}
}

func TestOpSchemaFC(t *testing.T) {
	s := schema(t, "FC")
	if s.MinInputs != 3 || s.MaxInputs != 3 || s.MinOutputs != 1 || s.MaxOutputs != 1 {
		t.Errorf("FC counts: %+v", s)
	}
	if !reflect.DeepEqual(s.InputNames, []string{"X", "W", "b"}) || !reflect.DeepEqual(s.OutputNames, []string{"Y"}) {
		t.Errorf("FC names: %v %v", s.InputNames, s.OutputNames)
	}
	if len(s.Args) != 3 || len(s.Inplace) != 0 || s.InplaceShift != -1 || s.Gradient != dp.GradientDifferentiable {
		t.Errorf("FC: %+v", s)
	}
	axis := s.Arg("axis")
	if axis == nil || axis.Kind != dp.ArgInt || axis.Required || axis.Default != int64(1) || axis.DefaultText != "1" ||
		axis.Doc == "" {
		t.Errorf("FC axis: %+v", axis)
	}
	act := s.Arg("activation")
	if act == nil || act.Kind != dp.ArgString || act.Default != "none" || act.DefaultText != `"none"` {
		t.Errorf("FC activation: %+v", act)
	}
	if s.Arg("no_such") != nil {
		t.Error("Arg of an unknown name is not nil")
	}
}

func TestOpSchemaDefaults(t *testing.T) {
	lr := schema(t, "LearningRate")
	if a := lr.Arg("base_lr"); a == nil || !a.Required || a.Default != nil || a.DefaultText != "" {
		t.Errorf("base_lr: %+v", a)
	}
	if a := lr.Arg("gamma"); a == nil || a.Kind != dp.ArgFloat || a.Default != 0.1 {
		t.Errorf("gamma: %+v", a)
	}
	if a := schema(t, "Dropout").Arg("seed"); a == nil || a.Default != nil || a.DefaultText != "a hash of output 0's name" {
		t.Errorf("Dropout seed: %+v", a)
	}
	if a := schema(t, "Scale").Arg("scale"); a == nil || a.Default != float64(1) {
		t.Errorf("Scale scale: %+v (a float argument's default is a float64)", a)
	}
	if a := schema(t, "ConstantFill").Arg("shape"); a == nil || a.Kind != dp.ArgInts ||
		!reflect.DeepEqual(a.Default, []int64{}) || a.DefaultText != "[]" {
		t.Errorf("ConstantFill shape: %+v", a)
	}
}

func TestOpSchemaInplaceKernelsGradients(t *testing.T) {
	add := schema(t, "Add")
	want := []dp.InplacePair{{0, 0, dp.InplaceAllowed}, {1, 0, dp.InplaceAllowed}}
	if !reflect.DeepEqual(add.Inplace, want) || add.InplaceShift != -1 {
		t.Errorf("Add in place: %v, shift %d", add.Inplace, add.InplaceShift)
	}
	bn := schema(t, "SpatialBN")
	want = []dp.InplacePair{{3, 1, dp.InplaceEnforced}, {4, 2, dp.InplaceEnforced}, {0, 0, dp.InplaceAllowed}}
	if !reflect.DeepEqual(bn.Inplace, want) {
		t.Errorf("SpatialBN in place: %v", bn.Inplace)
	}
	ar := schema(t, "Allreduce")
	if len(ar.Inplace) != 0 || ar.InplaceShift != 1 || ar.MaxInputs != math.MaxInt32 {
		t.Errorf("Allreduce: %v, shift %d, max inputs %d", ar.Inplace, ar.InplaceShift, ar.MaxInputs)
	}
	info, err := dp.GetBuildInfo()
	must(t, err)
	relu := schema(t, "Relu")
	wantKernels := []dp.DeviceType{dp.DeviceCPU}
	if info.CUDA {
		wantKernels = append(wantKernels, dp.DeviceCUDA)
	}
	if !reflect.DeepEqual(relu.Kernels, wantKernels) || len(relu.Engines) != 0 {
		t.Errorf("Relu kernels %v, engines %v (CUDA build: %v)", relu.Kernels, relu.Engines, info.CUDA)
	}
	for ty, g := range map[string]dp.GradientKind{
		"Relu": dp.GradientDifferentiable, "Accuracy": dp.GradientNotDifferentiable, "StopGradient": dp.GradientStop,
		"ReluGradient": dp.GradientUndeclared, "Div": dp.GradientDifferentiable,
	} {
		if got := schema(t, ty).Gradient; got != g {
			t.Errorf("%s gradient %d, want %d", ty, got, g)
		}
	}
}

func TestOpSchemaUnknownType(t *testing.T) {
	_, err := dp.OpSchemaOf("Relux")
	if !errors.Is(err, dp.ErrNotFound) || !strings.Contains(err.Error(), "did you mean 'Relu'?") {
		t.Errorf("Relux: %v", err)
	}
	if _, err := dp.OpSchemaOf("Relu\x00x"); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Errorf("a NUL in the type: %v", err)
	}
	// A net naming the type gets the same suggestion.
	_, err = dp.NetDefFromJSON([]byte(`{"external_inputs":["x"],"ops":[{"type":"Relux","inputs":["x"],"outputs":["y"]}]}`))
	if !errors.Is(err, dp.ErrInvalidNet) || !strings.Contains(err.Error(), "did you mean 'Relu'?") {
		t.Errorf("net with Relux: %v", err)
	}
}
