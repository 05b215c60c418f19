//! The op catalogue (dp_opschema_*, since 0.6): every operator type and what
//! its schema accepts. [`OpSchema::of`] copies one type's schema into plain
//! Rust data (the C handle is freed before it returns), so an `OpSchema` is
//! `Send + Sync` and outlives nothing.
use crate::error::{check, Code, Error, Result};
use crate::netdef::{ArgDef, ArgKind};
use crate::options::DeviceType;
use crate::sys;
use crate::util::{borrowed_str, cstring, StringList};
use std::os::raw::c_char;
use std::ptr;

/// Every operator type this library knows (gradient ops such as ReluGradient
/// included), sorted (dp_opschema_list_types).
pub fn op_types() -> Result<Vec<String>> {
    Ok(StringList::fill(|o| unsafe { sys::dp_opschema_list_types(o) })?.into_vec())
}

/// An argument's default value, of the argument's kind.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    Float(f64),
    Int(i64),
    String(String),
    Floats(Vec<f64>),
    Ints(Vec<i64>),
    Strings(Vec<String>),
}

impl ArgValue {
    fn read(a: &ArgDef<'_>) -> Result<ArgValue> {
        Ok(match a.kind() {
            ArgKind::Float => ArgValue::Float(a.get_float()?),
            ArgKind::Int => ArgValue::Int(a.get_int()?),
            ArgKind::String => ArgValue::String(a.get_string()?.to_owned()),
            ArgKind::Floats => ArgValue::Floats(a.get_floats()?.to_vec()),
            ArgKind::Ints => ArgValue::Ints(a.get_ints()?.to_vec()),
            ArgKind::Strings => ArgValue::Strings(a.get_strings()?.into_iter().map(str::to_owned).collect()),
            k => return Err(Error::new(Code::Internal, format!("an argument default of kind {:?}", k))),
        })
    }
}

/// An argument an op type accepts.
#[derive(Debug, Clone, PartialEq)]
pub struct OpArg {
    pub name: String,
    pub kind: ArgKind,
    pub doc: String,
    pub required: bool,
    /// The value the kernel uses when an op leaves the argument out; None
    /// when it is required or its default is not one value (see
    /// `default_text`).
    pub default: Option<ArgValue>,
    /// The default as text: the value as JSON ("0.9", "\"fixed\"", "[]") or
    /// a description; "" when required.
    pub default_text: String,
}

/// Whether an output may or must be written in place of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InplaceRule {
    Allowed,
    Enforced,
}

/// One in-place rule: `output` may (or must) name the same blob as `input`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InplacePair {
    pub input: usize,
    pub output: usize,
    pub rule: InplaceRule,
}

/// How gradients treat an op type (DP_GRADIENT_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradientKind {
    /// Nothing registered (gradient ops themselves).
    Undeclared,
    Differentiable,
    /// A loss may not depend on a param through it (Accuracy, updates).
    NotDifferentiable,
    /// Stops gradients on purpose (StopGradient, fills).
    Stop,
    Other(i32),
}

/// What an operator type accepts, copied from the op catalogue.
#[derive(Debug, Clone, PartialEq)]
pub struct OpSchema {
    pub op_type: String,
    pub doc: String,
    /// Input and output counts, min to max inclusive; max is `i32::MAX` when
    /// there is no limit.
    pub min_inputs: i32,
    pub max_inputs: i32,
    pub min_outputs: i32,
    pub max_outputs: i32,
    /// The names of the leading inputs and outputs ("X", "W", "b").
    pub input_names: Vec<String>,
    pub output_names: Vec<String>,
    pub args: Vec<OpArg>,
    /// Pairs that may or must name the same blob (enforced ones first).
    pub inplace: Vec<InplacePair>,
    /// Some(s) when every output k must be written in place of input k + s.
    pub inplace_shift: Option<usize>,
    /// The device types with a kernel for this type.
    pub kernels: Vec<DeviceType>,
    /// The engines (kernel variants) per device type, where there are any.
    pub engines: Vec<(DeviceType, Vec<String>)>,
    pub gradient: GradientKind,
}

/// Frees the handle however `of` returns.
struct Handle(*mut sys::dp_opschema);

impl Drop for Handle {
    fn drop(&mut self) {
        unsafe { sys::dp_opschema_free(self.0) }
    }
}

impl OpSchema {
    /// The schema of `op_type` (case-sensitive: "Relu"). NotFound for an
    /// unknown type, naming the nearest known one ("did you mean 'Relu'?").
    pub fn of(op_type: &str) -> Result<OpSchema> {
        let t = cstring(op_type, "op type")?;
        let mut raw = ptr::null_mut();
        check(unsafe { sys::dp_opschema_from_type(t.as_ptr(), &mut raw) })?;
        let h = Handle(raw);
        let s = h.0 as *const sys::dp_opschema;
        let text = |p: *const c_char| unsafe { borrowed_str(p) }.to_owned();
        let mut args = Vec::new();
        for i in 0..unsafe { sys::dp_opschema_num_args(s) } {
            // The default is a dp_argdef view into the schema, valid while `h` lives.
            let default = match ArgDef::wrap(unsafe { sys::dp_opschema_arg_default(s, i) }) {
                Some(d) => Some(ArgValue::read(&d)?),
                None => None,
            };
            args.push(OpArg {
                name: text(unsafe { sys::dp_opschema_arg_name(s, i) }),
                kind: ArgKind::from_raw(unsafe { sys::dp_opschema_arg_kind(s, i) }),
                doc: text(unsafe { sys::dp_opschema_arg_doc(s, i) }),
                required: unsafe { sys::dp_opschema_arg_required(s, i) } != 0,
                default,
                default_text: text(unsafe { sys::dp_opschema_arg_default_text(s, i) }),
            });
        }
        let mut inplace = Vec::new();
        for i in 0..unsafe { sys::dp_opschema_num_inplace(s) } {
            let (mut input, mut output) = (0i32, 0i32);
            let rule = match unsafe { sys::dp_opschema_inplace_at(s, i, &mut input, &mut output) } {
                sys::DP_INPLACE_ENFORCED => InplaceRule::Enforced,
                _ => InplaceRule::Allowed,
            };
            inplace.push(InplacePair { input: input as usize, output: output as usize, rule });
        }
        let (mut kernels, mut engines) = (Vec::new(), Vec::new());
        for d in [DeviceType::Cpu, DeviceType::Cuda] {
            if unsafe { sys::dp_opschema_has_kernel(s, d.value()) } == 0 {
                continue;
            }
            kernels.push(d);
            let e = StringList::fill(|o| unsafe { sys::dp_opschema_engines(s, d.value(), o) })?.into_vec();
            if !e.is_empty() {
                engines.push((d, e));
            }
        }
        let shift = unsafe { sys::dp_opschema_inplace_shift(s) };
        Ok(OpSchema {
            op_type: text(unsafe { sys::dp_opschema_type(s) }),
            doc: text(unsafe { sys::dp_opschema_doc(s) }),
            min_inputs: unsafe { sys::dp_opschema_min_inputs(s) },
            max_inputs: unsafe { sys::dp_opschema_max_inputs(s) },
            min_outputs: unsafe { sys::dp_opschema_min_outputs(s) },
            max_outputs: unsafe { sys::dp_opschema_max_outputs(s) },
            input_names: (0..unsafe { sys::dp_opschema_num_named_inputs(s) })
                .map(|i| text(unsafe { sys::dp_opschema_input_name(s, i) }))
                .collect(),
            output_names: (0..unsafe { sys::dp_opschema_num_named_outputs(s) })
                .map(|i| text(unsafe { sys::dp_opschema_output_name(s, i) }))
                .collect(),
            args,
            inplace,
            inplace_shift: if shift >= 0 { Some(shift as usize) } else { None },
            kernels,
            engines,
            gradient: match unsafe { sys::dp_opschema_gradient(s) } {
                sys::DP_GRADIENT_UNDECLARED => GradientKind::Undeclared,
                sys::DP_GRADIENT_DIFFERENTIABLE => GradientKind::Differentiable,
                sys::DP_GRADIENT_NOT_DIFFERENTIABLE => GradientKind::NotDifferentiable,
                sys::DP_GRADIENT_STOP => GradientKind::Stop,
                g => GradientKind::Other(g),
            },
        })
    }

    /// The argument named `name`.
    pub fn arg(&self, name: &str) -> Option<&OpArg> {
        self.args.iter().find(|a| a.name == name)
    }
}
