package dp_test

import (
	"os"
	"path/filepath"
	"testing"

	"dp.dev/dp"
)

// repoRoot is the repository root (bindings/go is two levels down).
func repoRoot(t testing.TB) string {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// buildDir is the libdp build (DP_BUILD_DIR, set by test.sh).
func buildDir(t testing.TB) string {
	if d := os.Getenv("DP_BUILD_DIR"); d != "" {
		return d
	}
	return filepath.Join(repoRoot(t), "build-cpu")
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func netdef(t testing.TB, json string) *dp.NetDef {
	t.Helper()
	d, err := dp.NetDefFromJSON([]byte(json))
	must(t, err)
	return d
}

// Two-layer perceptron of tests/capi/test_capi.c: 4 inputs, 8 hidden, 3 classes.
const initJSON = `{"name":"init","ops":[
 {"type":"XavierFill","outputs":["W1"],"args":[{"name":"shape","ints":[8,4]},{"name":"seed","i":7}]},
 {"type":"ConstantFill","outputs":["b1"],"args":[{"name":"shape","ints":[8]},{"name":"value","f":0.125}]},
 {"type":"XavierFill","outputs":["W2"],"args":[{"name":"shape","ints":[3,8]}]},
 {"type":"ConstantFill","outputs":["b2"],"args":[{"name":"shape","ints":[3]},{"name":"value","f":-0.25}]}]}`

const mlpJSON = `{"name":"mlp","external_inputs":["data","W1","b1","W2","b2"],"external_outputs":["prob"],"ops":[
 {"type":"FC","name":"fc1","inputs":["data","W1","b1"],"outputs":["h"]},
 {"type":"Relu","inputs":["h"],"outputs":["h"]},
 {"type":"FC","name":"fc2","inputs":["h","W2","b2"],"outputs":["logits"]},
 {"type":"Softmax","inputs":["logits"],"outputs":["prob"]}]}`

// Linear classifier model of test_capi.c (momentum optimizer).
const modelJSON = `{"name":"lin",
 "init_net":{"ops":[
  {"type":"XavierFill","outputs":["w"],"args":[{"name":"shape","ints":[3,4]},{"name":"seed","i":5}]},
  {"type":"ConstantFill","outputs":["b"],"args":[{"name":"shape","ints":[3]}]}]},
 "forward_net":{"ops":[
  {"type":"FC","inputs":["x","w","b"],"outputs":["logits"]},
  {"type":"SoftmaxWithLoss","inputs":["logits","label"],"outputs":["p","loss"]},
  {"type":"Accuracy","inputs":["p","label"],"outputs":["acc"]}]},
 "params":["w","b"],"inputs":["x","label"],"losses":["loss"],"metrics":["acc"],
 "optimizer":{"type":"momentum","lr":0.5,"momentum":0.5}}`

// lcg is test_capi.c's generator.
type lcg uint32

func (g *lcg) next() uint32 { *g = *g*1664525 + 1013904223; return uint32(*g) >> 8 }

// feedBatch feeds 16 samples of 4 features labelled by the argmax of the
// first three (as test_capi.c does).
func feedBatch(t testing.TB, ws *dp.Workspace, g *lcg) {
	t.Helper()
	x := make([]float32, 16*4)
	label := make([]int32, 16)
	for i := 0; i < 16; i++ {
		best := 0
		for k := 0; k < 4; k++ {
			x[i*4+k] = float32(int(g.next()%2001)-1000) / 1000
		}
		for k := 1; k < 3; k++ {
			if x[i*4+k] > x[i*4+best] {
				best = k
			}
		}
		label[i] = int32(best)
	}
	must(t, dp.FeedValues(ws, "x", []int64{16, 4}, x))
	must(t, dp.FeedValues(ws, "label", []int64{16}, label))
}

func scalar(t testing.TB, ws *dp.Workspace, name string) float32 {
	t.Helper()
	v, _, err := dp.FetchValues[float32](ws, name)
	must(t, err)
	if len(v) != 1 {
		t.Fatalf("%s: %d values", name, len(v))
	}
	return v[0]
}

// trainer is a model's one-device training nets in one workspace.
type trainer struct {
	ws                *dp.Workspace
	init, train, eval *dp.Net
}

func newTrainer(t testing.TB, m *dp.Model, opts *dp.TrainingOptions) *trainer {
	t.Helper()
	nets, err := m.BuildTraining(opts)
	must(t, err)
	defer nets.Close()
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	tr := &trainer{ws: ws}
	tr.init, err = dp.NewNet(ws, nets.Init, nil)
	must(t, err)
	tr.train, err = dp.NewNet(ws, nets.Train, nil)
	must(t, err)
	tr.eval, err = dp.NewNet(ws, nets.Eval, nil)
	must(t, err)
	must(t, tr.init.Run())
	return tr
}

func (tr *trainer) Close() {
	tr.init.Close()
	tr.train.Close()
	tr.eval.Close()
	tr.ws.Close()
}
