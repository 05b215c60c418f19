//! Helpers shared by the integration tests.
#![allow(dead_code)]
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fashion_mlp_path() -> String {
    repo_root().join("samples/nets/fashion_mlp.json").to_string_lossy().into_owned()
}

/// A fresh, empty directory for this test, unique per process and call.
pub fn temp_dir(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let base = std::env::var("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    let d = base.join(format!("dp_rust_{}_{}_{}", tag, std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.to_string_lossy().into_owned()
}

/// Deterministic pseudo-random batch for the fashion MLP: data [b, 784] in
/// [-1, 1) and labels [b] in 0..10.
pub fn batch(b: usize, seed: u64) -> (Vec<f32>, Vec<i32>) {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) | 1;
    let mut next = move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545F4914F6CDD1D)
    };
    let x = (0..b * 784).map(|_| ((next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0).collect();
    let y = (0..b).map(|_| (next() >> 33) as i32 % 10).collect();
    (x, y)
}
