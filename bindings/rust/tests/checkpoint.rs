//! Checkpoint save/load/async/info/list/prune round trips, one-device and
//! data-parallel.
use dp::checkpoint::{self, CheckpointInfo};
use dp::{Code, LoadOptions, Model, Net, SaveOptions, Tensor, Workspace};

fn trained(model: &Model, ws: &Workspace<'_>, steps: u64) {
    let nets = model.build_training(None).unwrap();
    let init = Net::new(ws, &nets.init, None).unwrap();
    let train = Net::new(ws, &nets.train, None).unwrap();
    init.run().unwrap();
    for s in 0..steps {
        let (x, y) = common::batch(8, s);
        ws.feed("data", &Tensor::new(&[8, 784], &x).unwrap()).unwrap();
        ws.feed("label", &Tensor::new(&[8], &y).unwrap()).unwrap();
        train.run().unwrap();
    }
}

fn state(ws: &Workspace<'_>, names: &[String]) -> Vec<Vec<u8>> {
    names.iter().map(|n| ws.fetch(n).unwrap().bytes().to_vec()).collect()
}

#[test]
fn save_load_info_round_trip() {
    let dir = common::temp_dir("ckpt");
    let model = Model::from_file(&common::fashion_mlp_path()).unwrap();
    let names = model.checkpoint_blobs().unwrap();
    let ws = Workspace::new().unwrap();
    trained(&model, &ws, 2);
    let path = checkpoint::step_path(&dir, 2);
    let opts = SaveOptions { model_name: Some("fashion".into()), ..Default::default() };
    checkpoint::save(&ws, &names, &path, Some(&opts)).unwrap();

    let info = CheckpointInfo::from_file(&path).unwrap();
    assert_eq!(info.dp_version(), dp::version());
    assert_eq!(info.model_name(), "fashion");
    assert_eq!(info.iteration(), 2, "from optimizer/iter");
    assert_eq!(info.num_tensors(), names.len());
    let fc1 = info.tensors().into_iter().find(|t| t.name == "fc1_w").unwrap();
    assert_eq!(fc1.dims, &[512, 784]);
    assert_eq!(fc1.dtype(), Some(dp::DType::Float32));
    assert_eq!(fc1.nbytes, 512 * 784 * 4);
    assert!(info.tensor(names.len()).is_none());

    // A fresh workspace after init differs; loading restores every byte.
    let ws2 = Workspace::new().unwrap();
    trained(&model, &ws2, 0);
    assert_ne!(state(&ws2, &names), state(&ws, &names));
    checkpoint::load(&ws2, &path, None).unwrap();
    assert_eq!(state(&ws2, &names), state(&ws, &names));

    // mmap + subset + lenient into an empty workspace.
    let ws3 = Workspace::new().unwrap();
    let lo = LoadOptions { names: Some(vec!["fc3_b".into(), "nope".into()]), lenient: true, mmap: true, ..Default::default() };
    checkpoint::load(&ws3, &path, Some(&lo)).unwrap();
    assert_eq!(ws3.list_blobs("").unwrap(), vec!["fc3_b"]);
    // Strict load of a missing name fails and changes nothing.
    let strict = LoadOptions { names: Some(vec!["nope".into()]), ..Default::default() };
    assert_eq!(checkpoint::load(&ws3, &path, Some(&strict)).unwrap_err().code(), Code::NotFound);

    // Corrupt a copy: DataLoss, never a crash.
    let bad = format!("{}/step-000000001.dpckpt", dir);
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(&bad, &bytes).unwrap();
    assert_eq!(checkpoint::load(&ws2, &bad, None).unwrap_err().code(), Code::DataLoss);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn async_save_list_and_prune() {
    let dir = common::temp_dir("async");
    let model = Model::from_file(&common::fashion_mlp_path()).unwrap();
    let names = model.checkpoint_blobs().unwrap();
    let ws = Workspace::new().unwrap();
    trained(&model, &ws, 1);
    for it in 1..=4 {
        let opts = SaveOptions { iteration: it, async_write_share: 1.0, ..Default::default() };
        let job = checkpoint::save_async(&ws, &names, &checkpoint::step_path(&dir, it), Some(&opts)).unwrap();
        // Job is Send + Sync: wait on another thread, bounded.
        std::thread::scope(|s| s.spawn(|| job.wait(60_000)).join().unwrap()).unwrap();
        job.wait(0).unwrap(); // finished: same result again
    }
    // Every blob with a tensor, via the empty name list.
    let all = format!("{}/all.dpckpt", dir);
    checkpoint::save(&ws, &[] as &[&str], &all, None).unwrap();
    assert!(CheckpointInfo::from_file(&all).unwrap().num_tensors() >= names.len());

    let steps = checkpoint::list_steps(&dir).unwrap();
    assert_eq!(steps, (1..=4).rev().map(|i| checkpoint::step_path(&dir, i)).collect::<Vec<_>>());
    assert_eq!(CheckpointInfo::from_file(&steps[0]).unwrap().iteration(), 4);
    checkpoint::prune(&dir, 2).unwrap();
    assert_eq!(checkpoint::list_steps(&dir).unwrap(), vec![checkpoint::step_path(&dir, 4), checkpoint::step_path(&dir, 3)]);
    checkpoint::prune(&dir, 0).unwrap();
    assert_eq!(checkpoint::list_steps(&dir).unwrap().len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn parallel_save_loads_into_one_device_and_back() {
    let dir = common::temp_dir("par");
    let model = Model::from_file(&common::fashion_mlp_path()).unwrap();
    let names = model.checkpoint_blobs().unwrap();
    let ws1 = Workspace::new().unwrap();
    trained(&model, &ws1, 2);
    let one = checkpoint::step_path(&dir, 2);
    checkpoint::save(&ws1, &names, &one, None).unwrap();

    let p = model.parallelize(&dp::ParallelOptions { num_shards: 1, ..dp::ParallelOptions::cpu(2) }).unwrap();
    let nets = p.nets().unwrap();
    let ws = Workspace::new().unwrap();
    Net::new(&ws, &nets.init, None).unwrap().run().unwrap();
    p.load(&ws, &one, Some(&LoadOptions::default())).unwrap();
    for n in &names {
        let a = ws1.fetch(n).unwrap().bytes().to_vec();
        assert!(ws.fetch(&format!("cpu_0/{}", n)).map(|t| t.bytes().to_vec()).unwrap_or_default() == a
            || ws.fetch(n).map(|t| t.bytes().to_vec()).unwrap_or_default() == a, "blob {}", n);
        if n != "optimizer/iter" {
            assert!(ws.fetch(&format!("cpu_1/{}", n)).unwrap().bytes() == &a[..], "replica 1 synced: {}", n);
        }
    }
    let back = format!("{}/par.dpckpt", dir);
    p.save(&ws, &back, Some(&SaveOptions::default())).unwrap();
    let info = CheckpointInfo::from_file(&back).unwrap();
    assert_eq!(info.model_name(), "fashion_mlp");
    assert_eq!(info.iteration(), 2);
    let ws3 = Workspace::new().unwrap();
    trained(&model, &ws3, 0);
    checkpoint::load(&ws3, &back, None).unwrap();
    assert_eq!(state(&ws3, &names), state(&ws1, &names));
    let _ = std::fs::remove_dir_all(&dir);
}

mod common;
