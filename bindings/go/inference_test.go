package dp_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"dp.dev/dp"
)

// trainedLin trains the linear model a few steps and runs its eval net on
// one more batch (left in the workspace).
func trainedLin(t *testing.T) (*dp.Model, *trainer) {
	m, err := dp.ModelFromJSON([]byte(modelJSON))
	must(t, err)
	tr := newTrainer(t, m, nil)
	g := lcg(3)
	for i := 0; i < 5; i++ {
		feedBatch(t, tr.ws, &g)
		must(t, tr.train.Run())
	}
	feedBatch(t, tr.ws, &g)
	must(t, tr.eval.Run())
	return m, tr
}

// shareParams feeds the inference net's params from the trained workspace
// into ws (shared tensors: nothing is copied). Any goroutine.
func shareParams(def *dp.NetDef, from, to *dp.Workspace) error {
	for _, name := range def.ExternalInputs() {
		if name == "x" {
			continue
		}
		p, err := from.Fetch(name)
		if err != nil {
			return err
		}
		err = to.Feed(name, p)
		p.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// fetchBytes is blob name's bytes. Any goroutine.
func fetchBytes(ws *dp.Workspace, name string) ([]byte, error) {
	v, err := ws.Fetch(name)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	return v.Bytes()
}

func blobBytes(t testing.TB, ws *dp.Workspace, name string) []byte {
	t.Helper()
	b, err := fetchBytes(ws, name)
	must(t, err)
	return b
}

func TestInferenceNetMatchesEvalWithoutLabels(t *testing.T) {
	m, tr := trainedLin(t)
	defer m.Close()
	defer tr.Close()
	def, err := m.BuildInference([]string{"p"}, nil)
	must(t, err)
	defer def.Close()
	if got := fmt.Sprint(def.ExternalInputs(), def.ExternalOutputs()); got != "[w b x] [p]" {
		t.Fatal(got)
	}
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	must(t, shareParams(def, tr.ws, ws))
	x, err := tr.ws.Fetch("x")
	must(t, err)
	must(t, ws.Feed("x", x))
	x.Close()
	net, err := dp.NewNet(ws, def, nil)
	must(t, err)
	defer net.Close()
	must(t, net.Run())
	if !bytes.Equal(blobBytes(t, ws, "p"), blobBytes(t, tr.ws, "p")) {
		t.Fatal("the inference net's softmax differs from the eval net's")
	}
	if has, _ := ws.HasBlob("label"); has {
		t.Fatal("the inference net read a label")
	}

	// Defaults, options, errors.
	dflt, err := m.BuildInference(nil, &dp.InferenceOptions{NoFuse: true})
	must(t, err)
	defer dflt.Close()
	if got := fmt.Sprint(dflt.ExternalOutputs()); got != "[logits p]" {
		t.Fatal(got)
	}
	if _, err := m.BuildInference([]string{"q"}, nil); !errors.Is(err, dp.ErrNotFound) ||
		!strings.Contains(err.Error(), "did you mean 'p'?") {
		t.Fatal(err)
	}
	if _, err := m.BuildInference([]string{"p", "p"}, nil); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Fatal(err)
	}
}

// TestServingFromGoroutines: a workspace and a net per goroutine, all fed
// the same param tensors, run at once; each gets its batches' serial result.
func TestServingFromGoroutines(t *testing.T) {
	m, tr := trainedLin(t)
	defer m.Close()
	defer tr.Close()
	def, err := m.BuildInference([]string{"p"}, nil)
	must(t, err)
	defer def.Close()
	const workers, runs = 4, 20
	// The serial results of each worker's batch.
	want := make([][]byte, workers)
	batches := make([][]float32, workers)
	ref, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ref.Close()
	must(t, shareParams(def, tr.ws, ref))
	refNet, err := dp.NewNet(ref, def, nil)
	must(t, err)
	defer refNet.Close()
	for w := range want {
		g := lcg(100 + w)
		batches[w] = make([]float32, 16*4)
		for i := range batches[w] {
			batches[w][i] = float32(int(g.next()%2001)-1000) / 1000
		}
		must(t, dp.FeedValues(ref, "x", []int64{16, 4}, batches[w]))
		must(t, refNet.Run())
		want[w] = blobBytes(t, ref, "p")
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			ws, err := dp.NewWorkspace(nil)
			if err != nil {
				errs <- err
				return
			}
			defer ws.Close()
			if err := shareParams(def, tr.ws, ws); err != nil {
				errs <- err
				return
			}
			net, err := dp.NewNet(ws, def, nil)
			if err != nil {
				errs <- err
				return
			}
			defer net.Close()
			for r := 0; r < runs; r++ {
				if err := dp.FeedValues(ws, "x", []int64{16, 4}, batches[w]); err != nil {
					errs <- err
					return
				}
				if err := net.Run(); err != nil {
					errs <- err
					return
				}
				if got, err := fetchBytes(ws, "p"); err != nil || !bytes.Equal(got, want[w]) {
					errs <- fmt.Errorf("worker %d run %d: softmax differs from the serial run", w, r)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if bytes.Equal(want[0], want[1]) {
		t.Fatal("the workers' batches should differ")
	}
}
