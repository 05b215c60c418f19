//! Inference nets (Model::build_inference): the eval net's softmax without
//! labels, in workspaces that share the trained param tensors; served from
//! threads, each with its own workspace and net, every run equal to the
//! serial one.
use dp::{Code, InferenceOptions, Model, Net, NetDef, Tensor, Workspace};

const MODEL: &str = r#"{"name": "tiny",
 "init_net": {"ops": [
  {"type": "XavierFill", "outputs": ["w1"], "args": [{"name": "shape", "ints": [16, 8]}, {"name": "seed", "i": 1}]},
  {"type": "ConstantFill", "outputs": ["b1"], "args": [{"name": "shape", "ints": [16]}]},
  {"type": "XavierFill", "outputs": ["w2"], "args": [{"name": "shape", "ints": [3, 16]}, {"name": "seed", "i": 2}]},
  {"type": "ConstantFill", "outputs": ["b2"], "args": [{"name": "shape", "ints": [3]}]}]},
 "forward_net": {"ops": [
  {"type": "FC", "inputs": ["data", "w1", "b1"], "outputs": ["h"]},
  {"type": "Relu", "inputs": ["h"], "outputs": ["h"]},
  {"type": "FC", "inputs": ["h", "w2", "b2"], "outputs": ["logits"]},
  {"type": "SoftmaxWithLoss", "inputs": ["logits", "label"], "outputs": ["softmax", "loss"]},
  {"type": "Accuracy", "inputs": ["softmax", "label"], "outputs": ["accuracy"]}]},
 "params": ["w1", "b1", "w2", "b2"], "inputs": ["data", "label"], "losses": ["loss"], "metrics": ["accuracy"],
 "optimizer": {"type": "adam", "lr": 0.05}}"#;

const B: i64 = 16;

fn batch(seed: u32) -> (Vec<f32>, Vec<i32>) {
    let mut s = 2654435761u32.wrapping_mul(seed + 1);
    let mut x = Vec::new();
    let mut y = Vec::new();
    for _ in 0..B {
        for _ in 0..8 {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            x.push(((s >> 8) as f64 / 16777216.0 * 4.0 - 2.0) as f32);
        }
        let row = &x[x.len() - 8..];
        y.push((row[0] > 0.0) as i32 + (row[1] > 0.5) as i32);
    }
    (x, y)
}

fn feed(ws: &Workspace<'_>, seed: u32, label: bool) {
    let (x, y) = batch(seed);
    ws.feed("data", &Tensor::from_vec(&[B, 8], x).unwrap()).unwrap();
    if label {
        ws.feed("label", &Tensor::from_vec(&[B], y).unwrap()).unwrap();
    }
}

/// Trains a few steps; returns the workspace, with the eval net's blobs of batch 100.
fn trained(model: &Model) -> Workspace<'static> {
    let nets = model.build_training(None).unwrap();
    let ws = Workspace::new().unwrap();
    {
        let init = Net::new(&ws, &nets.init, None).unwrap();
        let train = Net::new(&ws, &nets.train, None).unwrap();
        let eval = Net::new(&ws, &nets.eval, None).unwrap();
        init.run().unwrap();
        for s in 0..6 {
            feed(&ws, s, true);
            train.run().unwrap();
        }
        feed(&ws, 100, true);
        eval.run().unwrap();
    }
    ws
}

/// The inference net's params, fetched from the trained workspace.
fn params(def: &NetDef, trained: &Workspace<'static>) -> Vec<(String, Tensor<'static>)> {
    def.external_inputs().into_iter().filter(|x| *x != "data").map(|x| {
        let t = trained.fetch(x).unwrap();
        (x.to_string(), t)
    }).collect()
}

#[test]
fn softmax_without_labels_equals_the_eval_net() {
    let model = Model::from_json(MODEL).unwrap();
    let trained = trained(&model);
    let def = model.build_inference(&["softmax"], None).unwrap();
    assert_eq!(def.external_outputs(), vec!["softmax"]);
    assert!(!def.external_inputs().contains(&"label"));
    let ws = Workspace::new().unwrap();
    for (name, t) in params(&def, &trained) {
        ws.feed(&name, &t).unwrap();
        // Shared, not copied.
        assert_eq!(ws.fetch(&name).unwrap().bytes().as_ptr(), t.bytes().as_ptr());
    }
    feed(&ws, 100, false);
    Net::new(&ws, &def, None).unwrap().run().unwrap();
    assert_eq!(ws.fetch("softmax").unwrap().bytes(), trained.fetch("softmax").unwrap().bytes());
    assert!(!ws.has_blob("label").unwrap());

    let dflt = model.build_inference::<&str>(&[], Some(&InferenceOptions { no_fuse: true })).unwrap();
    assert_eq!(dflt.external_outputs(), vec!["logits", "softmax"]);
    assert_eq!(dflt.num_ops(), 4); // FC, Relu, FC, Softmax
    let e = model.build_inference(&["sofmax"], None).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("did you mean 'softmax'?"), "{}", e.message());
    assert_eq!(model.build_inference(&["h", "h"], None).unwrap_err().code(), Code::InvalidArgument);
}

#[test]
fn served_from_threads_each_with_its_own_workspace() {
    let model = Model::from_json(MODEL).unwrap();
    let trained = trained(&model);
    let def = model.build_inference(&["softmax"], None).unwrap();
    let params = params(&def, &trained);
    const WORKERS: u32 = 4;
    // The serial result of each worker's batch.
    let want: Vec<Vec<u8>> = {
        let ws = Workspace::new().unwrap();
        for (name, t) in &params {
            ws.feed(name, t).unwrap();
        }
        let net = Net::new(&ws, &def, None).unwrap();
        (0..WORKERS).map(|w| {
            feed(&ws, 200 + w, false);
            net.run().unwrap();
            ws.fetch("softmax").unwrap().bytes().to_vec()
        }).collect()
    };
    assert_ne!(want[0], want[1]);
    std::thread::scope(|s| {
        for w in 0..WORKERS {
            let (def, params, want) = (&def, &params, &want);
            s.spawn(move || {
                let ws = Workspace::new().unwrap();
                for (name, t) in params {
                    ws.feed(name, t).unwrap();
                }
                let net = Net::new(&ws, def, None).unwrap();
                for _ in 0..20 {
                    feed(&ws, 200 + w, false);
                    net.run().unwrap();
                    assert_eq!(ws.fetch("softmax").unwrap().bytes(), &want[w as usize][..], "worker {}", w);
                }
            });
        }
    });
}
