//! The workspace from several threads (issue 25, item 12: eight threads
//! feeding one blob crashed the process): 8 threads feed and fetch one blob
//! and one each, ask for and list blobs, while another thread runs a net
//! that reads blobs they fetch. The workspace keeps blob calls and runs
//! apart: a blob call while a run is in flight fails with
//! FailedPrecondition (the thread tries again), a run waits for the blob
//! calls in flight.
use dp::{Code, Net, NetDef, Tensor, Workspace};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;

const READER: &str = r#"{"name":"reader","external_inputs":["w","b"],"ops":[
 {"type":"Scale","inputs":["w"],"outputs":["y"],"args":[{"name":"scale","f":2}]},
 {"type":"Scale","inputs":["b"],"outputs":["z"],"args":[{"name":"scale","f":3}]}]}"#;

/// `f` again while a run keeps the workspace (bounded: the runs end).
fn retry<T>(refused: &AtomicUsize, mut f: impl FnMut() -> dp::Result<T>) -> T {
    loop {
        match f() {
            Err(e) if e.code() == Code::FailedPrecondition => {
                refused.fetch_add(1, Ordering::Relaxed);
                std::thread::yield_now();
            }
            r => return r.unwrap(),
        }
    }
}

/// The blob's float32 values, all equal: (count, value).
fn uniform(t: &Tensor<'_>) -> (usize, f32) {
    let v = t.to_vec::<f32>().unwrap();
    assert_eq!(t.dims().len(), 1);
    assert!(!v.is_empty() && v.iter().all(|x| *x == v[0]), "torn: {:?}", v);
    (v.len(), v[0])
}

/// Thread t's k-th length for the shared blob, whose values are 1000 t + k.
fn shared_len(t: usize, k: usize) -> usize {
    1 + (t + k) % 5
}

#[test]
fn feeds_and_fetches_from_eight_threads_while_a_net_runs() {
    const THREADS: usize = 8;
    const ITERS: usize = 200;
    const RUNS: usize = 50;
    let ws = Workspace::new().unwrap();
    ws.feed("w", &Tensor::new(&[64], &[0.5f32; 64]).unwrap()).unwrap();
    ws.feed("b", &Tensor::new(&[1], &[-1f32]).unwrap()).unwrap();
    let def = NetDef::from_json(READER).unwrap();
    let refused = AtomicUsize::new(0);
    let start = Barrier::new(THREADS + 1);
    std::thread::scope(|s| {
        s.spawn(|| {
            let net = Net::new(&ws, &def, None).unwrap();
            start.wait();
            for _ in 0..RUNS {
                net.run().unwrap();
            }
        });
        for t in 0..THREADS {
            let (ws, refused, start) = (&ws, &refused, &start);
            s.spawn(move || {
                let own = format!("own/{}", t);
                start.wait();
                for k in 0..ITERS {
                    let n = shared_len(t, k);
                    let shared = Tensor::new(&[n as i64], &vec![(1000 * t + k) as f32; n]).unwrap();
                    retry(refused, || ws.feed("shared", &shared));
                    retry(refused, || ws.feed(&own, &Tensor::new(&[3], &[k as f32; 3]).unwrap()));
                    let (n, v) = uniform(&retry(refused, || ws.fetch("shared")));
                    assert_eq!(n, shared_len(v as usize / 1000, v as usize % 1000));
                    assert_eq!(uniform(&retry(refused, || ws.fetch(&own))), (3, k as f32));
                    assert_eq!(uniform(&retry(refused, || ws.fetch("w"))), (64, 0.5));
                    // Neither of these touches a blob's contents: no refusal.
                    assert!(ws.has_blob("shared").unwrap());
                    assert!(!ws.list_blobs("own/").unwrap().is_empty());
                }
            });
        }
    });
    assert_eq!(uniform(&ws.fetch("y").unwrap()), (64, 1.0));
    assert_eq!(uniform(&ws.fetch("z").unwrap()), (1, -3.0));
    assert_eq!(ws.list_blobs("own/").unwrap().len(), THREADS);
    println!("blob calls refused during runs (and tried again): {}", refused.load(Ordering::Relaxed));
}

#[test]
fn a_second_run_on_the_workspace_fails_while_one_is_in_flight() {
    let ws = Workspace::new().unwrap();
    ws.feed("w", &Tensor::new(&[1], &[1f32]).unwrap()).unwrap();
    ws.feed("b", &Tensor::new(&[1], &[1f32]).unwrap()).unwrap();
    let def = NetDef::from_json(READER).unwrap();
    let a = Net::new(&ws, &def, None).unwrap();
    let b = Net::new(&ws, &def, None).unwrap();
    let mut run = a.run_async().unwrap();
    let e = b.run().unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().starts_with("Net::run: a net is running on this workspace"), "{}", e);
    assert_eq!(ws.fetch("w").unwrap_err().code(), Code::FailedPrecondition);
    assert!(ws.has_blob("w").unwrap()); // reads no blob's contents
    run.wait(-1).unwrap();
    drop(run);
    b.run().unwrap();
    assert_eq!(ws.fetch("y").unwrap().to_vec::<f32>().unwrap(), vec![2.0]);
}
