package dp_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"dp.dev/dp"
)

const fashionDir = "/usr/share/datasets/fashion-mnist"

// loadImages reads the training images as the sample does: standardised float32.
func loadTrain(t *testing.T, n int) ([]float32, []int32) {
	img, err := dp.TensorFromIDXFile(filepath.Join(fashionDir, "train-images-idx3-ubyte.gz"))
	if err != nil {
		t.Skipf("no Fashion-MNIST: %v", err)
	}
	defer img.Close()
	lab, err := dp.TensorFromIDXFile(filepath.Join(fashionDir, "train-labels-idx1-ubyte.gz"))
	must(t, err)
	defer lab.Close()
	px, err := img.Bytes()
	must(t, err)
	lb, err := lab.Bytes()
	must(t, err)
	// Runtime float32 operations, each rounded (explicit conversions forbid
	// fusing), as the C sample computes them.
	one, c255, cmean, cstd := float32(1), float32(255), float32(0.2860), float32(0.3530)
	scale, invStd := one/c255, one/cstd
	x := make([]float32, n*784)
	for i := range x {
		x[i] = float32(float32(float32(px[i])*scale)-cmean) * invStd
	}
	y := make([]int32, n)
	for i := range y {
		y[i] = int32(lb[i])
	}
	return x, y
}

// TestTrainingMatchesC trains the sample's MLP 4 steps through the binding
// (batches from a Loader, as the sample takes them) and compares every checkpointed blob bit for bit with the checkpoint the
// C sample writes after the same steps.
func TestTrainingMatchesC(t *testing.T) {
	sample := filepath.Join(buildDir(t), "samples", "train_fashion_mnist")
	if _, err := os.Stat(sample); err != nil {
		t.Skipf("no C sample: %v", err)
	}
	const limit, batch, seed = 256, 64, 7
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	modelPath := filepath.Join(repoRoot(t), "samples", "nets", "fashion_mlp.json")
	cmd := exec.CommandContext(ctx, sample, "--model", modelPath, "--limit", "256", "--batch", "64", "--epochs", "1",
		"--seed", "7", "--checkpoint", dir)
	// One process, whatever dp-run's variables say (the sample reads them).
	for _, kv := range os.Environ() {
		if !isShardEnv(kv) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("C sample: %v\n%s", err, out)
	}
	files, err := dp.ListCheckpointSteps(dir)
	must(t, err)
	if len(files) != 1 {
		t.Fatal(files)
	}

	x, y := loadTrain(t, limit)
	m, err := dp.ModelFromFile(modelPath)
	must(t, err)
	defer m.Close()
	tr := newTrainer(t, m, &dp.TrainingOptions{})
	defer tr.Close()
	// The sample's batches come from dp's input pipeline with its seed.
	tx, err := dp.NewTensorOf([]int64{limit, 1, 28, 28}, x)
	must(t, err)
	ty, err := dp.NewTensorOf([]int64{limit}, y)
	must(t, err)
	loader, err := dp.NewLoader(tr.ws, []string{"data", "label"}, []*dp.Tensor{tx, ty},
		&dp.LoaderOptions{BatchSize: batch, Seed: seed})
	must(t, err)
	defer loader.Close()
	tx.Close()
	ty.Close()
	steps := 0
	for {
		fed, err := loader.Next()
		must(t, err)
		if !fed {
			break
		}
		must(t, tr.train.Run())
		steps++
	}
	if steps != limit/batch {
		t.Fatalf("%d steps in an epoch of %d samples in batches of %d", steps, limit, batch)
	}

	ref, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ref.Close()
	must(t, dp.LoadCheckpoint(ref, files[0], &dp.LoadOptions{Lenient: true}))
	blobs, err := m.CheckpointBlobs()
	must(t, err)
	for _, b := range blobs {
		got, err := tr.ws.Fetch(b)
		must(t, err)
		want, err := ref.Fetch(b)
		must(t, err)
		gb, _ := got.Bytes()
		wb, _ := want.Bytes()
		got.Close()
		want.Close()
		if !bytes.Equal(gb, wb) {
			t.Errorf("blob %s differs from the C sample's", b)
		}
	}
	t.Logf("%d blobs equal to %s", len(blobs), files[0])
}

// isShardEnv: "NAME=value" sets one of the variables that make dp_model_parallelize
// join a job of several processes (dp-run sets them).
func isShardEnv(kv string) bool {
	for _, n := range []string{"DP_WORLD_SIZE", "DP_RANK", "DP_STORE", "DP_TIMEOUT_MS", "DP_INTERFACE", "DP_RUN_ID"} {
		if strings.HasPrefix(kv, n+"=") {
			return true
		}
	}
	return false
}
