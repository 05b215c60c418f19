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

#[test]
fn interior_nul_is_invalid_argument() {
    let ws = Workspace::new().unwrap();
    let t = Tensor::new(&[1], &[1f32]).unwrap();
    assert_eq!(code(ws.feed("a\0b", &t)), Code::InvalidArgument);
    assert_eq!(code(ws.fetch("a\0b")), Code::InvalidArgument);
    assert_eq!(code(NetDef::from_file("x\0y")), Code::InvalidArgument);
    assert_eq!(code(dp::checkpoint::list_steps("d\0")), Code::InvalidArgument);
    let opts = dp::SaveOptions { model_name: Some("m\0".into()), ..Default::default() };
    assert_eq!(code(dp::checkpoint::save(&ws, &["a"], "/tmp/x.dpckpt", Some(&opts))), Code::InvalidArgument);
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
