package dp_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"dp.dev/dp"
)

func TestCheckpoints(t *testing.T) {
	dir := t.TempDir()
	m, err := dp.ModelFromJSON([]byte(modelJSON))
	must(t, err)
	defer m.Close()
	blobs, err := m.CheckpointBlobs()
	must(t, err)
	tr := newTrainer(t, m, nil)
	defer tr.Close()
	g := lcg(3)
	step := func(n int) {
		for i := 0; i < n; i++ {
			feedBatch(t, tr.ws, &g)
			must(t, tr.train.Run())
		}
	}
	step(5)
	p5 := filepath.Join(dir, dp.StepCheckpointName(5))
	must(t, dp.SaveCheckpoint(tr.ws, blobs, p5, &dp.SaveOptions{ModelName: "lin"}))
	w5, _, _ := dp.FetchValues[float32](tr.ws, "w")

	info, err := dp.ReadCheckpointInfo(p5)
	must(t, err)
	if info.Iteration != 5 || info.ModelName != "lin" || info.DPVersion != dp.Version() || len(info.Tensors) != len(blobs) {
		t.Fatalf("%+v", info)
	}
	for _, ti := range info.Tensors {
		if ti.Name == "w" && (ti.DType != dp.Float32 || fmt.Sprint(ti.Dims) != "[3 4]" || ti.NBytes != 48) {
			t.Fatalf("%+v", ti)
		}
	}

	// Async save while training goes on: the snapshot is of step 10.
	step(5)
	w10, _, _ := dp.FetchValues[float32](tr.ws, "w")
	p10 := filepath.Join(dir, dp.StepCheckpointName(10))
	job, err := dp.SaveCheckpointAsync(tr.ws, blobs, p10, &dp.SaveOptions{AsyncWriteShare: 1})
	must(t, err)
	step(3) // overwrites the blobs during the write (copy on write)
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := job.Wait(100 * time.Millisecond)
		if err == nil {
			break
		}
		if !errors.Is(err, dp.ErrTimeout) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	must(t, job.Wait(0)) // the same result again
	job.Close()
	job.Close()
	if err := job.Wait(0); !errors.Is(err, dp.ErrClosed) {
		t.Fatal(err)
	}
	// Bad options are refused at once.
	if _, err := dp.SaveCheckpointAsync(tr.ws, blobs, p10, &dp.SaveOptions{AsyncWriteShare: 2}); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Fatal(err)
	}

	list, err := dp.ListCheckpointSteps(dir)
	must(t, err)
	if fmt.Sprint(list) != fmt.Sprint([]string{p10, p5}) {
		t.Fatal(list)
	}

	// Load into a fresh workspace: the params are those saved.
	load := func(path string, opts *dp.LoadOptions) []float32 {
		fresh := newTrainer(t, m, nil)
		defer fresh.Close()
		must(t, dp.LoadCheckpoint(fresh.ws, path, opts))
		w, _, err := dp.FetchValues[float32](fresh.ws, "w")
		must(t, err)
		return w
	}
	if fmt.Sprint(load(p10, nil)) != fmt.Sprint(w10) || fmt.Sprint(load(p5, &dp.LoadOptions{MMap: true})) != fmt.Sprint(w5) {
		t.Fatal("loaded params differ")
	}
	if fmt.Sprint(load(p5, &dp.LoadOptions{Names: []string{"w"}, NoVerify: true})) != fmt.Sprint(w5) {
		t.Fatal("named load")
	}
	// Lenient load creates blobs in an empty workspace.
	ws, _ := dp.NewWorkspace(nil)
	defer ws.Close()
	if err := dp.LoadCheckpoint(ws, p5, nil); !errors.Is(err, dp.ErrNotFound) {
		t.Fatal("strict load into an empty workspace", err)
	}
	must(t, dp.LoadCheckpoint(ws, p5, &dp.LoadOptions{Lenient: true}))
	if ok, _ := ws.HasBlob("optimizer/iter"); !ok {
		t.Fatal("lenient load")
	}
	// Every tensor of a workspace (names nil).
	all := filepath.Join(dir, "all.dpckpt")
	must(t, dp.SaveCheckpoint(ws, nil, all, nil))

	// Corruption is detected; the newest file is skipped by list_steps.
	b, err := os.ReadFile(p10)
	must(t, err)
	b[len(b)/2] ^= 0xff
	must(t, os.WriteFile(p10, b, 0o644))
	if err := dp.LoadCheckpoint(tr.ws, p10, nil); !errors.Is(err, dp.ErrDataLoss) && !errors.Is(err, dp.ErrParse) {
		t.Fatal("corrupted file", err)
	}
	if _, err := dp.ReadCheckpointInfo(filepath.Join(dir, "missing.dpckpt")); !errors.Is(err, dp.ErrNotFound) {
		t.Fatal(err)
	}

	// Prune keeps the newest.
	p15 := filepath.Join(dir, dp.StepCheckpointName(15))
	must(t, dp.SaveCheckpoint(tr.ws, blobs, p15, &dp.SaveOptions{Iteration: 15}))
	must(t, dp.PruneCheckpoints(dir, 1))
	list, err = dp.ListCheckpointSteps(dir)
	must(t, err)
	if fmt.Sprint(list) != fmt.Sprint([]string{p15}) {
		t.Fatal(list)
	}
	if _, err := dp.ListCheckpointSteps(filepath.Join(dir, "nodir")); err == nil {
		t.Fatal("listing a missing directory")
	}
}

func TestParallelCheckpoint(t *testing.T) {
	dir := t.TempDir()
	m, err := dp.ModelFromJSON([]byte(modelJSON))
	must(t, err)
	defer m.Close()
	run := func(devices int, fn func(pm *dp.ParallelModel, ws *dp.Workspace, train *dp.Net)) {
		ids := make([]int32, devices)
		for i := range ids {
			ids[i] = int32(i)
		}
		pm, err := m.Parallelize(&dp.ParallelOptions{DeviceIDs: ids, NumShards: 1})
		must(t, err)
		defer pm.Close()
		nets, err := pm.Nets()
		must(t, err)
		defer nets.Close()
		ws, _ := dp.NewWorkspace(nil)
		defer ws.Close()
		in, err := dp.NewNet(ws, nets.Init, nil)
		must(t, err)
		defer in.Close()
		train, err := dp.NewNet(ws, nets.Train, nil)
		must(t, err)
		defer train.Close()
		must(t, in.Run())
		fn(pm, ws, train)
	}
	path := filepath.Join(dir, "p.dpckpt")
	var saved string
	run(2, func(pm *dp.ParallelModel, ws *dp.Workspace, train *dp.Net) {
		g := lcg(11)
		for i := 0; i < 4; i++ {
			feedBatch(t, ws, &g)
			must(t, train.Run())
		}
		must(t, pm.Save(ws, path, nil))
		w, _, _ := dp.FetchValues[float32](ws, "cpu_0/w")
		saved = fmt.Sprint(w)
	})
	info, err := dp.ReadCheckpointInfo(path)
	must(t, err)
	if info.Iteration != 4 || info.ModelName != "lin" {
		t.Fatalf("%+v", info)
	}
	// A cpu:2 checkpoint loads into cpu:3, and every replica holds it.
	run(3, func(pm *dp.ParallelModel, ws *dp.Workspace, _ *dp.Net) {
		must(t, pm.Load(ws, path, nil))
		for _, s := range []string{"cpu_0/", "cpu_2/"} {
			w, _, err := dp.FetchValues[float32](ws, s+"w")
			must(t, err)
			if fmt.Sprint(w) != saved {
				t.Fatalf("%s differs after load", s)
			}
		}
		if err := pm.Load(ws, path, &dp.LoadOptions{Names: []string{"w"}}); !errors.Is(err, dp.ErrInvalidArgument) {
			t.Fatal("names with a parallel load", err)
		}
	})
}
