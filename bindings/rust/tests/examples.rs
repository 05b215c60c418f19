//! The examples as a user runs them: the training port under a pseudo-terminal
//! and with a pipe (tests/check_progress.py: a progress line on the terminal
//! only, the same lines otherwise), writing a checkpoint; then the serving
//! example from 4 threads on that checkpoint, which must classify the test set
//! exactly as the training port's inference net did. Returns early (passing,
//! with a note) without the data set or python3.
use std::path::{Path, PathBuf};
use std::process::Command;

const DATA: &str = "/usr/share/datasets/fashion-mnist";

fn example(name: &str) -> PathBuf {
    // target/<profile>/deps/<this test> -> target/<profile>/examples/
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("examples").join(name)
}

/// The number after `key` in `text`.
fn value_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let rest = &text[text.find(key)? + key.len()..];
    Some(rest.split_whitespace().next().unwrap_or(""))
}

#[test]
fn training_port_draws_progress_and_serve_matches_its_inference_net() {
    let python_ok = Command::new("python3").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    if !Path::new(DATA).exists() || !python_ok {
        eprintln!("note: no {} or no python3; nothing to run", DATA);
        return;
    }
    let (train, serve) = (example("train_fashion_mnist"), example("serve"));
    assert!(train.exists() && serve.exists(), "examples not built at {:?}", train.parent());
    let ckpt = common::temp_dir("examples");
    let nets = common::repo_root().join("samples/nets");
    let mut cmd = Command::new("python3");
    cmd.arg(common::repo_root().join("tests/check_progress.py")).arg(&train);
    cmd.args(["--limit", "1024", "--epochs", "1", "--checkpoint", &ckpt, "--nets"]).arg(&nets);
    for v in ["DP_WORLD_SIZE", "DP_RANK", "DP_STORE", "DP_TIMEOUT_MS", "DP_INTERFACE", "DP_RUN_ID"] {
        cmd.env_remove(v);
    }
    let out = cmd.output().expect("run check_progress.py");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "check_progress.py failed:\n{}{}", text, String::from_utf8_lossy(&out.stderr));
    let inferred = value_after(&text, "inference: test_acc=").expect("an inference line").to_owned();

    let out = Command::new(&serve)
        .args(["--checkpoint", &ckpt, "--workers", "4", "--batch", "50", "--nets"])
        .arg(&nets)
        .output()
        .expect("run serve");
    let served = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "serve failed: {}{}", served, String::from_utf8_lossy(&out.stderr));
    assert!(served.contains("from 4 workers:"), "{}", served);
    assert_eq!(value_after(&served, "test_acc="), Some(inferred.as_str()), "{}", served);
    let _ = std::fs::remove_dir_all(ckpt);
}

mod common;
