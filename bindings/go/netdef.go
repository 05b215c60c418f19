package dp

/*
#include <dp/dp.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// NetDef is a parsed, validated, immutable net definition: every method may
// be called from any number of goroutines at once. The OpDef and ArgDef
// views it hands out read it and fail (or return zero values) once it is
// closed.
type NetDef struct {
	r ref[C.dp_netdef]
}

func newNetDef(p *C.dp_netdef) *NetDef {
	if p == nil {
		return nil
	}
	d := &NetDef{}
	d.r.set(p, "NetDef", func(p *C.dp_netdef) { C.dp_netdef_free(p) })
	runtime.SetFinalizer(d, func(d *NetDef) { d.r.close() })
	return d
}

func (d *NetDef) get() (*C.dp_netdef, func(), error) {
	if d == nil {
		return nil, noop, nil
	}
	p, err := d.r.acquire()
	if err != nil {
		return nil, nil, err
	}
	return p, d.r.release, nil
}

// Close releases the definition. Idempotent.
func (d *NetDef) Close() {
	if d != nil {
		d.r.close()
	}
}

// NetDefFromJSON parses a JSON net definition.
func NetDefFromJSON(json []byte) (*NetDef, error) {
	var out *C.dp_netdef
	var p *C.char
	if len(json) > 0 {
		p = (*C.char)(unsafe.Pointer(&json[0]))
	}
	if err := statusErr(C.dp_netdef_from_json(p, C.size_t(len(json)), &out)); err != nil {
		return nil, err
	}
	return newNetDef(out), nil
}

// NetDefFromBuffer parses a binary FlatBuffer definition (read during the
// call only).
func NetDefFromBuffer(buf []byte) (*NetDef, error) {
	var out *C.dp_netdef
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
	}
	if err := statusErr(C.dp_netdef_from_buffer(p, C.size_t(len(buf)), &out)); err != nil {
		return nil, err
	}
	return newNetDef(out), nil
}

// NetDefFromFile reads a definition file (JSON or FlatBuffer).
func NetDefFromFile(path string) (*NetDef, error) {
	cp, err := cString("dp.NetDefFromFile: path", path)
	if err != nil {
		return nil, err
	}
	defer freeStr(cp)
	var out *C.dp_netdef
	if err := statusErr(C.dp_netdef_from_file(cp, &out)); err != nil {
		return nil, err
	}
	return newNetDef(out), nil
}

func (d *NetDef) buffer(f func(*C.dp_netdef, **C.dp_buffer) *C.dp_status) ([]byte, error) {
	p, done, err := d.get()
	if err != nil {
		return nil, err
	}
	defer done()
	var out *C.dp_buffer
	if err := statusErr(f(p, &out)); err != nil {
		return nil, err
	}
	return goBytes(out), nil
}

// ToBuffer serialises the definition as a binary FlatBuffer.
func (d *NetDef) ToBuffer() ([]byte, error) {
	return d.buffer(func(p *C.dp_netdef, o **C.dp_buffer) *C.dp_status { return C.dp_netdef_to_buffer(p, o) })
}

// ToJSON serialises the definition as JSON.
func (d *NetDef) ToJSON() (string, error) {
	b, err := d.buffer(func(p *C.dp_netdef, o **C.dp_buffer) *C.dp_status { return C.dp_netdef_to_json(p, o) })
	return string(b), err
}

// ToDot draws the ops and their blob dependencies as Graphviz DOT.
func (d *NetDef) ToDot() (string, error) {
	b, err := d.buffer(func(p *C.dp_netdef, o **C.dp_buffer) *C.dp_status { return C.dp_netdef_to_dot(p, o) })
	return string(b), err
}

// with runs f on the handle; closed or nil definitions run f on NULL, which
// the getters answer with zero values.
func (d *NetDef) with(f func(*C.dp_netdef)) {
	p, done, err := d.get()
	if err != nil {
		f(nil)
		return
	}
	defer done()
	f(p)
}

// Name is the net's name ("" when unnamed or closed).
func (d *NetDef) Name() (s string) {
	d.with(func(p *C.dp_netdef) { s = C.GoString(C.dp_netdef_name(p)) })
	return
}

// NumOps is the number of ops.
func (d *NetDef) NumOps() (n int) {
	d.with(func(p *C.dp_netdef) { n = int(C.dp_netdef_num_ops(p)) })
	return
}

// ExternalInputs are the blobs the caller feeds.
func (d *NetDef) ExternalInputs() (s []string) {
	d.with(func(p *C.dp_netdef) {
		n := int(C.dp_netdef_num_external_inputs(p))
		s = make([]string, n)
		for i := range s {
			s[i] = C.GoString(C.dp_netdef_external_input(p, C.size_t(i)))
		}
	})
	return
}

// ExternalOutputs are the blobs the caller reads.
func (d *NetDef) ExternalOutputs() (s []string) {
	d.with(func(p *C.dp_netdef) {
		n := int(C.dp_netdef_num_external_outputs(p))
		s = make([]string, n)
		for i := range s {
			s[i] = C.GoString(C.dp_netdef_external_output(p, C.size_t(i)))
		}
	})
	return
}

// Device is the default device of ops that set none (DeviceNone, -1 when
// closed).
func (d *NetDef) Device() (t DeviceType, id int) {
	d.with(func(p *C.dp_netdef) {
		t, id = DeviceType(C.dp_netdef_device_type(p)), int(C.dp_netdef_device_id(p))
	})
	return
}

// Executor is the executor the definition asks for, and its worker count.
func (d *NetDef) Executor() (e Executor, workers int) {
	d.with(func(p *C.dp_netdef) {
		e, workers = Executor(C.dp_netdef_executor(p)), int(C.dp_netdef_num_workers(p))
	})
	return
}

// Memory is the memory mode the definition asks for (MemoryShare for the
// builders' train nets). Since 0.6.
func (d *NetDef) Memory() (m Memory) {
	d.with(func(p *C.dp_netdef) { m = Memory(C.dp_netdef_memory(p)) })
	return
}

// Ops are views of the ops in run order.
func (d *NetDef) Ops() []*OpDef {
	var ops []*OpDef
	d.with(func(p *C.dp_netdef) {
		n := int(C.dp_netdef_num_ops(p))
		for i := 0; i < n; i++ {
			ops = append(ops, &OpDef{d: d, p: C.dp_netdef_op(p, C.size_t(i))})
		}
	})
	return ops
}

// Op is op i (nil when out of range or closed).
func (d *NetDef) Op(i int) (op *OpDef) {
	if i < 0 {
		return nil
	}
	d.with(func(p *C.dp_netdef) {
		if o := C.dp_netdef_op(p, C.size_t(i)); o != nil {
			op = &OpDef{d: d, p: o}
		}
	})
	return
}

// GradientOptions configure AddGradients; Losses is required, everything
// else defaults when zero.
type GradientOptions struct {
	Losses    []string // loss blobs (at least one)
	WRT       []string // blobs to differentiate with respect to; nil: every external input
	Stop      []string // blobs through which no gradient flows
	LossScale float64  // seed of the loss gradients; 0 means 1
	Memory    Memory   // the net made; MemoryDefault is MemoryShare. Since 0.6.
}

// GradientPair names a wrt blob and its gradient blob.
type GradientPair struct{ Blob, Grad string }

// AddGradients returns a new definition with the ops computing the
// gradients of the losses appended, and the blob -> gradient pairs.
func (d *NetDef) AddGradients(opts GradientOptions) (*NetDef, []GradientPair, error) {
	p, done, err := d.get()
	if err != nil {
		return nil, nil, err
	}
	defer done()
	var c C.dp_gradient_options
	C.dp_gradient_options_init(&c, C.sizeof_dp_gradient_options)
	losses, err := newCStringArray("dp.NetDef.AddGradients: GradientOptions.Losses", opts.Losses)
	if err != nil {
		return nil, nil, err
	}
	defer losses.free()
	wrt, err := newCStringArray("dp.NetDef.AddGradients: GradientOptions.WRT", opts.WRT)
	if err != nil {
		return nil, nil, err
	}
	defer wrt.free()
	stop, err := newCStringArray("dp.NetDef.AddGradients: GradientOptions.Stop", opts.Stop)
	if err != nil {
		return nil, nil, err
	}
	defer stop.free()
	c.losses, c.num_losses = losses.ptr, C.size_t(losses.n)
	c.wrt, c.num_wrt = wrt.ptr, C.size_t(wrt.n)
	c.stop, c.num_stop = stop.ptr, C.size_t(stop.n)
	c.loss_scale = C.double(opts.LossScale)
	c.memory = C.int32_t(opts.Memory)
	var out *C.dp_netdef
	var gm *C.dp_string_list
	if err := statusErr(C.dp_netdef_add_gradients(p, &c, &out, &gm)); err != nil {
		return nil, nil, err
	}
	flat := goStrings(gm)
	pairs := make([]GradientPair, 0, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		pairs = append(pairs, GradientPair{flat[i], flat[i+1]})
	}
	return newNetDef(out), pairs, nil
}
