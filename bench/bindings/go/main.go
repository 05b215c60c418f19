// Command bindings_bench (Go): the Go side of
// bench/bindings/run_bindings_bench.sh. It does exactly what
// bench/bindings/c/bindings_bench.c does, through package dp, and prints the
// same line (see that file for the method).
//
//	bindings_bench call ITERS          per-call cost of a 1-op net
//	bindings_bench train STEPS MODEL   training steps of a model
package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"dp.dev/dp"
)

const (
	oneOpNet = `{"name":"one_op","external_inputs":["x"],"external_outputs":["y"],` +
		`"ops":[{"type":"Copy","inputs":["x"],"outputs":["y"]}]}`
	nElem       = 16
	blocks      = 5
	batch       = 256
	numBatches  = 4
	pixels      = 784
	warmupSteps = 20
)

func check(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "bindings_bench: %s failed: %v\n", what, err)
		os.Exit(1)
	}
}

func median(v []float64) float64 {
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return 0.5 * (v[n/2-1] + v[n/2])
}

var rng uint64 = 0x9E3779B97F4A7C15

func nextU64() uint64 {
	rng ^= rng >> 12
	rng ^= rng << 25
	rng ^= rng >> 27
	return rng * 0x2545F4914F6CDD1D
}

var dims = []int64{nElem}

// roundTrip: one feed + run + fetch round.
func roundTrip(ws *dp.Workspace, net *dp.Net, in []float32) []float32 {
	check(dp.FeedValues(ws, "x", dims, in), "FeedValues")
	check(net.Run(), "Run")
	out, _, err := dp.FetchValues[float32](ws, "y")
	check(err, "FetchValues")
	return out
}

func benchCall(iters int) {
	def, err := dp.NetDefFromJSON([]byte(oneOpNet))
	check(err, "NetDefFromJSON")
	defer def.Close()
	ws, err := dp.NewWorkspace(nil)
	check(err, "NewWorkspace")
	defer ws.Close()
	in := make([]float32, nElem)
	for i := range in {
		in[i] = float32(i)
	}
	check(dp.FeedValues(ws, "x", dims, in), "FeedValues")
	net, err := dp.NewNet(ws, def, nil)
	check(err, "NewNet")
	defer net.Close()

	perBlock, roundsPerBlock := iters/blocks, iters/4/blocks
	runNs := make([]float64, blocks)
	roundNs := make([]float64, blocks)
	for i := 0; i < iters/2; i++ {
		check(net.Run(), "Run")
	}
	for b := 0; b < blocks; b++ {
		t0 := time.Now()
		for i := 0; i < perBlock; i++ {
			check(net.Run(), "Run")
		}
		runNs[b] = float64(time.Since(t0).Nanoseconds()) / float64(perBlock)
	}
	var out []float32
	for i := 0; i < iters/8; i++ {
		out = roundTrip(ws, net, in)
	}
	for b := 0; b < blocks; b++ {
		t0 := time.Now()
		for i := 0; i < roundsPerBlock; i++ {
			out = roundTrip(ws, net, in)
		}
		roundNs[b] = float64(time.Since(t0).Nanoseconds()) / float64(roundsPerBlock)
	}
	if out[nElem-1] != float32(nElem-1) {
		fmt.Fprintf(os.Stderr, "bindings_bench: y[%d] = %g, want %d\n", nElem-1, out[nElem-1], nElem-1)
		os.Exit(1)
	}
	fmt.Printf("call lang=go iters=%d run_ns=%.1f round_ns=%.1f\n", perBlock*blocks, median(runNs), median(roundNs))
}

func benchTrain(steps int, modelPath string) {
	model, err := dp.ModelFromFile(modelPath)
	check(err, modelPath)
	defer model.Close()
	nets, err := model.BuildTraining(nil)
	check(err, "BuildTraining")
	defer nets.Close()
	ws, err := dp.NewWorkspace(nil)
	check(err, "NewWorkspace")
	defer ws.Close()
	initNet, err := dp.NewNet(ws, nets.Init, nil)
	check(err, "creating the init net")
	defer initNet.Close()
	train, err := dp.NewNet(ws, nets.Train, nil)
	check(err, "creating the train net")
	defer train.Close()
	check(initNet.Run(), "running the init net")

	xn := batch * pixels
	xs := make([]float32, numBatches*xn)
	ys := make([]int32, numBatches*batch)
	for i := range xs {
		xs[i] = float32(nextU64()>>40) / float32(1<<24)
	}
	for i := range ys {
		ys[i] = int32(nextU64() % 10)
	}
	var tx, ty [numBatches]*dp.Tensor
	for k := 0; k < numBatches; k++ {
		tx[k], err = dp.NewTensorOf([]int64{batch, 1, 28, 28}, xs[k*xn:(k+1)*xn])
		check(err, "data")
		defer tx[k].Close()
		ty[k], err = dp.NewTensorOf([]int64{batch}, ys[k*batch:(k+1)*batch])
		check(err, "label")
		defer ty[k].Close()
	}

	times := make([]float64, steps)
	for s := -warmupSteps; s < steps; s++ {
		k := (s + warmupSteps) % numBatches
		t0 := time.Now()
		check(ws.Feed("data", tx[k]), "feeding 'data'")
		check(ws.Feed("label", ty[k]), "feeding 'label'")
		check(train.Run(), "running the train net")
		if s >= 0 {
			times[s] = time.Since(t0).Seconds()
		}
	}
	loss, _, err := dp.FetchValues[float32](ws, "loss")
	check(err, "fetching 'loss'")

	med := median(times)
	fmt.Printf("train lang=go steps=%d batch=%d median_ms=%.3f samples_per_s=%.1f last_loss=%.6f\n", steps, batch,
		med*1e3, batch/med, loss[0])
}

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "call" {
		if n, err := strconv.Atoi(os.Args[2]); err == nil && n >= 20*blocks {
			benchCall(n)
			return
		}
	} else if len(os.Args) >= 4 && os.Args[1] == "train" {
		if n, err := strconv.Atoi(os.Args[2]); err == nil && n >= 1 {
			benchTrain(n, os.Args[3])
			return
		}
	}
	fmt.Fprintf(os.Stderr, "usage: %s call ITERS (>= 100) | train STEPS MODEL_JSON\n", os.Args[0])
	os.Exit(2)
}
