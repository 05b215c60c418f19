//! The op catalogue: every type listed has a schema and a CPU kernel; one
//! type's inputs, outputs, arguments and defaults, in-place rules, kernels and
//! gradient; unknown types name the nearest one.
use dp::{
    build_info, op_types, ArgKind, ArgValue, Code, DeviceType, GradientKind, InplacePair, InplaceRule, NetDef,
    OpSchema,
};

#[test]
fn every_listed_type_has_a_schema_and_a_cpu_kernel() {
    let types = op_types().unwrap();
    assert!(types.len() >= 70, "{} types", types.len());
    assert!(types.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
    for t in ["Relu", "ReluGradient", "Sub", "Div", "SquaredL2Distance"] {
        assert!(types.iter().any(|x| x == t), "{} missing", t);
    }
    for t in &types {
        let s = OpSchema::of(t).unwrap();
        assert_eq!(&s.op_type, t);
        assert!(!s.doc.is_empty(), "{} has no doc", t);
        assert_eq!(s.kernels.first(), Some(&DeviceType::Cpu), "{}", t);
    }
}

#[test]
fn fc_schema() {
    let s = OpSchema::of("FC").unwrap();
    assert_eq!((s.min_inputs, s.max_inputs, s.min_outputs, s.max_outputs), (3, 3, 1, 1));
    assert_eq!(s.input_names, ["X", "W", "b"]);
    assert_eq!(s.output_names, ["Y"]);
    assert_eq!(s.args.len(), 3);
    assert!(s.inplace.is_empty());
    assert_eq!(s.inplace_shift, None);
    assert_eq!(s.gradient, GradientKind::Differentiable);
    let axis = s.arg("axis").unwrap();
    assert_eq!(axis.kind, ArgKind::Int);
    assert!(!axis.required && !axis.doc.is_empty());
    assert_eq!(axis.default, Some(ArgValue::Int(1)));
    assert_eq!(axis.default_text, "1");
    let act = s.arg("activation").unwrap();
    assert_eq!(act.default, Some(ArgValue::String("none".into())));
    assert_eq!(act.default_text, "\"none\"");
    assert!(s.arg("no_such").is_none());
}

#[test]
fn defaults_required_and_described() {
    let lr = OpSchema::of("LearningRate").unwrap();
    let base = lr.arg("base_lr").unwrap();
    assert!(base.required && base.default.is_none() && base.default_text.is_empty());
    assert_eq!(lr.arg("gamma").unwrap().default, Some(ArgValue::Float(0.1)));
    let seed = OpSchema::of("Dropout").unwrap().arg("seed").unwrap().clone();
    assert_eq!(seed.default, None);
    assert_eq!(seed.default_text, "a hash of output 0's name");
    // A float argument's default is a float even where it reads as an integer.
    assert_eq!(OpSchema::of("Scale").unwrap().arg("scale").unwrap().default, Some(ArgValue::Float(1.0)));
    let shape = OpSchema::of("ConstantFill").unwrap().arg("shape").unwrap().clone();
    assert_eq!(shape.kind, ArgKind::Ints);
    assert_eq!(shape.default, Some(ArgValue::Ints(vec![])));
    assert_eq!(shape.default_text, "[]");
}

#[test]
fn inplace_kernels_gradients() {
    let allowed = |input, output| InplacePair { input, output, rule: InplaceRule::Allowed };
    let enforced = |input, output| InplacePair { input, output, rule: InplaceRule::Enforced };
    assert_eq!(OpSchema::of("Add").unwrap().inplace, [allowed(0, 0), allowed(1, 0)]);
    assert_eq!(OpSchema::of("SpatialBN").unwrap().inplace, [enforced(3, 1), enforced(4, 2), allowed(0, 0)]);
    let ar = OpSchema::of("Allreduce").unwrap();
    assert!(ar.inplace.is_empty());
    assert_eq!(ar.inplace_shift, Some(1));
    assert_eq!(ar.max_inputs, i32::MAX);
    let relu = OpSchema::of("Relu").unwrap();
    let want = if build_info().unwrap().cuda { vec![DeviceType::Cpu, DeviceType::Cuda] } else { vec![DeviceType::Cpu] };
    assert_eq!(relu.kernels, want);
    assert!(relu.engines.is_empty());
    for (t, g) in [
        ("Relu", GradientKind::Differentiable),
        ("Accuracy", GradientKind::NotDifferentiable),
        ("StopGradient", GradientKind::Stop),
        ("ReluGradient", GradientKind::Undeclared),
        ("SquaredL2Distance", GradientKind::Differentiable),
    ] {
        assert_eq!(OpSchema::of(t).unwrap().gradient, g, "{}", t);
    }
}

#[test]
fn unknown_types_name_the_nearest() {
    let e = OpSchema::of("Relux").unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("did you mean 'Relu'?"), "{}", e.message());
    assert_eq!(OpSchema::of("Relu\0x").unwrap_err().code(), Code::InvalidArgument);
    let e = NetDef::from_json(r#"{"external_inputs":["x"],"ops":[{"type":"Relux","inputs":["x"],"outputs":["y"]}]}"#)
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidNet);
    assert!(e.message().contains("did you mean 'Relu'?"), "{}", e.message());
}
