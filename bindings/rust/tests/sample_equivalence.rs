//! The C sample and the Rust port (examples/train_fashion_mnist.rs) train
//! to the same final line and the same checkpoint, bit for bit; --resume
//! continues exactly. Returns early (passing, with a note) when the data
//! set or the C sample binary is absent.
use dp::{checkpoint, CheckpointInfo, LoadOptions, Workspace};
use std::path::{Path, PathBuf};
use std::process::Command;

const DATA: &str = "/usr/share/datasets/fashion-mnist";

fn c_sample() -> Option<PathBuf> {
    let build = std::env::var("DP_BUILD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| common::repo_root().join("build-cpu"));
    let p = build.join("samples/train_fashion_mnist");
    if p.exists() {
        Some(p)
    } else {
        None
    }
}

fn rust_example() -> PathBuf {
    // target/<profile>/deps/<this test> -> target/<profile>/examples/
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("examples/train_fashion_mnist")
}

fn run(bin: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new(bin);
    // One process, whatever dp-run's variables say (the trainers read them).
    for v in ["DP_WORLD_SIZE", "DP_RANK", "DP_STORE", "DP_TIMEOUT_MS", "DP_INTERFACE", "DP_RUN_ID"] {
        cmd.env_remove(v);
    }
    let out = cmd.args(args).output().expect("run a trainer");
    assert!(out.status.success(), "{:?} failed: {}", bin, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The final line without its timing.
fn final_line(out: &str) -> String {
    let line = out.lines().filter(|l| l.starts_with("final ")).last().expect("a final line");
    line.split(" samples_per_s=").next().unwrap().to_owned()
}

fn blobs(path: &str) -> Vec<(String, Vec<u8>)> {
    let info = CheckpointInfo::from_file(path).unwrap();
    let names: Vec<String> = info.tensors().iter().map(|t| t.name.to_owned()).collect();
    let ws = Workspace::new().unwrap();
    checkpoint::load(&ws, path, Some(&LoadOptions { lenient: true, ..Default::default() })).unwrap();
    names.into_iter().map(|n| { let b = ws.fetch(&n).unwrap().bytes().to_vec(); (n, b) }).collect()
}

#[test]
fn rust_port_matches_the_c_sample() {
    let c = match c_sample() {
        Some(c) if Path::new(DATA).exists() => c,
        _ => {
            eprintln!("note: no C sample or no {}; nothing to compare", DATA);
            return;
        }
    };
    let r = rust_example();
    assert!(r.exists(), "example not built at {:?}", r);
    let (dc, dr, dres) = (common::temp_dir("c"), common::temp_dir("r"), common::temp_dir("res"));
    let common_args = ["--limit", "256", "--epochs", "2", "--seed", "7", "--batch", "32"];
    let c_out = run(&c, &[&common_args[..], &["--checkpoint", &dc]].concat());
    let r_out = run(&r, &[&common_args[..], &["--checkpoint", &dr]].concat());
    assert_eq!(final_line(&r_out), final_line(&c_out));
    let (fc, fr) = (checkpoint::list_steps(&dc).unwrap(), checkpoint::list_steps(&dr).unwrap());
    assert_eq!(fc.len(), 2);
    assert_eq!(fr.len(), 2);
    assert_eq!(CheckpointInfo::from_file(&fr[0]).unwrap().iteration(), 16);
    assert!(blobs(&fc[0]) == blobs(&fr[0]), "the C and Rust checkpoints differ");

    // Interrupted after one epoch, then resumed: the same final line.
    run(&r, &["--limit", "256", "--epochs", "1", "--seed", "7", "--batch", "32", "--checkpoint", &dres]);
    let resumed = run(&r, &[&common_args[..], &["--checkpoint", &dres, "--resume"]].concat());
    assert!(resumed.contains("resumed from"));
    assert_eq!(final_line(&resumed), final_line(&c_out));
    for d in [dc, dr, dres] {
        let _ = std::fs::remove_dir_all(d);
    }
}

mod common;
