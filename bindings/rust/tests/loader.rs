//! The thread budget and the input pipeline (dp_loader): tensor and
//! callback datasets, epochs, the seeded order, seek, and the errors.
use dp::{Code, DType, Loader, LoaderBatch, LoaderInput, LoaderOptions, Tensor, Workspace};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn cpu_threads_cap() {
    dp::set_cpu_threads(1).unwrap();
    assert_eq!(dp::cpu_threads(), 1);
    dp::set_cpu_threads(0).unwrap();
    assert!(dp::cpu_threads() >= 1);
    assert_eq!(dp::set_cpu_threads(-1).unwrap_err().code(), Code::InvalidArgument);
}

/// 10 samples: "data" [10, 3] whose row i holds i, "label" [10] holding i.
fn dataset() -> (Tensor<'static>, Tensor<'static>) {
    let x: Vec<f32> = (0..30).map(|k| (k / 3) as f32).collect();
    let y: Vec<i32> = (0..10).collect();
    (Tensor::new(&[10, 3], &x).unwrap(), Tensor::new(&[10], &y).unwrap())
}

/// The batch in the blobs: shapes [4, 3] and [4], each data row equal to
/// its label; returns the labels.
fn fed_batch(ws: &Workspace<'_>) -> Vec<i32> {
    let x = ws.fetch("data").unwrap();
    let y = ws.fetch("label").unwrap();
    assert_eq!(x.dims(), &[4, 3]);
    assert_eq!(y.dims(), &[4]);
    let (xs, ys) = (x.as_slice::<f32>().unwrap(), y.as_slice::<i32>().unwrap());
    for (r, &s) in ys.iter().enumerate() {
        assert!((0..10).contains(&s), "sample {}", s);
        assert_eq!(&xs[r * 3..r * 3 + 3], &[s as f32; 3], "row {}", r);
    }
    ys.to_vec()
}

/// One epoch of two batches, then its end.
fn epoch(loader: &mut Loader<'_, '_>, ws: &Workspace<'_>) -> Vec<Vec<i32>> {
    let mut out = Vec::new();
    for i in 0..2 {
        assert!(loader.next().unwrap(), "batch {}: end of epoch", i);
        out.push(fed_batch(ws));
    }
    assert!(!loader.next().unwrap(), "a third batch of 4 from 10 samples (the last is dropped)");
    out
}

fn assert_distinct(batches: &[Vec<i32>]) {
    let all: Vec<i32> = batches.concat();
    assert_eq!(all.len(), 8);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), 8, "a sample twice in one epoch: {:?}", batches);
}

fn opts(batch_size: i64, seed: u64) -> LoaderOptions {
    LoaderOptions { seed, ..LoaderOptions::new(batch_size) }
}

#[test]
fn tensor_loader_batches_epochs_order_and_seek() {
    let ws = Workspace::new().unwrap();
    let mut loader = {
        let (x, y) = dataset();
        // The loader shares the tensors' memory: the handles go at once.
        Loader::new(&ws, &[("data", &x), ("label", &y)], &opts(4, 7)).unwrap()
    };
    assert_eq!((loader.steps_per_epoch(), loader.batch_rows(), loader.epoch(), loader.step()), (2, 4, 0, 0));
    let first = epoch(&mut loader, &ws);
    assert_distinct(&first);
    assert_eq!((loader.epoch(), loader.step()), (1, 0));
    let second = epoch(&mut loader, &ws);
    assert_distinct(&second);

    // The same seed gives the same order; seek reproduces a batch.
    let ws2 = Workspace::new().unwrap();
    let (x, y) = dataset();
    let mut again = Loader::new(&ws2, &[("data", &x), ("label", &y)], &opts(4, 7)).unwrap();
    assert_eq!(epoch(&mut again, &ws2), first);
    again.seek(0, 1).unwrap();
    assert!(again.next().unwrap());
    assert_eq!(fed_batch(&ws2), first[1]);
    again.seek(1, 0).unwrap();
    assert!(again.next().unwrap());
    assert_eq!(fed_batch(&ws2), second[0]);
    assert_eq!(again.seek(0, 2).unwrap_err().code(), Code::OutOfRange);

    // Without shuffling the first batch is samples 0..3.
    let ws3 = Workspace::new().unwrap();
    let o = LoaderOptions { no_shuffle: true, ..LoaderOptions::new(4) };
    let mut ordered = Loader::new(&ws3, &[("data", &x), ("label", &y)], &o).unwrap();
    assert!(ordered.next().unwrap());
    assert_eq!(fed_batch(&ws3), vec![0, 1, 2, 3]);
}

#[test]
fn borrowed_dataset() {
    let x: Vec<f32> = (0..30).map(|k| (k / 3) as f32).collect();
    let y: Vec<i32> = (0..10).collect();
    // The dataset outlives the workspace, which outlives the loader.
    let ws = Workspace::new().unwrap();
    let tx = Tensor::borrowed(&[10, 3], &x).unwrap();
    let ty = Tensor::borrowed(&[10], &y).unwrap();
    let mut loader = Loader::new(&ws, &[("data", &tx), ("label", &ty)], &opts(4, 3)).unwrap();
    drop((tx, ty));
    assert_distinct(&epoch(&mut loader, &ws));
}

#[test]
fn bad_options_and_datasets() {
    let ws = Workspace::new().unwrap();
    let (x, y) = dataset();
    let inputs = [("data", &x), ("label", &y)];
    for (o, what) in [
        (LoaderOptions::default(), "batch_size 0"),
        (LoaderOptions::new(-4), "negative batch"),
        (LoaderOptions::new(11), "no full batch"),
        (LoaderOptions { timeout_ms: -1, ..LoaderOptions::new(4) }, "negative timeout"),
    ] {
        assert_eq!(Loader::new(&ws, &inputs, &o).err().map(|e| e.code()), Some(Code::InvalidArgument), "{}", what);
    }
    let short = Tensor::new(&[9], &[0i32; 9]).unwrap();
    let e = Loader::new(&ws, &[("data", &x), ("label", &short)], &LoaderOptions::new(4)).err().unwrap();
    assert_eq!(e.code(), Code::Shape);
    let e = Loader::new(&ws, &[("data", &x), ("data", &y)], &LoaderOptions::new(4)).err().unwrap();
    assert_eq!(e.code(), Code::InvalidArgument);
    let e = Loader::new(&ws, &[("da\0ta", &x)], &LoaderOptions::new(4)).err().unwrap();
    assert_eq!(e.code(), Code::InvalidArgument);
    let e = Loader::new(&ws, &[], &LoaderOptions::new(4)).err().unwrap();
    assert_eq!(e.code(), Code::InvalidArgument);
    let inputs = [LoaderInput::new("data", DType::Float32, &[3])];
    let e = Loader::with_callback(&ws, &inputs, 10, &LoaderOptions::default(), |_: &mut LoaderBatch<'_>| 0).err();
    assert_eq!(e.unwrap().code(), Code::InvalidArgument);
}

fn callback_inputs() -> Vec<LoaderInput> {
    vec![
        LoaderInput::new("data", DType::Float32, &[3]),
        LoaderInput::new("label", DType::Int32, &[]), // a scalar per sample
    ]
}

/// Writes sample i as data row i and label i.
fn write_samples(b: &mut LoaderBatch<'_>) -> i32 {
    if b.num_inputs() != 2 || b.row_bytes(0) != 12 || b.row_bytes(1) != 4 || b.rows() != b.indices().len() {
        return 2;
    }
    // A buffer is handed out once per call, and only as its own dtype.
    assert_eq!(b.values::<i32>(0).unwrap_err().code(), Code::Dtype);
    let x = b.values::<f32>(0).unwrap();
    let y = b.values::<i32>(1).unwrap();
    assert_eq!(b.bytes(1).unwrap_err().code(), Code::FailedPrecondition);
    assert_eq!(b.bytes(2).unwrap_err().code(), Code::InvalidArgument);
    for (i, &s) in b.indices().iter().enumerate() {
        y[i] = s as i32;
        x[i * 3..i * 3 + 3].fill(s as f32);
    }
    0
}

#[test]
fn callback_loader_matches_the_tensor_order() {
    let ws = Workspace::new().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let mut loader = Loader::with_callback(&ws, &callback_inputs(), 10, &opts(4, 11), move |b: &mut LoaderBatch<'_>| {
        seen.fetch_add(1, Ordering::SeqCst);
        write_samples(b)
    })
    .unwrap();
    assert_eq!((loader.steps_per_epoch(), loader.batch_rows()), (2, 4));
    let got = epoch(&mut loader, &ws);
    assert_distinct(&got);
    loader.seek(0, 1).unwrap();
    assert!(loader.next().unwrap());
    assert_eq!(fed_batch(&ws), got[1]);
    drop(loader); // the closure is not called after this
    assert!(calls.load(Ordering::SeqCst) > 0);

    // Same seed, same order as a tensor dataset.
    let ws2 = Workspace::new().unwrap();
    let (x, y) = dataset();
    let mut reference = Loader::new(&ws2, &[("data", &x), ("label", &y)], &opts(4, 11)).unwrap();
    assert_eq!(epoch(&mut reference, &ws2), got);
}

#[test]
fn callback_borrowing_local_state() {
    // The closure may borrow for as long as the loader.
    let counter = AtomicUsize::new(0);
    let ws = Workspace::new().unwrap();
    {
        let mut loader = Loader::with_callback(&ws, &callback_inputs(), 10, &opts(4, 1), |b: &mut LoaderBatch<'_>| {
            counter.fetch_add(1, Ordering::SeqCst);
            write_samples(b)
        })
        .unwrap();
        assert_distinct(&epoch(&mut loader, &ws));
    }
    assert!(counter.load(Ordering::SeqCst) > 0);
}

#[test]
fn failing_callbacks_give_internal() {
    let ws = Workspace::new().unwrap();
    let o = LoaderOptions { timeout_ms: 10_000, ..LoaderOptions::new(4) };
    let check = |mut loader: Loader<'_, '_>, want: &str| {
        for _ in 0..2 {
            // The same error on every call.
            let e = loader.next().unwrap_err();
            assert_eq!(e.code(), Code::Internal, "{}", e);
            assert!(e.message().contains(want), "{}", e);
        }
    };
    check(Loader::with_callback(&ws, &callback_inputs(), 10, &o, |_: &mut LoaderBatch<'_>| 3).unwrap(), "returned 3");
    // A panic is caught before it reaches C.
    check(
        Loader::with_callback(&ws, &callback_inputs(), 10, &o, |_: &mut LoaderBatch<'_>| -> i32 { panic!("fill") })
            .unwrap(),
        "returned -1",
    );
}

/// A dataset on a GPU, or staged to one (`host_dataset`, callbacks): the
/// device fields are checked; without the GPU the loader is Unavailable,
/// with one it feeds the host loader's batches.
#[test]
fn dataset_on_a_gpu() {
    let ws = Workspace::new().unwrap();
    let (x, y) = dataset();
    let inputs = [("data", &x), ("label", &y)];
    let bad = LoaderOptions { device: dp::DeviceType::Cpu, device_id: 1, ..opts(4, 3) };
    let e = Loader::new(&ws, &inputs, &bad).err().unwrap();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("device_id"), "{}", e.message());
    let host_only = LoaderOptions { host_dataset: true, ..opts(4, 3) };
    let e = Loader::new(&ws, &inputs, &host_only).err().unwrap();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("host_dataset"), "{}", e.message());
    let gpu = LoaderOptions { device: dp::DeviceType::Cuda, ..opts(4, 3) };
    let staged = LoaderOptions { host_dataset: true, ..gpu.clone() };
    let cb = [LoaderInput::new("data", DType::Float32, &[3])];
    if dp::device_count(dp::DeviceType::Cuda).unwrap_or(0) == 0 {
        assert_eq!(Loader::new(&ws, &inputs, &gpu).err().map(|e| e.code()), Some(Code::Unavailable));
        assert_eq!(Loader::new(&ws, &inputs, &staged).err().map(|e| e.code()), Some(Code::Unavailable));
        let e = Loader::with_callback(&ws, &cb, 10, &gpu, |_: &mut LoaderBatch<'_>| 0).err().unwrap();
        assert_eq!(e.code(), Code::Unavailable);
        return;
    }
    let mut host = Loader::new(&ws, &inputs, &opts(4, 3)).unwrap();
    for o in [&gpu, &staged] {
        let mut on_gpu = Loader::new(&ws, &inputs, o).unwrap();
        for _ in 0..3 {
            let want = epoch(&mut host, &ws);
            assert_eq!(epoch(&mut on_gpu, &ws), want, "host_dataset {}", o.host_dataset);
        }
    }
}
