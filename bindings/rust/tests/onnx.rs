//! ONNX (Model::from_onnx, to_onnx, save_onnx; since 0.6): a two-layer
//! perceptron exported with the params of its init net and an example batch,
//! at the default opset and at 11, imported from the bytes and from the
//! saved file, computes the same logits and softmax, bit for bit, as the
//! original's inference net; imported with a head and an optimizer it is
//! trainable; each error its code. A build without ONNX fails every call
//! with Code::Unimplemented.
mod common;

use dp::{
    BlobList, Code, Model, ModelNet, Net, OnnxExportOptions, OnnxHead, OnnxImportOptions, OptimizerInfo, Tensor,
    Workspace,
};
use std::collections::BTreeMap;

const MLP: &str = r#"{"name": "mlp",
 "init_net": {"ops": [
  {"type": "XavierFill", "outputs": ["w1"], "args": [{"name": "shape", "ints": [8, 4]}, {"name": "seed", "i": 7}]},
  {"type": "ConstantFill", "outputs": ["b1"], "args": [{"name": "shape", "ints": [8]}, {"name": "value", "f": 0.125}]},
  {"type": "XavierFill", "outputs": ["w2"], "args": [{"name": "shape", "ints": [3, 8]}, {"name": "seed", "i": 9}]},
  {"type": "ConstantFill", "outputs": ["b2"], "args": [{"name": "shape", "ints": [3]}, {"name": "value", "f": -0.25}]}]},
 "forward_net": {"ops": [
  {"type": "FC", "name": "fc1", "inputs": ["x", "w1", "b1"], "outputs": ["h"]},
  {"type": "Relu", "inputs": ["h"], "outputs": ["h"]},
  {"type": "FC", "name": "fc2", "inputs": ["h", "w2", "b2"], "outputs": ["logits"]},
  {"type": "SoftmaxWithLoss", "inputs": ["logits", "label"], "outputs": ["softmax", "loss"]},
  {"type": "Accuracy", "inputs": ["softmax", "label"], "outputs": ["accuracy"]}]},
 "params": ["w1", "b1", "w2", "b2"], "inputs": ["x", "label"], "losses": ["loss"], "metrics": ["accuracy"],
 "optimizer": {"type": "momentum", "lr": 0.1, "momentum": 0.9}}"#;

/// An example batch of 5 samples of 4 features.
fn example() -> Tensor<'static> {
    let mut s = 11u32;
    let x: Vec<f32> = (0..20)
        .map(|_| {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            ((s >> 8) % 2001) as f32 / 500.0 - 2.0
        })
        .collect();
    Tensor::from_vec(&[5, 4], x).unwrap()
}

/// Runs `model`'s init net in `ws`, then its inference net (default outputs)
/// on `x`: each output's name and bytes.
fn infer<'d>(model: &Model, ws: &Workspace<'d>, x: &Tensor<'d>) -> (Vec<String>, BTreeMap<String, Vec<u8>>) {
    let init = model.net(ModelNet::Init).unwrap();
    Net::new(ws, &init, None).unwrap().run().unwrap();
    let def = model.build_inference::<&str>(&[], None).unwrap();
    let net = Net::new(ws, &def, None).unwrap();
    ws.feed("x", x).unwrap();
    net.run().unwrap();
    let outs: Vec<String> = def.external_outputs().iter().map(|s| s.to_string()).collect();
    let got = outs.iter().map(|o| (o.clone(), ws.fetch(o).unwrap().bytes().to_vec())).collect();
    (outs, got)
}

/// Adam with lr, beta1, beta2 and epsilon given; every other field zero
/// ("" for lr_policy): the model format's default.
fn adam() -> OptimizerInfo<'static> {
    OptimizerInfo {
        optimizer_type: "adam",
        lr: 0.01,
        momentum: 0.0,
        nesterov: false,
        beta1: 0.8,
        beta2: 0.99,
        epsilon: 1e-7,
        weight_decay: 0.0,
        lr_policy: "",
        gamma: 0.0,
        stepsize: 0,
        power: 0.0,
        max_iter: 0,
        warmup_iters: 0,
        warmup_start_factor: 0.0,
    }
}

#[test]
fn round_trip_head_and_errors() {
    let info = dp::build_info().unwrap();
    let model = Model::from_json(MLP).unwrap();
    let ws = Workspace::new().unwrap();
    let dir = common::temp_dir("onnx");
    let path = format!("{}/mlp.onnx", dir);
    assert_eq!(info.onnx, !info.onnx_version.is_empty(), "onnx {} version {:?}", info.onnx, info.onnx_version);

    if !info.onnx {
        let e = Model::from_onnx(b"0123456789abcdef", None).err().unwrap();
        assert_eq!(e.code(), Code::Unimplemented, "{}", e);
        let e = Model::from_onnx_file(&path, Some(&OnnxImportOptions::default())).err().unwrap();
        assert_eq!(e.code(), Code::Unimplemented, "{}", e);
        assert_eq!(model.to_onnx(&ws, None).unwrap_err().code(), Code::Unimplemented);
        let e = model.save_onnx(&ws, &path, Some(&OnnxExportOptions::default())).unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented);
        eprintln!("built without ONNX: every ONNX call is Code::Unimplemented");
        return;
    }

    let init = model.net(ModelNet::Init).unwrap();
    Net::new(&ws, &init, None).unwrap().run().unwrap();
    // No example batch yet: the input is not found.
    assert_eq!(model.to_onnx(&ws, None).unwrap_err().code(), Code::NotFound);

    let x = example();
    ws.feed("x", &x).unwrap();
    let reference = model.build_inference::<&str>(&[], None).unwrap();
    Net::new(&ws, &reference, None).unwrap().run().unwrap();
    let outputs: Vec<String> = reference.external_outputs().iter().map(|s| s.to_string()).collect();
    assert_eq!(outputs, vec!["logits", "softmax"]);

    for opset in [0, 11] {
        let options = OnnxExportOptions { opset, ..Default::default() };
        let opts = if opset == 0 { None } else { Some(&options) };
        let bytes = model.to_onnx(&ws, opts).unwrap();
        assert!(bytes.len() > 100, "opset {}: {} bytes", opset, bytes.len());
        model.save_onnx(&ws, &path, opts).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "opset {}: the file differs from to_onnx's bytes", opset);
        let from_bytes = Model::from_onnx(&bytes, None).unwrap();
        let from_file = Model::from_onnx_file(&path, Some(&OnnxImportOptions::default())).unwrap();
        for imported in [&from_bytes, &from_file] {
            assert_eq!(imported.blobs(BlobList::Params).unwrap(), vec!["w1", "b1", "w2", "b2"]);
            assert_eq!(imported.blobs(BlobList::Inputs).unwrap(), vec!["x"]);
            assert!(imported.blobs(BlobList::Losses).unwrap().is_empty());
            assert!(!imported.has_optimizer());
            assert_eq!(imported.optimizer().unwrap_err().code(), Code::NotFound);
            let ws2 = Workspace::new().unwrap();
            let (outs, got) = infer(imported, &ws2, &x);
            assert_eq!(outs, outputs, "opset {}", opset);
            for o in &outputs {
                assert_eq!(&got[o][..], ws.fetch(o).unwrap().bytes(), "opset {}: imported {} differs", opset, o);
            }
        }
    }

    // The logits alone, imported with the softmax cross-entropy head and
    // Adam: trainable, the optimizer as given.
    let logits_only = OnnxExportOptions { outputs: vec!["logits".to_string()], ..Default::default() };
    let logits = model.to_onnx(&ws, Some(&logits_only)).unwrap();
    let head = OnnxImportOptions { head: OnnxHead::SoftmaxCrossEntropy, optimizer: Some(adam()), ..Default::default() };
    let trainable = Model::from_onnx(&logits, Some(&head)).unwrap();
    assert_eq!(trainable.blobs(BlobList::Losses).unwrap(), vec!["loss"]);
    assert_eq!(trainable.blobs(BlobList::Metrics).unwrap(), vec!["accuracy"]);
    assert_eq!(trainable.blobs(BlobList::Inputs).unwrap(), vec!["x", "label"]);
    let back = trainable.optimizer().unwrap();
    assert_eq!(
        (back.optimizer_type, back.lr, back.beta1, back.beta2, back.epsilon, back.lr_policy),
        ("adam", 0.01, 0.8, 0.99, 1e-7, "fixed")
    );
    // The zeros took the defaults: a model with the same optimizer in JSON has them too.
    let json = MLP.replace(
        r#""type": "momentum", "lr": 0.1, "momentum": 0.9"#,
        r#""type": "adam", "lr": 0.01, "beta1": 0.8, "beta2": 0.99, "epsilon": 1e-7"#,
    );
    assert_ne!(json, MLP);
    let json = Model::from_json(&json).unwrap();
    assert_eq!(back, json.optimizer().unwrap());
    trainable.build_training(None).unwrap();
    let named = OnnxImportOptions {
        head: OnnxHead::SoftmaxCrossEntropy,
        labels: Some("y".to_string()),
        ..Default::default()
    };
    assert_eq!(Model::from_onnx(&logits, Some(&named)).unwrap().blobs(BlobList::Inputs).unwrap(), vec!["x", "y"]);

    // Errors, each of its code.
    let code = |r: dp::Result<Model>| r.err().expect("an error").code();
    assert_eq!(code(Model::from_onnx(b"0123456789abcdef", None)), Code::Parse);
    assert_eq!(code(Model::from_onnx(&[], None)), Code::Parse);
    assert_eq!(code(Model::from_onnx_file(&format!("{}/none.onnx", dir), None)), Code::NotFound);
    let taken = OnnxImportOptions { labels: Some("x".to_string()), ..named.clone() };
    assert_eq!(code(Model::from_onnx(&logits, Some(&taken))), Code::InvalidArgument);
    let nul = OnnxImportOptions { labels: Some("a\0b".to_string()), ..Default::default() };
    assert_eq!(code(Model::from_onnx(&logits, Some(&nul))), Code::InvalidArgument);
    let bad = |o: OnnxExportOptions| model.to_onnx(&ws, Some(&o)).unwrap_err().code();
    assert_eq!(bad(OnnxExportOptions { opset: 10, ..Default::default() }), Code::InvalidArgument);
    assert_eq!(bad(OnnxExportOptions { param_prefix: Some("cpu_0/".into()), ..Default::default() }), Code::NotFound);
    assert_eq!(bad(OnnxExportOptions { outputs: vec!["q".into()], ..Default::default() }), Code::NotFound);
    let unwritable = format!("{}/no_such_dir/m.onnx", dir);
    assert_eq!(model.save_onnx(&ws, &unwritable, None).unwrap_err().code(), Code::Io);
    assert!(!std::path::Path::new(&format!("{}/no_such_dir", dir)).exists());
    let _ = std::fs::remove_dir_all(&dir);
}
