//! Print ops that the async executor's own worker threads run (run_async:
//! the caller runs none, waiting does not help) reach the Rust closure on
//! those threads. A file of its own: the log callback is process wide.
use dp::log::{self, Level};
use dp::{Net, NetDef, Tensor, Workspace};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

#[test]
fn print_ops_log_from_dp_worker_threads() {
    let seen: Arc<Mutex<Vec<(String, ThreadId)>>> = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    log::set_callback(Level::Info, move |_, msg| {
        if msg.contains("(Print)") {
            sink.lock().unwrap().push((msg.to_owned(), std::thread::current().id()));
        }
    })
    .unwrap();

    let ops = vec![r#"{"type":"Print","inputs":["x"],"args":[{"name":"limit","i":2}]}"#; 8].join(",");
    let json =
        format!(r#"{{"name":"printer","executor":"Async","num_workers":2,"external_inputs":["x"],"ops":[{}]}}"#, ops);
    let def = NetDef::from_json(&json).unwrap();
    let ws = Workspace::new().unwrap();
    ws.feed("x", &Tensor::new(&[3], &[1.5f32, -2.0, 3.0]).unwrap()).unwrap();
    let net = Net::new(&ws, &def, None).unwrap();
    let mut run = net.run_async().unwrap();
    run.wait(60_000).unwrap();
    drop(run);
    log::reset(Level::Warning).unwrap();

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 8, "{:?}", *seen);
    assert!(seen[0].0.contains("'x' float32 [3] = [1.5, -2, ...]"), "{}", seen[0].0);
    let me = std::thread::current().id();
    assert!(seen.iter().all(|(_, id)| *id != me), "a Print ran on the caller's thread");
}
