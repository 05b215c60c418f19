//! Training through the safe API equals training driven by raw dp::sys
//! calls, bit for bit; 8 threads train separate nets at once; data
//! parallelism over CPU replicas.
use dp::sys;
use dp::{Code, DeviceType, Memory, Model, Net, NetMemoryStats, Tensor, TrainingOptions, Workspace};
use std::ffi::{CStr, CString};
use std::ptr;

const B: usize = 16;
const STEPS: u64 = 3;

/// Trains STEPS steps with the safe API; returns (losses, state blobs).
fn train_safe(model: &Model) -> (Vec<f32>, Vec<(String, Vec<u8>)>) {
    train_with(model, None).0
}

/// train_safe with training options; also the train net's memory figures.
fn train_with(model: &Model, options: Option<&TrainingOptions>) -> ((Vec<f32>, Vec<(String, Vec<u8>)>), NetMemoryStats) {
    let nets = model.build_training(options).unwrap();
    let asked = options.map_or(Memory::Default, |o| o.memory);
    assert_eq!(nets.train.memory(), if asked == Memory::Default { Memory::Share } else { asked });
    // Borrowed feeds must outlive the workspace (the borrow checker insists).
    let labels: Vec<Vec<i32>> = (0..STEPS).map(|s| common::batch(B, s).1).collect();
    let ws = Workspace::new().unwrap();
    let init = Net::new(&ws, &nets.init, None).unwrap();
    let train = Net::new(&ws, &nets.train, None).unwrap();
    init.run().unwrap();
    let mut losses = Vec::new();
    for s in 0..STEPS {
        let (x, _) = common::batch(B, s);
        ws.feed("data", &Tensor::from_vec(&[B as i64, 784], x).unwrap()).unwrap();
        ws.feed("label", &Tensor::borrowed(&[B as i64], &labels[s as usize]).unwrap()).unwrap();
        train.run().unwrap();
        losses.push(ws.fetch("loss").unwrap().as_slice::<f32>().unwrap()[0]);
    }
    let memory = train.memory_stats(DeviceType::Cpu, 0).unwrap();
    // A temporary (the first layer's output) is empty after a planned run.
    match memory.mode {
        Memory::Keep => assert!(ws.fetch("fc1").is_ok()),
        _ => assert_eq!(ws.fetch("fc1").err().map(|e| e.code()), Some(Code::NotFound)),
    }
    drop(train);
    drop(init);
    let state = model.checkpoint_blobs().unwrap().into_iter().map(|n| {
        let bytes = ws.fetch(&n).unwrap().bytes().to_vec();
        (n, bytes)
    });
    ((losses, state.collect()), memory)
}

/// Keeping every blob, sharing blocks and freeing after use train the same
/// bits; the builders share by default.
#[test]
fn memory_modes_train_alike() {
    let model = Model::from_file(&common::fashion_mlp_path()).unwrap();
    let opts = |memory| TrainingOptions { memory, ..Default::default() };
    let (keep, mk) = train_with(&model, Some(&opts(Memory::Keep)));
    let (share, ms) = train_with(&model, None);
    let (free, mf) = train_with(&model, Some(&opts(Memory::Free)));
    assert_eq!(keep, share);
    assert_eq!(keep, free);
    assert_eq!((mk.mode, mk.temporaries), (Memory::Keep, 0));
    assert!(ms.mode == Memory::Share && ms.temporaries > 0 && ms.slots > 0 && ms.slot_bytes > 0, "{:?}", ms);
    assert!(mf.mode == Memory::Free && mf.temporaries == ms.temporaries && mf.slot_bytes == 0, "{:?}", mf);
    assert!(ms.peak_bytes < mk.peak_bytes, "{:?} {:?}", ms, mk);
    assert!(model.build_training(Some(&opts(Memory::Default))).is_ok());
}

/// Dynamic loss scaling trains the same bits while nothing overflows; a net
/// in fp16 math that computes gradients needs it.
#[test]
fn loss_scaling_trains_alike_and_fp16_needs_it() {
    use dp::{LossScaling, MathMode, NetOptions};
    let model = Model::from_file(&common::fashion_mlp_path()).unwrap();
    assert_eq!(TrainingOptions::default().loss_scaling, LossScaling::None);
    let scaled = TrainingOptions { loss_scaling: LossScaling::Dynamic, ..Default::default() };
    assert_eq!(train_with(&model, Some(&scaled)).0, train_with(&model, None).0);
    let small = TrainingOptions { initial_loss_scale: 8.0, ..scaled.clone() };
    assert_eq!(train_with(&model, Some(&small)).0, train_with(&model, None).0);
    let bad = TrainingOptions { initial_loss_scale: -1.0, ..scaled.clone() };
    assert_eq!(model.build_training(Some(&bad)).err().map(|e| e.code()), Some(Code::InvalidArgument));
    let ws = Workspace::new().unwrap();
    let fp16 = NetOptions { math_mode: MathMode::Fp16, ..Default::default() };
    let plain = model.build_training(None).unwrap();
    let e = Net::new(&ws, &plain.train, Some(&fp16)).err().unwrap();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("loss scaling"), "{}", e.message());
    let nets = model.build_training(Some(&scaled)).unwrap();
    assert!(Net::new(&ws, &nets.train, Some(&fp16)).is_ok());
}

unsafe fn ok(s: *mut sys::dp_status) {
    if !s.is_null() {
        let m = CStr::from_ptr(sys::dp_status_message(s)).to_string_lossy().into_owned();
        sys::dp_status_free(s);
        panic!("dp call failed: {}", m);
    }
}

/// The same through raw C calls only.
fn train_raw(path: &str) -> (Vec<f32>, Vec<(String, Vec<u8>)>) {
    unsafe {
        let cpath = CString::new(path).unwrap();
        let mut model = ptr::null_mut();
        ok(sys::dp_model_from_file(cpath.as_ptr(), &mut model));
        let (mut di, mut dt) = (ptr::null_mut(), ptr::null_mut());
        ok(sys::dp_model_build_training(model, ptr::null(), &mut di, &mut dt, ptr::null_mut()));
        let mut ws = ptr::null_mut();
        ok(sys::dp_workspace_create(&mut ws));
        let (mut init, mut train) = (ptr::null_mut(), ptr::null_mut());
        ok(sys::dp_net_create(ws, di, ptr::null(), &mut init));
        ok(sys::dp_net_create(ws, dt, ptr::null(), &mut train));
        ok(sys::dp_net_run(init));
        let data = CString::new("data").unwrap();
        let label = CString::new("label").unwrap();
        let loss = CString::new("loss").unwrap();
        let mut losses = Vec::new();
        for s in 0..STEPS {
            let (x, y) = common::batch(B, s);
            let (xd, yd) = ([B as i64, 784], [B as i64]);
            let (mut tx, mut ty) = (ptr::null_mut(), ptr::null_mut());
            ok(sys::dp_tensor_create(sys::DP_DTYPE_FLOAT32, xd.as_ptr(), 2, x.as_ptr() as _, x.len() * 4, &mut tx));
            ok(sys::dp_tensor_create(sys::DP_DTYPE_INT32, yd.as_ptr(), 1, y.as_ptr() as _, y.len() * 4, &mut ty));
            ok(sys::dp_workspace_feed(ws, data.as_ptr(), tx));
            ok(sys::dp_workspace_feed(ws, label.as_ptr(), ty));
            sys::dp_tensor_free(tx);
            sys::dp_tensor_free(ty);
            ok(sys::dp_net_run(train));
            let mut t = ptr::null_mut();
            ok(sys::dp_workspace_fetch(ws, loss.as_ptr(), &mut t));
            losses.push(*(sys::dp_tensor_data(t) as *const f32));
            sys::dp_tensor_free(t);
        }
        let mut list = ptr::null_mut();
        ok(sys::dp_model_checkpoint_blobs(model, &mut list));
        let mut state = Vec::new();
        for i in 0..sys::dp_string_list_size(list) {
            let name = sys::dp_string_list_get(list, i);
            let mut t = ptr::null_mut();
            ok(sys::dp_workspace_fetch(ws, name, &mut t));
            let bytes = std::slice::from_raw_parts(sys::dp_tensor_data(t) as *const u8, sys::dp_tensor_nbytes(t)).to_vec();
            sys::dp_tensor_free(t);
            state.push((CStr::from_ptr(name).to_str().unwrap().to_owned(), bytes));
        }
        sys::dp_string_list_free(list);
        sys::dp_net_free(train);
        sys::dp_net_free(init);
        sys::dp_workspace_free(ws);
        sys::dp_netdef_free(dt);
        sys::dp_netdef_free(di);
        sys::dp_model_free(model);
        (losses, state)
    }
}

#[test]
fn safe_training_equals_raw_c_calls_bit_for_bit() {
    let path = common::fashion_mlp_path();
    let model = Model::from_file(&path).unwrap();
    let (l1, s1) = train_safe(&model);
    let (l2, s2) = train_raw(&path);
    assert_eq!(l1.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), l2.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    assert!(l1.iter().all(|v| v.is_finite()));
    assert_eq!(s1.len(), s2.len());
    assert!(s1.len() > 6, "params and optimizer state");
    for ((n1, b1), (n2, b2)) in s1.iter().zip(&s2) {
        assert_eq!(n1, n2);
        assert!(b1 == b2, "blob {} differs", n1);
    }
}

#[test]
fn eight_threads_train_separate_nets() {
    let model = Model::from_file(&common::fashion_mlp_path()).unwrap();
    let (want, _) = train_safe(&model);
    // Model is Sync: shared by reference with scoped threads.
    let results: Vec<Vec<f32>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8).map(|_| s.spawn(|| train_safe(&model).0)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in results {
        assert_eq!(r.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }
}

#[test]
fn data_parallel_over_two_cpu_replicas() {
    let model = Model::from_file(&common::fashion_mlp_path()).unwrap();
    let p = model.parallelize(&dp::ParallelOptions { num_shards: 1, ..dp::ParallelOptions::cpu(2) }).unwrap();
    assert_eq!(p.num_replicas(), 2);
    assert_eq!((p.num_shards(), p.shard_id()), (1, 0));
    assert_eq!(p.scope(0), Some("cpu_0/"));
    assert_eq!(p.scope(1), Some("cpu_1/"));
    assert_eq!(p.scope(2), None);
    let nets = p.nets().unwrap();
    let sync = p.sync_net().unwrap();
    let ws = Workspace::new().unwrap();
    let init = Net::new(&ws, &nets.init, None).unwrap();
    let train = Net::new(&ws, &nets.train, None).unwrap();
    let eval = Net::new(&ws, &nets.eval, None).unwrap();
    init.run().unwrap();
    for s in 0..2 {
        let (x, y) = common::batch(B, s);
        ws.feed("data", &Tensor::new(&[B as i64, 784], &x).unwrap()).unwrap();
        ws.feed("label", &Tensor::new(&[B as i64], &y).unwrap()).unwrap();
        train.run().unwrap();
        assert!(ws.fetch("loss").unwrap().as_slice::<f32>().unwrap()[0].is_finite());
    }
    eval.run().unwrap();
    let acc = ws.fetch("accuracy").unwrap().as_slice::<f32>().unwrap()[0];
    assert!((0.0..=1.0).contains(&acc));
    p.sync(&ws).unwrap();
    Net::new(&ws, &sync, None).unwrap().run().unwrap();
    let w0 = ws.fetch("cpu_0/fc1_w").unwrap().bytes().to_vec();
    let w1 = ws.fetch("cpu_1/fc1_w").unwrap().bytes().to_vec();
    assert!(w0 == w1, "replicas stay identical");

    let acc_opts = dp::ParallelOptions { accumulate_steps: 2, num_shards: 1, ..dp::ParallelOptions::cpu(2) };
    assert!(model.parallelize(&acc_opts).unwrap().accumulate_net().unwrap().num_ops() > 0);
    let bmuf = dp::ParallelOptions { bmuf: true, bmuf_block_length: 4, num_shards: 1, ..dp::ParallelOptions::cpu(2) };
    let (block, len) = model.parallelize(&bmuf).unwrap().block_net().unwrap();
    assert_eq!(len, 4);
    assert!(block.num_ops() > 0);
}

/// A copy per replica, one shared model and the layout dp picks
/// (`shared_model_auto`) train the same params from the same batches.
#[test]
fn replica_layouts_train_alike() {
    let model = Model::from_file(&common::fashion_mlp_path()).unwrap();
    let train = |o: dp::ParallelOptions| -> Vec<f32> {
        let p = model.parallelize(&dp::ParallelOptions { num_shards: 1, ..o }).unwrap();
        let nets = p.nets().unwrap();
        let ws = Workspace::new().unwrap();
        Net::new(&ws, &nets.init, None).unwrap().run().unwrap();
        let train = Net::new(&ws, &nets.train, None).unwrap();
        for s in 0..3 {
            let (x, y) = common::batch(B, s);
            ws.feed("data", &Tensor::new(&[B as i64, 784], &x).unwrap()).unwrap();
            ws.feed("label", &Tensor::new(&[B as i64], &y).unwrap()).unwrap();
            train.run().unwrap();
        }
        ws.fetch("cpu_0/fc2_w").unwrap().as_slice::<f32>().unwrap().to_vec()
    };
    let copies = train(dp::ParallelOptions::cpu(2));
    for o in [
        dp::ParallelOptions { shared_model: true, ..dp::ParallelOptions::cpu(2) },
        dp::ParallelOptions { shared_model_auto: true, ..dp::ParallelOptions::cpu(2) },
    ] {
        let got = train(o);
        assert_eq!(got.len(), copies.len());
        let worst = got.iter().zip(&copies).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-5, "layouts differ by {}", worst);
    }
    // The gradient allreduce in 16 bits (since 0.6): close to float32's, not its bits.
    for c in [dp::GradientCompression::Bf16, dp::GradientCompression::Fp16] {
        let got = train(dp::ParallelOptions { gradient_compression: c, ..dp::ParallelOptions::cpu(2) });
        let worst = got.iter().zip(&copies).map(|(a, b)| (a - b).abs() / (1.0 + b.abs())).fold(0f32, f32::max);
        assert!(worst > 0.0 && worst < 2e-2, "{:?}: {}", c, worst);
    }
    // A sharded optimizer state (ZeRO-1, since 0.6): the unsharded bits.
    assert_eq!(train(dp::ParallelOptions { shard_optimizer_state: true, ..dp::ParallelOptions::cpu(2) }), copies);
    // AUTO with BMUF is a copy per replica; ON with BMUF is refused.
    let bmuf = dp::ParallelOptions { bmuf: true, bmuf_block_length: 4, num_shards: 1, ..dp::ParallelOptions::cpu(2) };
    assert!(model.parallelize(&dp::ParallelOptions { shared_model_auto: true, ..bmuf.clone() }).is_ok());
    match model.parallelize(&dp::ParallelOptions { shared_model: true, ..bmuf }) {
        Ok(_) => panic!("a shared model with BMUF was accepted"),
        Err(e) => assert_eq!(e.code(), dp::Code::InvalidArgument, "{}", e),
    }
}

mod common;

/// The several-processes options (since 0.3), without starting other
/// processes; num_shards is explicit so DP_WORLD_SIZE and friends in the
/// environment change nothing.
#[test]
fn shard_options_of_one_process() {
    let model = Model::from_file(&common::fashion_mlp_path()).unwrap();
    let one = dp::ParallelOptions { num_shards: 1, shard_id: 0, ..dp::ParallelOptions::cpu(1) };
    let p = model.parallelize(&one).unwrap();
    assert_eq!((p.num_shards(), p.shard_id(), p.num_replicas()), (1, 0, 1));
    // One process: join returns at once, having shadowed no step.
    assert_eq!(p.join(&Workspace::new().unwrap()).unwrap(), 0);

    let fails = |o: dp::ParallelOptions, want: &str| match model.parallelize(&o) {
        Ok(_) => panic!("{:?} succeeded", o),
        Err(e) => {
            assert_eq!(e.code(), dp::Code::InvalidArgument, "{}", e);
            assert!(e.message().contains(want), "{:?} -> {}", want, e);
        }
    };
    let store = Some("tcp://nope".to_string());
    fails(dp::ParallelOptions { num_shards: 2, shard_id: 0, store, ..Default::default() }, "store address");
    fails(dp::ParallelOptions { num_shards: 2, shard_id: 2, ..Default::default() }, "shard_id");
    fails(dp::ParallelOptions { num_shards: 1, timeout_ms: -1, ..Default::default() }, "timeout_ms");
    fails(dp::ParallelOptions { num_shards: 1, run_id: Some("a/b".into()), ..Default::default() }, "run id");
    let udp = Some("udp".to_string());
    fails(dp::ParallelOptions { num_shards: 1, local_transport: udp, ..Default::default() }, "local_transport");
    // A NUL byte cannot reach C.
    fails(dp::ParallelOptions { num_shards: 1, run_id: Some("a\0b".into()), ..Default::default() }, "run_id");
    // Explicit strings that are valid with one process are accepted.
    let named = dp::ParallelOptions {
        num_shards: 1,
        run_id: Some("rust-test".into()),
        network_interface: Some("lo".into()),
        timeout_ms: 1000,
        local_transport: Some("tcp".into()),
        ..Default::default()
    };
    assert_eq!(model.parallelize(&named).unwrap().num_shards(), 1);
}
