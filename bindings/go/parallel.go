package dp

/*
#include <stdlib.h>
#include <dp/dp.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// ComputedParamsMode says what happens to computed params (BN running
// statistics) across replicas after each step.
type ComputedParamsMode int32

const (
	ComputedParamsBroadcast ComputedParamsMode = C.DP_COMPUTED_PARAMS_BROADCAST
	ComputedParamsAverage   ComputedParamsMode = C.DP_COMPUTED_PARAMS_AVERAGE
	ComputedParamsNone      ComputedParamsMode = C.DP_COMPUTED_PARAMS_NONE
)

// CUDACollectives selects how CUDA replicas communicate.
type CUDACollectives int32

const (
	CUDACollectivesNCCL CUDACollectives = C.DP_CUDA_COLLECTIVES_NCCL
	CUDACollectivesTree CUDACollectives = C.DP_CUDA_COLLECTIVES_TREE
)

// ParallelOptions: the zero value is one CPU replica with every default
// (see dp_parallel_options for each field).
type ParallelOptions struct {
	DeviceType        DeviceType
	DeviceIDs         []int32 // one replica per id; nil: every device of DeviceType
	FirstBucketBytes  int64   // 0 means 1 MiB
	BucketBytes       int64   // 0 means 25 MiB
	UnevenSplit       bool
	NoFuse            bool
	LR                float64 // > 0 replaces the optimizer's base learning rate
	AccumulateSteps   int     // 0 means 1
	BMUF              bool
	BMUFBlockLR       float64 // 0 means 1
	BMUFBlockMomentum float64 // 0: 1 - 1/replicas; negative: none
	BMUFNoNesterov    bool
	BMUFBlockLength   int // 0 means 8
	ComputedParams    ComputedParamsMode
	CUDACollectives   CUDACollectives
	SharedModel       bool
	// SharedModelAuto lets dp pick SharedModel from where the CPU replicas
	// run (DP_SHARED_MODEL_AUTO: shared when their CPUs share a last-level
	// cache); it overrides SharedModel.
	SharedModelAuto bool
	SyncBN          bool
	// Several processes (since 0.3): NumShards processes train one model,
	// meeting through Store. Zero values read the environment (what dp-run
	// sets), else the default; see dp_parallel_options.
	ShardID          int    // this process's rank in [0, NumShards)
	NumShards        int    // 0: DP_WORLD_SIZE and DP_RANK, else 1
	Store            string // "file:///dir" or "redis://host:port[/prefix]"; "": DP_STORE
	TimeoutMS        int64  // 0: DP_TIMEOUT_MS, else 60000
	NetworkInterface string // "eth0"; "": DP_INTERFACE, else the host name's address
	RunID            string // "": DP_RUN_ID, else "dp"
	// Between the processes of one host (since 0.4): "auto" (shared memory
	// where usable), "shm" or "tcp"; "": DP_LOCAL_TRANSPORT, else "auto".
	LocalTransport string
	// The train and accumulate nets' Memory; MemoryDefault is MemoryShare.
	// Since 0.6.
	Memory Memory
	// The gradient allreduce in 16 bits: half the bytes between processes
	// (dp_parallel_options.gradient_compression). Since 0.6.
	GradientCompression GradientCompression
	// ZeRO-1: the optimizer state sharded over every replica of every
	// process (dp_parallel_options.shard_optimizer_state). Since 0.6.
	ShardOptimizerState bool
	// Dynamic loss scaling (for MathFP16): one scale for every replica;
	// not with BMUF; with ShardOptimizerState or several GPUs each replica
	// checks its gradients (its shard), one verdict over every process.
	// Since 0.6.
	LossScaling      LossScaling
	InitialLossScale float64 // its first scale; 0: 65536 (2^16). Since 0.6.
}

// GradientCompression is DP_GRADIENT_COMPRESSION_*.
type GradientCompression int32

const (
	CompressionNone GradientCompression = C.DP_GRADIENT_COMPRESSION_NONE
	CompressionBF16 GradientCompression = C.DP_GRADIENT_COMPRESSION_BF16
	CompressionFP16 GradientCompression = C.DP_GRADIENT_COMPRESSION_FP16
)

func b2i(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// ParallelModel is a model turned into replicas, one per device.
// Immutable: every method may be called from any goroutine, except that
// Sync, Join, Save and Load must not overlap a net running on the same workspace.
type ParallelModel struct {
	r ref[C.dp_parallel_model]
}

func (m *ParallelModel) get() (*C.dp_parallel_model, func(), error) {
	if m == nil {
		return nil, noop, nil
	}
	p, err := m.r.acquire()
	if err != nil {
		return nil, nil, err
	}
	return p, m.r.release, nil
}

// Close releases the parallel model. Idempotent.
func (m *ParallelModel) Close() {
	if m != nil {
		m.r.close()
	}
}

// Parallelize builds data-parallel training; opts nil means one CPU replica
// with every default.
func (m *Model) Parallelize(opts *ParallelOptions) (*ParallelModel, error) {
	p, done, err := m.get()
	if err != nil {
		return nil, err
	}
	defer done()
	if opts == nil {
		opts = &ParallelOptions{}
	}
	var c C.dp_parallel_options
	C.dp_parallel_options_init(&c, C.sizeof_dp_parallel_options)
	c.device_type = C.int32_t(opts.DeviceType)
	// The ids go to C memory: the options struct must hold no Go pointer.
	if n := len(opts.DeviceIDs); n > 0 {
		ids := (*C.int32_t)(C.malloc(C.size_t(n) * 4))
		defer C.free(unsafe.Pointer(ids))
		copy(unsafe.Slice((*int32)(unsafe.Pointer(ids)), n), opts.DeviceIDs)
		c.device_ids, c.num_devices = ids, C.size_t(n)
	}
	c.first_bucket_bytes = C.int64_t(opts.FirstBucketBytes)
	c.bucket_bytes = C.int64_t(opts.BucketBytes)
	c.uneven_split = b2i(opts.UnevenSplit)
	c.no_fuse = b2i(opts.NoFuse)
	c.lr = C.double(opts.LR)
	c.accumulate_steps = C.int32_t(opts.AccumulateSteps)
	c.bmuf = b2i(opts.BMUF)
	c.bmuf_block_lr = C.double(opts.BMUFBlockLR)
	c.bmuf_block_momentum = C.double(opts.BMUFBlockMomentum)
	c.bmuf_no_nesterov = b2i(opts.BMUFNoNesterov)
	c.bmuf_block_length = C.int32_t(opts.BMUFBlockLength)
	c.computed_params = C.int32_t(opts.ComputedParams)
	c.cuda_collectives = C.int32_t(opts.CUDACollectives)
	c.shared_model = b2i(opts.SharedModel)
	if opts.SharedModelAuto {
		c.shared_model = C.DP_SHARED_MODEL_AUTO
	}
	c.sync_bn = b2i(opts.SyncBN)
	c.shard_id = C.int32_t(opts.ShardID)
	c.num_shards = C.int32_t(opts.NumShards)
	c.timeout_ms = C.int64_t(opts.TimeoutMS)
	c.memory = C.int32_t(opts.Memory)
	c.gradient_compression = C.int32_t(opts.GradientCompression)
	c.shard_optimizer_state = b2i(opts.ShardOptimizerState)
	c.loss_scaling = C.int32_t(opts.LossScaling)
	c.initial_loss_scale = C.double(opts.InitialLossScale)
	// The strings go to C memory too, freed after the call; "" is NULL.
	for _, s := range []struct {
		field string
		value string
		dst   **C.char
	}{
		{"Store", opts.Store, &c.store},
		{"NetworkInterface", opts.NetworkInterface, &c.network_interface},
		{"RunID", opts.RunID, &c.run_id},
		{"LocalTransport", opts.LocalTransport, &c.local_transport},
	} {
		cs, err := cStringOrNull("dp.Model.Parallelize: ParallelOptions."+s.field, s.value)
		if err != nil {
			return nil, err
		}
		defer freeStr(cs)
		*s.dst = cs
	}
	var out *C.dp_parallel_model
	if err := statusErr(C.dp_model_parallelize(p, &c, &out)); err != nil {
		return nil, err
	}
	pm := &ParallelModel{}
	pm.r.set(out, "ParallelModel", func(p *C.dp_parallel_model) { C.dp_parallel_model_free(p) })
	runtime.SetFinalizer(pm, func(m *ParallelModel) { m.r.close() })
	return pm, nil
}

// Nets are the init, train-step and eval nets (one workspace for all).
func (m *ParallelModel) Nets() (*TrainingNets, error) {
	p, done, err := m.get()
	if err != nil {
		return nil, err
	}
	defer done()
	var i, t, e *C.dp_netdef
	if err := statusErr(C.dp_parallel_model_nets(p, &i, &t, &e)); err != nil {
		return nil, err
	}
	return &TrainingNets{newNetDef(i), newNetDef(t), newNetDef(e)}, nil
}

func (m *ParallelModel) netdef(f func(*C.dp_parallel_model, **C.dp_netdef) *C.dp_status) (*NetDef, error) {
	p, done, err := m.get()
	if err != nil {
		return nil, err
	}
	defer done()
	var out *C.dp_netdef
	if err := statusErr(f(p, &out)); err != nil {
		return nil, err
	}
	return newNetDef(out), nil
}

// AccumulateNet is the gradient-accumulation net (AccumulateSteps > 1).
func (m *ParallelModel) AccumulateNet() (*NetDef, error) {
	return m.netdef(func(p *C.dp_parallel_model, o **C.dp_netdef) *C.dp_status {
		return C.dp_parallel_model_accumulate_net(p, o)
	})
}

// SyncNet broadcasts replica 0's state to the others.
func (m *ParallelModel) SyncNet() (*NetDef, error) {
	return m.netdef(func(p *C.dp_parallel_model, o **C.dp_netdef) *C.dp_status {
		return C.dp_parallel_model_sync_net(p, o)
	})
}

// BlockNet is the BMUF block net and the block length.
func (m *ParallelModel) BlockNet() (*NetDef, int, error) {
	p, done, err := m.get()
	if err != nil {
		return nil, 0, err
	}
	defer done()
	var out *C.dp_netdef
	var n C.int32_t
	if err := statusErr(C.dp_parallel_model_block_net(p, &out, &n)); err != nil {
		return nil, 0, err
	}
	return newNetDef(out), int(n), nil
}

// Sync builds the sync net on ws and runs it once.
func (m *ParallelModel) Sync(ws *Workspace) error {
	p, done, err := m.get()
	if err != nil {
		return err
	}
	defer done()
	wp, wdone, err := ws.get()
	if err != nil {
		return err
	}
	defer wdone()
	return statusErr(C.dp_parallel_model_sync(p, wp))
}

// Join is for uneven data across processes: a process that has run out of
// batches calls it instead of running the train net again; it shadows the
// others' steps until every process has joined and returns how many steps it
// shadowed (0 at once with one process). See dp_parallel_model_join.
func (m *ParallelModel) Join(ws *Workspace) (int64, error) {
	p, done, err := m.get()
	if err != nil {
		return 0, err
	}
	defer done()
	wp, wdone, err := ws.get()
	if err != nil {
		return 0, err
	}
	defer wdone()
	var steps C.int64_t
	if err := statusErr(C.dp_parallel_model_join(p, wp, &steps)); err != nil {
		return 0, err
	}
	return int64(steps), nil
}

// NumReplicas is the replica count (0 when closed).
func (m *ParallelModel) NumReplicas() int {
	p, done, err := m.get()
	if err != nil {
		return 0
	}
	defer done()
	return int(C.dp_parallel_model_num_replicas(p))
}

// NumShards is the job's process count (1 for a one-process model; 0 when
// closed).
func (m *ParallelModel) NumShards() int {
	p, done, err := m.get()
	if err != nil {
		return 0
	}
	defer done()
	return int(C.dp_parallel_model_num_shards(p))
}

// ShardID is this process's rank in the job (0 for a one-process model; -1
// when closed).
func (m *ParallelModel) ShardID() int {
	p, done, err := m.get()
	if err != nil {
		return -1
	}
	defer done()
	return int(C.dp_parallel_model_shard_id(p))
}

// Scope is replica i's name scope ("cpu_1/"); "" when out of range.
func (m *ParallelModel) Scope(i int) string {
	p, done, err := m.get()
	if err != nil || i < 0 {
		return ""
	}
	defer done()
	return C.GoString(C.dp_parallel_model_scope(p, C.size_t(i)))
}

// Save writes replica 0's training state under unscoped names to path;
// opts nil means defaults.
func (m *ParallelModel) Save(ws *Workspace, path string, opts *SaveOptions) error {
	p, done, err := m.get()
	if err != nil {
		return err
	}
	defer done()
	wp, wdone, err := ws.get()
	if err != nil {
		return err
	}
	defer wdone()
	const fn = "dp.ParallelModel.Save"
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
	return statusErr(C.dp_parallel_model_save(p, wp, cp, c))
}

// Load reads a checkpoint into replica 0 and syncs every replica; opts.Names
// must be nil.
func (m *ParallelModel) Load(ws *Workspace, path string, opts *LoadOptions) error {
	p, done, err := m.get()
	if err != nil {
		return err
	}
	defer done()
	wp, wdone, err := ws.get()
	if err != nil {
		return err
	}
	defer wdone()
	const fn = "dp.ParallelModel.Load"
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
	return statusErr(C.dp_parallel_model_load(p, wp, cp, c))
}
