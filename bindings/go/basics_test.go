package dp_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"dp.dev/dp"
)

func TestVersionAndBuildInfo(t *testing.T) {
	want := fmt.Sprintf("%d.%d.%d", dp.HeaderVersionMajor, dp.HeaderVersionMinor, dp.HeaderVersionPatch)
	if dp.Version() != want || dp.VersionNumber() != dp.HeaderVersionNumber {
		t.Fatalf("library %s (%d), header %s (%d)", dp.Version(), dp.VersionNumber(), want, dp.HeaderVersionNumber)
	}
	bi, err := dp.GetBuildInfo()
	must(t, err)
	if bi.Version != dp.Version() || bi.BLAS == "" || bi.BuildType == "" {
		t.Fatalf("build info %+v", bi)
	}
	n, err := dp.DeviceCount(dp.DeviceCPU)
	must(t, err)
	if n != 1 {
		t.Fatalf("cpu count %d", n)
	}
	if n, err := dp.DeviceCount(dp.DeviceCUDA); err != nil || (!bi.CUDA && n != 0) ||
		(n > 0) != (bi.CUDAState == dp.CUDAStateAvailable) {
		t.Fatalf("cuda count %d, state %d, %v", n, bi.CUDAState, err)
	}
	// Why there are CUDA devices or not, in every build.
	if bi.CUDAStateDetail == "" || (!bi.CUDA && (bi.CUDAState != dp.CUDAStateNotBuilt || bi.CUDAModule != "")) ||
		(bi.CUDA && (bi.CUDAState == dp.CUDAStateNotBuilt || bi.CUDAModule == "")) {
		t.Fatalf("cuda state %d (%q), module %q", bi.CUDAState, bi.CUDAStateDetail, bi.CUDAModule)
	}
	// ONNX (since 0.6): a version exactly when built with it.
	if bi.ONNX != (bi.ONNXVersion != "") {
		t.Fatalf("onnx %v, version %q", bi.ONNX, bi.ONNXVersion)
	}
	if dp.CodeNotFound.String() != "NOT_FOUND" || dp.Code(1000).String() != "UNKNOWN" {
		t.Fatal("code names")
	}
	if dp.Float32.Size() != 4 || dp.Int64.Size() != 8 || dp.Bool.Size() != 1 || dp.DType(99).Size() != 0 {
		t.Fatal("dtype sizes")
	}
}

func TestDeviceMemoryStats(t *testing.T) {
	must(t, dp.ResetPeakMemory(dp.DeviceCPU, 0))
	before, err := dp.DeviceMemoryStats(dp.DeviceCPU, 0)
	must(t, err)
	if before.Reserved != before.Allocated || before.Peak != before.Allocated {
		t.Fatalf("host stats after a reset %+v", before)
	}
	x, err := dp.NewTensorOf([]int64{1000}, make([]float32, 1000))
	must(t, err)
	during, err := dp.DeviceMemoryStats(dp.DeviceCPU, 0)
	must(t, err)
	x.Close()
	after, err := dp.DeviceMemoryStats(dp.DeviceCPU, 0)
	must(t, err)
	if during.Allocated < before.Allocated+4000 || during.RawAllocs <= before.RawAllocs ||
		after.Peak < before.Allocated+4000 || after.RawFrees <= before.RawFrees {
		t.Fatalf("before %+v, during %+v, after %+v", before, during, after)
	}
	if _, err := dp.DeviceMemoryStats(dp.DeviceType(42), 0); !dp.IsCode(err, dp.CodeInvalidArgument) ||
		!strings.Contains(err.Error(), "device_type") {
		t.Fatalf("unknown type: %v", err)
	}
	if _, err := dp.DeviceMemoryStats(dp.DeviceCPU, -1); !dp.IsCode(err, dp.CodeInvalidArgument) {
		t.Fatalf("negative id: %v", err)
	}
	n, err := dp.DeviceCount(dp.DeviceCUDA)
	must(t, err)
	if _, err := dp.DeviceMemoryStats(dp.DeviceCUDA, n); !dp.IsCode(err, dp.CodeUnavailable) ||
		!strings.Contains(err.Error(), fmt.Sprintf("cuda:%d", n)) {
		t.Fatalf("missing GPU: %v", err)
	}
	if err := dp.ResetPeakMemory(dp.DeviceCUDA, n); !dp.IsCode(err, dp.CodeUnavailable) {
		t.Fatalf("reset on a missing GPU: %v", err)
	}
}

func TestTensors(t *testing.T) {
	x, err := dp.NewTensorOf([]int64{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	must(t, err)
	defer x.Close()
	if x.DType() != dp.Float32 || x.NumElements() != 6 || x.NumBytes() != 24 || fmt.Sprint(x.Dims()) != "[2 3]" {
		t.Fatalf("tensor %v %v %v", x.DType(), x.NumElements(), x.Dims())
	}
	v, err := dp.TensorValues[float32](x)
	must(t, err)
	if fmt.Sprint(v) != "[1 2 3 4 5 6]" {
		t.Fatal(v)
	}
	if _, err := dp.TensorValues[int32](x); !dp.IsCode(err, dp.CodeDType) {
		t.Fatalf("wrong element type: %v", err)
	}
	// CopyTo wants exactly NumBytes.
	if err := x.CopyTo(make([]byte, 23)); !dp.IsCode(err, dp.CodeShape) {
		t.Fatalf("short CopyTo: %v", err)
	}
	b, err := x.Bytes()
	must(t, err)
	if len(b) != 24 {
		t.Fatal(len(b))
	}
	// Zeros, scalars, empties.
	z, err := dp.NewZeroTensor(dp.Int64, []int64{4})
	must(t, err)
	zv, _ := dp.TensorValues[int64](z)
	if fmt.Sprint(zv) != "[0 0 0 0]" {
		t.Fatal(zv)
	}
	z.Close()
	s, err := dp.NewTensorOf(nil, []float64{2.5})
	must(t, err)
	if len(s.Dims()) != 0 || s.NumElements() != 1 {
		t.Fatal("scalar", s.Dims())
	}
	s.Close()
	e, err := dp.NewTensorOf([]int64{0, 3}, []float32{})
	must(t, err)
	if e.NumElements() != 0 {
		t.Fatal("empty")
	}
	e.Close()

	// Borrowed C memory: dp reads it in place.
	mem := dp.AllocHostMemory(8)
	copy(mem.Bytes(), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	bt, err := dp.NewTensorBorrowed(dp.Uint8, []int64{8}, mem)
	must(t, err)
	bv, _ := dp.TensorValues[uint8](bt)
	if fmt.Sprint(bv) != "[1 2 3 4 5 6 7 8]" {
		t.Fatal(bv)
	}
	bt.Close()
	mem.Free()
	mem.Free()
	if _, err := dp.NewTensorBorrowed(dp.Uint8, []int64{8}, mem); !dp.IsCode(err, dp.CodeInvalidArgument) {
		t.Fatalf("freed memory: %v", err)
	}

	// Owned: dp frees it; the HostMemory is emptied.
	own := dp.AllocHostMemory(4 * 4)
	for i, f := range []float32{1, 2, 3, 4} {
		bits := math.Float32bits(f)
		copy(own.Bytes()[4*i:], []byte{byte(bits), byte(bits >> 8), byte(bits >> 16), byte(bits >> 24)})
	}
	// A failure leaves the memory with the caller.
	if _, err := dp.NewTensorOwned(dp.Float32, []int64{5}, own); !dp.IsCode(err, dp.CodeShape) {
		t.Fatalf("bad size: %v", err)
	}
	if own.Bytes() == nil {
		t.Fatal("memory lost on failure")
	}
	ot, err := dp.NewTensorOwned(dp.Float32, []int64{2, 2}, own)
	must(t, err)
	if own.Bytes() != nil {
		t.Fatal("memory not transferred")
	}
	ws, err := dp.NewWorkspace(&dp.WorkspaceOptions{})
	must(t, err)
	defer ws.Close()
	must(t, ws.Feed("o", ot))
	ot.Close() // the blob keeps the memory alive
	ov, dims, err := dp.FetchValues[float32](ws, "o")
	must(t, err)
	if fmt.Sprint(ov, dims) != "[1 2 3 4] [2 2]" {
		t.Fatal(ov, dims)
	}
	has, err := ws.HasBlob("o")
	must(t, err)
	if !has {
		t.Fatal("blob o missing")
	}
	names, err := ws.ListBlobs("")
	must(t, err)
	if fmt.Sprint(names) != "[o]" {
		t.Fatal(names)
	}
}

type celsius float32

// TestNamedElementTypes: a named type takes the dtype of its underlying kind.
func TestNamedElementTypes(t *testing.T) {
	if dp.DTypeOf[celsius]() != dp.Float32 {
		t.Fatalf("DTypeOf[celsius] = %v", dp.DTypeOf[celsius]())
	}
	tt, err := dp.NewTensorOf([]int64{2}, []celsius{1.5, -3})
	must(t, err)
	defer tt.Close()
	v, err := dp.TensorValues[celsius](tt)
	must(t, err)
	if tt.DType() != dp.Float32 || len(v) != 2 || v[0] != 1.5 || v[1] != -3 {
		t.Fatalf("got %v as %v", v, tt.DType())
	}
}

func TestIDXFile(t *testing.T) {
	p := "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"
	lab, err := dp.TensorFromIDXFile(p)
	if err != nil {
		t.Skipf("no Fashion-MNIST: %v", err)
	}
	defer lab.Close()
	if lab.DType() != dp.Uint8 || fmt.Sprint(lab.Dims()) != "[10000]" {
		t.Fatal(lab.DType(), lab.Dims())
	}
	_, err = dp.TensorFromIDXFile(filepath.Join(t.TempDir(), "none.gz"))
	if !dp.IsCode(err, dp.CodeNotFound) {
		t.Fatal(err)
	}
}

// TestMLPForward checks the forward pass against the same math done in Go.
func TestMLPForward(t *testing.T) {
	ws, err := dp.NewWorkspace(nil)
	must(t, err)
	defer ws.Close()
	idef, mdef := netdef(t, initJSON), netdef(t, mlpJSON)
	defer idef.Close()
	defer mdef.Close()
	init, err := dp.NewNet(ws, idef, nil)
	must(t, err)
	defer init.Close()
	mlp, err := dp.NewNet(ws, mdef, &dp.NetOptions{Executor: dp.ExecutorAsync, NumWorkers: 2, Profile: true})
	must(t, err)
	defer mlp.Close()
	must(t, init.Run())
	const batch, in, hidden, out = 3, 4, 8, 3
	x := make([]float32, batch*in)
	for i := range x {
		x[i] = float32((i*37)%11)/5 - 1
	}
	must(t, dp.FeedValues(ws, "data", []int64{batch, in}, x))
	must(t, mlp.RunAsync())
	must(t, mlp.Wait(-1))
	w1, _, _ := dp.FetchValues[float32](ws, "W1")
	b1, _, _ := dp.FetchValues[float32](ws, "b1")
	w2, _, _ := dp.FetchValues[float32](ws, "W2")
	b2, _, _ := dp.FetchValues[float32](ws, "b2")
	if b1[0] != 0.125 || b2[2] != -0.25 {
		t.Fatal("init values", b1, b2)
	}
	prob, dims, err := dp.FetchValues[float32](ws, "prob")
	must(t, err)
	if fmt.Sprint(dims) != "[3 3]" {
		t.Fatal(dims)
	}
	for r := 0; r < batch; r++ {
		var h [hidden]float64
		for j := 0; j < hidden; j++ {
			s := float64(b1[j])
			for i := 0; i < in; i++ {
				s += float64(x[r*in+i]) * float64(w1[j*in+i])
			}
			h[j] = math.Max(s, 0)
		}
		var logits [out]float64
		mx, sum := math.Inf(-1), 0.0
		for k := 0; k < out; k++ {
			s := float64(b2[k])
			for j := 0; j < hidden; j++ {
				s += h[j] * float64(w2[k*hidden+j])
			}
			logits[k] = s
			mx = math.Max(mx, s)
		}
		for k := range logits {
			sum += math.Exp(logits[k] - mx)
		}
		for k := 0; k < out; k++ {
			want := math.Exp(logits[k]-mx) / sum
			if got := float64(prob[r*out+k]); math.Abs(got-want) > 1e-5 {
				t.Errorf("prob[%d,%d] = %v, want %v", r, k, got, want)
			}
		}
	}
	trace, err := mlp.TraceJSON()
	must(t, err)
	if !strings.Contains(trace, "traceEvents") || !strings.Contains(trace, "FC") {
		t.Fatal("trace", trace)
	}
	dot, err := mlp.ToDot()
	must(t, err)
	if !strings.Contains(dot, "digraph") {
		t.Fatal(dot)
	}
	// Wait without a run started.
	if err := mlp.Wait(0); !dp.IsCode(err, dp.CodeFailedPrecondition) {
		t.Fatal(err)
	}
	mlp.Cancel() // nothing running: no effect
}
