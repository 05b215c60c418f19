package dp_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"dp.dev/dp"
)

// A two-layer perceptron (4 features, 8 hidden, 3 classes) with a loss, a
// metric and an optimizer: what ONNX export drops and import can add back.
const onnxMLPJSON = `{"name":"mlp",
 "init_net":{"ops":[
  {"type":"XavierFill","outputs":["w1"],"args":[{"name":"shape","ints":[8,4]},{"name":"seed","i":7}]},
  {"type":"ConstantFill","outputs":["b1"],"args":[{"name":"shape","ints":[8]},{"name":"value","f":0.125}]},
  {"type":"XavierFill","outputs":["w2"],"args":[{"name":"shape","ints":[3,8]},{"name":"seed","i":9}]},
  {"type":"ConstantFill","outputs":["b2"],"args":[{"name":"shape","ints":[3]},{"name":"value","f":-0.25}]}]},
 "forward_net":{"ops":[
  {"type":"FC","name":"fc1","inputs":["x","w1","b1"],"outputs":["h"]},
  {"type":"Relu","inputs":["h"],"outputs":["h"]},
  {"type":"FC","name":"fc2","inputs":["h","w2","b2"],"outputs":["logits"]},
  {"type":"SoftmaxWithLoss","inputs":["logits","label"],"outputs":["softmax","loss"]},
  {"type":"Accuracy","inputs":["softmax","label"],"outputs":["accuracy"]}]},
 "params":["w1","b1","w2","b2"],"inputs":["x","label"],"losses":["loss"],"metrics":["accuracy"],
 "optimizer":{"type":"momentum","lr":0.1,"momentum":0.9}}`

// onnxExample is an example batch of 5 samples.
func onnxExample() []float32 {
	x := make([]float32, 5*4)
	g := lcg(11)
	for i := range x {
		x[i] = float32(int(g.next()%2001)-1000) / 500
	}
	return x
}

// runInference runs model m's init net and its inference net (default
// outputs) on x in a fresh workspace: each output's name and bytes.
func runInference(t *testing.T, m *dp.Model, x *dp.Tensor) ([]string, map[string][]byte) {
	t.Helper()
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	initDef, err := m.Net(dp.ModelInitNet)
	must(t, err)
	defer initDef.Close()
	initNet, err := dp.NewNet(ws, initDef, nil)
	must(t, err)
	defer initNet.Close()
	must(t, initNet.Run())
	def, err := m.BuildInference(nil, nil)
	must(t, err)
	defer def.Close()
	net, err := dp.NewNet(ws, def, nil)
	must(t, err)
	defer net.Close()
	must(t, ws.Feed("x", x))
	must(t, net.Run())
	outs := def.ExternalOutputs()
	got := map[string][]byte{}
	for _, o := range outs {
		got[o] = blobBytes(t, ws, o)
	}
	return outs, got
}

func blobs(t *testing.T, m *dp.Model, which dp.ModelBlobList) string {
	t.Helper()
	b, err := m.Blobs(which)
	must(t, err)
	return fmt.Sprint(b)
}

// TestONNXRoundTrip exports the MLP (params from its init net, an example
// batch fed) at the default opset and at 11, imports the bytes and the
// saved file, and runs each import on the batch in a workspace of its own:
// the same logits and softmax, bit for bit, as the original's inference
// net. With a head and an optimizer the import is trainable. A build
// without ONNX fails every call with ErrUnimplemented.
func TestONNXRoundTrip(t *testing.T) {
	bi, err := dp.GetBuildInfo()
	must(t, err)
	m, err := dp.ModelFromJSON([]byte(onnxMLPJSON))
	must(t, err)
	defer m.Close()
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "mlp.onnx")

	if !bi.ONNX {
		if bi.ONNXVersion != "" {
			t.Fatalf("a build without ONNX has ONNX version %q", bi.ONNXVersion)
		}
		if _, err := dp.ModelFromONNX([]byte("0123456789abcdef"), nil); !errors.Is(err, dp.ErrUnimplemented) {
			t.Fatal(err)
		}
		if _, err := dp.ModelFromONNXFile(path, &dp.ONNXImportOptions{}); !errors.Is(err, dp.ErrUnimplemented) {
			t.Fatal(err)
		}
		if _, err := m.ToONNX(ws, nil); !errors.Is(err, dp.ErrUnimplemented) {
			t.Fatal(err)
		}
		if err := m.SaveONNX(ws, path, &dp.ONNXExportOptions{}); !errors.Is(err, dp.ErrUnimplemented) {
			t.Fatal(err)
		}
		t.Log("built without ONNX: every ONNX call is ErrUnimplemented")
		return
	}
	if bi.ONNXVersion == "" {
		t.Fatal("built with ONNX, but no ONNX version")
	}

	initDef, err := m.Net(dp.ModelInitNet)
	must(t, err)
	defer initDef.Close()
	initNet, err := dp.NewNet(ws, initDef, nil)
	must(t, err)
	defer initNet.Close()
	must(t, initNet.Run())
	// No example batch yet: the input is not found.
	if _, err := m.ToONNX(ws, nil); !errors.Is(err, dp.ErrNotFound) {
		t.Fatalf("export without an example batch: %v", err)
	}

	x, err := dp.NewTensorOf([]int64{5, 4}, onnxExample())
	must(t, err)
	defer x.Close()
	must(t, ws.Feed("x", x))
	ref, err := m.BuildInference(nil, nil)
	must(t, err)
	defer ref.Close()
	refNet, err := dp.NewNet(ws, ref, nil)
	must(t, err)
	defer refNet.Close()
	must(t, refNet.Run())
	outputs := ref.ExternalOutputs()
	if fmt.Sprint(outputs) != "[logits softmax]" {
		t.Fatalf("reference outputs %v", outputs)
	}

	for _, opset := range []int32{0, 11} {
		var opts *dp.ONNXExportOptions
		if opset != 0 {
			opts = &dp.ONNXExportOptions{Opset: opset}
		}
		data, err := m.ToONNX(ws, opts)
		must(t, err)
		if len(data) < 100 {
			t.Fatalf("opset %d: %d bytes", opset, len(data))
		}
		must(t, m.SaveONNX(ws, path, opts))
		saved, err := os.ReadFile(path)
		must(t, err)
		if !bytes.Equal(saved, data) {
			t.Fatalf("opset %d: the saved file differs from ToONNX's bytes", opset)
		}
		fromBytes, err := dp.ModelFromONNX(data, nil)
		must(t, err)
		defer fromBytes.Close()
		fromFile, err := dp.ModelFromONNXFile(path, &dp.ONNXImportOptions{})
		must(t, err)
		defer fromFile.Close()
		for _, im := range []*dp.Model{fromBytes, fromFile} {
			if got := blobs(t, im, dp.ModelParams) + blobs(t, im, dp.ModelInputs) + blobs(t, im, dp.ModelLosses); got != "[w1 b1 w2 b2][x][]" {
				t.Fatalf("opset %d: imported lists %s", opset, got)
			}
			if im.HasOptimizer() {
				t.Fatalf("opset %d: imported without options, the model has an optimizer", opset)
			}
			if _, err := im.Optimizer(); !errors.Is(err, dp.ErrNotFound) {
				t.Fatal(err)
			}
			outs, got := runInference(t, im, x)
			if fmt.Sprint(outs) != fmt.Sprint(outputs) {
				t.Fatalf("opset %d: imported outputs %v, want %v", opset, outs, outputs)
			}
			for _, o := range outputs {
				if !bytes.Equal(got[o], blobBytes(t, ws, o)) {
					t.Fatalf("opset %d: imported %s differs from the original's", opset, o)
				}
			}
		}
	}

	// The logits alone, imported with the softmax cross-entropy head and
	// Adam: trainable, the optimizer as given.
	logits, err := m.ToONNX(ws, &dp.ONNXExportOptions{Outputs: []string{"logits"}})
	must(t, err)
	adam := &dp.OptimizerInfo{Type: "adam", LR: 0.01, Beta1: 0.8, Beta2: 0.99, Epsilon: 1e-7}
	tm, err := dp.ModelFromONNX(logits, &dp.ONNXImportOptions{Head: dp.ONNXHeadSoftmaxCrossEntropy, Optimizer: adam})
	must(t, err)
	defer tm.Close()
	if got := blobs(t, tm, dp.ModelLosses) + blobs(t, tm, dp.ModelMetrics) + blobs(t, tm, dp.ModelInputs); got != "[loss][accuracy][x label]" {
		t.Fatalf("with a head: %s", got)
	}
	back, err := tm.Optimizer()
	must(t, err)
	// The fields left zero take the model format's defaults (momentum 0.9).
	if back.Type != "adam" || back.LR != 0.01 || back.Beta1 != 0.8 || back.Beta2 != 0.99 || back.Epsilon != 1e-7 ||
		back.LRPolicy != "fixed" || back.Momentum != 0.9 || back.StepSize != 1 {
		t.Fatalf("optimizer read back %+v", back)
	}
	nets, err := tm.BuildTraining(nil)
	must(t, err)
	nets.Close()
	named, err := dp.ModelFromONNX(logits, &dp.ONNXImportOptions{Head: dp.ONNXHeadSoftmaxCrossEntropy, Labels: "y"})
	must(t, err)
	defer named.Close()
	if got := blobs(t, named, dp.ModelInputs); got != "[x y]" {
		t.Fatalf("labels y: inputs %s", got)
	}

	// Errors, each of its type.
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"garbage bytes", func() error { _, err := dp.ModelFromONNX([]byte("0123456789abcdef"), nil); return err }(), dp.ErrParse},
		{"no bytes", func() error { _, err := dp.ModelFromONNX(nil, nil); return err }(), dp.ErrParse},
		{"missing file", func() error {
			_, err := dp.ModelFromONNXFile(filepath.Join(dir, "none.onnx"), nil)
			return err
		}(), dp.ErrNotFound},
		{"labels the graph has", func() error {
			_, err := dp.ModelFromONNX(logits, &dp.ONNXImportOptions{Head: dp.ONNXHeadSoftmaxCrossEntropy, Labels: "x"})
			return err
		}(), dp.ErrInvalidArgument},
		{"unknown head", func() error { _, err := dp.ModelFromONNX(logits, &dp.ONNXImportOptions{Head: 7}); return err }(), dp.ErrInvalidArgument},
		{"NUL in labels", func() error {
			_, err := dp.ModelFromONNX(logits, &dp.ONNXImportOptions{Labels: "a\x00b"})
			return err
		}(), dp.ErrInvalidArgument},
		{"opset 10", func() error { _, err := m.ToONNX(ws, &dp.ONNXExportOptions{Opset: 10}); return err }(), dp.ErrInvalidArgument},
		{"params elsewhere", func() error { _, err := m.ToONNX(ws, &dp.ONNXExportOptions{ParamPrefix: "cpu_0/"}); return err }(), dp.ErrNotFound},
		{"unknown output", func() error {
			_, err := m.ToONNX(ws, &dp.ONNXExportOptions{Outputs: []string{"q"}})
			return err
		}(), dp.ErrNotFound},
		{"nil workspace", func() error { _, err := m.ToONNX(nil, nil); return err }(), dp.ErrInvalidArgument},
		{"unwritable path", m.SaveONNX(ws, filepath.Join(dir, "no_such_dir", "m.onnx"), nil), dp.ErrIO},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "no_such_dir")); !os.IsNotExist(err) {
		t.Fatal("a failed save left something behind")
	}
}
