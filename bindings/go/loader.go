package dp

/*
#include <stdint.h>
#include <stdlib.h>
#include <dp/dp.h>
extern int32_t dpGoLoaderFill(void* user_data, int64_t* indices, size_t count, void** buffers, size_t* row_bytes,
                              size_t num_inputs);
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"sync"
	"unsafe"
)

// LoaderOptions configure a Loader (dp_loader_options). BatchSize has no
// default; every other zero field means its default.
type LoaderOptions struct {
	BatchSize int64  // the global batch: samples per step over all processes; > 0
	Seed      uint64 // the shuffle's seed
	NoShuffle bool   // every epoch in dataset order
	KeepLast  bool   // feed a last partial batch too (one process only); default: dropped
	NumShards int    // processes sharing each global batch (0: 1); BatchSize divides by it
	ShardID   int    // this process, in [0, NumShards): fed rows [ShardID*B/S, (ShardID+1)*B/S) of each batch
	Prefetch  int    // batches gathered ahead, 1..64 (0: 2, double buffering)
	TimeoutMS int    // longest Next waits for a batch (0: 60000)
	// Where the batches are fed (since 0.6): DeviceCPU (the default) in host
	// memory; DeviceCUDA: on GPU DeviceID, NewLoader's dataset copied there
	// once and each batch gathered there, unless HostDataset; a callback
	// loader's batches staged there.
	Device   DeviceType
	DeviceID int // the GPU, with Device DeviceCUDA; 0 otherwise
	// With DeviceCUDA (since 0.6): NewLoader keeps the dataset in host memory
	// and stages each batch to the GPU (page-locked buffers, a copy stream
	// ahead of the steps), for a dataset that does not fit there.
	HostDataset bool
}

// toC converts; nil gives NULL (dp reports it: BatchSize has no default).
func (o *LoaderOptions) toC() *C.dp_loader_options {
	if o == nil {
		return nil
	}
	c := &C.dp_loader_options{}
	C.dp_loader_options_init(c, C.sizeof_dp_loader_options)
	c.batch_size = C.int64_t(o.BatchSize)
	c.seed = C.uint64_t(o.Seed)
	c.no_shuffle = b2i(o.NoShuffle)
	c.keep_last = b2i(o.KeepLast)
	c.num_shards = C.int32_t(o.NumShards)
	c.shard_id = C.int32_t(o.ShardID)
	c.prefetch = C.int32_t(o.Prefetch)
	c.timeout_ms = C.int32_t(o.TimeoutMS)
	c.device_type = C.int32_t(o.Device)
	c.device_id = C.int32_t(o.DeviceID)
	c.host_dataset = b2i(o.HostDataset)
	return c
}

// LoaderInput is one input of a callback loader (dp_loader_input): the blob
// it is fed to, its dtype and one sample's shape without the batch
// dimension (nil for a scalar per sample).
type LoaderInput struct {
	Blob       string
	DType      DType
	SampleDims []int64
}

// LoaderFillFunc writes the samples indices[0..len(indices)) into a batch:
// for input j, sample indices[i] goes to row i of buffers[j], i.e. bytes
// [i*n, (i+1)*n) with n = len(buffers[j]) / len(indices) (one sample's size
// in bytes), in the input's dtype and the machine's byte order. It returns 0
// on success; anything else fails the batch, and Next then returns an
// ErrInternal error naming the value. It runs on the loader's own thread
// (the Go runtime adopts it), one call at a time, while the caller's steps
// run. The buffers are C memory valid during the call only: do not keep
// them. A panic in it is recovered and fails the batch as -1 would.
type LoaderFillFunc func(indices []int64, buffers [][]byte) int32

// Loader is dp's input pipeline (dp_loader): it feeds a workspace one batch
// per step, gathering the next batches on its own thread in a seeded
// shuffled order (the same seed gives the same order in every run; SeekTo
// resumes mid-run exactly). Next and SeekTo are serialised by the binding;
// call Next between runs of the nets that read the blobs. The loader keeps
// its workspace alive. Close stops its thread (after the batch it is
// filling); batches already fed stay in their blobs.
type Loader struct {
	r  ref[C.dp_loader]
	mu sync.Mutex // Next and SeekTo one at a time (dp.h: one thread at a time)
}

func (l *Loader) get() (*C.dp_loader, func(), error) {
	if l == nil {
		return nil, noop, nil
	}
	p, err := l.r.acquire()
	if err != nil {
		return nil, nil, err
	}
	return p, l.r.release, nil
}

func newLoader(p *C.dp_loader, after func()) *Loader {
	l := &Loader{}
	l.r.set(p, "Loader", func(p *C.dp_loader) {
		C.dp_loader_free(p) // stops the thread: the callback is not running after this
		after()
	})
	runtime.SetFinalizer(l, func(l *Loader) { l.r.close() })
	return l
}

// NewLoader creates a loader over tensors (dp_loader_create): input i is
// tensors[i], whose dim 0 indexes the samples (all share it), fed to blob
// blobs[i] as a batch of shape [rows, dims[1:]...]. The loader shares the
// tensors' data (no copy): the tensors may be closed at once, but memory
// that a tensor borrows (NewTensorBorrowed) must stay allocated and
// unchanged until the loader is closed. ErrShape when the tensors' dim 0
// differ, ErrInvalidArgument for bad options or blob names or a dataset
// with no (full) batch. Since 0.5.
func NewLoader(ws *Workspace, blobs []string, tensors []*Tensor, opts *LoaderOptions) (*Loader, error) {
	if len(blobs) != len(tensors) {
		return nil, argErr("dp.NewLoader: %d blob names for %d tensors", len(blobs), len(tensors))
	}
	wp, wdone, err := ws.get()
	if err != nil {
		return nil, err
	}
	defer wdone()
	n := len(tensors)
	var tptr **C.dp_tensor
	if n > 0 {
		// C memory: an array of pointers must not be a Go pointer to Go pointers.
		tptr = (**C.dp_tensor)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof((*C.dp_tensor)(nil)))))
		defer C.free(unsafe.Pointer(tptr))
		view := unsafe.Slice(tptr, n)
		for i, t := range tensors {
			p, done, err := t.get()
			if err != nil {
				return nil, err
			}
			defer done()
			view[i] = p
		}
	}
	names, err := newCStringArray("dp.NewLoader: blob name", blobs)
	if err != nil {
		return nil, err
	}
	defer names.free()
	var out *C.dp_loader
	if err := statusErr(C.dp_loader_create(wp, names.ptr, tptr, C.size_t(n), opts.toC(), &out)); err != nil {
		return nil, err
	}
	return newLoader(out, noop), nil
}

// NewCallbackLoader creates a loader over numSamples samples that fill
// writes (dp_loader_create_callback), on the loader's own thread, into
// batch memory the loader provides. Errors as NewLoader. Since 0.5.
func NewCallbackLoader(ws *Workspace, inputs []LoaderInput, numSamples int64, fill LoaderFillFunc,
	opts *LoaderOptions) (*Loader, error) {
	if fill == nil {
		return nil, argErr("dp.NewCallbackLoader: fill is nil")
	}
	wp, wdone, err := ws.get()
	if err != nil {
		return nil, err
	}
	defer wdone()
	n := len(inputs)
	var in *C.dp_loader_input
	if n > 0 {
		// C memory: the structs hold pointers (blob names, dims).
		in = (*C.dp_loader_input)(C.calloc(C.size_t(n), C.sizeof_dp_loader_input))
		defer C.free(unsafe.Pointer(in))
		view := unsafe.Slice(in, n)
		for i, x := range inputs {
			if view[i].blob, err = cString("dp.NewCallbackLoader: LoaderInput.Blob", x.Blob); err != nil {
				return nil, err
			}
			defer freeStr(view[i].blob)
			view[i].dtype = C.int32_t(x.DType)
			if len(x.SampleDims) > 0 {
				d := (*C.int64_t)(C.malloc(C.size_t(len(x.SampleDims)) * 8))
				defer C.free(unsafe.Pointer(d))
				copy(unsafe.Slice((*int64)(unsafe.Pointer(d)), len(x.SampleDims)), x.SampleDims)
				view[i].sample_dims = d
				view[i].sample_ndim = C.size_t(len(x.SampleDims))
			}
		}
	}
	// The handle travels in C memory (user_data must not be a Go pointer),
	// as SetLogCallback's does; both live until the loader is freed.
	h := cgo.NewHandle(fill)
	slot := C.malloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0))))
	*(*C.uintptr_t)(slot) = C.uintptr_t(h)
	release := func() {
		C.free(slot)
		h.Delete()
	}
	var out *C.dp_loader
	if err := statusErr(C.dp_loader_create_callback(wp, in, C.size_t(n), C.int64_t(numSamples),
		C.dp_loader_fill_fn(C.dpGoLoaderFill), slot, opts.toC(), &out)); err != nil {
		release()
		return nil, err
	}
	return newLoader(out, release), nil
}

//export dpGoLoaderFill
func dpGoLoaderFill(userData unsafe.Pointer, indices *C.int64_t, count C.size_t, buffers *unsafe.Pointer,
	rowBytes *C.size_t, numInputs C.size_t) (rc C.int32_t) {
	defer func() {
		if recover() != nil {
			rc = -1
		}
	}()
	if userData == nil {
		return -1
	}
	f, ok := cgo.Handle(*(*C.uintptr_t)(userData)).Value().(LoaderFillFunc)
	if !ok {
		return -1
	}
	n, k := int(count), int(numInputs)
	var idx []int64
	if n > 0 {
		idx = unsafe.Slice((*int64)(unsafe.Pointer(indices)), n)
	}
	bufs := make([][]byte, k)
	if k > 0 {
		ptrs := unsafe.Slice(buffers, k)
		rows := unsafe.Slice(rowBytes, k)
		for j := range bufs {
			if size := n * int(rows[j]); size > 0 && ptrs[j] != nil {
				bufs[j] = unsafe.Slice((*byte)(ptrs[j]), size)
			} else {
				bufs[j] = []byte{}
			}
		}
	}
	return C.int32_t(f(idx, bufs))
}

// Close stops the loader's thread (after the batch it is filling) and
// releases it; batches already fed stay in their blobs. Idempotent.
func (l *Loader) Close() {
	if l != nil {
		l.r.close()
	}
}

// Next feeds the next batch of the epoch into the blobs (as Workspace.Feed
// would, without copying) and returns true; at the end of an epoch it feeds
// nothing and returns false, once: the next call starts the next epoch.
// ErrTimeout when the batch is not ready within TimeoutMS; a failed fill's
// error (the same on every call until SeekTo).
func (l *Loader) Next() (bool, error) {
	p, done, err := l.get()
	if err != nil {
		return false, err
	}
	defer done()
	if l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	var fed C.int32_t
	if err := statusErr(C.dp_loader_next(p, &fed)); err != nil {
		return false, err
	}
	return fed != 0, nil
}

// SeekTo makes the next Next feed step `step` of epoch `epoch` (both from 0,
// step < StepsPerEpoch): after LoadCheckpoint, seek to the checkpoint's
// iteration to continue with exactly the batches an uninterrupted run would
// have seen. ErrOutOfRange otherwise.
func (l *Loader) SeekTo(epoch, step int64) error {
	p, done, err := l.get()
	if err != nil {
		return err
	}
	defer done()
	if l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	return statusErr(C.dp_loader_seek(p, C.int64_t(epoch), C.int64_t(step)))
}

func (l *Loader) getter(f func(*C.dp_loader) C.int64_t, serialise bool) int64 {
	p, done, err := l.get()
	if err != nil || p == nil {
		return 0
	}
	defer done()
	if serialise {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	return int64(f(p))
}

// StepsPerEpoch is the number of batches per epoch (0 when closed).
func (l *Loader) StepsPerEpoch() int64 {
	return l.getter(func(p *C.dp_loader) C.int64_t { return C.dp_loader_steps_per_epoch(p) }, false)
}

// Epoch is the epoch the next Next feeds from (0 when closed).
func (l *Loader) Epoch() int64 {
	return l.getter(func(p *C.dp_loader) C.int64_t { return C.dp_loader_epoch(p) }, true)
}

// Step is the step of its epoch the next Next feeds (0 when closed).
func (l *Loader) Step() int64 {
	return l.getter(func(p *C.dp_loader) C.int64_t { return C.dp_loader_step(p) }, true)
}

// BatchRows is this process's samples per batch, BatchSize / NumShards (0
// when closed).
func (l *Loader) BatchRows() int64 {
	return l.getter(func(p *C.dp_loader) C.int64_t { return C.dp_loader_batch_rows(p) }, false)
}
