//! Log messages reach a Rust closure from other threads; a panicking
//! closure never unwinds into dp. One test: the callback is process wide.
use dp::log::{self, Level};
use dp::{Net, NetDef, Workspace};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn create_logged_net(name: &str) {
    let def = NetDef::from_json(&format!(r#"{{"name":"{}","ops":[{{"type":"ConstantFill","outputs":["y"]}}]}}"#, name))
        .unwrap();
    let ws = Workspace::new().unwrap();
    Net::new(&ws, &def, None).unwrap().run().unwrap();
}

#[test]
fn callbacks_from_worker_threads() {
    let (tx, rx) = mpsc::channel::<(Level, String, std::thread::ThreadId)>();
    let tx = Mutex::new(tx);
    log::set_callback(Level::Info, move |level, msg| {
        let _ = tx.lock().unwrap().send((level, msg.to_owned(), std::thread::current().id()));
    })
    .unwrap();

    let main_id = std::thread::current().id();
    let workers: Vec<_> = (0..4)
        .map(|i| std::thread::spawn(move || {
            create_logged_net(&format!("logged_{}", i));
            std::thread::current().id()
        }))
        .collect();
    let ids: Vec<_> = workers.into_iter().map(|h| h.join().unwrap()).collect();

    let mut seen = Vec::new();
    while seen.len() < 4 {
        let (level, msg, id) = rx.recv_timeout(Duration::from_secs(30)).expect("a log message within 30 s");
        if let Some(i) = (0..4).find(|i| msg.contains(&format!("net 'logged_{}'", i))) {
            assert_eq!(level, Level::Info);
            assert_ne!(id, main_id);
            assert_eq!(id, ids[i]);
            seen.push(i);
        }
    }

    // Below the minimum level: nothing arrives for the net.
    let hits = Arc::new(Mutex::new(0));
    log::set_callback(Level::Warning, {
        let hits = hits.clone();
        move |_, msg| {
            if msg.contains("net 'quiet'") {
                *hits.lock().unwrap() += 1;
            }
        }
    })
    .unwrap();
    create_logged_net("quiet");
    assert_eq!(*hits.lock().unwrap(), 0);

    // A panicking closure is contained: dp and the test go on.
    let (ptx, prx) = mpsc::channel::<()>();
    let ptx = Mutex::new(ptx);
    log::set_callback(Level::Debug, move |_, msg| {
        if msg.contains("net 'boom'") {
            let _ = ptx.lock().unwrap().send(());
            panic!("panic inside the log callback");
        }
    })
    .unwrap();
    std::thread::spawn(|| create_logged_net("boom")).join().unwrap();
    prx.recv_timeout(Duration::from_secs(30)).expect("the panicking callback ran");
    create_logged_net("after_boom");

    // Changing the routing from inside the callback is refused, not a deadlock.
    let (rtx, rrx) = mpsc::channel::<bool>();
    let rtx = Mutex::new(rtx);
    log::set_callback(Level::Info, move |_, msg| {
        if msg.contains("net 'reentrant'") {
            let refused = log::reset(Level::Warning).is_err();
            let _ = rtx.lock().unwrap().send(refused);
        }
    })
    .unwrap();
    create_logged_net("reentrant");
    assert!(rrx.recv_timeout(Duration::from_secs(30)).unwrap());
    log::reset(Level::Warning).unwrap();
    create_logged_net("back_to_stderr");
}
