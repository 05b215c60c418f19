package dp

/*
#include <dp/dp.h>
*/
import "C"

import "unsafe"

// OpDef is a read-only view of one op of a NetDef. It reads its NetDef on
// every call, so it is safe from any number of goroutines, and once the
// NetDef is closed the getters return zero values ("" / 0 / nil) and the
// fallible ones ErrClosed.
type OpDef struct {
	d *NetDef
	p *C.dp_opdef
}

// ArgDef is a read-only view of one argument of an op (same rules as OpDef).
type ArgDef struct {
	d *NetDef
	p *C.dp_argdef
}

// ArgKind is the kind of value an argument holds (DP_ARG_*).
type ArgKind int32

const (
	ArgFloat   ArgKind = C.DP_ARG_FLOAT
	ArgInt     ArgKind = C.DP_ARG_INT
	ArgString  ArgKind = C.DP_ARG_STRING
	ArgFloats  ArgKind = C.DP_ARG_FLOATS
	ArgInts    ArgKind = C.DP_ARG_INTS
	ArgStrings ArgKind = C.DP_ARG_STRINGS
	ArgNet     ArgKind = C.DP_ARG_NET
	ArgNets    ArgKind = C.DP_ARG_NETS
)

// op runs f with the view's pointer while its NetDef is held open; f gets
// NULL when the NetDef is closed (the getters then return zero values).
func (o *OpDef) op(f func(*C.dp_opdef)) {
	if o == nil {
		f(nil)
		return
	}
	_, done, err := o.d.get()
	if err != nil {
		f(nil)
		return
	}
	defer done()
	f(o.p)
}

func (a *ArgDef) arg(f func(*C.dp_argdef)) error {
	if a == nil {
		f(nil)
		return nil
	}
	_, done, err := a.d.get()
	if err != nil {
		f(nil)
		return err
	}
	defer done()
	f(a.p)
	return nil
}

// Type is the op's type ("FC").
func (o *OpDef) Type() (s string) {
	o.op(func(p *C.dp_opdef) { s = C.GoString(C.dp_opdef_type(p)) })
	return
}

// Name is the op's name ("" when unnamed).
func (o *OpDef) Name() (s string) {
	o.op(func(p *C.dp_opdef) { s = C.GoString(C.dp_opdef_name(p)) })
	return
}

// Engine is the kernel variant ("" for the default).
func (o *OpDef) Engine() (s string) {
	o.op(func(p *C.dp_opdef) { s = C.GoString(C.dp_opdef_engine(p)) })
	return
}

// Inputs are the input blob names.
func (o *OpDef) Inputs() (s []string) {
	o.op(func(p *C.dp_opdef) {
		s = make([]string, int(C.dp_opdef_num_inputs(p)))
		for i := range s {
			s[i] = C.GoString(C.dp_opdef_input(p, C.size_t(i)))
		}
	})
	return
}

// Outputs are the output blob names.
func (o *OpDef) Outputs() (s []string) {
	o.op(func(p *C.dp_opdef) {
		s = make([]string, int(C.dp_opdef_num_outputs(p)))
		for i := range s {
			s[i] = C.GoString(C.dp_opdef_output(p, C.size_t(i)))
		}
	})
	return
}

// ControlInputs are blobs that must be written before the op runs.
func (o *OpDef) ControlInputs() (s []string) {
	o.op(func(p *C.dp_opdef) {
		s = make([]string, int(C.dp_opdef_num_control_inputs(p)))
		for i := range s {
			s[i] = C.GoString(C.dp_opdef_control_input(p, C.size_t(i)))
		}
	})
	return
}

// Device is the device the op sets, or DeviceNone and -1.
func (o *OpDef) Device() (t DeviceType, id int) {
	t, id = DeviceNone, -1
	o.op(func(p *C.dp_opdef) {
		t, id = DeviceType(C.dp_opdef_device_type(p)), int(C.dp_opdef_device_id(p))
	})
	return
}

// Args are views of the op's arguments in definition order.
func (o *OpDef) Args() (args []*ArgDef) {
	o.op(func(p *C.dp_opdef) {
		n := int(C.dp_opdef_num_args(p))
		for i := 0; i < n; i++ {
			args = append(args, &ArgDef{d: o.d, p: C.dp_opdef_arg(p, C.size_t(i))})
		}
	})
	return
}

// FindArg is the argument named name, or nil (also for a name holding a NUL
// byte, which no argument's name holds).
func (o *OpDef) FindArg(name string) (a *ArgDef) {
	cn, err := cString("dp.OpDef.FindArg: name", name)
	if err != nil {
		return nil
	}
	defer freeStr(cn)
	o.op(func(p *C.dp_opdef) {
		if ap := C.dp_opdef_find_arg(p, cn); ap != nil {
			a = &ArgDef{d: o.d, p: ap}
		}
	})
	return
}

// Name is the argument's name.
func (a *ArgDef) Name() (s string) {
	_ = a.arg(func(p *C.dp_argdef) { s = C.GoString(C.dp_argdef_name(p)) })
	return
}

// Kind is the argument's kind (0 when closed).
func (a *ArgDef) Kind() (k ArgKind) {
	_ = a.arg(func(p *C.dp_argdef) { k = ArgKind(C.dp_argdef_kind(p)) })
	return
}

// NumValues is the length of a list kind, 1 for scalar kinds.
func (a *ArgDef) NumValues() (n int) {
	_ = a.arg(func(p *C.dp_argdef) { n = int(C.dp_argdef_num_values(p)) })
	return
}

// Float is a FLOAT argument's value (ErrInvalidArgument for another kind).
func (a *ArgDef) Float() (v float64, err error) {
	if e := a.arg(func(p *C.dp_argdef) {
		var c C.double
		if err = statusErr(C.dp_argdef_get_float(p, &c)); err == nil {
			v = float64(c)
		}
	}); e != nil {
		return 0, e
	}
	return
}

// Int is an INT argument's value.
func (a *ArgDef) Int() (v int64, err error) {
	if e := a.arg(func(p *C.dp_argdef) {
		var c C.int64_t
		if err = statusErr(C.dp_argdef_get_int(p, &c)); err == nil {
			v = int64(c)
		}
	}); e != nil {
		return 0, e
	}
	return
}

// StringValue is a STRING argument's value.
func (a *ArgDef) StringValue() (v string, err error) {
	if e := a.arg(func(p *C.dp_argdef) {
		var c *C.char
		if err = statusErr(C.dp_argdef_get_string(p, &c)); err == nil {
			v = C.GoString(c)
		}
	}); e != nil {
		return "", e
	}
	return
}

// Floats is a FLOATS argument's values.
func (a *ArgDef) Floats() (v []float64, err error) {
	if e := a.arg(func(p *C.dp_argdef) {
		var data *C.double
		var n C.size_t
		if err = statusErr(C.dp_argdef_get_floats(p, &data, &n)); err == nil {
			v = make([]float64, int(n))
			if n > 0 {
				copy(v, unsafe.Slice((*float64)(unsafe.Pointer(data)), int(n)))
			}
		}
	}); e != nil {
		return nil, e
	}
	return
}

// Ints is an INTS argument's values.
func (a *ArgDef) Ints() (v []int64, err error) {
	if e := a.arg(func(p *C.dp_argdef) {
		var data *C.int64_t
		var n C.size_t
		if err = statusErr(C.dp_argdef_get_ints(p, &data, &n)); err == nil {
			v = goDims(data, int(n))
		}
	}); e != nil {
		return nil, e
	}
	return
}

// StringAt is element i of a STRINGS argument.
func (a *ArgDef) StringAt(i int) (v string, err error) {
	if i < 0 {
		return "", &Error{code: CodeOutOfRange, msg: "dp.ArgDef.StringAt: negative index"}
	}
	if e := a.arg(func(p *C.dp_argdef) {
		var c *C.char
		if err = statusErr(C.dp_argdef_get_string_at(p, C.size_t(i), &c)); err == nil {
			v = C.GoString(c)
		}
	}); e != nil {
		return "", e
	}
	return
}

// Strings is every element of a STRINGS argument.
func (a *ArgDef) Strings() ([]string, error) {
	if a.Kind() != ArgStrings {
		_, err := a.StringAt(0) // dp's error for the wrong kind (or ErrClosed)
		if err == nil {
			err = argErr("dp.ArgDef.Strings: not a STRINGS argument")
		}
		return nil, err
	}
	n := a.NumValues()
	out := make([]string, n)
	for i := range out {
		s, err := a.StringAt(i)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// Net is a NET argument's nested definition, a new NetDef (close it) that
// may outlive its parent.
func (a *ArgDef) Net() (d *NetDef, err error) {
	if e := a.arg(func(p *C.dp_argdef) {
		var out *C.dp_netdef
		if err = statusErr(C.dp_argdef_get_net(p, &out)); err == nil {
			d = newNetDef(out)
		}
	}); e != nil {
		return nil, e
	}
	return
}

// NetAt is element i of a NETS argument as a new NetDef.
func (a *ArgDef) NetAt(i int) (d *NetDef, err error) {
	if i < 0 {
		return nil, &Error{code: CodeOutOfRange, msg: "dp.ArgDef.NetAt: negative index"}
	}
	if e := a.arg(func(p *C.dp_argdef) {
		var out *C.dp_netdef
		if err = statusErr(C.dp_argdef_get_net_at(p, C.size_t(i), &out)); err == nil {
			d = newNetDef(out)
		}
	}); e != nil {
		return nil, e
	}
	return
}
