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

// rng is the C sample's xorshift64* with a splitmix64-scrambled seed.
type rng uint64

func newRNG(seed uint64) rng {
	z := seed + 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	if z == 0 {
		z = 0x2545F4914F6CDD1D
	}
	return rng(z)
}

func (r *rng) next() uint64 {
	s := uint64(*r)
	s ^= s >> 12
	s ^= s << 25
	s ^= s >> 27
	*r = rng(s)
	return s * 0x2545F4914F6CDD1D
}

func (r *rng) shuffle(a []uint32) {
	for i := len(a); i > 1; i-- {
		j := int(r.next() % uint64(i))
		a[i-1], a[j] = a[j], a[i-1]
	}
}

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
// and compares every checkpointed blob bit for bit with the checkpoint the
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
	order := make([]uint32, limit)
	for i := range order {
		order[i] = uint32(i)
	}
	r := newRNG(seed)
	r.shuffle(order)
	for s := 0; s < limit/batch; s++ {
		bx := make([]float32, batch*784)
		by := make([]int32, batch)
		for i := 0; i < batch; i++ {
			k := int(order[s*batch+i])
			copy(bx[i*784:], x[k*784:(k+1)*784])
			by[i] = y[k]
		}
		must(t, dp.FeedValues(tr.ws, "data", []int64{batch, 1, 28, 28}, bx))
		must(t, dp.FeedValues(tr.ws, "label", []int64{batch}, by))
		must(t, tr.train.Run())
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
