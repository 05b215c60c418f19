//! train_fashion_mnist: the C sample (samples/train_fashion_mnist.c) ported
//! to the safe Rust API, with the same flags and output lines and its batches
//! from dp's input pipeline (`dp::Loader`); for the same seed its final line
//! (timing aside) equals the C sample's. After training it serves the model
//! through its inference net (`Model::build_inference`: "data" to "softmax",
//! no labels) in a workspace of its own sharing the trained param tensors;
//! when stdout is a terminal it redraws a progress line within each epoch.
//!
//!   train_fashion_mnist [--model mlp|cnn|PATH.json] [--epochs E] [--batch B]
//!                       [--lr LR] [--seed S] [--data DIR] [--nets DIR]
//!                       [--limit N] [--min-acc A] [--devices cpu:N|cuda:N]
//!                       [--checkpoint DIR [--resume] [--keep K]]
use dp::{checkpoint, DeviceType, Loader, LoaderOptions, Model, Net, ParallelModel, Tensor, TrainingOptions, Workspace};
use std::io::Write;
use std::path::Path;
use std::process::exit;
use std::time::{Duration, Instant};

const IMAGE_PIXELS: usize = 28 * 28;
const NUM_CLASSES: i32 = 10;
const EVAL_BATCH: usize = 1000;
const PREDICTIONS_SHOWN: usize = 8;

extern "C" {
    fn isatty(fd: i32) -> i32; // POSIX, from the C library std links
}

/// An epoch's progress line, drawn only when stdout is a terminal: redrawn in
/// place at most every 250 ms, erased before the epoch's own line.
struct Progress {
    on: bool,
    drawn: Option<Instant>,
    width: usize,
}

impl Progress {
    fn draw(&mut self, epoch: i64, epochs: i64, step: usize, steps: usize, batch: usize, t0: Instant) {
        let now = Instant::now();
        if !self.on || self.drawn.map_or(false, |d| now - d < Duration::from_millis(250)) {
            return;
        }
        self.drawn = Some(now);
        let elapsed = (now - t0).as_secs_f64();
        let rate = if elapsed > 0.0 { (step * batch) as f64 / elapsed } else { 0.0 };
        let left = (elapsed / step as f64 * (steps - step) as f64 + 0.5) as u64;
        let line = format!(
            "epoch {}/{} step {}/{} {:.1} samples/s {}:{:02} left",
            epoch, epochs, step, steps, rate, left / 60, left % 60
        );
        let pad = self.width.saturating_sub(line.len());
        print!("\r{}{:pad$}", line, "", pad = pad);
        let _ = std::io::stdout().flush();
        self.width = line.len();
    }

    fn erase(&mut self) {
        if self.on && self.width > 0 {
            print!("\r{:w$}\r", "", w = self.width);
        }
        self.width = 0;
        self.drawn = None;
    }
}

/// Classifies the test set with the inference net ("softmax", no labels) in a
/// workspace of its own fed the trained params (replica 0's for a data-parallel
/// model): shared tensors, not copies. Returns the share whose most probable
/// class (the first on ties, as Accuracy ranks) is the label, and the first
/// predictions.
fn serve(model: &Model, trained: &Workspace<'_>, scope: &str, x: &[f32], y: &[i32]) -> (f64, Vec<i32>) {
    let def = check(model.build_inference(&["softmax"], None), "dp_model_build_inference");
    let ws = check(Workspace::new(), "dp_workspace_create (serving)");
    for name in def.external_inputs() {
        if name == "data" {
            continue; // fed per batch
        }
        let t = check(trained.fetch(&format!("{}{}", scope, name)), name);
        check(ws.feed(name, &t), "sharing a param with the serving workspace");
    }
    let net = check(Net::new(&ws, &def, None), "creating the inference net");
    let (n, mut correct, mut predicted) = (y.len(), 0usize, Vec::new());
    let mut off = 0;
    while off < n {
        let b = EVAL_BATCH.min(n - off);
        let images = check(
            Tensor::from_vec(&[b as i64, 1, 28, 28], x[off * IMAGE_PIXELS..(off + b) * IMAGE_PIXELS].to_vec()),
            "test images",
        );
        check(ws.feed("data", &images), "feeding test images");
        check(net.run(), "running the inference net");
        let probs = check(ws.fetch("softmax"), "softmax");
        let p = check(probs.as_slice::<f32>(), "softmax");
        let classes = NUM_CLASSES as usize;
        for i in 0..b {
            let mut best = 0;
            for c in 1..classes {
                if p[i * classes + c] > p[i * classes + best] {
                    best = c;
                }
            }
            if off + i < PREDICTIONS_SHOWN {
                predicted.push(best as i32);
            }
            correct += (best as i32 == y[off + i]) as usize;
        }
        off += b;
    }
    (if n > 0 { correct as f64 / n as f64 } else { 0.0 }, predicted)
}

fn fail(what: &str, e: dp::Error) -> ! {
    eprintln!("train_fashion_mnist: {} failed: [{}] {}", what, e.code().name(), e.message());
    exit(1)
}

fn check<T>(r: dp::Result<T>, what: &str) -> T {
    r.unwrap_or_else(|e| fail(what, e))
}

fn usage(argv0: &str) -> ! {
    eprintln!(
        "usage: {} [--model mlp|cnn|PATH.json] [--epochs E] [--batch B] [--lr LR] [--seed S]\n          [--data DIR] [--nets DIR] [--limit N] [--min-acc A] [--devices cpu:N|cuda:N]\n          [--checkpoint DIR [--resume] [--keep K]]",
        argv0
    );
    exit(2)
}

fn parse_long(argv0: &str, flag: &str, s: &str, lo: i64, hi: i64) -> i64 {
    match s.parse::<i64>() {
        Ok(v) if v >= lo && v <= hi => v,
        _ => {
            eprintln!("{}: {} must be an integer in {}..{}, got '{}'", argv0, flag, lo, hi, s);
            exit(2)
        }
    }
}

/// One split: images uint8 [N, 28, 28] -> standardised f32; labels -> i32.
fn load_split(dir: &str, split: &str) -> (Vec<f32>, Vec<i32>) {
    let path = format!("{}/{}-images-idx3-ubyte.gz", dir, split);
    let what = format!("reading the Fashion-MNIST images '{}' (see --data; Debian: dataset-fashion-mnist)", path);
    let images = check(Tensor::from_idx_file(&path), &what);
    let d = images.dims().to_vec();
    if images.dtype() != Some(dp::DType::UInt8) || d.len() != 3 || d[1] != 28 || d[2] != 28 {
        eprintln!("train_fashion_mnist: '{}' is not a uint8 [N, 28, 28] image file", path);
        exit(1);
    }
    let n = d[0] as usize;
    let lpath = format!("{}/{}-labels-idx1-ubyte.gz", dir, split);
    let what = format!("reading the Fashion-MNIST labels '{}' (see --data; Debian: dataset-fashion-mnist)", lpath);
    let labels = check(Tensor::from_idx_file(&lpath), &what);
    if labels.ndim() != 1 || labels.dims()[0] as usize != n {
        eprintln!("train_fashion_mnist: '{}' is not a label file [N] matching its images", lpath);
        exit(1);
    }
    let (mean, inv_std) = (0.2860f32, 1.0f32 / 0.3530f32);
    let x = images.bytes().iter().map(|&p| (p as f32 * (1.0f32 / 255.0f32) - mean) * inv_std).collect();
    let y: Vec<i32> = match labels.dtype() {
        Some(dp::DType::UInt8) => labels.bytes().iter().map(|&v| v as i32).collect(),
        Some(dp::DType::Int32) => labels.as_slice::<i32>().unwrap().to_vec(),
        _ => {
            eprintln!("train_fashion_mnist: '{}' is not a label file [N] matching its images", lpath);
            exit(1)
        }
    };
    if y.iter().any(|&v| v < 0 || v >= NUM_CLASSES) {
        eprintln!("train_fashion_mnist: '{}' has a label outside 0..9", lpath);
        exit(1);
    }
    (x, y)
}

/// Feeds a batch borrowed straight from x/y (they outlive the workspace).
fn feed_borrowed<'d>(ws: &Workspace<'d>, x: &'d [f32], y: &'d [i32]) {
    let b = y.len();
    let tx = check(Tensor::borrowed(&[b as i64, 1, 28, 28], x), "dp_tensor_create_borrowed (data)");
    let ty = check(Tensor::borrowed(&[b as i64], y), "dp_tensor_create_borrowed (label)");
    check(ws.feed("data", &tx).and_then(|_| ws.feed("label", &ty)), "feeding a batch");
}

fn fetch_scalar(ws: &Workspace<'_>, name: &str) -> f64 {
    let t = check(ws.fetch(name), name);
    match t.as_slice::<f32>() {
        Ok(v) if v.len() == 1 => v[0] as f64,
        _ => {
            eprintln!("train_fashion_mnist: blob '{}' is not a float32 scalar", name);
            exit(1)
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let argv0 = args[0].clone();
    let mut model_arg = "mlp".to_string();
    let mut data_dir = "/usr/share/datasets/fashion-mnist".to_string();
    let mut nets_dir: Option<String> = None;
    let (mut epochs, mut batch, mut limit) = (3i64, 64i64, 0i64);
    let mut seed = 1u64;
    let (mut lr, mut min_acc) = (0f64, -1f64);
    let mut devices: Option<(DeviceType, usize)> = None;
    let mut checkpoint_dir: Option<String> = None;
    let mut resume = false;
    let mut keep = 3i64;
    let mut i = 1;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--resume" {
            resume = true;
            i += 1;
            continue;
        }
        if i + 1 >= args.len() {
            usage(&argv0);
        }
        let v = args[i + 1].clone();
        i += 2;
        match a {
            "--model" => model_arg = v,
            "--epochs" => epochs = parse_long(&argv0, a, &v, 1, 100000),
            "--batch" => batch = parse_long(&argv0, a, &v, 1, 65536),
            "--limit" => limit = parse_long(&argv0, a, &v, 1, 1 << 30),
            "--seed" => seed = parse_long(&argv0, a, &v, 0, 0x7FFFFFFF) as u64,
            "--lr" => match v.parse::<f64>() {
                Ok(x) if x > 0.0 && x.is_finite() => lr = x,
                _ => {
                    eprintln!("{}: --lr must be a positive number, got '{}'", argv0, v);
                    exit(2)
                }
            },
            "--min-acc" => match v.parse::<f64>() {
                Ok(x) if (0.0..=1.0).contains(&x) => min_acc = x,
                _ => {
                    eprintln!("{}: --min-acc must be a number in [0, 1], got '{}'", argv0, v);
                    exit(2)
                }
            },
            "--devices" => {
                let (kind, n) = match v.split_once(':') {
                    Some(("cpu", n)) => (DeviceType::Cpu, n),
                    Some(("cuda", n)) => (DeviceType::Cuda, n),
                    _ => {
                        eprintln!("{}: --devices must be cpu:N or cuda:N, got '{}'", argv0, v);
                        exit(2)
                    }
                };
                devices = Some((kind, parse_long(&argv0, a, n, 1, 64) as usize));
            }
            "--checkpoint" => checkpoint_dir = Some(v),
            "--keep" => keep = parse_long(&argv0, a, &v, 0, 1000000),
            "--data" => data_dir = v,
            "--nets" => nets_dir = Some(v),
            _ => usage(&argv0),
        }
    }
    if resume && checkpoint_dir.is_none() {
        eprintln!("{}: --resume needs --checkpoint DIR", argv0);
        exit(2);
    }
    // The checkpoint directory is made when missing (not its parents).
    if let Some(dir) = &checkpoint_dir {
        if let Err(e) = std::fs::create_dir(dir) {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                eprintln!("{}: cannot create checkpoint directory '{}': {}", argv0, dir, e);
                exit(1);
            }
        }
    }

    // The model file: a path, or mlp/cnn from --nets, else the source tree.
    let file = match model_arg.as_str() {
        "mlp" => Some("fashion_mlp.json"),
        "cnn" => Some("fashion_cnn.json"),
        m if m.len() > 5 && m.ends_with(".json") => None,
        m => {
            eprintln!("{}: --model must be mlp, cnn or a .json model file, got '{}'", argv0, m);
            exit(2)
        }
    };
    let model_path = match file {
        None => model_arg.clone(),
        Some(f) => {
            let candidates: Vec<String> = match &nets_dir {
                Some(d) => vec![format!("{}/{}", d, f)],
                None => vec![
                    format!("{}/../../samples/nets/{}", env!("CARGO_MANIFEST_DIR"), f),
                    format!("samples/nets/{}", f),
                ],
            };
            candidates.iter().find(|c| Path::new(c).exists()).unwrap_or(&candidates[0]).clone()
        }
    };

    println!("dp {}", dp::version());

    // Data: it outlives the workspace, so the loader's dataset and the eval
    // batches are borrowed.
    let (train_x, train_y) = load_split(&data_dir, "train");
    let (test_x, test_y) = load_split(&data_dir, "t10k");
    let mut n_train = train_y.len();
    let n_test = test_y.len();
    if limit > 0 && (limit as usize) < n_train {
        n_train = limit as usize;
    }
    if n_train < batch as usize {
        eprintln!("train_fashion_mnist: {} training samples make no full batch of {}", n_train, batch);
        exit(1);
    }

    let model = check(Model::from_file(&model_path), &model_path);
    let mut parallel: Option<ParallelModel> = None;
    let nets = match devices {
        None => check(
            model.build_training(Some(&TrainingOptions { lr, ..Default::default() })),
            "dp_model_build_training",
        ),
        Some((kind, n)) => {
            // CPU replicas: dp picks one shared model or a copy each, as in the C sample.
            let opts = dp::ParallelOptions {
                device_type: kind,
                device_ids: (0..n as i32).collect(),
                lr,
                shared_model_auto: true,
                ..Default::default()
            };
            let p = check(model.parallelize(&opts), "dp_model_parallelize");
            let nets = check(p.nets(), "dp_parallel_model_nets");
            let r = p.num_replicas();
            println!("data parallel over {} replicas ({} ... {})", r, p.scope(0).unwrap_or(""), p.scope(r - 1).unwrap_or(""));
            parallel = Some(p);
            nets
        }
    };
    let ws = check(Workspace::new(), "dp_workspace_create");
    let init = check(Net::new(&ws, &nets.init, None), "creating the init net");
    let train = check(Net::new(&ws, &nets.train, None), "creating the train net");
    let eval = check(Net::new(&ws, &nets.eval, None), "creating the eval net");
    check(init.run(), "running the init net");

    // The input pipeline over the first n_train training samples, borrowed.
    // With several processes each is fed its part of every global batch.
    let (shards, shard) = parallel.as_ref().map_or((1, 0), |p| (p.num_shards(), p.shard_id()));
    let tx = check(
        Tensor::borrowed(&[n_train as i64, 1, 28, 28], &train_x[..n_train * IMAGE_PIXELS]),
        "dp_tensor_create_borrowed (training images)",
    );
    let ty = check(Tensor::borrowed(&[n_train as i64], &train_y[..n_train]), "dp_tensor_create_borrowed (training labels)");
    let lopts = LoaderOptions { seed, num_shards: shards, shard_id: shard, ..LoaderOptions::new(batch) };
    let mut loader = check(Loader::new(&ws, &[("data", &tx), ("label", &ty)], &lopts), "dp_loader_create");
    drop((tx, ty));
    let steps = loader.steps_per_epoch() as usize;
    let lr_text = if lr > 0.0 { format!("{}", lr) } else { "the model's".to_string() };
    println!(
        "model {}: train {} ({} steps of {}), test {}, epochs {}, lr {}, seed {}",
        model_path, n_train, steps, batch, n_test, epochs, lr_text, seed
    );

    let mut first_epoch = 1i64;
    if resume {
        let dir = checkpoint_dir.as_deref().unwrap();
        let mut done = 0i64;
        let files = check(checkpoint::list_steps(dir), "listing checkpoints");
        for path in &files {
            let loaded = checkpoint::CheckpointInfo::from_file(path).and_then(|info| {
                let it = info.iteration();
                match &parallel {
                    Some(p) => p.load(&ws, path, None),
                    None => checkpoint::load(&ws, path, None),
                }
                .map(|_| it)
            });
            match loaded {
                Ok(it) if it > 0 => {
                    println!("resumed from {} (iteration {})", path, it);
                    done = it;
                    break;
                }
                Ok(_) => eprintln!("train_fashion_mnist: {} records no iteration; skipping it", path),
                Err(e) => eprintln!(
                    "train_fashion_mnist: cannot resume from {}: [{}] {}; trying an older one",
                    path,
                    e.code().name(),
                    e.message()
                ),
            }
        }
        if done == 0 {
            println!("no checkpoint to resume from in {}; starting afresh", dir);
        }
        if done % steps as i64 != 0 {
            eprintln!("{}: the checkpoint's iteration {} is not a whole number of epochs of {} steps (were --batch and --limit the same?)", argv0, done, steps);
            exit(1);
        }
        // The loader's order depends only on the seed and the epoch.
        first_epoch = 1 + done / steps as i64;
        check(loader.seek(first_epoch - 1, 0), "dp_loader_seek");
    }

    let (mut total_time, mut last_loss, mut last_acc) = (0f64, 0f64, 0f64);
    let mut progress = Progress { on: unsafe { isatty(1) } == 1, drawn: None, width: 0 };
    for e in first_epoch..=epochs {
        let mut loss_sum = 0f64;
        let t0 = Instant::now();
        // Until the epoch's end.
        let mut step = 0;
        while check(loader.next(), "dp_loader_next") {
            check(train.run(), "running the train net");
            loss_sum += fetch_scalar(&ws, "loss");
            step += 1;
            progress.draw(e, epochs, step, steps, batch as usize, t0);
        }
        let dt = t0.elapsed().as_secs_f64();
        progress.erase();
        total_time += dt;
        last_loss = loss_sum / steps as f64;
        let mut correct = 0f64;
        let mut off = 0;
        while off < n_test {
            let b = EVAL_BATCH.min(n_test - off);
            feed_borrowed(&ws, &test_x[off * IMAGE_PIXELS..(off + b) * IMAGE_PIXELS], &test_y[off..off + b]);
            check(eval.run(), "running the eval net");
            correct += fetch_scalar(&ws, "accuracy") * b as f64;
            off += b;
        }
        last_acc = if n_test > 0 { correct / n_test as f64 } else { 0.0 };
        if let Some(dir) = &checkpoint_dir {
            let path = checkpoint::step_path(dir, e * steps as i64);
            match &parallel {
                Some(p) => check(p.save(&ws, &path, None), "saving a checkpoint"),
                None => {
                    let blobs = check(model.checkpoint_blobs(), "dp_model_checkpoint_blobs");
                    check(checkpoint::save(&ws, &blobs, &path, None), "saving a checkpoint")
                }
            }
            check(checkpoint::prune(dir, keep as i32), "pruning old checkpoints");
        }
        println!(
            "epoch {}/{} loss={:.4} test_acc={:.4} samples_per_s={:.1}",
            e,
            epochs,
            last_loss,
            last_acc,
            (steps * batch as usize) as f64 / dt
        );
    }
    let trained = epochs - first_epoch + 1;

    // Serving: the test set through the inference net, which must classify
    // exactly as the eval net did.
    let scope = parallel.as_ref().map_or("", |p| p.scope(0).unwrap_or(""));
    let (infer_acc, predicted) = serve(&model, &ws, scope, &test_x, &test_y);
    let shown: Vec<String> = predicted.iter().map(|c| c.to_string()).collect();
    let labels: Vec<String> = test_y.iter().take(predicted.len()).map(|c| c.to_string()).collect();
    println!("inference: test_acc={:.4} predicted {} labels {}", infer_acc, shown.join(" "), labels.join(" "));
    if trained > 0 && (infer_acc - last_acc).abs() > 0.5 / (n_test.max(1) as f64) {
        eprintln!(
            "train_fashion_mnist: the inference net's test accuracy {:.6} is not the eval net's {:.6}",
            infer_acc, last_acc
        );
        exit(1);
    }
    println!(
        "final test_acc={:.4} train_loss={:.4} samples_per_s={:.1}",
        last_acc,
        last_loss,
        if trained > 0 { (steps * batch as usize) as f64 * trained as f64 / total_time } else { 0.0 }
    );
    if min_acc >= 0.0 && !(last_acc >= min_acc) {
        eprintln!("{}: test accuracy {:.4} is below --min-acc {:.4}", argv0, last_acc, min_acc);
        exit(3);
    }
}
