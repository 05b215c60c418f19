package dp_test

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"dp.dev/dp"
)

// TestUnreadFeed: a fed blob that no net of the workspace reads (a misspelt
// name) is a warning through the log callback, naming it and the nearest
// input, and the run goes on; a net created with UnreadFeedError fails its
// run with ErrNotFound instead, before any op runs, and the next run goes on.
func TestUnreadFeed(t *testing.T) {
	var mu sync.Mutex
	var warnings []string
	must(t, dp.SetLogCallback(func(level dp.LogLevel, m string) {
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(m, "fed blob") {
			warnings = append(warnings, m)
		}
	}, dp.LogWarning))
	defer dp.SetLogCallback(nil, dp.LogWarning)

	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	idef := netdef(t, initJSON)
	defer idef.Close()
	mdef := netdef(t, mlpJSON)
	defer mdef.Close()
	in, err := dp.NewNet(ws, idef, nil)
	must(t, err)
	defer in.Close()
	must(t, in.Run())
	strict, err := dp.NewNet(ws, mdef, &dp.NetOptions{UnreadFeedError: true})
	must(t, err)
	defer strict.Close()
	lenient, err := dp.NewNet(ws, mdef, nil)
	must(t, err)
	defer lenient.Close()

	must(t, dp.FeedValues(ws, "data", []int64{2, 4}, make([]float32, 8)))
	must(t, strict.Run())
	must(t, dp.FeedValues(ws, "dta", []int64{2, 4}, make([]float32, 8)))
	err = strict.Run()
	if !errors.Is(err, dp.ErrNotFound) || !strings.Contains(err.Error(), "fed blob 'dta'") ||
		!strings.Contains(err.Error(), "did you mean 'data'?") {
		t.Fatalf("strict run after a misspelt feed: %v", err)
	}
	must(t, strict.Run()) // the feed was reported: the next run goes on

	must(t, dp.FeedValues(ws, "dta", []int64{2, 4}, make([]float32, 8)))
	must(t, lenient.Run())
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 1 || !strings.Contains(warnings[0], "fed blob 'dta'") ||
		!strings.Contains(warnings[0], "did you mean 'data'?") {
		t.Fatalf("warnings: %q", warnings)
	}
}

// TestCUDAGraphsOption: the option reaches dp_net_create (a value outside
// DP_CUDA_GRAPHS_* is refused); on a CPU net, which never runs as a graph,
// either setting runs the same.
func TestCUDAGraphsOption(t *testing.T) {
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	idef := netdef(t, initJSON)
	defer idef.Close()
	mdef := netdef(t, mlpJSON)
	defer mdef.Close()
	in, err := dp.NewNet(ws, idef, nil)
	must(t, err)
	defer in.Close()
	must(t, in.Run())
	must(t, dp.FeedValues(ws, "data", []int64{2, 4}, make([]float32, 8)))
	for _, g := range []dp.CUDAGraphs{dp.CUDAGraphsDefault, dp.CUDAGraphsOn, dp.CUDAGraphsOff} {
		n, err := dp.NewNet(ws, mdef, &dp.NetOptions{CUDAGraphs: g})
		must(t, err)
		must(t, n.Run())
		n.Close()
	}
	if _, err := dp.NewNet(ws, mdef, &dp.NetOptions{CUDAGraphs: 7}); !errors.Is(err, dp.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "cuda_graphs") {
		t.Fatalf("CUDAGraphs 7: %v", err)
	}
}

// TestMathModeOption: the option reaches dp_net_create (a value outside
// DP_MATH_* is refused); a CPU net computes in float32 in every mode.
func TestMathModeOption(t *testing.T) {
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	idef := netdef(t, initJSON)
	defer idef.Close()
	mdef := netdef(t, mlpJSON)
	defer mdef.Close()
	in, err := dp.NewNet(ws, idef, nil)
	must(t, err)
	defer in.Close()
	must(t, in.Run())
	must(t, dp.FeedValues(ws, "data", []int64{2, 4}, []float32{1, -2, 3, 0.5, -1, 2, 0.25, 4}))
	var first []float32
	for _, m := range []dp.MathMode{dp.MathDefault, dp.MathFP32, dp.MathTF32, dp.MathBF16, dp.MathFP16} {
		n, err := dp.NewNet(ws, mdef, &dp.NetOptions{MathMode: m})
		must(t, err)
		must(t, n.Run())
		got, _, err := dp.FetchValues[float32](ws, "prob")
		must(t, err)
		if first == nil {
			first = got
		} else if !reflect.DeepEqual(first, got) {
			t.Fatalf("math mode %d: %v, want %v", m, got, first)
		}
		n.Close()
	}
	if _, err := dp.NewNet(ws, mdef, &dp.NetOptions{MathMode: 5}); !errors.Is(err, dp.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "math_mode") {
		t.Fatalf("MathMode 5: %v", err)
	}
}
