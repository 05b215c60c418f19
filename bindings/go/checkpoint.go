package dp

/*
#include <dp/dp.h>
*/
import "C"

import (
	"runtime"
	"time"
)

// SaveOptions: the zero value asks for every default.
type SaveOptions struct {
	ModelName string // recorded in the file
	// Iteration recorded; 0: the "optimizer/iter" blob when saved, else -1.
	Iteration int64
	// AsyncWriteShare: SaveCheckpointAsync's share of wall time spent
	// writing, in (0, 1]; 0 means 0.2.
	AsyncWriteShare float64
}

// toC converts; nil gives NULL (defaults). The returned func frees the C
// strings after the call.
// toC: `fn` names the calling function in argument errors.
func (o *SaveOptions) toC(fn string) (*C.dp_checkpoint_save_options, func(), error) {
	if o == nil {
		return nil, noop, nil
	}
	name, err := cStringOrNull(fn+": SaveOptions.ModelName", o.ModelName)
	if err != nil {
		return nil, nil, err
	}
	c := &C.dp_checkpoint_save_options{}
	C.dp_checkpoint_save_options_init(c, C.sizeof_dp_checkpoint_save_options)
	c.model_name = name
	c.iteration = C.int64_t(o.Iteration)
	c.async_write_share = C.double(o.AsyncWriteShare)
	return c, func() { freeStr(name) }, nil
}

// LoadOptions: the zero value is strict, verified, read into memory.
type LoadOptions struct {
	Names    []string // tensors to load; nil: all
	Lenient  bool     // create missing blobs, skip names the file lacks
	NoVerify bool     // skip the tensors' checksums
	MMap     bool     // map the file; tensors are views of it
}

// toC: `fn` names the calling function in argument errors.
func (o *LoadOptions) toC(fn string) (*C.dp_checkpoint_load_options, func(), error) {
	if o == nil {
		return nil, noop, nil
	}
	names, err := newCStringArray(fn+": LoadOptions.Names", o.Names)
	if err != nil {
		return nil, nil, err
	}
	c := &C.dp_checkpoint_load_options{}
	C.dp_checkpoint_load_options_init(c, C.sizeof_dp_checkpoint_load_options)
	c.names, c.num_names = names.ptr, C.size_t(names.n)
	c.lenient, c.no_verify, c.mmap = b2i(o.Lenient), b2i(o.NoVerify), b2i(o.MMap)
	return c, names.free, nil
}

// SaveCheckpoint saves blobs names (nil: every tensor blob) of ws to path,
// atomically. No net may write these blobs during the call.
func SaveCheckpoint(ws *Workspace, names []string, path string, opts *SaveOptions) error {
	wp, done, err := ws.get()
	if err != nil {
		return err
	}
	defer done()
	const fn = "dp.SaveCheckpoint"
	arr, err := newCStringArray(fn+": blob name", names)
	if err != nil {
		return err
	}
	defer arr.free()
	c, free, err := opts.toC(fn)
	if err != nil {
		return err
	}
	defer free()
	cp, err := cString(fn+": path", path)
	if err != nil {
		return err
	}
	defer freeStr(cp)
	return statusErr(C.dp_checkpoint_save(wp, arr.ptr, C.size_t(arr.n), cp, c))
}

// LoadCheckpoint loads a checkpoint into ws (all or nothing). No net may
// run on ws during the call.
func LoadCheckpoint(ws *Workspace, path string, opts *LoadOptions) error {
	wp, done, err := ws.get()
	if err != nil {
		return err
	}
	defer done()
	const fn = "dp.LoadCheckpoint"
	c, free, err := opts.toC(fn)
	if err != nil {
		return err
	}
	defer free()
	cp, err := cString(fn+": path", path)
	if err != nil {
		return err
	}
	defer freeStr(cp)
	return statusErr(C.dp_checkpoint_load(wp, cp, c))
}

// CheckpointJob is a save running in the background. Wait may be called
// from any number of goroutines; Close waits for the write, then releases.
type CheckpointJob struct {
	r ref[C.dp_checkpoint_job]
}

// SaveCheckpointAsync snapshots the blobs (copy-on-write, no copy) and
// writes them from a thread of its own. No net may run on ws during this
// call; during the write is fine.
func SaveCheckpointAsync(ws *Workspace, names []string, path string, opts *SaveOptions) (*CheckpointJob, error) {
	wp, done, err := ws.get()
	if err != nil {
		return nil, err
	}
	defer done()
	const fn = "dp.SaveCheckpointAsync"
	arr, err := newCStringArray(fn+": blob name", names)
	if err != nil {
		return nil, err
	}
	defer arr.free()
	c, free, err := opts.toC(fn)
	if err != nil {
		return nil, err
	}
	defer free()
	cp, err := cString(fn+": path", path)
	if err != nil {
		return nil, err
	}
	defer freeStr(cp)
	var out *C.dp_checkpoint_job
	if err := statusErr(C.dp_checkpoint_save_async(wp, arr.ptr, C.size_t(arr.n), cp, c, &out)); err != nil {
		return nil, err
	}
	j := &CheckpointJob{}
	j.r.set(out, "CheckpointJob", func(p *C.dp_checkpoint_job) { C.dp_checkpoint_job_free(p) })
	runtime.SetFinalizer(j, func(j *CheckpointJob) { j.r.close() })
	return j, nil
}

// Wait waits up to timeout (negative: without limit): nil once the file is
// in place, the write's error, or ErrTimeout while it still runs.
func (j *CheckpointJob) Wait(timeout time.Duration) error {
	var p *C.dp_checkpoint_job
	if j != nil {
		var err error
		if p, err = j.r.acquire(); err != nil {
			return err
		}
		defer j.r.release()
	}
	ms := int64(-1)
	if timeout >= 0 {
		ms = int64(timeout / time.Millisecond)
	}
	return statusErr(C.dp_checkpoint_wait(p, C.int64_t(ms)))
}

// Close waits for the write if it still runs and releases the job.
// Idempotent.
func (j *CheckpointJob) Close() {
	if j != nil {
		j.r.close()
	}
}

// CheckpointTensor describes one tensor of a checkpoint.
type CheckpointTensor struct {
	Name   string
	DType  DType
	Dims   []int64
	NBytes uint64
}

// CheckpointInfo is what a checkpoint's header holds.
type CheckpointInfo struct {
	DPVersion string
	ModelName string
	Iteration int64 // -1: unknown
	Tensors   []CheckpointTensor
}

// ReadCheckpointInfo reads (and verifies) a checkpoint's header.
func ReadCheckpointInfo(path string) (*CheckpointInfo, error) {
	cp, err := cString("dp.ReadCheckpointInfo: path", path)
	if err != nil {
		return nil, err
	}
	defer freeStr(cp)
	var h *C.dp_checkpoint_info
	if err := statusErr(C.dp_checkpoint_info_from_file(cp, &h)); err != nil {
		return nil, err
	}
	defer C.dp_checkpoint_info_free(h)
	info := &CheckpointInfo{
		DPVersion: C.GoString(C.dp_checkpoint_info_dp_version(h)),
		ModelName: C.GoString(C.dp_checkpoint_info_model_name(h)),
		Iteration: int64(C.dp_checkpoint_info_iteration(h)),
	}
	n := int(C.dp_checkpoint_info_num_tensors(h))
	for i := 0; i < n; i++ {
		ci := C.size_t(i)
		info.Tensors = append(info.Tensors, CheckpointTensor{
			Name:   C.GoString(C.dp_checkpoint_info_tensor_name(h, ci)),
			DType:  DType(C.dp_checkpoint_info_tensor_dtype(h, ci)),
			Dims:   goDims(C.dp_checkpoint_info_tensor_dims(h, ci), int(C.dp_checkpoint_info_tensor_ndim(h, ci))),
			NBytes: uint64(C.dp_checkpoint_info_tensor_nbytes(h, ci)),
		})
	}
	return info, nil
}

// ListCheckpointSteps lists the verified step checkpoints of dir, newest
// first.
func ListCheckpointSteps(dir string) ([]string, error) {
	cd, err := cString("dp.ListCheckpointSteps: dir", dir)
	if err != nil {
		return nil, err
	}
	defer freeStr(cd)
	var out *C.dp_string_list
	if err := statusErr(C.dp_checkpoint_list_steps(cd, &out)); err != nil {
		return nil, err
	}
	return goStrings(out), nil
}

// PruneCheckpoints keeps the keep newest step checkpoints of dir (0: all)
// and removes dead writers' temporary files.
func PruneCheckpoints(dir string, keep int) error {
	cd, err := cString("dp.PruneCheckpoints: dir", dir)
	if err != nil {
		return err
	}
	defer freeStr(cd)
	return statusErr(C.dp_checkpoint_prune(cd, C.int32_t(keep)))
}

// StepCheckpointName is the file name of iteration n's step checkpoint
// ("step-000000937.dpckpt").
func StepCheckpointName(n int64) string {
	s := itoa(int(n))
	for len(s) < 9 {
		s = "0" + s
	}
	return "step-" + s + ".dpckpt"
}
