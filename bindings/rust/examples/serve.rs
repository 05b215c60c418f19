//! serve: classifies the Fashion-MNIST test set from several threads at once,
//! as a service would: the model's inference net (`Model::build_inference`:
//! "data" to "softmax", no labels, loss or metric), trained params loaded once
//! from a checkpoint that train_fashion_mnist --checkpoint wrote, and per
//! worker thread a workspace and a net of its own, each fed the same param
//! tensors (shared, not copied: the params are in memory once).
//!
//!   serve --checkpoint DIR|FILE [--model mlp|cnn|PATH.json] [--workers N]
//!         [--batch B] [--data DIR] [--nets DIR]
//!
//! Each request is B test images; the workers take the next request until
//! the test set is done. It prints one line
//!   served N images in R requests of B from W workers: test_acc=<acc> images_per_s=<rate>
use dp::{checkpoint, BlobList, LoadOptions, Model, Net, NetDef, Tensor, Workspace};
use std::path::Path;
use std::process::exit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

const PIXELS: usize = 28 * 28;
const CLASSES: usize = 10;

fn check<T>(r: dp::Result<T>, what: &str) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("serve: {} failed: [{}] {}", what, e.code().name(), e.message());
        exit(1)
    })
}

fn usage() -> ! {
    eprintln!(
        "usage: serve --checkpoint DIR|FILE [--model mlp|cnn|PATH.json] [--workers N] [--batch B] [--data DIR] \
         [--nets DIR]"
    );
    exit(2)
}

/// The test images (standardised as the training sample does) and labels.
fn test_set(dir: &str) -> (Vec<f32>, Vec<i32>) {
    let images = check(
        Tensor::from_idx_file(&format!("{}/t10k-images-idx3-ubyte.gz", dir)),
        "reading the test images (see --data; Debian: dataset-fashion-mnist)",
    );
    let labels = check(Tensor::from_idx_file(&format!("{}/t10k-labels-idx1-ubyte.gz", dir)), "reading the test labels");
    let (mean, inv_std) = (0.2860f32, 1.0f32 / 0.3530f32);
    let x = images.bytes().iter().map(|&p| (p as f32 * (1.0f32 / 255.0f32) - mean) * inv_std).collect();
    let y = labels.bytes().iter().map(|&v| v as i32).collect();
    (x, y)
}

/// One worker: its own workspace, fed the shared params, and its own net.
/// Returns how many images it classified correctly.
fn worker(
    def: &NetDef, params: &[(String, Tensor<'static>)], x: &[f32], y: &[i32], batch: usize, next: &AtomicUsize,
) -> dp::Result<usize> {
    let ws = Workspace::new()?;
    for (name, t) in params {
        ws.feed(name, t)?; // shared, not copied
    }
    let net = Net::new(&ws, def, None)?;
    let mut correct = 0;
    loop {
        let first = next.fetch_add(batch, Ordering::Relaxed);
        if first >= y.len() {
            return Ok(correct);
        }
        let b = batch.min(y.len() - first);
        ws.feed("data", &Tensor::new(&[b as i64, 1, 28, 28], &x[first * PIXELS..(first + b) * PIXELS])?)?;
        net.run()?;
        let probs = ws.fetch("softmax")?;
        let p = probs.as_slice::<f32>()?;
        for i in 0..b {
            let mut best = 0;
            for c in 1..CLASSES {
                if p[i * CLASSES + c] > p[i * CLASSES + best] {
                    best = c;
                }
            }
            correct += (best as i32 == y[first + i]) as usize;
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (mut model_arg, mut ckpt, mut data_dir, mut nets_dir) =
        ("mlp".to_string(), String::new(), "/usr/share/datasets/fashion-mnist".to_string(), None);
    let (mut workers, mut batch) = (4usize, 1usize);
    let mut i = 1;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_else(|| usage());
        match args[i].as_str() {
            "--model" => model_arg = v,
            "--checkpoint" => ckpt = v,
            "--data" => data_dir = v,
            "--nets" => nets_dir = Some(v),
            "--workers" => workers = v.parse().ok().filter(|&n| (1..=1024).contains(&n)).unwrap_or_else(|| usage()),
            "--batch" => batch = v.parse().ok().filter(|&n| (1..=65536).contains(&n)).unwrap_or_else(|| usage()),
            _ => usage(),
        }
        i += 2;
    }
    if ckpt.is_empty() {
        usage();
    }
    let model_path = match model_arg.as_str() {
        "mlp" | "cnn" => {
            let dir = nets_dir.unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/nets").to_string());
            format!("{}/fashion_{}.json", dir, model_arg)
        }
        p if p.ends_with(".json") => p.to_string(),
        _ => usage(),
    };
    if Path::new(&ckpt).is_dir() {
        let files = check(checkpoint::list_steps(&ckpt), "listing checkpoints");
        ckpt = files.into_iter().next().unwrap_or_else(|| {
            eprintln!("serve: no step checkpoint in {}", ckpt);
            exit(1)
        });
    }

    let (x, y) = test_set(&data_dir);
    let model = check(Model::from_file(&model_path), &model_path);
    let def = check(model.build_inference(&["softmax"], None), "dp_model_build_inference");

    // The params, once: the net's external inputs that are not model inputs,
    // loaded into a workspace of their own (lenient creates the blobs, mmap
    // shares the file's pages), then fetched as tensors every worker feeds.
    let inputs = check(model.blobs(BlobList::Inputs), "the model's inputs");
    let names: Vec<String> =
        def.external_inputs().into_iter().filter(|x| !inputs.iter().any(|i| i == x)).map(String::from).collect();
    let loaded = check(Workspace::new(), "dp_workspace_create");
    let lo = LoadOptions { names: Some(names.clone()), lenient: true, mmap: true, ..Default::default() };
    check(checkpoint::load(&loaded, &ckpt, Some(&lo)), &ckpt);
    let params: Vec<(String, Tensor<'static>)> = names
        .iter()
        .map(|n| (n.clone(), check(loaded.fetch(n), &format!("param '{}' of the model in {}", n, ckpt))))
        .collect();

    let next = AtomicUsize::new(0);
    let start = Instant::now();
    let results: Vec<dp::Result<usize>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| s.spawn(|| worker(&def, &params, &x, &y, batch, &next)))
            .collect();
        handles.into_iter().map(|h| h.join().expect("a worker panicked")).collect()
    });
    let took = start.elapsed().as_secs_f64();
    let mut correct = 0;
    for (w, r) in results.into_iter().enumerate() {
        correct += check(r, &format!("worker {}", w));
    }
    let n = y.len();
    println!(
        "served {} images in {} requests of {} from {} workers: test_acc={:.4} images_per_s={:.1}",
        n,
        (n + batch - 1) / batch,
        batch,
        workers,
        correct as f64 / n as f64,
        n as f64 / took
    );
}
