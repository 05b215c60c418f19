//! A fed blob that no net of the workspace reads (a misspelt name): a
//! warning through the log callback by default, the run going on; with
//! NetOptions::unread_feed_error, Code::NotFound before any op runs. One
//! test: the log callback is process wide.
use dp::log::{self, Level};
use dp::{Code, Net, NetDef, NetOptions, Tensor, Workspace};
use std::sync::{Arc, Mutex};

const RELU: &str = r#"{"name":"relu","external_inputs":["x"],"ops":[
  {"type":"Relu","inputs":["x"],"outputs":["y"]}]}"#;

#[test]
fn unread_feeds_warn_or_fail() {
    let warnings = Arc::new(Mutex::new(Vec::<String>::new()));
    log::set_callback(Level::Warning, {
        let warnings = warnings.clone();
        move |_, msg| {
            if msg.contains("fed blob") {
                warnings.lock().unwrap().push(msg.to_owned());
            }
        }
    })
    .unwrap();

    let ws = Workspace::new().unwrap();
    let def = NetDef::from_json(RELU).unwrap();
    let strict =
        Net::new(&ws, &def, Some(&NetOptions { unread_feed_error: true, ..Default::default() })).unwrap();
    let lenient = Net::new(&ws, &def, None).unwrap();
    assert!(!NetOptions::default().unread_feed_error);
    let t = Tensor::new(&[2], &[1.0f32, -1.0]).unwrap();

    ws.feed("x", &t).unwrap();
    strict.run().unwrap();
    ws.feed("X", &t).unwrap();
    let e = strict.run().unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("fed blob 'X'") && e.message().contains("did you mean 'x'?"), "{}", e.message());
    strict.run().unwrap(); // reported: the next run goes on

    ws.feed("X", &t).unwrap();
    lenient.run().unwrap();
    let w = warnings.lock().unwrap().clone();
    assert_eq!(w.len(), 1, "{:?}", w);
    assert!(w[0].contains("fed blob 'X'") && w[0].contains("did you mean 'x'?"), "{}", w[0]);
    log::reset(Level::Warning).unwrap();
}

/// The CUDA graphs option reaches dp_net_create; on a CPU net, which never
/// runs as a graph, every setting runs the same.
#[test]
fn cuda_graphs_option() {
    use dp::CudaGraphs;
    assert_eq!(NetOptions::default().cuda_graphs, CudaGraphs::Default);
    let ws = Workspace::new().unwrap();
    let def = NetDef::from_json(RELU).unwrap();
    let t = Tensor::new(&[2], &[1.0f32, -1.0]).unwrap();
    for g in [CudaGraphs::Default, CudaGraphs::On, CudaGraphs::Off] {
        let net = Net::new(&ws, &def, Some(&NetOptions { cuda_graphs: g, ..Default::default() })).unwrap();
        ws.feed("x", &t).unwrap();
        net.run().unwrap();
        let y = ws.fetch("y").unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![1.0, 0.0]);
    }
}

/// The math mode option reaches dp_net_create; a CPU net computes in float32
/// in every mode.
#[test]
fn math_mode_option() {
    use dp::MathMode;
    assert_eq!(NetOptions::default().math_mode, MathMode::Default);
    let ws = Workspace::new().unwrap();
    let def = NetDef::from_json(RELU).unwrap();
    let t = Tensor::new(&[2], &[1.0f32, -1.0]).unwrap();
    for m in [MathMode::Default, MathMode::Fp32, MathMode::Tf32, MathMode::Bf16, MathMode::Fp16] {
        let net = Net::new(&ws, &def, Some(&NetOptions { math_mode: m, ..Default::default() })).unwrap();
        ws.feed("x", &t).unwrap();
        net.run().unwrap();
        let y = ws.fetch("y").unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![1.0, 0.0]);
    }
}
