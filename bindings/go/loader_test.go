package dp_test

import (
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"dp.dev/dp"
)

// TestCPUThreads: the cap is set, read back and lifted; negative is refused.
func TestCPUThreads(t *testing.T) {
	must(t, dp.SetCPUThreads(1))
	if n := dp.CPUThreads(); n != 1 {
		t.Fatalf("CPUThreads after SetCPUThreads(1): %d", n)
	}
	must(t, dp.SetCPUThreads(0))
	if n := dp.CPUThreads(); n < 1 {
		t.Fatalf("CPUThreads without a cap: %d", n)
	}
	if err := dp.SetCPUThreads(-1); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Fatalf("SetCPUThreads(-1): %v", err)
	}
}

// loaderDataset is 10 samples: "data" [10,3] float32 whose row i holds i,
// "label" [10] int32 holding i.
func loaderDataset(t testing.TB) (data, label *dp.Tensor) {
	t.Helper()
	x := make([]float32, 30)
	y := make([]int32, 10)
	for i := range y {
		y[i] = int32(i)
		for k := 0; k < 3; k++ {
			x[i*3+k] = float32(i)
		}
	}
	var err error
	data, err = dp.NewTensorOf([]int64{10, 3}, x)
	must(t, err)
	label, err = dp.NewTensorOf([]int64{10}, y)
	must(t, err)
	return data, label
}

// loaderSetup is a workspace and loaderDataset's tensors with their blob
// names, all closed when the test ends.
func loaderSetup(t testing.TB) (*dp.Workspace, []string, []*dp.Tensor) {
	t.Helper()
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	data, label := loaderDataset(t)
	t.Cleanup(func() {
		label.Close()
		data.Close()
		ws.Close()
	})
	return ws, []string{"data", "label"}, []*dp.Tensor{data, label}
}

// fedBatch checks the batch in ws's "data" and "label" blobs (shapes [4,3]
// and [4], each data row equal to its label) and returns its samples.
func fedBatch(t testing.TB, ws *dp.Workspace) []int32 {
	t.Helper()
	x, xd, err := dp.FetchValues[float32](ws, "data")
	must(t, err)
	y, yd, err := dp.FetchValues[int32](ws, "label")
	must(t, err)
	if !reflect.DeepEqual(xd, []int64{4, 3}) || !reflect.DeepEqual(yd, []int64{4}) {
		t.Fatalf("batch shapes %v and %v", xd, yd)
	}
	for r, s := range y {
		if s < 0 || s >= 10 {
			t.Fatalf("sample %d out of range", s)
		}
		for k := 0; k < 3; k++ {
			if x[r*3+k] != float32(s) {
				t.Fatalf("row %d: data %v, label %d", r, x[r*3:r*3+3], s)
			}
		}
	}
	return y
}

func next(t testing.TB, l *dp.Loader) bool {
	t.Helper()
	fed, err := l.Next()
	must(t, err)
	return fed
}

// epochBatches reads one epoch of two batches and its end.
func epochBatches(t testing.TB, l *dp.Loader, ws *dp.Workspace) [][]int32 {
	t.Helper()
	var out [][]int32
	for i := 0; i < 2; i++ {
		if !next(t, l) {
			t.Fatalf("batch %d: end of epoch", i)
		}
		out = append(out, fedBatch(t, ws))
	}
	if next(t, l) {
		t.Fatal("a third batch of 4 from 10 samples (the last is dropped)")
	}
	return out
}

func distinct(t testing.TB, batches [][]int32) {
	t.Helper()
	var all []int
	for _, b := range batches {
		for _, s := range b {
			all = append(all, int(s))
		}
	}
	sort.Ints(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("sample %d twice in one epoch: %v", all[i], batches)
		}
	}
	if len(all) != 8 {
		t.Fatalf("%d samples in one epoch", len(all))
	}
}

func newTensorLoader(t testing.TB, ws *dp.Workspace, opts *dp.LoaderOptions) *dp.Loader {
	t.Helper()
	data, label := loaderDataset(t)
	l, err := dp.NewLoader(ws, []string{"data", "label"}, []*dp.Tensor{data, label}, opts)
	must(t, err)
	// The loader shares the tensors' data: the handles may go at once.
	data.Close()
	label.Close()
	return l
}

// TestLoaderTensors: batches, epochs, the seeded order, seek, no shuffle.
func TestLoaderTensors(t *testing.T) {
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	opts := &dp.LoaderOptions{BatchSize: 4, Seed: 7}
	l := newTensorLoader(t, ws, opts)
	defer l.Close()
	if l.StepsPerEpoch() != 2 || l.BatchRows() != 4 || l.Epoch() != 0 || l.Step() != 0 {
		t.Fatalf("steps %d, rows %d, epoch %d, step %d", l.StepsPerEpoch(), l.BatchRows(), l.Epoch(), l.Step())
	}
	first := epochBatches(t, l, ws)
	distinct(t, first)
	if l.Epoch() != 1 || l.Step() != 0 {
		t.Fatalf("after one epoch: epoch %d, step %d", l.Epoch(), l.Step())
	}
	second := epochBatches(t, l, ws)
	distinct(t, second)

	// The same seed gives the same order; seek reproduces a batch.
	ws2, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws2.Close()
	again := newTensorLoader(t, ws2, opts)
	defer again.Close()
	if got := epochBatches(t, again, ws2); !reflect.DeepEqual(got, first) {
		t.Fatalf("same seed, epoch 0: %v, then %v", first, got)
	}
	must(t, again.SeekTo(0, 1))
	if !next(t, again) || !reflect.DeepEqual(fedBatch(t, ws2), first[1]) {
		t.Fatal("seek(0, 1) did not reproduce batch 1 of epoch 0")
	}
	must(t, again.SeekTo(1, 0))
	if !next(t, again) || !reflect.DeepEqual(fedBatch(t, ws2), second[0]) {
		t.Fatal("seek(1, 0) did not reproduce batch 0 of epoch 1")
	}
	if err := again.SeekTo(0, 2); !errors.Is(err, dp.ErrOutOfRange) {
		t.Fatalf("seek past the epoch: %v", err)
	}

	// Without shuffling the first batch is samples 0..3.
	ws3, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws3.Close()
	ordered := newTensorLoader(t, ws3, &dp.LoaderOptions{BatchSize: 4, NoShuffle: true})
	defer ordered.Close()
	if !next(t, ordered) || !reflect.DeepEqual(fedBatch(t, ws3), []int32{0, 1, 2, 3}) {
		t.Fatal("no_shuffle: first batch is not samples 0..3")
	}

	// Closed: ErrClosed, zero getters.
	ordered.Close()
	if _, err := ordered.Next(); !errors.Is(err, dp.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if ordered.StepsPerEpoch() != 0 {
		t.Fatal("getter after Close")
	}
}

// TestLoaderErrors: bad options and datasets.
func TestLoaderErrors(t *testing.T) {
	ws, blobs, tensors := loaderSetup(t)
	for _, opts := range []*dp.LoaderOptions{nil, {BatchSize: 0}, {BatchSize: -4}, {BatchSize: 11},
		{BatchSize: 4, TimeoutMS: -1}} {
		if _, err := dp.NewLoader(ws, blobs, tensors, opts); !errors.Is(err, dp.ErrInvalidArgument) {
			t.Errorf("options %+v: %v", opts, err)
		}
	}
	short, err := dp.NewTensorOf([]int64{9}, make([]int32, 9))
	must(t, err)
	defer short.Close()
	if _, err := dp.NewLoader(ws, blobs, []*dp.Tensor{tensors[0], short}, &dp.LoaderOptions{BatchSize: 4}); !errors.Is(err, dp.ErrShape) {
		t.Errorf("dim 0 differs: %v", err)
	}
	if _, err := dp.NewLoader(ws, []string{"data", "data"}, tensors, &dp.LoaderOptions{BatchSize: 4}); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Errorf("repeated blob: %v", err)
	}
	if _, err := dp.NewLoader(ws, []string{"data"}, tensors, &dp.LoaderOptions{BatchSize: 4}); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Errorf("one name for two tensors: %v", err)
	}
	in := []dp.LoaderInput{{Blob: "data", DType: dp.Float32, SampleDims: []int64{3}}}
	fill := func([]int64, [][]byte) int32 { return 0 }
	if _, err := dp.NewCallbackLoader(ws, in, 10, fill, &dp.LoaderOptions{}); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Errorf("callback loader, batch_size 0: %v", err)
	}
	if _, err := dp.NewCallbackLoader(ws, in, 10, nil, &dp.LoaderOptions{BatchSize: 4}); !errors.Is(err, dp.ErrInvalidArgument) {
		t.Errorf("nil fill: %v", err)
	}
}

// TestLoaderOnGPU: a dataset on a GPU (Device DeviceCUDA), or staged to one
// (HostDataset, callbacks): the device fields are checked; without the GPU
// the loader is ErrUnavailable, with one it feeds the host loader's batches.
func TestLoaderOnGPU(t *testing.T) {
	ws, blobs, tensors := loaderSetup(t)
	if _, err := dp.NewLoader(ws, blobs, tensors, &dp.LoaderOptions{BatchSize: 4, DeviceID: 1}); !errors.Is(err, dp.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "device_id") {
		t.Errorf("device_id 1 on the host: %v", err)
	}
	hostOnly := &dp.LoaderOptions{BatchSize: 4, HostDataset: true}
	if _, err := dp.NewLoader(ws, blobs, tensors, hostOnly); !errors.Is(err, dp.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "host_dataset") {
		t.Errorf("HostDataset without a GPU target: %v", err)
	}
	gpu := &dp.LoaderOptions{BatchSize: 4, Seed: 3, Device: dp.DeviceCUDA}
	staged := &dp.LoaderOptions{BatchSize: 4, Seed: 3, Device: dp.DeviceCUDA, HostDataset: true}
	in := []dp.LoaderInput{{Blob: "data", DType: dp.Float32, SampleDims: []int64{3}}}
	fill := func([]int64, [][]byte) int32 { return 0 }
	if n, err := dp.DeviceCount(dp.DeviceCUDA); err != nil || n == 0 {
		for _, o := range []*dp.LoaderOptions{gpu, staged} {
			if _, err := dp.NewLoader(ws, blobs, tensors, o); !errors.Is(err, dp.ErrUnavailable) {
				t.Errorf("no GPU (HostDataset %v): %v", o.HostDataset, err)
			}
		}
		if _, err := dp.NewCallbackLoader(ws, in, 10, fill, gpu); !errors.Is(err, dp.ErrUnavailable) {
			t.Errorf("callback loader staged to a missing GPU: %v", err)
		}
		return
	}
	host, err := dp.NewLoader(ws, blobs, tensors, &dp.LoaderOptions{BatchSize: 4, Seed: 3})
	must(t, err)
	defer host.Close()
	for _, o := range []*dp.LoaderOptions{gpu, staged} {
		onGPU, err := dp.NewLoader(ws, blobs, tensors, o)
		must(t, err)
		for e := 0; e < 3; e++ {
			want := epochBatches(t, host, ws)
			if got := epochBatches(t, onGPU, ws); !reflect.DeepEqual(got, want) {
				t.Fatalf("epoch %d on the GPU (HostDataset %v): %v, on the host %v", e, o.HostDataset, got, want)
			}
		}
		onGPU.Close()
	}
}

// writeSamples is a fill function that writes sample i as data row i
// (3 float32s) and label i (int32), counting its calls.
func writeSamples(calls *int) dp.LoaderFillFunc {
	return func(indices []int64, buffers [][]byte) int32 {
		*calls++
		if len(buffers) != 2 || len(buffers[0]) != 12*len(indices) || len(buffers[1]) != 4*len(indices) {
			return 2
		}
		x := unsafe.Slice((*float32)(unsafe.Pointer(&buffers[0][0])), 3*len(indices))
		y := unsafe.Slice((*int32)(unsafe.Pointer(&buffers[1][0])), len(indices))
		for i, s := range indices {
			y[i] = int32(s)
			for k := 0; k < 3; k++ {
				x[i*3+k] = float32(s)
			}
		}
		return 0
	}
}

var callbackInputs = []dp.LoaderInput{
	{Blob: "data", DType: dp.Float32, SampleDims: []int64{3}},
	{Blob: "label", DType: dp.Int32}, // a scalar per sample
}

// TestLoaderCallback: a Go fill function on the loader's thread gives the
// batches a tensor dataset would (same seed, same order); a failing or
// panicking one fails Next with ErrInternal.
func TestLoaderCallback(t *testing.T) {
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	opts := &dp.LoaderOptions{BatchSize: 4, Seed: 11}
	calls := 0
	l, err := dp.NewCallbackLoader(ws, callbackInputs, 10, writeSamples(&calls), opts)
	must(t, err)
	defer l.Close()
	if l.StepsPerEpoch() != 2 || l.BatchRows() != 4 {
		t.Fatalf("steps %d, rows %d", l.StepsPerEpoch(), l.BatchRows())
	}
	got := epochBatches(t, l, ws)
	distinct(t, got)
	must(t, l.SeekTo(0, 1))
	if !next(t, l) || !reflect.DeepEqual(fedBatch(t, ws), got[1]) {
		t.Fatal("seek(0, 1) did not reproduce batch 1")
	}
	l.Close() // the fill function is not called after this
	if calls == 0 {
		t.Fatal("the fill function never ran")
	}

	ws2, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws2.Close()
	ref := newTensorLoader(t, ws2, opts)
	defer ref.Close()
	if want := epochBatches(t, ref, ws2); !reflect.DeepEqual(got, want) {
		t.Fatalf("callback order %v, tensor order %v", got, want)
	}

	for _, c := range []struct {
		name string
		fill dp.LoaderFillFunc
		want string
	}{
		{"nonzero", func([]int64, [][]byte) int32 { return 3 }, "returned 3"},
		{"panic", func([]int64, [][]byte) int32 { panic("fill") }, "returned -1"},
	} {
		bad, err := dp.NewCallbackLoader(ws, callbackInputs, 10, c.fill, &dp.LoaderOptions{BatchSize: 4, TimeoutMS: 10000})
		must(t, err)
		for i := 0; i < 2; i++ { // the same error on every call
			_, err = bad.Next()
			if !errors.Is(err, dp.ErrInternal) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: Next: %v", c.name, err)
			}
		}
		bad.Close()
	}
}
