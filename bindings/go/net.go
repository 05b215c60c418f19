package dp

/*
#include <dp/dp.h>
*/
import "C"

import (
	"runtime"
	"sync"
	"time"
)

// Executor selects how a net runs its ops (DP_EXECUTOR_*).
type Executor int32

const (
	ExecutorDefault Executor = C.DP_EXECUTOR_DEFAULT
	ExecutorSimple  Executor = C.DP_EXECUTOR_SIMPLE
	ExecutorAsync   Executor = C.DP_EXECUTOR_ASYNC
)

// Memory is what a net does with the memory of its temporaries (blobs a run
// writes and then reads itself: activations, gradients): keep every blob,
// share blocks between temporaries whose lives never overlap, or free each
// after its last use (dp.h's DP_MEMORY_*; docs/MEMORY.md). With Share and
// Free a temporary is empty after a run. Since 0.6.
type Memory int32

const (
	MemoryDefault Memory = C.DP_MEMORY_DEFAULT // a definition's: Keep; the builders': Share
	MemoryKeep    Memory = C.DP_MEMORY_KEEP
	MemoryShare   Memory = C.DP_MEMORY_SHARE
	MemoryFree    Memory = C.DP_MEMORY_FREE
)

// CUDAGraphs is whether a net on one GPU runs as a CUDA graph, recorded on
// its second run and replayed after that (dp.h's DP_CUDA_GRAPHS_*): Default
// and On do, Off runs op by op (a profiled run then times every op). Since 0.6.
type CUDAGraphs int32

const (
	CUDAGraphsDefault CUDAGraphs = C.DP_CUDA_GRAPHS_DEFAULT // on
	CUDAGraphsOn      CUDAGraphs = C.DP_CUDA_GRAPHS_ON
	CUDAGraphsOff     CUDAGraphs = C.DP_CUDA_GRAPHS_OFF
)

// MathMode is how a net's CUDA GEMMs (FC, Conv and their gradients) compute
// (dp.h's DP_MATH_*): tensors stay float32 in every mode; TF32, BF16 and FP16
// round the GEMMs' inputs for tensor cores and accumulate in float32; a
// training net in FP16 needs dynamic loss scaling (LossScalingDynamic). CPU
// kernels compute in float32 whatever the mode. Since 0.6.
type MathMode int32

const (
	MathDefault MathMode = C.DP_MATH_DEFAULT // FP32
	MathFP32    MathMode = C.DP_MATH_FP32
	MathTF32    MathMode = C.DP_MATH_TF32
	MathBF16    MathMode = C.DP_MATH_BF16
	MathFP16    MathMode = C.DP_MATH_FP16
)

// LossScaling is DP_LOSS_SCALING_*: dynamic loss scaling of the training
// nets (TrainingOptions, ParallelOptions), which FP16 math needs: the
// gradients of the loss times a scale, unscaled before the updates; a step
// whose gradients overflowed is skipped and the scale halved (dp.h). Since
// 0.6.
type LossScaling int32

const (
	LossScalingNone    LossScaling = C.DP_LOSS_SCALING_NONE
	LossScalingDynamic LossScaling = C.DP_LOSS_SCALING_DYNAMIC
)

// NetOptions: the zero value asks for every default.
type NetOptions struct {
	Executor      Executor // default: the definition's, else async across devices, simple otherwise
	NumWorkers    int      // async executor CPU workers; 0: the definition's, else the core count
	StreamsPerGPU int      // 0 means 1
	Profile       bool     // record per-op timings (see TraceJSON)
	// A blob fed since the last run that no net of the workspace reads (a
	// misspelt name) fails the run with ErrNotFound before any op runs;
	// false: a warning through the log callback, once per blob. Since 0.6.
	UnreadFeedError bool
	Memory          Memory     // MemoryDefault: the definition's. Since 0.6.
	CUDAGraphs      CUDAGraphs // CUDAGraphsDefault: on. Since 0.6.
	MathMode        MathMode   // MathDefault: FP32. Since 0.6.
}

// Net is a definition instantiated in a workspace. Runs of one net never
// overlap: Run or RunAsync while a run is in progress fails with
// ErrFailedPrecondition. Cancel may be called from any goroutine at any
// time; Wait is serialised by the binding (the header allows one waiter at a
// time). Different nets on one workspace may run concurrently only if they
// write disjoint blobs. Close during a run takes effect when the run's call
// returns.
type Net struct {
	r      ref[C.dp_net]
	waitMu sync.Mutex
}

func (n *Net) get() (*C.dp_net, func(), error) {
	if n == nil {
		return nil, noop, nil
	}
	p, err := n.r.acquire()
	if err != nil {
		return nil, nil, err
	}
	return p, n.r.release, nil
}

// NewNet creates a net in ws from def (copied: def may be closed after);
// opts nil means defaults. The net keeps ws alive.
func NewNet(ws *Workspace, def *NetDef, opts *NetOptions) (*Net, error) {
	wp, wdone, err := ws.get()
	if err != nil {
		return nil, err
	}
	defer wdone()
	dp, ddone, err := def.get()
	if err != nil {
		return nil, err
	}
	defer ddone()
	var c C.dp_net_options
	var cp *C.dp_net_options
	if opts != nil {
		C.dp_net_options_init(&c, C.sizeof_dp_net_options)
		c.executor = C.int32_t(opts.Executor)
		c.num_workers = C.int32_t(opts.NumWorkers)
		c.streams_per_gpu = C.int32_t(opts.StreamsPerGPU)
		if opts.Profile {
			c.profile = 1
		}
		if opts.UnreadFeedError {
			c.unread_feed_error = 1
		}
		c.memory = C.int32_t(opts.Memory)
		c.cuda_graphs = C.int32_t(opts.CUDAGraphs)
		c.math_mode = C.int32_t(opts.MathMode)
		cp = &c
	}
	var out *C.dp_net
	if err := statusErr(C.dp_net_create(wp, dp, cp, &out)); err != nil {
		return nil, err
	}
	n := &Net{}
	n.r.set(out, "Net", func(p *C.dp_net) { C.dp_net_free(p) })
	runtime.SetFinalizer(n, func(n *Net) { n.r.close() })
	return n, nil
}

// Close releases the net (waiting for an async run to finish). Idempotent.
func (n *Net) Close() {
	if n != nil {
		n.r.close()
	}
}

// Run runs every op once. ErrCancelled if Cancel stopped it.
func (n *Net) Run() error {
	p, done, err := n.get()
	if err != nil {
		return err
	}
	defer done()
	return statusErr(C.dp_net_run(p))
}

// RunAsync starts a run and returns at once; collect it with Wait.
func (n *Net) RunAsync() error {
	p, done, err := n.get()
	if err != nil {
		return err
	}
	defer done()
	return statusErr(C.dp_net_run_async(p))
}

// Wait waits up to timeout (negative: without limit) for the run started by
// RunAsync: nil when it succeeded, its error when it failed, ErrTimeout when
// it still runs, ErrFailedPrecondition when none was started.
func (n *Net) Wait(timeout time.Duration) error {
	p, done, err := n.get()
	if err != nil {
		return err
	}
	defer done()
	ms := int64(-1)
	if timeout >= 0 {
		ms = int64(timeout / time.Millisecond)
	}
	if n != nil {
		n.waitMu.Lock()
		defer n.waitMu.Unlock()
	}
	return statusErr(C.dp_net_wait(p, C.int64_t(ms)))
}

// Cancel asks the current run to stop at the next op boundary. Any
// goroutine, any time; nothing happens without a run or on a closed net.
func (n *Net) Cancel() {
	p, done, err := n.get()
	if err != nil {
		return
	}
	defer done()
	C.dp_net_cancel(p)
}

func (n *Net) buffer(f func(*C.dp_net, **C.dp_buffer) *C.dp_status) (string, error) {
	p, done, err := n.get()
	if err != nil {
		return "", err
	}
	defer done()
	var out *C.dp_buffer
	if err := statusErr(f(p, &out)); err != nil {
		return "", err
	}
	return string(goBytes(out)), nil
}

// TraceJSON is the last completed run as Chrome trace JSON (empty events
// unless created with Profile).
func (n *Net) TraceJSON() (string, error) {
	return n.buffer(func(p *C.dp_net, o **C.dp_buffer) *C.dp_status { return C.dp_net_trace_json(p, o) })
}

// NetMemoryStats is a net's memory on one device after its last run
// (dp_net_memory), in bytes and counts.
type NetMemoryStats struct {
	Mode        Memory // what the net does: MemoryKeep, MemoryShare or MemoryFree
	PeakBytes   uint64 // the most the workspace held on the device during the last run
	BytesInUse  uint64 // what it holds there now
	Temporaries uint64 // blobs the plan empties after their last use
	Slots       uint64 // Share: the blocks they take turns in
	SlotBytes   uint64 // Share: the bytes those blocks hold between runs
}

// MemoryStats reports the net's memory on device (t, id) (dp_net_memory_stats);
// ErrFailedPrecondition while a run is in progress.
func (n *Net) MemoryStats(t DeviceType, id int) (NetMemoryStats, error) {
	p, done, err := n.get()
	if err != nil {
		return NetMemoryStats{}, err
	}
	defer done()
	var c C.dp_net_memory
	c.struct_size = C.uint32_t(C.sizeof_dp_net_memory)
	if err := statusErr(C.dp_net_memory_stats(p, C.int32_t(t), C.int32_t(id), &c)); err != nil {
		return NetMemoryStats{}, err
	}
	return NetMemoryStats{Mode: Memory(c.mode), PeakBytes: uint64(c.peak_bytes), BytesInUse: uint64(c.bytes_in_use),
		Temporaries: uint64(c.temporaries), Slots: uint64(c.slots), SlotBytes: uint64(c.slot_bytes)}, nil
}

// ToDot draws the net's ops and dependencies as Graphviz DOT.
func (n *Net) ToDot() (string, error) {
	return n.buffer(func(p *C.dp_net, o **C.dp_buffer) *C.dp_status { return C.dp_net_to_dot(p, o) })
}
