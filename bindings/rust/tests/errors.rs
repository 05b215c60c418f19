//! Bad inputs give `Err` with the right stable code, never a crash.
use dp::{Code, Model, Net, NetDef, Tensor, Workspace};

fn code<T>(r: dp::Result<T>) -> Code {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => {
            assert!(!e.message().is_empty());
            assert!(e.to_string().starts_with('['), "Display: {}", e);
            let _: &dyn std::error::Error = &e;
            assert_eq!(Code::from_raw(e.code().value()), e.code());
            e.code()
        }
    }
}

const ADD: &str = r#"{"external_inputs":["a","b"],"ops":[{"type":"Add","inputs":["a","b"],"outputs":["c"]}]}"#;

#[test]
fn bad_json_and_definitions() {
    assert_eq!(code(NetDef::from_json("{\"name\": \"x\", ")), Code::Parse);
    assert_eq!(code(NetDef::from_json_bytes(b"{\"na\0me\": 1}")), Code::Parse);
    assert_eq!(code(NetDef::from_json(r#"{"ops":[{"type":"NoSuchOp","outputs":["y"]}]}"#)), Code::InvalidNet);
    assert_eq!(code(NetDef::from_json(r#"{"ops":[{"type":"Relu","inputs":["never_fed"],"outputs":["y"]}]}"#)), Code::InvalidNet);
    assert_eq!(code(NetDef::from_buffer(b"not a flatbuffer")), Code::Parse);
    assert!(matches!(code(NetDef::from_file("/nonexistent/dir/net.json")), Code::NotFound | Code::Io));
    assert_eq!(code(Model::from_json("[]")), Code::Parse);
    assert!(matches!(code(Model::from_file("/nonexistent/model.json")), Code::NotFound | Code::Io));
}

/// InvalidArgument whose message says that `what` holds a NUL byte.
fn nul_refused<T>(r: dp::Result<T>, what: &str) {
    match r {
        Ok(_) => panic!("{} with a NUL byte was accepted", what),
        Err(e) => {
            assert_eq!(e.code(), Code::InvalidArgument, "{}: {}", what, e);
            assert!(e.message().starts_with(&format!("{} contains a NUL byte", what)), "{}: {}", what, e);
        }
    }
}

/// A C string ends at its first NUL: "w1\0x" would reach dp as "w1" (and
/// overwrite it), a path as another file. Every name and path is refused,
/// and nothing is touched.
#[test]
fn interior_nul_is_invalid_argument() {
    let dir = common::temp_dir("nul");
    let ckpt = format!("{}/c.dpckpt", dir);
    let ws = Workspace::new().unwrap();
    let t = Tensor::new(&[1], &[1f32]).unwrap();
    ws.feed("w1", &Tensor::new(&[1], &[7f32]).unwrap()).unwrap();
    dp::checkpoint::save(&ws, &["w1"], &ckpt, None).unwrap();
    nul_refused(ws.feed("w1\0x", &t), "blob name");
    nul_refused(ws.fetch("w1\0x"), "blob name");
    nul_refused(ws.has_blob("w1\0"), "blob name");
    nul_refused(ws.list_blobs("w\0"), "prefix");
    nul_refused(NetDef::from_file(&format!("{}\0.json", ckpt)), "path");
    nul_refused(Model::from_file(&format!("{}\0.json", ckpt)), "path");
    nul_refused(Tensor::from_idx_file(&format!("{}\0", ckpt)), "path");
    nul_refused(dp::checkpoint::save(&ws, &["w1\0x"], &ckpt, None), "blob name");
    nul_refused(dp::checkpoint::save(&ws, &["w1"], &format!("{}\0.tmp", ckpt), None), "path");
    let opts = dp::SaveOptions { model_name: Some("m\0".into()), ..Default::default() };
    nul_refused(dp::checkpoint::save(&ws, &["w1"], &ckpt, Some(&opts)), "model_name");
    nul_refused(dp::checkpoint::save_async(&ws, &["w1"], &format!("{}\0", ckpt), None), "path");
    nul_refused(dp::checkpoint::load(&ws, &format!("{}\0", ckpt), None), "path");
    let names = dp::LoadOptions { names: Some(vec!["w1\0x".into()]), ..Default::default() };
    nul_refused(dp::checkpoint::load(&ws, &ckpt, Some(&names)), "tensor name");
    nul_refused(dp::CheckpointInfo::from_file(&format!("{}\0", ckpt)), "path");
    nul_refused(dp::checkpoint::list_steps(&format!("{}\0/x", dir)), "dir");
    nul_refused(dp::checkpoint::prune(&format!("{}\0/x", dir), 1), "dir");
    let model = Model::from_file(&common::fashion_mlp_path()).unwrap();
    let pm = model.parallelize(&dp::ParallelOptions { num_shards: 1, ..dp::ParallelOptions::cpu(1) }).unwrap();
    nul_refused(pm.save(&ws, &format!("{}\0", ckpt), None), "path");
    nul_refused(pm.load(&ws, &format!("{}\0", ckpt), None), "path");
    let def = NetDef::from_json(ADD).unwrap();
    let grads = dp::GradientOptions { losses: vec!["c\0".into()], ..Default::default() };
    nul_refused(def.add_gradients(&grads), "loss name");
    assert_eq!(ws.fetch("w1").unwrap().to_vec::<f32>().unwrap(), vec![7.0]);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "only the checkpoint saved first");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Dtypes are named as dp names them.
#[test]
fn dtype_errors_name_the_dtypes() {
    let t = Tensor::new(&[2], &[1i32, 2]).unwrap();
    for e in [t.to_vec::<f32>().unwrap_err(), t.as_slice::<f32>().unwrap_err()] {
        assert_eq!(e.code(), Code::Dtype);
        assert_eq!(e.message(), "tensor holds int32, not float32");
    }
    assert_eq!(dp::DType::UInt8.to_string(), "uint8");
    assert_eq!(dp::dtype_name(99), "dtype 99");
}

#[test]
fn tensors_and_feeds() {
    // Element count does not match the shape.
    assert!(matches!(code(Tensor::new(&[2, 2], &[1f32, 2.0, 3.0])), Code::Shape | Code::InvalidArgument));
    assert!(matches!(code(Tensor::from_vec(&[5], vec![1i32])), Code::Shape | Code::InvalidArgument));
    assert!(matches!(code(Tensor::from_bytes_raw(99, &[1], &[0])), Code::Dtype | Code::InvalidArgument));
    assert!(matches!(code(Tensor::new(&[-1], &[0f32; 0])), Code::Shape | Code::InvalidArgument));
    assert!(matches!(code(Tensor::from_idx_file("/nonexistent.idx")), Code::NotFound | Code::Io));

    let ws = Workspace::new().unwrap();
    assert_eq!(code(ws.fetch("missing")), Code::NotFound);
    let def = NetDef::from_json(ADD).unwrap();
    let net = Net::new(&ws, &def, None).unwrap();
    // Missing input: created but never fed.
    assert!(net.run().is_err());
    // Wrong dtype fed.
    ws.feed("a", &Tensor::new(&[2], &[1f32, 2.0]).unwrap()).unwrap();
    ws.feed("b", &Tensor::new(&[2], &[1i32, 2]).unwrap()).unwrap();
    assert_eq!(code(net.run()), Code::Dtype);
    // Wrong shape fed.
    ws.feed("b", &Tensor::new(&[3], &[1f32, 2.0, 3.0]).unwrap()).unwrap();
    assert_eq!(code(net.run()), Code::Shape);
    // The net stays usable.
    ws.feed("b", &Tensor::new(&[2], &[10f32, 20.0]).unwrap()).unwrap();
    net.run().unwrap();
    assert_eq!(ws.fetch("c").unwrap().to_vec::<f32>().unwrap(), vec![11.0, 22.0]);
    // Reading a tensor as the wrong type.
    assert_eq!(code(ws.fetch("c").unwrap().to_vec::<i32>()), Code::Dtype);
}

#[test]
fn bad_options_and_state() {
    assert_eq!(code(dp::device_count_raw(42)), Code::InvalidArgument);
    let model = Model::from_file(&common::fashion_mlp_path()).unwrap();
    assert_eq!(code(model.blobs_raw(77)), Code::InvalidArgument);
    let bad = dp::TrainingOptions { lr: -1.0, ..Default::default() };
    assert_eq!(code(model.build_training(Some(&bad))), Code::InvalidArgument);
    let p = model.parallelize(&dp::ParallelOptions { num_shards: 1, ..dp::ParallelOptions::cpu(1) }).unwrap();
    assert_eq!(code(p.accumulate_net()), Code::FailedPrecondition);
    assert_eq!(code(p.block_net()), Code::FailedPrecondition);
    let dup = dp::ParallelOptions { device_ids: vec![0, 0], num_shards: 1, ..Default::default() };
    assert_eq!(code(model.parallelize(&dup)), Code::InvalidArgument);
    let ws = Workspace::new().unwrap();
    assert_eq!(code(p.sync(&ws)), Code::NotFound);
    assert_eq!(code(dp::checkpoint::prune("/tmp", -1)), Code::InvalidArgument);
    assert!(matches!(code(dp::checkpoint::CheckpointInfo::from_file("/nonexistent.dpckpt")), Code::NotFound | Code::Io));
    let share = dp::SaveOptions { async_write_share: 2.0, ..Default::default() };
    assert_eq!(code(dp::checkpoint::save_async(&ws, &[] as &[&str], "/tmp/never.dpckpt", Some(&share))), Code::InvalidArgument);
    let no_opt = Model::from_json(&model.to_json().unwrap().replace("\"optimizer\"", "\"unused_optimizer\"")).ok();
    if let Some(m) = no_opt {
        assert_eq!(code(m.optimizer()), Code::NotFound);
    }
}

#[test]
fn async_run_guards_the_workspace() {
    let ws = Workspace::new().unwrap();
    ws.feed("a", &Tensor::new(&[1], &[1f32]).unwrap()).unwrap();
    ws.feed("b", &Tensor::new(&[1], &[2f32]).unwrap()).unwrap();
    let def = NetDef::from_json(ADD).unwrap();
    let net = Net::new(&ws, &def, None).unwrap();
    {
        let mut run = net.run_async().unwrap();
        // While it may run, the binding refuses touching the workspace.
        let t = Tensor::new(&[1], &[5f32]).unwrap();
        assert_eq!(code(ws.feed("a", &t)), Code::FailedPrecondition);
        assert_eq!(code(net.run()), Code::FailedPrecondition);
        run.wait(60_000).unwrap();
        assert!(run.is_finished());
        run.wait(0).unwrap();
    }
    assert_eq!(ws.fetch("c").unwrap().to_vec::<f32>().unwrap(), vec![3.0]);
    // Dropping an unfinished run cancels and waits.
    let _ = net.run_async().unwrap();
    net.run().unwrap();
    net.canceller().cancel(); // nothing running: does nothing
}

mod common;
