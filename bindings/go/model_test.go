package dp_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"dp.dev/dp"
)

func TestIntrospection(t *testing.T) {
	d := netdef(t, initJSON)
	defer d.Close()
	if d.Name() != "init" || d.NumOps() != 4 || len(d.ExternalInputs()) != 0 {
		t.Fatal(d.Name(), d.NumOps(), d.ExternalInputs())
	}
	if ty, _ := d.Device(); ty != dp.DeviceCPU {
		t.Fatal("device", ty)
	}
	if e, w := d.Executor(); e != dp.ExecutorDefault || w != 0 {
		t.Fatal("executor", e, w)
	}
	op := d.Op(0)
	if op.Type() != "XavierFill" || op.Name() != "" || op.Engine() != "" || fmt.Sprint(op.Outputs()) != "[W1]" ||
		len(op.Inputs()) != 0 || len(op.ControlInputs()) != 0 {
		t.Fatal(op.Type(), op.Outputs())
	}
	if ty, _ := op.Device(); ty != dp.DeviceNone {
		t.Fatal("op device", ty)
	}
	shape := op.FindArg("shape")
	if shape == nil || shape.Kind() != dp.ArgInts || shape.NumValues() != 2 || shape.Name() != "shape" {
		t.Fatal("shape arg")
	}
	ints, err := shape.Ints()
	must(t, err)
	if fmt.Sprint(ints) != "[8 4]" {
		t.Fatal(ints)
	}
	seed, err := op.FindArg("seed").Int()
	must(t, err)
	if seed != 7 {
		t.Fatal(seed)
	}
	if _, err := shape.Float(); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Fatal("kinds are not converted", err)
	}
	if op.FindArg("nope") != nil || d.Op(99) != nil || len(op.Args()) != 2 {
		t.Fatal("lookups")
	}
	v, err := d.Op(1).FindArg("value").Float()
	must(t, err)
	if v != 0.125 {
		t.Fatal(v)
	}
	// The kinds a validated net holds (test_introspect.c's net); STRINGS,
	// FLOATS and NET(S) arguments are rejected by every op's schema, so only
	// their getters' error paths can be reached from here.
	intro := netdef(t, `{"name":"intro","external_inputs":["x","w","b"],"external_outputs":["y","z"],
	 "executor":"Async","num_workers":3,"device":{"type":"CPU","id":2},"ops":[
	 {"type":"FC","name":"fc","inputs":["x","w","b"],"outputs":["h"],"args":[{"name":"activation","s":"relu"}],
	  "engine":"FAST","device":{"type":"CUDA","id":1}},
	 {"type":"Scale","inputs":["h"],"outputs":["y"],"control_inputs":["h"],"args":[{"name":"scale","f":2.5}]},
	 {"type":"XavierFill","outputs":["z"],"args":[{"name":"shape","ints":[3,4]}]}]}`)
	defer intro.Close()
	if e, w := intro.Executor(); e != dp.ExecutorAsync || w != 3 {
		t.Fatal("executor", e, w)
	}
	if ty, id := intro.Device(); ty != dp.DeviceCPU || id != 2 {
		t.Fatal("device", ty, id)
	}
	if fmt.Sprint(intro.ExternalInputs(), intro.ExternalOutputs()) != "[x w b] [y z]" {
		t.Fatal(intro.ExternalInputs(), intro.ExternalOutputs())
	}
	fc := intro.Op(0)
	if ty, id := fc.Device(); ty != dp.DeviceCUDA || id != 1 || fc.Engine() != "FAST" || fc.Name() != "fc" {
		t.Fatal("fc", ty, id, fc.Engine())
	}
	act := fc.FindArg("activation")
	if s, err := act.StringValue(); err != nil || s != "relu" || act.Kind() != dp.ArgString {
		t.Fatal(s, err)
	}
	if sc, err := intro.Op(1).FindArg("scale").Float(); err != nil || sc != 2.5 {
		t.Fatal(sc, err)
	}
	if fmt.Sprint(intro.Op(1).ControlInputs()) != "[h]" {
		t.Fatal(intro.Op(1).ControlInputs())
	}
	for name, f := range map[string]func() error{
		"floats":    func() error { _, err := act.Floats(); return err },
		"string_at": func() error { _, err := act.StringAt(0); return err },
		"strings":   func() error { _, err := act.Strings(); return err },
		"net":       func() error { _, err := act.Net(); return err },
		"net_at":    func() error { _, err := act.NetAt(0); return err },
		"ints":      func() error { _, err := act.Ints(); return err },
	} {
		if err := f(); !errors.Is(err, dp.ErrInvalidArgument) {
			t.Errorf("%s of a STRING argument: %v", name, err)
		}
	}
	// Serialisation round trips.
	buf, err := d.ToBuffer()
	must(t, err)
	d2, err := dp.NetDefFromBuffer(buf)
	must(t, err)
	j1, _ := d.ToJSON()
	j2, _ := d2.ToJSON()
	d2.Close()
	if j1 != j2 || !strings.Contains(j1, "XavierFill") {
		t.Fatal("round trip")
	}
	dot, err := d.ToDot()
	must(t, err)
	if !strings.Contains(dot, "digraph") {
		t.Fatal(dot)
	}
	// Views fail safely once their NetDef is closed.
	d3 := netdef(t, initJSON)
	op3 := d3.Op(0)
	arg3 := op3.FindArg("seed")
	d3.Close()
	if op3.Type() != "" || arg3.Name() != "" {
		t.Fatal("view after close")
	}
	if _, err := arg3.Int(); !errors.Is(err, dp.ErrClosed) {
		t.Fatal(err)
	}
}

func TestGradientsAndModel(t *testing.T) {
	lin := netdef(t, `{"name":"lin","external_inputs":["x","w","b","label"],"ops":[
	 {"type":"FC","inputs":["x","w","b"],"outputs":["logits"]},
	 {"type":"SoftmaxWithLoss","inputs":["logits","label"],"outputs":["p","loss"]}]}`)
	defer lin.Close()
	g, pairs, err := lin.AddGradients(dp.GradientOptions{Losses: []string{"loss"}, WRT: []string{"w", "b"}})
	must(t, err)
	defer g.Close()
	if fmt.Sprint(pairs) != "[{w w_grad} {b b_grad}]" || g.NumOps() <= lin.NumOps() {
		t.Fatal(pairs)
	}
	if _, _, err := lin.AddGradients(dp.GradientOptions{}); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Fatal("no losses", err)
	}

	m, err := dp.ModelFromJSON([]byte(modelJSON))
	must(t, err)
	defer m.Close()
	if m.Name() != "lin" || !m.HasOptimizer() {
		t.Fatal(m.Name())
	}
	for which, want := range map[dp.ModelBlobList]string{dp.ModelParams: "[w b]", dp.ModelInputs: "[x label]",
		dp.ModelLosses: "[loss]", dp.ModelMetrics: "[acc]", dp.ModelComputedParams: "[]"} {
		got, err := m.Blobs(which)
		must(t, err)
		if fmt.Sprint(got) != want {
			t.Errorf("blobs %d: %v", which, got)
		}
	}
	opt, err := m.Optimizer()
	must(t, err)
	if opt.Type != "momentum" || opt.LR != 0.5 || opt.Momentum != 0.5 || opt.LRPolicy == "" {
		t.Fatalf("%+v", opt)
	}
	fwd, err := m.Net(dp.ModelForwardNet)
	must(t, err)
	if fwd.NumOps() != 3 {
		t.Fatal(fwd.NumOps())
	}
	fwd.Close()
	if _, err := m.Net(7); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Fatal(err)
	}
	buf, err := m.ToBuffer()
	must(t, err)
	m2, err := dp.ModelFromBuffer(buf)
	must(t, err)
	m2.Close()
	js, err := m.ToJSON()
	must(t, err)
	if !strings.Contains(js, `"momentum"`) {
		t.Fatal(js)
	}
	cb, err := m.CheckpointBlobs()
	must(t, err)
	if !strings.Contains(fmt.Sprint(cb), "optimizer/iter") {
		t.Fatal(cb)
	}

	// Training reduces the loss (as test_capi.c checks).
	tr := newTrainer(t, m, &dp.TrainingOptions{LR: 0.2})
	defer tr.Close()
	g0 := lcg(777)
	feedBatch(t, tr.ws, &g0)
	must(t, tr.eval.Run())
	first := scalar(t, tr.ws, "loss")
	for i := 0; i < 200; i++ {
		feedBatch(t, tr.ws, &g0)
		must(t, tr.train.Run())
	}
	if lr := scalar(t, tr.ws, "optimizer/lr"); math.Abs(float64(lr)-0.2) > 1e-6 {
		t.Fatal("lr", lr)
	}
	g0 = 777
	feedBatch(t, tr.ws, &g0)
	must(t, tr.eval.Run())
	if last := scalar(t, tr.ws, "loss"); !(last < 0.5*first) || scalar(t, tr.ws, "acc") < 0.8 {
		t.Fatal("no learning", first, last)
	}
}

func TestParallelModel(t *testing.T) {
	m, err := dp.ModelFromJSON([]byte(modelJSON))
	must(t, err)
	defer m.Close()
	pm, err := m.Parallelize(&dp.ParallelOptions{DeviceIDs: []int32{0, 1}, AccumulateSteps: 2, NumShards: 1})
	must(t, err)
	defer pm.Close()
	if pm.NumReplicas() != 2 || pm.Scope(1) != "cpu_1/" || pm.Scope(2) != "" {
		t.Fatal(pm.NumReplicas(), pm.Scope(1))
	}
	if pm.NumShards() != 1 || pm.ShardID() != 0 {
		t.Fatal("shards", pm.NumShards(), pm.ShardID())
	}
	nets, err := pm.Nets()
	must(t, err)
	defer nets.Close()
	acc, err := pm.AccumulateNet()
	must(t, err)
	acc.Close()
	sn, err := pm.SyncNet()
	must(t, err)
	sn.Close()
	if _, _, err := pm.BlockNet(); !errors.Is(err, dp.ErrFailedPrecondition) {
		t.Fatal("block net without BMUF", err)
	}
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	if err := pm.Sync(ws); !errors.Is(err, dp.ErrNotFound) {
		t.Fatal("sync before init", err)
	}
	in, err := dp.NewNet(ws, nets.Init, nil)
	must(t, err)
	defer in.Close()
	train, err := dp.NewNet(ws, nets.Train, nil)
	must(t, err)
	defer train.Close()
	must(t, in.Run())
	g := lcg(5)
	for i := 0; i < 3; i++ {
		feedBatch(t, ws, &g)
		must(t, train.Run())
	}
	must(t, pm.Sync(ws))
	w0, _, err := dp.FetchValues[float32](ws, "cpu_0/w")
	must(t, err)
	w1, _, err := dp.FetchValues[float32](ws, "cpu_1/w")
	must(t, err)
	if fmt.Sprint(w0) != fmt.Sprint(w1) {
		t.Fatal("replicas differ")
	}
	bm, err := m.Parallelize(&dp.ParallelOptions{DeviceIDs: []int32{0, 1}, BMUF: true, BMUFBlockLength: 4, NumShards: 1})
	must(t, err)
	bn, k, err := bm.BlockNet()
	must(t, err)
	if k != 4 || bn.NumOps() == 0 {
		t.Fatal(k)
	}
	bn.Close()
	bm.Close()
	if _, err := m.Parallelize(&dp.ParallelOptions{BucketBytes: -1, NumShards: 1}); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Fatal(err)
	}
}

// TestParallelLayouts: a copy per replica, one shared model, and the layout
// dp picks (SharedModelAuto) train the same params from the same batches.
func TestParallelLayouts(t *testing.T) {
	m, err := dp.ModelFromJSON([]byte(modelJSON))
	must(t, err)
	defer m.Close()
	train := func(o dp.ParallelOptions) []float32 {
		o.DeviceIDs = []int32{0, 1}
		o.NumShards = 1
		pm, err := m.Parallelize(&o)
		must(t, err)
		defer pm.Close()
		nets, err := pm.Nets()
		must(t, err)
		defer nets.Close()
		ws, err := dp.NewWorkspace(nil)
		must(t, err)
		defer ws.Close()
		in, err := dp.NewNet(ws, nets.Init, nil)
		must(t, err)
		defer in.Close()
		tr, err := dp.NewNet(ws, nets.Train, nil)
		must(t, err)
		defer tr.Close()
		must(t, in.Run())
		g := lcg(9)
		for i := 0; i < 4; i++ {
			feedBatch(t, ws, &g)
			must(t, tr.Run())
		}
		w, _, err := dp.FetchValues[float32](ws, "cpu_0/w")
		must(t, err)
		return w
	}
	copies := train(dp.ParallelOptions{})
	// The gradient allreduce in 16 bits (since 0.6): close to float32's, not its bits.
	for _, c := range []dp.GradientCompression{dp.CompressionBF16, dp.CompressionFP16} {
		got := train(dp.ParallelOptions{GradientCompression: c})
		same := true
		for i := range got {
			same = same && got[i] == copies[i]
			if math.Abs(float64(got[i]-copies[i])) > 2e-2*(1+math.Abs(float64(copies[i]))) {
				t.Fatal("compression", c, i, got[i], copies[i])
			}
		}
		if same {
			t.Fatal("compression", c, "changed nothing")
		}
	}
	// A sharded optimizer state (ZeRO-1, since 0.6): the unsharded bits.
	if got := train(dp.ParallelOptions{ShardOptimizerState: true}); fmt.Sprint(got) != fmt.Sprint(copies) {
		t.Fatal("sharded optimizer state", got, copies)
	}
	for _, o := range []dp.ParallelOptions{{SharedModel: true}, {SharedModelAuto: true}, {SharedModelAuto: true, BMUF: true, BMUFBlockLength: 4}} {
		got := train(o)
		if len(got) != len(copies) {
			t.Fatal(o, len(got))
		}
		if o.BMUF {
			continue // BMUF's params move at block ends only: AUTO means a copy per replica, without an error
		}
		for i := range got {
			if math.Abs(float64(got[i]-copies[i])) > 1e-5 {
				t.Fatal(o, i, got[i], copies[i])
			}
		}
	}
	if _, err := m.Parallelize(&dp.ParallelOptions{DeviceIDs: []int32{0, 1}, NumShards: 1, SharedModel: true, BMUF: true}); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Fatal("shared model with BMUF", err)
	}
}

// TestParallelShards: the several-processes options (since 0.3), without
// starting other processes. NumShards is explicit so that DP_WORLD_SIZE and
// friends in the environment change nothing.
func TestParallelShards(t *testing.T) {
	m, err := dp.ModelFromJSON([]byte(modelJSON))
	must(t, err)
	defer m.Close()
	pm, err := m.Parallelize(&dp.ParallelOptions{DeviceIDs: []int32{0}, NumShards: 1, ShardID: 0})
	must(t, err)
	if pm.NumShards() != 1 || pm.ShardID() != 0 || pm.NumReplicas() != 1 {
		t.Fatal(pm.NumShards(), pm.ShardID(), pm.NumReplicas())
	}
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	// One process: join returns at once, having shadowed no step.
	if steps, err := pm.Join(ws); err != nil || steps != 0 {
		t.Fatal("join", steps, err)
	}
	if _, err := pm.Join(nil); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Fatal("join without workspace", err)
	}
	pm.Close()
	if pm.NumShards() != 0 || pm.ShardID() != -1 {
		t.Fatal("closed", pm.NumShards(), pm.ShardID())
	}
	if (*dp.ParallelModel)(nil).NumShards() != 0 || (*dp.ParallelModel)(nil).ShardID() != -1 {
		t.Fatal("nil model")
	}
	for _, c := range []struct {
		name string
		opts dp.ParallelOptions
		want string
	}{
		{"bad store", dp.ParallelOptions{NumShards: 2, ShardID: 0, Store: "tcp://nope"}, "store address"},
		{"shard out of range", dp.ParallelOptions{NumShards: 2, ShardID: 2}, "shard_id"},
		{"negative timeout", dp.ParallelOptions{NumShards: 1, TimeoutMS: -1}, "timeout_ms"},
		{"bad run id", dp.ParallelOptions{NumShards: 1, RunID: "a/b"}, "run id"},
		{"bad local transport", dp.ParallelOptions{NumShards: 1, LocalTransport: "udp"}, "local_transport"},
	} {
		_, err := m.Parallelize(&c.opts)
		var e *dp.Error
		if !errors.Is(err, dp.ErrInvalidArgument) || !errors.As(err, &e) || !strings.Contains(e.Message(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// Explicit strings that are valid with one process are accepted.
	named, err := m.Parallelize(&dp.ParallelOptions{NumShards: 1, RunID: "go-test", NetworkInterface: "lo", TimeoutMS: 1000,
		LocalTransport: "tcp"})
	must(t, err)
	if named.NumShards() != 1 || named.ShardID() != 0 {
		t.Fatal(named.NumShards(), named.ShardID())
	}
	named.Close()
}

// TestConcurrentTraining: 8 goroutines train separate nets at once; equal
// data gives bit-equal params.
func TestConcurrentTraining(t *testing.T) {
	m, err := dp.ModelFromJSON([]byte(modelJSON))
	must(t, err)
	defer m.Close()
	const workers = 8
	results := make([]string, workers)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs <- func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("worker %d: %v", w, r)
					}
				}()
				tr := newTrainer(t, m, nil)
				defer tr.Close()
				g := lcg(99)
				for s := 0; s < 50; s++ {
					feedBatch(t, tr.ws, &g)
					if err := tr.train.Run(); err != nil {
						return err
					}
				}
				v, _, err := dp.FetchValues[float32](tr.ws, "w")
				results[w] = fmt.Sprint(v)
				return err
			}()
		}(w)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		t.Fatal("training goroutines did not finish")
	}
	close(errs)
	for err := range errs {
		must(t, err)
	}
	for w := 1; w < workers; w++ {
		if results[w] != results[0] {
			t.Fatalf("worker %d trained to %s, worker 0 to %s", w, results[w], results[0])
		}
	}
}

// The memory modes train the same params bit for bit; Share and Free empty
// the temporaries after a run, and the net reports its memory.
func TestMemoryModes(t *testing.T) {
	m, err := dp.ModelFromJSON([]byte(modelJSON))
	must(t, err)
	defer m.Close()
	var want []float32
	for _, mode := range []dp.Memory{dp.MemoryKeep, dp.MemoryDefault, dp.MemoryFree} {
		nets, err := m.BuildTraining(&dp.TrainingOptions{Memory: mode})
		must(t, err)
		asked := mode
		if mode == dp.MemoryDefault {
			asked = dp.MemoryShare // the builders' default
		}
		if nets.Train.Memory() != asked {
			t.Errorf("memory %d: the train net asks for %d", mode, nets.Train.Memory())
		}
		nets.Close()
		tr := newTrainer(t, m, &dp.TrainingOptions{Memory: mode})
		g := lcg(4242)
		for s := 0; s < 5; s++ {
			feedBatch(t, tr.ws, &g)
			must(t, tr.train.Run())
		}
		w, _, err := dp.FetchValues[float32](tr.ws, "w")
		must(t, err)
		if want == nil {
			want = w
		} else if fmt.Sprint(w) != fmt.Sprint(want) {
			t.Errorf("memory %d: w %v, want %v", mode, w, want)
		}
		st, err := tr.train.MemoryStats(dp.DeviceCPU, 0)
		must(t, err)
		_, _, fetchErr := dp.FetchValues[float32](tr.ws, "logits")
		switch mode {
		case dp.MemoryKeep:
			if st.Mode != dp.MemoryKeep || st.Temporaries != 0 || fetchErr != nil {
				t.Errorf("keep: %+v, fetch %v", st, fetchErr)
			}
		case dp.MemoryDefault:
			if st.Mode != dp.MemoryShare || st.Temporaries == 0 || st.Slots == 0 || st.SlotBytes == 0 ||
				!dp.IsCode(fetchErr, dp.CodeNotFound) || !strings.Contains(fetchErr.Error(), "memory plan") {
				t.Errorf("share: %+v, fetch %v", st, fetchErr)
			}
		case dp.MemoryFree:
			if st.Mode != dp.MemoryFree || st.Temporaries == 0 || st.SlotBytes != 0 || !dp.IsCode(fetchErr, dp.CodeNotFound) {
				t.Errorf("free: %+v, fetch %v", st, fetchErr)
			}
		}
		if st.PeakBytes == 0 || st.PeakBytes < st.BytesInUse {
			t.Errorf("memory %d: peak %d, in use %d", mode, st.PeakBytes, st.BytesInUse)
		}
		if _, err := tr.train.MemoryStats(dp.DeviceType(9), 0); !dp.IsCode(err, dp.CodeInvalidArgument) {
			t.Errorf("bad device: %v", err)
		}
		tr.Close()
	}
	if _, err := m.BuildTraining(&dp.TrainingOptions{Memory: 7}); !dp.IsCode(err, dp.CodeInvalidArgument) {
		t.Errorf("memory 7: %v", err)
	}
}

// TestLossScaling: dynamic loss scaling trains the same bits while nothing
// overflows and keeps its scale in the workspace; a net in FP16 math that
// computes gradients needs it; bad values are refused.
func TestLossScaling(t *testing.T) {
	m, err := dp.ModelFromJSON([]byte(modelJSON))
	must(t, err)
	defer m.Close()
	var weights [2][]float32
	for i, ls := range []dp.LossScaling{dp.LossScalingNone, dp.LossScalingDynamic} {
		tr := newTrainer(t, m, &dp.TrainingOptions{LossScaling: ls, InitialLossScale: 1024})
		g := lcg(77)
		for s := 0; s < 4; s++ {
			feedBatch(t, tr.ws, &g)
			must(t, tr.train.Run())
		}
		weights[i], _, err = dp.FetchValues[float32](tr.ws, "w")
		must(t, err)
		if ls == dp.LossScalingDynamic {
			scale, _, err := dp.FetchValues[float32](tr.ws, "optimizer/loss_scale")
			must(t, err)
			if len(scale) != 1 || scale[0] != 1024 {
				t.Errorf("the loss scale after 4 good steps: %v", scale)
			}
		}
		tr.Close()
	}
	if fmt.Sprint(weights[0]) != fmt.Sprint(weights[1]) {
		t.Errorf("w with loss scaling %v, without %v", weights[1], weights[0])
	}
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	for _, ls := range []dp.LossScaling{dp.LossScalingNone, dp.LossScalingDynamic} {
		nets, err := m.BuildTraining(&dp.TrainingOptions{LossScaling: ls})
		must(t, err)
		n, err := dp.NewNet(ws, nets.Train, &dp.NetOptions{MathMode: dp.MathFP16})
		if ls == dp.LossScalingNone {
			if !dp.IsCode(err, dp.CodeInvalidArgument) || !strings.Contains(err.Error(), "loss scaling") {
				t.Errorf("FP16 without loss scaling: %v", err)
			}
		} else {
			must(t, err)
			n.Close()
		}
		nets.Close()
	}
	if _, err := m.BuildTraining(&dp.TrainingOptions{LossScaling: 7}); !dp.IsCode(err, dp.CodeInvalidArgument) {
		t.Errorf("loss scaling 7: %v", err)
	}
	if _, err := m.Parallelize(&dp.ParallelOptions{DeviceType: dp.DeviceCPU, DeviceIDs: []int32{0}, LossScaling: 7}); !dp.IsCode(err, dp.CodeInvalidArgument) ||
		!strings.Contains(err.Error(), "loss_scaling") {
		t.Errorf("parallel loss scaling 7: %v", err)
	}
}
