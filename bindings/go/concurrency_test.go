package dp_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"dp.dev/dp"
)

// readerJSON reads w and b and writes y and z: goroutines fetch w and b
// while it runs.
const readerJSON = `{"name":"reader","external_inputs":["w","b"],"ops":[
 {"type":"Scale","inputs":["w"],"outputs":["y"],"args":[{"name":"scale","f":2}]},
 {"type":"Scale","inputs":["b"],"outputs":["z"],"args":[{"name":"scale","f":3}]}]}`

// uniform checks that blob name holds float32 values, all equal, and
// returns their count and value.
func uniform(ws *dp.Workspace, name string) (int, float32, error) {
	v, dims, err := dp.FetchValues[float32](ws, name)
	if err != nil {
		return 0, 0, err
	}
	if len(dims) != 1 || len(v) == 0 {
		return 0, 0, fmt.Errorf("blob %s: dims %v", name, dims)
	}
	for _, x := range v {
		if x != v[0] {
			return 0, 0, fmt.Errorf("blob %s holds %v: torn", name, v)
		}
	}
	return len(v), v[0], nil
}

// sharedLen is goroutine g's k-th length for the shared blob, whose values
// are 1000 g + k: a fetch can tell a whole tensor from a torn one.
func sharedLen(g, k int) int { return 1 + (g+k)%5 }

// TestConcurrentFeedFetch (issue 25, item 12: eight goroutines feeding one
// blob crashed the process): 8 goroutines feed and fetch one blob and one
// each, ask for and list blobs, while a net that only reads blobs they fetch
// runs. test.sh also runs it with -race.
func TestConcurrentFeedFetch(t *testing.T) {
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	must(t, dp.FeedValues(ws, "w", []int64{64}, filled(64, 0.5)))
	must(t, dp.FeedValues(ws, "b", []int64{1}, []float32{-1}))
	def := netdef(t, readerJSON)
	defer def.Close()
	net, err := dp.NewNet(ws, def, nil)
	must(t, err)
	defer net.Close()

	const goroutines, iters, runs = 8, 200, 100
	errs := make(chan error, goroutines+1)
	start := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(goroutines + 1)
	go func() {
		defer wg.Done()
		<-start
		for r := 0; r < runs; r++ {
			if err := net.Run(); err != nil {
				errs <- err
				return
			}
		}
	}()
	for g := 0; g < goroutines; g++ {
		go func(g int) {
			defer wg.Done()
			<-start
			errs <- func() error {
				own := fmt.Sprintf("own/%d", g)
				for k := 0; k < iters; k++ {
					if err := dp.FeedValues(ws, "shared", []int64{int64(sharedLen(g, k))},
						filled(sharedLen(g, k), float32(1000*g+k))); err != nil {
						return err
					}
					if err := dp.FeedValues(ws, own, []int64{3}, filled(3, float32(k))); err != nil {
						return err
					}
					n, v, err := uniform(ws, "shared")
					if err != nil {
						return err
					}
					if n != sharedLen(int(v)/1000, int(v)%1000) {
						return fmt.Errorf("shared holds %d elements of %v", n, v)
					}
					if n, v, err := uniform(ws, own); err != nil || n != 3 || v != float32(k) {
						return fmt.Errorf("%s: %d elements of %v (%v), want 3 of %d", own, n, v, err, k)
					}
					// Blobs the running net reads.
					if n, v, err := uniform(ws, "w"); err != nil || n != 64 || v != 0.5 {
						return fmt.Errorf("w: %d elements of %v (%v)", n, v, err)
					}
					if has, err := ws.HasBlob("shared"); err != nil || !has {
						return fmt.Errorf("HasBlob(shared) = %v, %v", has, err)
					}
					if names, err := ws.ListBlobs("own/"); err != nil || len(names) == 0 {
						return fmt.Errorf("ListBlobs(own/) = %v, %v", names, err)
					}
				}
				return nil
			}()
		}(g)
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	if n, v, err := uniform(ws, "y"); err != nil || n != 64 || v != 1 {
		t.Fatalf("y: %d elements of %v (%v)", n, v, err)
	}
	if names, err := ws.ListBlobs("own/"); err != nil || len(names) != goroutines {
		t.Fatalf("ListBlobs(own/) = %v, %v", names, err)
	}
}

func filled(n int, v float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestNULRefused (issue 25, item 13): a C string ends at its first NUL, so
// "w1\x00x" reached dp as "w1" and overwrote that blob, and a path with a NUL
// opened another file. Every name and path holding one is refused with
// ErrInvalidArgument naming the argument, and nothing is touched.
func TestNULRefused(t *testing.T) {
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	must(t, dp.FeedValues(ws, "w1", []int64{1}, []float32{7}))
	x, err := dp.NewTensorOf([]int64{1}, []float32{-1})
	must(t, err)
	defer x.Close()
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "c.dpckpt")
	must(t, dp.SaveCheckpoint(ws, nil, ckpt, nil))
	// A file named as the path would be cut: opening the cut path would succeed.
	cut := filepath.Join(dir, "m.json")
	must(t, os.WriteFile(cut, []byte(modelJSON), 0o600))
	m, err := dp.ModelFromJSON([]byte(modelJSON))
	must(t, err)
	defer m.Close()
	def := netdef(t, mlpJSON)
	defer def.Close()
	pm, err := m.Parallelize(&dp.ParallelOptions{DeviceType: dp.DeviceCPU, DeviceIDs: []int32{0}})
	must(t, err)
	defer pm.Close()

	cases := []struct {
		what string
		err  error
	}{
		{"dp.Workspace.Feed: blob name", ws.Feed("w1\x00x", x)},
		{"dp.Workspace.Fetch: blob name", func() error { _, err := ws.Fetch("w1\x00x"); return err }()},
		{"dp.Workspace.HasBlob: blob name", func() error { _, err := ws.HasBlob("w1\x00"); return err }()},
		{"dp.Workspace.ListBlobs: prefix", func() error { _, err := ws.ListBlobs("w\x00"); return err }()},
		{"dp.NetDefFromFile: path", func() error { _, err := dp.NetDefFromFile(cut + "\x00.bak"); return err }()},
		{"dp.ModelFromFile: path", func() error { _, err := dp.ModelFromFile(cut + "\x00.bak"); return err }()},
		{"dp.TensorFromIDXFile: path", func() error { _, err := dp.TensorFromIDXFile(cut + "\x00"); return err }()},
		{"dp.SaveCheckpoint: blob name", dp.SaveCheckpoint(ws, []string{"w1\x00x"}, ckpt, nil)},
		{"dp.SaveCheckpoint: path", dp.SaveCheckpoint(ws, nil, ckpt+"\x00.tmp", nil)},
		{"dp.SaveCheckpoint: SaveOptions.ModelName", dp.SaveCheckpoint(ws, nil, ckpt, &dp.SaveOptions{ModelName: "a\x00b"})},
		{"dp.SaveCheckpointAsync: path", func() error { _, err := dp.SaveCheckpointAsync(ws, nil, ckpt+"\x00", nil); return err }()},
		{"dp.LoadCheckpoint: path", dp.LoadCheckpoint(ws, ckpt+"\x00.old", nil)},
		{"dp.LoadCheckpoint: LoadOptions.Names", dp.LoadCheckpoint(ws, ckpt, &dp.LoadOptions{Names: []string{"w1\x00x"}})},
		{"dp.ReadCheckpointInfo: path", func() error { _, err := dp.ReadCheckpointInfo(ckpt + "\x00"); return err }()},
		{"dp.ListCheckpointSteps: dir", func() error { _, err := dp.ListCheckpointSteps(dir + "\x00/x"); return err }()},
		{"dp.PruneCheckpoints: dir", dp.PruneCheckpoints(dir+"\x00/x", 1)},
		{"dp.ParallelModel.Save: path", pm.Save(ws, ckpt+"\x00", nil)},
		{"dp.ParallelModel.Load: path", pm.Load(ws, ckpt+"\x00", nil)},
		{"dp.NetDef.AddGradients: GradientOptions.Losses", func() error {
			_, _, err := def.AddGradients(dp.GradientOptions{Losses: []string{"prob\x00"}})
			return err
		}()},
		{"dp.Model.Parallelize: ParallelOptions.Store", func() error {
			_, err := m.Parallelize(&dp.ParallelOptions{DeviceType: dp.DeviceCPU, DeviceIDs: []int32{0}, Store: "file:" + dir + "\x00x"})
			return err
		}()},
		{"dp.NewLoader: blob name", func() error {
			_, err := dp.NewLoader(ws, []string{"w1\x00x"}, []*dp.Tensor{x}, nil)
			return err
		}()},
		{"dp.NewCallbackLoader: LoaderInput.Blob", func() error {
			_, err := dp.NewCallbackLoader(ws, []dp.LoaderInput{{Blob: "w1\x00x", DType: dp.Float32, SampleDims: []int64{1}}}, 4,
				func(indices []int64, buffers [][]byte) int32 { return 0 }, nil)
			return err
		}()},
	}
	for _, c := range cases {
		var e *dp.Error
		if !errors.As(c.err, &e) || e.Code() != dp.CodeInvalidArgument ||
			!strings.HasPrefix(e.Message(), c.what+" contains a NUL byte") {
			t.Errorf("%s: got %v, want INVALID_ARGUMENT %q", c.what, c.err, c.what+" contains a NUL byte")
		}
	}
	// Nothing was overwritten, and no file was written beside the checkpoint.
	if n, v, err := uniform(ws, "w1"); err != nil || n != 1 || v != 7 {
		t.Fatalf("w1: %d elements of %v (%v)", n, v, err)
	}
	entries, err := os.ReadDir(dir)
	must(t, err)
	if len(entries) != 2 {
		t.Fatalf("the directory holds %d entries, want c.dpckpt and m.json", len(entries))
	}
	rdef := netdef(t, readerJSON)
	defer rdef.Close()
	if op := rdef.Op(0); op == nil || op.FindArg("scale") == nil || op.FindArg("scale\x00x") != nil {
		t.Fatal("FindArg with a NUL byte found the argument its name was cut to")
	}
}

// TestTensorDataNilAndEmpty (issue 25, item 14): a nil slice is an empty one,
// as the C API reads any non-NULL data: both are a size mismatch for a
// tensor with elements and fine for one without; zeros are NewZeroTensor's.
func TestTensorDataNilAndEmpty(t *testing.T) {
	for _, data := range [][]byte{nil, {}} {
		if _, err := dp.NewTensor(dp.Float32, []int64{2}, data); !errors.Is(err, dp.ErrShape) {
			t.Fatalf("NewTensor(%#v) for 2 elements: %v", data, err)
		}
		e, err := dp.NewTensor(dp.Float32, []int64{0, 3}, data)
		must(t, err)
		if e.NumElements() != 0 {
			t.Fatal(e.NumElements())
		}
		e.Close()
	}
	for _, data := range [][]int64{nil, {}} {
		if _, err := dp.NewTensorOf([]int64{4}, data); !errors.Is(err, dp.ErrShape) {
			t.Fatalf("NewTensorOf(%#v) for 4 elements: %v", data, err)
		}
	}
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	if err := dp.FeedValues[float32](ws, "x", []int64{2}, nil); !errors.Is(err, dp.ErrShape) {
		t.Fatalf("FeedValues(nil) for 2 elements: %v", err)
	}
	if has, _ := ws.HasBlob("x"); has {
		t.Fatal("a refused feed fed x")
	}
	z, err := dp.NewZeroTensor(dp.Int64, []int64{4})
	must(t, err)
	defer z.Close()
	if v, _ := dp.TensorValues[int64](z); fmt.Sprint(v) != "[0 0 0 0]" {
		t.Fatal(v)
	}
}

// TestMessages (issue 25, item 17): dtypes are named as dp names them, and a
// fetch says whether the blob is absent or empty.
func TestMessages(t *testing.T) {
	x, err := dp.NewTensorOf([]int64{2}, []int32{1, 2})
	must(t, err)
	defer x.Close()
	_, err = dp.TensorValues[float32](x)
	var e *dp.Error
	if !errors.As(err, &e) || e.Code() != dp.CodeDType || e.Message() != "tensor holds int32, not float32" {
		t.Fatalf("TensorValues: %v", err)
	}
	if dp.Float32.String() != "float32" || dp.Uint8.String() != "uint8" || dp.BFloat16.String() != "bfloat16" ||
		dp.DType(99).String() != "dtype 99" {
		t.Fatal(dp.Float32, dp.Uint8, dp.BFloat16, dp.DType(99))
	}
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	def := netdef(t, readerJSON)
	defer def.Close()
	net, err := dp.NewNet(ws, def, nil) // creates y, empty until a run
	must(t, err)
	defer net.Close()
	if _, err := ws.Fetch("y"); !errors.As(err, &e) || e.Code() != dp.CodeNotFound ||
		!strings.Contains(e.Message(), "blob 'y' is empty") {
		t.Fatalf("fetch of an empty blob: %v", err)
	}
	if _, err := ws.Fetch("nope"); !errors.As(err, &e) || !strings.Contains(e.Message(), "no blob named 'nope'") {
		t.Fatalf("fetch of an absent blob: %v", err)
	}
}
