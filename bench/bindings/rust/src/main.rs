//! bindings_bench (Rust): the Rust side of bench/bindings/run_bindings_bench.sh.
//! It does exactly what bench/bindings/c/bindings_bench.c does, through the
//! `dp` crate, and prints the same line (see that file for the method).
//!
//!     bindings_bench call ITERS          per-call cost of a 1-op net
//!     bindings_bench train STEPS MODEL   training steps of a model
use std::process::exit;
use std::time::Instant;

const ONE_OP_NET: &str = concat!(
    r#"{"name":"one_op","external_inputs":["x"],"external_outputs":["y"],"#,
    r#""ops":[{"type":"Copy","inputs":["x"],"outputs":["y"]}]}"#
);
const N_ELEM: usize = 16;
const BLOCKS: usize = 5;
const BATCH: usize = 256;
const NUM_BATCHES: usize = 4;
const PIXELS: usize = 784;
const WARMUP_STEPS: i64 = 20;

fn check<T>(r: dp::Result<T>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            eprintln!("bindings_bench: {} failed: {}", what, e);
            exit(1);
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

struct Rng(u64);
impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
}

/// One feed + run + fetch round.
fn round_trip(ws: &dp::Workspace<'_>, net: &dp::Net<'_, '_>, input: &[f32]) -> Vec<f32> {
    let t = check(dp::Tensor::new(&[N_ELEM as i64], input), "Tensor::new");
    check(ws.feed("x", &t), "feed");
    drop(t);
    check(net.run(), "run");
    let y = check(ws.fetch("y"), "fetch");
    check(y.to_vec::<f32>(), "to_vec")
}

fn bench_call(iters: usize) {
    let def = check(dp::NetDef::from_json(ONE_OP_NET), "NetDef::from_json");
    let ws = check(dp::Workspace::new(), "Workspace::new");
    let input: Vec<f32> = (0..N_ELEM).map(|i| i as f32).collect();
    check(ws.feed("x", &check(dp::Tensor::new(&[N_ELEM as i64], &input), "Tensor::new")), "feed");
    let net = check(dp::Net::new(&ws, &def, None), "Net::new");

    let (per_block, rounds_per_block) = (iters / BLOCKS, iters / 4 / BLOCKS);
    let mut run_ns = [0f64; BLOCKS];
    let mut round_ns = [0f64; BLOCKS];
    for _ in 0..iters / 2 {
        check(net.run(), "run");
    }
    for r in run_ns.iter_mut() {
        let t0 = Instant::now();
        for _ in 0..per_block {
            check(net.run(), "run");
        }
        *r = t0.elapsed().as_nanos() as f64 / per_block as f64;
    }
    let mut out = Vec::new();
    for _ in 0..iters / 8 {
        out = round_trip(&ws, &net, &input);
    }
    for r in round_ns.iter_mut() {
        let t0 = Instant::now();
        for _ in 0..rounds_per_block {
            out = round_trip(&ws, &net, &input);
        }
        *r = t0.elapsed().as_nanos() as f64 / rounds_per_block as f64;
    }
    if out[N_ELEM - 1] != (N_ELEM - 1) as f32 {
        eprintln!("bindings_bench: y[{}] = {}, want {}", N_ELEM - 1, out[N_ELEM - 1], N_ELEM - 1);
        exit(1);
    }
    println!(
        "call lang=rust iters={} run_ns={:.1} round_ns={:.1}",
        per_block * BLOCKS,
        median(&mut run_ns),
        median(&mut round_ns)
    );
}

fn bench_train(steps: usize, model_path: &str) {
    let model = check(dp::Model::from_file(model_path), model_path);
    let nets = check(model.build_training(None), "build_training");
    let ws = check(dp::Workspace::new(), "Workspace::new");
    let init = check(dp::Net::new(&ws, &nets.init, None), "creating the init net");
    let train = check(dp::Net::new(&ws, &nets.train, None), "creating the train net");
    check(init.run(), "running the init net");

    let mut rng = Rng(0x9E3779B97F4A7C15);
    let xn = BATCH * PIXELS;
    let xs: Vec<f32> = (0..NUM_BATCHES * xn).map(|_| (rng.next_u64() >> 40) as f32 / (1u32 << 24) as f32).collect();
    let ys: Vec<i32> = (0..NUM_BATCHES * BATCH).map(|_| (rng.next_u64() % 10) as i32).collect();
    let mut tx = Vec::new();
    let mut ty = Vec::new();
    for k in 0..NUM_BATCHES {
        tx.push(check(dp::Tensor::new(&[BATCH as i64, 1, 28, 28], &xs[k * xn..(k + 1) * xn]), "data"));
        ty.push(check(dp::Tensor::new(&[BATCH as i64], &ys[k * BATCH..(k + 1) * BATCH]), "label"));
    }

    let mut times = vec![0f64; steps];
    for s in -WARMUP_STEPS..steps as i64 {
        let k = ((s + WARMUP_STEPS) as usize) % NUM_BATCHES;
        let t0 = Instant::now();
        check(ws.feed("data", &tx[k]), "feeding 'data'");
        check(ws.feed("label", &ty[k]), "feeding 'label'");
        check(train.run(), "running the train net");
        if s >= 0 {
            times[s as usize] = t0.elapsed().as_secs_f64();
        }
    }
    let loss = check(check(ws.fetch("loss"), "fetching 'loss'").to_vec::<f32>(), "to_vec");

    let med = median(&mut times);
    println!(
        "train lang=rust steps={} batch={} median_ms={:.3} samples_per_s={:.1} last_loss={:.6}",
        steps,
        BATCH,
        med * 1e3,
        BATCH as f64 / med,
        loss[0]
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = args.get(2).and_then(|s| s.parse::<usize>().ok());
    match (args.get(1).map(|s| s.as_str()), n) {
        (Some("call"), Some(n)) if n >= 20 * BLOCKS => bench_call(n),
        (Some("train"), Some(n)) if n >= 1 && args.len() >= 4 => bench_train(n, &args[3]),
        _ => {
            eprintln!("usage: {} call ITERS (>= 100) | train STEPS MODEL_JSON", args[0]);
            exit(2);
        }
    }
}
