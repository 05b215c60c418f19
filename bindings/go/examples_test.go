package dp_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TestExamples builds the two examples and runs them as a user would: the
// training port under a pseudo-terminal and with a pipe
// (tests/check_progress.py: a progress line on the terminal only, the same
// lines otherwise), writing a checkpoint; then the serving example from 4
// goroutines on that checkpoint, which must classify the test set exactly as
// the training port's inference net did.
func TestExamples(t *testing.T) {
	if _, err := os.Stat(filepath.Join(fashionDir, "t10k-images-idx3-ubyte.gz")); err != nil {
		t.Skipf("no Fashion-MNIST: %v", err)
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to drive a pseudo-terminal")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	bin, ckpt := t.TempDir(), t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./examples/train_fashion_mnist", "./examples/serve")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	nets := filepath.Join(repoRoot(t), "samples", "nets")
	train := exec.CommandContext(ctx, python, filepath.Join(repoRoot(t), "tests", "check_progress.py"),
		filepath.Join(bin, "train_fashion_mnist"), "--limit", "1024", "--epochs", "1", "--nets", nets,
		"--checkpoint", ckpt)
	train.Env = oneProcessEnv()
	out, err := train.CombinedOutput()
	if err != nil {
		t.Fatalf("check_progress.py on the training example: %v\n%s", err, out)
	}
	inferred := regexp.MustCompile(`(?m)^inference: test_acc=([0-9.]+) `).FindSubmatch(out)
	if inferred == nil {
		t.Fatalf("no inference line:\n%s", out)
	}
	serve := exec.CommandContext(ctx, filepath.Join(bin, "serve"), "--checkpoint", ckpt, "--workers", "4",
		"--batch", "50", "--nets", nets)
	served, err := serve.CombinedOutput()
	if err != nil {
		t.Fatalf("serve: %v\n%s", err, served)
	}
	got := regexp.MustCompile(`from 4 workers: test_acc=([0-9.]+) `).FindSubmatch(served)
	if got == nil || string(got[1]) != string(inferred[1]) {
		t.Fatalf("served %s; the training example's inference net: test_acc=%s", served, inferred[1])
	}
	t.Logf("%s", served)
}

// oneProcessEnv is the environment without dp-run's variables.
func oneProcessEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !isShardEnv(kv) {
			env = append(env, kv)
		}
	}
	return env
}
