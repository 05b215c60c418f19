// train_fashion_mnist is the Go port of samples/train_fashion_mnist.c: the
// same flags, output lines, data order (dp's input pipeline, dp.Loader) and
// (for the same seed) results. After training it serves the model through
// its inference net (Model.BuildInference: "data" to "softmax", no labels)
// in a workspace of its own that shares the trained param tensors; when
// stdout is a terminal it redraws a progress line within each epoch.
//
//	go run ./examples/train_fashion_mnist [--model mlp|cnn|PATH.json] [--epochs E] [--batch B]
//	    [--lr LR] [--seed S] [--data DIR] [--nets DIR] [--limit N] [--min-acc A]
//	    [--devices cpu:N|cuda:N] [--checkpoint DIR [--resume] [--keep K]]
package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"dp.dev/dp"
)

const pixels, evalBatch, shown = 28 * 28, 1000, 8

type app struct {
	ws                *dp.Workspace
	model             *dp.Model
	parallel          *dp.ParallelModel
	init, train, eval *dp.Net
}

func check(err error, what string) {
	if err != nil {
		var e *dp.Error
		if errors.As(err, &e) {
			fmt.Fprintf(os.Stderr, "train_fashion_mnist: %s failed: [%s] %s\n", what, e.Code(), e.Message())
		} else {
			fmt.Fprintf(os.Stderr, "train_fashion_mnist: %s failed: %v\n", what, err)
		}
		os.Exit(1)
	}
}

// loadSplit reads images as standardised float32 and labels as int32.
func loadSplit(dir, split string) ([]float32, []int32) {
	p := fmt.Sprintf("%s/%s-images-idx3-ubyte.gz", dir, split)
	img, err := dp.TensorFromIDXFile(p)
	check(err, fmt.Sprintf("reading the Fashion-MNIST images '%s' (see --data; Debian: dataset-fashion-mnist)", p))
	defer img.Close()
	d := img.Dims()
	if img.DType() != dp.Uint8 || len(d) != 3 || d[1] != 28 || d[2] != 28 {
		fmt.Fprintf(os.Stderr, "train_fashion_mnist: '%s' is not a uint8 [N, 28, 28] image file\n", p)
		os.Exit(1)
	}
	n := int(d[0])
	p = fmt.Sprintf("%s/%s-labels-idx1-ubyte.gz", dir, split)
	lab, err := dp.TensorFromIDXFile(p)
	check(err, fmt.Sprintf("reading the Fashion-MNIST labels '%s' (see --data; Debian: dataset-fashion-mnist)", p))
	defer lab.Close()
	px, err := img.Bytes()
	check(err, "reading images")
	one, c255, cmean, cstd := float32(1), float32(255), float32(0.2860), float32(0.3530)
	scale, invStd := one/c255, one/cstd
	x := make([]float32, n*pixels)
	for i := range x {
		x[i] = float32(float32(float32(px[i])*scale)-cmean) * invStd
	}
	y := make([]int32, n)
	switch lab.DType() {
	case dp.Uint8:
		b, _ := lab.Bytes()
		for i := range y {
			y[i] = int32(b[i])
		}
	case dp.Int32:
		v, _ := dp.TensorValues[int32](lab)
		copy(y, v)
	}
	for _, v := range y {
		if v < 0 || v >= 10 {
			fmt.Fprintf(os.Stderr, "train_fashion_mnist: '%s' has a label outside 0..9\n", p)
			os.Exit(1)
		}
	}
	return x, y
}

func (a *app) feed(x []float32, y []int32, b int) {
	check(dp.FeedValues(a.ws, "data", []int64{int64(b), 1, 28, 28}, x[:b*pixels]), "feeding a batch")
	check(dp.FeedValues(a.ws, "label", []int64{int64(b)}, y[:b]), "feeding a batch")
}

func (a *app) scalar(name string) float64 {
	v, _, err := dp.FetchValues[float32](a.ws, name)
	check(err, name)
	return float64(v[0])
}

func (a *app) evaluate(x []float32, y []int32) float64 {
	n, correct := len(y), 0.0
	for off := 0; off < n; off += evalBatch {
		b := n - off
		if b > evalBatch {
			b = evalBatch
		}
		a.feed(x[off*pixels:], y[off:], b)
		check(a.eval.Run(), "running the eval net")
		correct += a.scalar("accuracy") * float64(b)
	}
	if n == 0 {
		return 0
	}
	return correct / float64(n)
}

// progress draws an epoch's progress line when stdout is a terminal:
// redrawn in place at most every 250 ms, erased before the epoch's line.
type progress struct {
	on     bool
	drawn  time.Time
	width  int
	period time.Duration
}

func (p *progress) draw(epoch, epochs int64, step, steps, batch int, t0 time.Time) {
	now := time.Now()
	if !p.on || (!p.drawn.IsZero() && now.Sub(p.drawn) < p.period) {
		return
	}
	p.drawn = now
	elapsed := now.Sub(t0).Seconds()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(step*batch) / elapsed
	}
	left := int64(elapsed/float64(step)*float64(steps-step) + 0.5)
	line := fmt.Sprintf("epoch %d/%d step %d/%d %.1f samples/s %d:%02d left", epoch, epochs, step, steps, rate,
		left/60, left%60)
	pad := 0
	if p.width > len(line) {
		pad = p.width - len(line)
	}
	fmt.Printf("\r%s%*s", line, pad, "")
	p.width = len(line)
}

func (p *progress) erase() {
	if p.on && p.width > 0 {
		fmt.Printf("\r%*s\r", p.width, "")
	}
	p.width = 0
	p.drawn = time.Time{}
}

// serve classifies the test set with the inference net ("softmax", no
// labels) in a workspace of its own fed the trained params (replica 0's for
// a data-parallel model): shared tensors, not copies. It returns the share
// whose most probable class (the first on ties, as Accuracy ranks) is the
// label, and the first predictions.
func (a *app) serve(testX []float32, testY []int32) (float64, []int32) {
	def, err := a.model.BuildInference([]string{"softmax"}, nil)
	check(err, "dp_model_build_inference")
	defer def.Close()
	ws, err := dp.NewWorkspace(nil)
	check(err, "dp_workspace_create (serving)")
	defer ws.Close()
	scope := ""
	if a.parallel != nil {
		scope = a.parallel.Scope(0)
	}
	for _, name := range def.ExternalInputs() {
		if name == "data" {
			continue // fed per batch
		}
		t, err := a.ws.Fetch(scope + name)
		check(err, scope+name)
		err = ws.Feed(name, t)
		t.Close()
		check(err, "sharing a param with the serving workspace")
	}
	net, err := dp.NewNet(ws, def, nil)
	check(err, "creating the inference net")
	defer net.Close()
	n, correct := len(testY), 0
	var predicted []int32
	for off := 0; off < n; off += evalBatch {
		b := n - off
		if b > evalBatch {
			b = evalBatch
		}
		check(dp.FeedValues(ws, "data", []int64{int64(b), 1, 28, 28}, testX[off*pixels:(off+b)*pixels]),
			"feeding test images")
		check(net.Run(), "running the inference net")
		p, _, err := dp.FetchValues[float32](ws, "softmax")
		check(err, "softmax")
		for i := 0; i < b; i++ {
			best := 0
			for c := 1; c < 10; c++ {
				if p[i*10+c] > p[i*10+best] {
					best = c
				}
			}
			if off+i < shown {
				predicted = append(predicted, int32(best))
			}
			if int32(best) == testY[off+i] {
				correct++
			}
		}
	}
	if n == 0 {
		return 0, predicted
	}
	return float64(correct) / float64(n), predicted
}

func (a *app) save(dir string, iter int64, keep int) {
	path := filepath.Join(dir, dp.StepCheckpointName(iter))
	if a.parallel != nil {
		check(a.parallel.Save(a.ws, path, nil), "saving a checkpoint")
	} else {
		blobs, err := a.model.CheckpointBlobs()
		check(err, "dp_model_checkpoint_blobs")
		check(dp.SaveCheckpoint(a.ws, blobs, path, nil), "saving a checkpoint")
	}
	check(dp.PruneCheckpoints(dir, keep), "pruning old checkpoints")
}

func (a *app) resume(dir string) int64 {
	files, err := dp.ListCheckpointSteps(dir)
	check(err, "listing checkpoints")
	for _, path := range files {
		info, err := dp.ReadCheckpointInfo(path)
		var iter int64
		if err == nil {
			iter = info.Iteration
			if a.parallel != nil {
				err = a.parallel.Load(a.ws, path, nil)
			} else {
				err = dp.LoadCheckpoint(a.ws, path, nil)
			}
		}
		if err == nil && iter > 0 {
			fmt.Printf("resumed from %s (iteration %d)\n", path, iter)
			return iter
		}
		if err == nil {
			fmt.Fprintf(os.Stderr, "train_fashion_mnist: %s records no iteration; skipping it\n", path)
		} else {
			var e *dp.Error
			errors.As(err, &e)
			fmt.Fprintf(os.Stderr, "train_fashion_mnist: cannot resume from %s: [%s] %s; trying an older one\n", path,
				e.Code(), e.Message())
		}
	}
	fmt.Printf("no checkpoint to resume from in %s; starting afresh\n", dir)
	return 0
}

func bad(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(2)
}

func intFlag(name, v string, lo, hi int64) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		bad("%s: %s must be an integer in %d..%d, got '%s'", os.Args[0], name, lo, hi, v)
	}
	return n
}

func main() {
	var modelArg, dataDir, netsDir, devices, ckptDir, epochsS, batchS, limitS, seedS, lrS, minAccS, keepS string
	var resume bool
	flag.StringVar(&modelArg, "model", "mlp", "mlp, cnn or a .json model file")
	flag.StringVar(&epochsS, "epochs", "3", "epochs")
	flag.StringVar(&batchS, "batch", "64", "batch size")
	flag.StringVar(&limitS, "limit", "0", "training samples to use (0: all)")
	flag.StringVar(&seedS, "seed", "1", "shuffle seed")
	flag.StringVar(&lrS, "lr", "", "learning rate (default: the model's)")
	flag.StringVar(&minAccS, "min-acc", "", "fail (exit 3) below this final test accuracy")
	flag.StringVar(&devices, "devices", "", "cpu:N or cuda:N: data parallelism")
	flag.StringVar(&dataDir, "data", "/usr/share/datasets/fashion-mnist", "data directory")
	flag.StringVar(&netsDir, "nets", "", "directory of fashion_mlp.json / fashion_cnn.json")
	flag.StringVar(&ckptDir, "checkpoint", "", "save a checkpoint per epoch in DIR")
	flag.BoolVar(&resume, "resume", false, "resume from the newest checkpoint in --checkpoint")
	flag.StringVar(&keepS, "keep", "3", "checkpoints to keep")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	epochs := intFlag("--epochs", epochsS, 1, 100000)
	batch := int(intFlag("--batch", batchS, 1, 65536))
	limit := int(intFlag("--limit", limitS, 0, 1<<30))
	seed := uint64(intFlag("--seed", seedS, 0, 0x7FFFFFFF))
	keep := int(intFlag("--keep", keepS, 0, 1000000))
	lr := 0.0
	if lrS != "" {
		var err error
		if lr, err = strconv.ParseFloat(lrS, 64); err != nil || !(lr > 0) || lr > 1e308 {
			bad("%s: --lr must be a positive number, got '%s'", os.Args[0], lrS)
		}
	}
	minAcc := -1.0
	if minAccS != "" {
		var err error
		if minAcc, err = strconv.ParseFloat(minAccS, 64); err != nil || !(minAcc >= 0 && minAcc <= 1) {
			bad("%s: --min-acc must be a number in [0, 1], got '%s'", os.Args[0], minAccS)
		}
	}
	devType, numDev := dp.DeviceType(-1), 0
	if devices != "" {
		kind, n, ok := strings.Cut(devices, ":")
		switch {
		case ok && kind == "cpu":
			devType = dp.DeviceCPU
		case ok && kind == "cuda":
			devType = dp.DeviceCUDA
		default:
			bad("%s: --devices must be cpu:N or cuda:N, got '%s'", os.Args[0], devices)
		}
		numDev = int(intFlag("--devices", n, 1, 64))
	}
	if resume && ckptDir == "" {
		bad("%s: --resume needs --checkpoint DIR", os.Args[0])
	}
	// The checkpoint directory is made when missing (not its parents).
	if ckptDir != "" {
		if err := os.Mkdir(ckptDir, 0o777); err != nil && !os.IsExist(err) {
			fmt.Fprintf(os.Stderr, "%s: cannot create checkpoint directory '%s': %v\n", os.Args[0], ckptDir, err)
			os.Exit(1)
		}
	}
	modelPath := modelArg
	if modelArg == "mlp" || modelArg == "cnn" {
		file := "fashion_" + modelArg + ".json"
		_, src, _, _ := runtime.Caller(0)
		cands := []string{filepath.Join(filepath.Dir(src), "../../../../samples/nets", file), filepath.Join("samples/nets", file)}
		if netsDir != "" {
			cands = []string{filepath.Join(netsDir, file)}
		}
		modelPath = cands[0]
		for i := len(cands) - 1; i >= 0; i-- {
			if _, err := os.Stat(cands[i]); err == nil {
				modelPath = cands[i]
			}
		}
	} else if !strings.HasSuffix(modelArg, ".json") || len(modelArg) <= 5 {
		bad("%s: --model must be mlp, cnn or a .json model file, got '%s'", os.Args[0], modelArg)
	}

	fmt.Printf("dp %s\n", dp.Version())
	trainX, trainY := loadSplit(dataDir, "train")
	testX, testY := loadSplit(dataDir, "t10k")
	nTrain := len(trainY)
	if limit > 0 && limit < nTrain {
		nTrain = limit
	}
	if nTrain < batch {
		fmt.Fprintf(os.Stderr, "train_fashion_mnist: %d training samples make no full batch of %d\n", nTrain, batch)
		os.Exit(1)
	}

	a := &app{}
	var err error
	a.model, err = dp.ModelFromFile(modelPath)
	check(err, modelPath)
	var nets *dp.TrainingNets
	if devType < 0 {
		nets, err = a.model.BuildTraining(&dp.TrainingOptions{LR: lr})
		check(err, "dp_model_build_training")
	} else {
		ids := make([]int32, numDev)
		for i := range ids {
			ids[i] = int32(i)
		}
		// CPU replicas: dp picks one shared model or a copy each, as in the C sample.
		a.parallel, err = a.model.Parallelize(&dp.ParallelOptions{DeviceType: devType, DeviceIDs: ids, LR: lr,
			SharedModelAuto: true})
		check(err, "dp_model_parallelize")
		nets, err = a.parallel.Nets()
		check(err, "dp_parallel_model_nets")
		n := a.parallel.NumReplicas()
		fmt.Printf("data parallel over %d replicas (%s ... %s)\n", n, a.parallel.Scope(0), a.parallel.Scope(n-1))
	}
	a.ws, err = dp.NewWorkspace(nil)
	check(err, "dp_workspace_create")
	a.init, err = dp.NewNet(a.ws, nets.Init, nil)
	check(err, "creating the init net")
	a.train, err = dp.NewNet(a.ws, nets.Train, nil)
	check(err, "creating the train net")
	a.eval, err = dp.NewNet(a.ws, nets.Eval, nil)
	check(err, "creating the eval net")
	nets.Close()
	check(a.init.Run(), "running the init net")

	// The input pipeline over the first nTrain training samples (copied
	// into dp: the loader reads them in place from there). With several
	// processes each is fed its part of every global batch of --batch.
	shards, shard := 1, 0
	if a.parallel != nil {
		shards, shard = a.parallel.NumShards(), a.parallel.ShardID()
	}
	tx, err := dp.NewTensorOf([]int64{int64(nTrain), 1, 28, 28}, trainX[:nTrain*pixels])
	check(err, "creating the training images")
	ty, err := dp.NewTensorOf([]int64{int64(nTrain)}, trainY[:nTrain])
	check(err, "creating the training labels")
	trainX, trainY = nil, nil
	loader, err := dp.NewLoader(a.ws, []string{"data", "label"}, []*dp.Tensor{tx, ty},
		&dp.LoaderOptions{BatchSize: int64(batch), Seed: seed, NumShards: shards, ShardID: shard})
	check(err, "dp_loader_create")
	tx.Close()
	ty.Close()
	steps := int(loader.StepsPerEpoch())
	lrText := "the model's"
	if lr > 0 {
		lrText = strconv.FormatFloat(lr, 'g', 6, 64)
	}
	fmt.Printf("model %s: train %d (%d steps of %d), test %d, epochs %d, lr %s, seed %d\n", modelPath, nTrain, steps,
		batch, len(testY), epochs, lrText, seed)

	first := int64(1)
	if resume {
		done := a.resume(ckptDir)
		if done%int64(steps) != 0 {
			fmt.Fprintf(os.Stderr, "%s: the checkpoint's iteration %d is not a whole number of epochs of %d steps "+
				"(were --batch and --limit the same?)\n", os.Args[0], done, steps)
			os.Exit(1)
		}
		// The loader's order depends only on the seed and the epoch.
		first = 1 + done/int64(steps)
		check(loader.SeekTo(first-1, 0), "dp_loader_seek")
	}
	var total time.Duration
	lastLoss, lastAcc := 0.0, 0.0
	bar := &progress{on: isTerminal(os.Stdout), period: 250 * time.Millisecond}
	for e := first; e <= epochs; e++ {
		lossSum := 0.0
		t0 := time.Now()
		for step := 1; ; step++ {
			fed, err := loader.Next()
			check(err, "dp_loader_next")
			if !fed {
				break // the epoch's end
			}
			check(a.train.Run(), "running the train net")
			lossSum += a.scalar("loss")
			bar.draw(e, epochs, step, steps, batch, t0)
		}
		dt := time.Since(t0)
		bar.erase()
		total += dt
		lastLoss = lossSum / float64(steps)
		lastAcc = a.evaluate(testX, testY)
		if ckptDir != "" {
			a.save(ckptDir, e*int64(steps), keep)
		}
		fmt.Printf("epoch %d/%d loss=%.4f test_acc=%.4f samples_per_s=%.1f\n", e, epochs, lastLoss, lastAcc,
			float64(steps*batch)/dt.Seconds())
	}
	trained := epochs - first + 1
	sps := 0.0
	if trained > 0 {
		sps = float64(steps*batch) * float64(trained) / total.Seconds()
	}
	// Serving: the test set through the inference net, which must classify
	// exactly as the eval net did.
	inferAcc, predicted := a.serve(testX, testY)
	fmt.Printf("inference: test_acc=%.4f predicted", inferAcc)
	for _, c := range predicted {
		fmt.Printf(" %d", c)
	}
	fmt.Printf(" labels")
	for i := 0; i < len(predicted); i++ {
		fmt.Printf(" %d", testY[i])
	}
	fmt.Println()
	if trained > 0 && math.Abs(inferAcc-lastAcc) > 0.5/math.Max(1, float64(len(testY))) {
		fmt.Fprintf(os.Stderr, "train_fashion_mnist: the inference net's test accuracy %.6f is not the eval net's %.6f\n",
			inferAcc, lastAcc)
		os.Exit(1)
	}
	fmt.Printf("final test_acc=%.4f train_loss=%.4f samples_per_s=%.1f\n", lastAcc, lastLoss, sps)
	loader.Close()
	a.eval.Close()
	a.train.Close()
	a.init.Close()
	a.ws.Close()
	a.parallel.Close()
	a.model.Close()
	if minAcc >= 0 && !(lastAcc >= minAcc) {
		fmt.Fprintf(os.Stderr, "%s: test accuracy %.4f is below --min-acc %.4f\n", os.Args[0], lastAcc, minAcc)
		os.Exit(3)
	}
}
