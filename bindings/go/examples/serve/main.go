// serve classifies the Fashion-MNIST test set from several goroutines at
// once, as a service would: the model's inference net (Model.BuildInference:
// "data" to "softmax", no labels, loss or metric), trained params loaded
// once from a checkpoint that train_fashion_mnist --checkpoint wrote, and
// per worker goroutine a workspace and a net of its own, each fed the same
// param tensors (shared, not copied: the params are in memory once).
//
//	go run ./examples/serve --checkpoint DIR|FILE [--model mlp|cnn|PATH.json] [--workers N]
//	    [--batch B] [--data DIR] [--nets DIR]
//
// Each request is B test images; the workers take requests from a channel
// until the test set is done. It prints one line
//
//	served N images in R requests of B from W workers: test_acc=<acc> images_per_s=<rate>
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"dp.dev/dp"
)

const pixels, classes = 28 * 28, 10

func check(err error, what string) {
	if err != nil {
		var e *dp.Error
		if errors.As(err, &e) {
			fmt.Fprintf(os.Stderr, "serve: %s failed: [%s] %s\n", what, e.Code(), e.Message())
		} else {
			fmt.Fprintf(os.Stderr, "serve: %s failed: %v\n", what, err)
		}
		os.Exit(1)
	}
}

// testSet reads the test images (standardised as the training sample does) and labels.
func testSet(dir string) ([]float32, []int32) {
	img, err := dp.TensorFromIDXFile(filepath.Join(dir, "t10k-images-idx3-ubyte.gz"))
	check(err, "reading the test images (see --data; Debian: dataset-fashion-mnist)")
	defer img.Close()
	lab, err := dp.TensorFromIDXFile(filepath.Join(dir, "t10k-labels-idx1-ubyte.gz"))
	check(err, "reading the test labels")
	defer lab.Close()
	px, err := img.Bytes()
	check(err, "reading images")
	lb, err := lab.Bytes()
	check(err, "reading labels")
	one, c255, cmean, cstd := float32(1), float32(255), float32(0.2860), float32(0.3530)
	scale, invStd := one/c255, one/cstd
	x := make([]float32, len(px))
	for i := range x {
		x[i] = float32(float32(float32(px[i])*scale)-cmean) * invStd
	}
	y := make([]int32, len(lb))
	for i := range y {
		y[i] = int32(lb[i])
	}
	return x, y
}

// loadParams loads the params the net reads (its external inputs other than
// the model's inputs) from a checkpoint into a workspace of their own:
// lenient creates the blobs, mmap shares the file's pages.
func loadParams(m *dp.Model, def *dp.NetDef, path string) *dp.Workspace {
	inputs, err := m.Blobs(dp.ModelInputs)
	check(err, "the model's inputs")
	var names []string
	for _, x := range def.ExternalInputs() {
		isInput := false
		for _, in := range inputs {
			isInput = isInput || in == x
		}
		if !isInput {
			names = append(names, x)
		}
	}
	ws, err := dp.NewWorkspace(nil)
	check(err, "dp_workspace_create")
	check(dp.LoadCheckpoint(ws, path, &dp.LoadOptions{Names: names, Lenient: true, MMap: true}), path)
	for _, n := range names { // lenient skips names the file lacks: a wrong checkpoint shows here
		has, err := ws.HasBlob(n)
		check(err, n)
		if !has {
			check(fmt.Errorf("%s holds no param %q of the model", path, n), "loading the params")
		}
	}
	return ws
}

// worker serves requests with its own workspace and net, reading the shared
// params; it returns how many images it classified correctly.
func worker(def *dp.NetDef, params map[string]*dp.Tensor, x []float32, y []int32, batch int,
	requests <-chan int) (int, error) {
	ws, err := dp.NewWorkspace(nil)
	if err != nil {
		return 0, err
	}
	defer ws.Close()
	for name, t := range params {
		if err := ws.Feed(name, t); err != nil { // shared, not copied
			return 0, err
		}
	}
	net, err := dp.NewNet(ws, def, nil)
	if err != nil {
		return 0, err
	}
	defer net.Close()
	correct := 0
	for first := range requests {
		b := len(y) - first
		if b > batch {
			b = batch
		}
		if err := dp.FeedValues(ws, "data", []int64{int64(b), 1, 28, 28}, x[first*pixels:(first+b)*pixels]); err != nil {
			return 0, err
		}
		if err := net.Run(); err != nil {
			return 0, err
		}
		p, _, err := dp.FetchValues[float32](ws, "softmax")
		if err != nil {
			return 0, err
		}
		for i := 0; i < b; i++ {
			best := 0
			for c := 1; c < classes; c++ {
				if p[i*classes+c] > p[i*classes+best] {
					best = c
				}
			}
			if int32(best) == y[first+i] {
				correct++
			}
		}
	}
	return correct, nil
}

func main() {
	var modelArg, ckpt, dataDir, netsDir string
	var workers, batch int
	flag.StringVar(&modelArg, "model", "mlp", "mlp, cnn or a .json model file")
	flag.StringVar(&ckpt, "checkpoint", "", "a checkpoint file, or a directory of step checkpoints (the newest)")
	flag.IntVar(&workers, "workers", 4, "serving goroutines, each with its own workspace and net")
	flag.IntVar(&batch, "batch", 1, "images per request")
	flag.StringVar(&dataDir, "data", "/usr/share/datasets/fashion-mnist", "data directory")
	flag.StringVar(&netsDir, "nets", "", "directory of fashion_mlp.json / fashion_cnn.json")
	flag.Parse()
	if flag.NArg() != 0 || ckpt == "" || workers < 1 || workers > 1024 || batch < 1 || batch > 65536 {
		fmt.Fprintln(os.Stderr, "serve: --checkpoint is required; --workers 1..1024, --batch 1..65536")
		flag.Usage()
		os.Exit(2)
	}
	modelPath := modelArg
	if modelArg == "mlp" || modelArg == "cnn" {
		file := "fashion_" + modelArg + ".json"
		_, src, _, _ := runtime.Caller(0)
		modelPath = filepath.Join(filepath.Dir(src), "../../../../samples/nets", file)
		if netsDir != "" {
			modelPath = filepath.Join(netsDir, file)
		}
	} else if !strings.HasSuffix(modelArg, ".json") {
		fmt.Fprintf(os.Stderr, "serve: --model must be mlp, cnn or a .json model file, got '%s'\n", modelArg)
		os.Exit(2)
	}
	if st, err := os.Stat(ckpt); err == nil && st.IsDir() {
		files, err := dp.ListCheckpointSteps(ckpt)
		check(err, "listing checkpoints")
		if len(files) == 0 {
			check(fmt.Errorf("no step checkpoint in %s", ckpt), "finding a checkpoint")
		}
		ckpt = files[0]
	}

	x, y := testSet(dataDir)
	m, err := dp.ModelFromFile(modelPath)
	check(err, modelPath)
	defer m.Close()
	def, err := m.BuildInference([]string{"softmax"}, nil)
	check(err, "dp_model_build_inference")
	defer def.Close()

	// The params, once: every worker's workspace is fed these tensors.
	loaded := loadParams(m, def, ckpt)
	defer loaded.Close()
	params := map[string]*dp.Tensor{}
	names, err := loaded.ListBlobs("")
	check(err, "listing the params")
	for _, n := range names {
		t, err := loaded.Fetch(n)
		check(err, n)
		defer t.Close()
		params[n] = t
	}

	requests := make(chan int)
	correct := make([]int, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			correct[w], errs[w] = worker(def, params, x, y, batch, requests)
			if errs[w] != nil {
				for range requests { // let the others finish the test set
				}
			}
		}(w)
	}
	nreq := 0
	for first := 0; first < len(y); first += batch {
		requests <- first
		nreq++
	}
	close(requests)
	wg.Wait()
	took := time.Since(start).Seconds()
	total := 0
	for w := range errs {
		check(errs[w], fmt.Sprintf("worker %d", w))
		total += correct[w]
	}
	fmt.Printf("served %d images in %d requests of %d from %d workers: test_acc=%.4f images_per_s=%.1f\n", len(y),
		nreq, batch, workers, float64(total)/float64(len(y)), float64(len(y))/took)
}
