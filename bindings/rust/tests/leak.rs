//! 10,000 create/free cycles of every kind of handle keep RSS flat.
use dp::{Model, Net, NetDef, Tensor, Workspace};

fn rss_pages() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    s.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn cycle(def: &NetDef, model: &Model, i: usize) {
    let data = vec![i as f32; 64];
    let ws = Workspace::new().unwrap();
    ws.feed("a", &Tensor::borrowed(&[64], &data).unwrap()).unwrap();
    ws.feed("b", &Tensor::from_vec(&[64], vec![1f32; 64]).unwrap()).unwrap();
    let net = Net::new(&ws, def, None).unwrap();
    net.run().unwrap();
    assert_eq!(ws.fetch("c").unwrap().as_slice::<f32>().unwrap()[0], i as f32 + 1.0);
    assert_eq!(ws.list_blobs("").unwrap().len(), 3);
    let _ = NetDef::from_json("{bad").unwrap_err(); // statuses are freed too
    let _ = def.to_json().unwrap();
    let _ = model.blobs(dp::BlobList::Params).unwrap();
    let _ = model.net(dp::ModelNet::Init).unwrap();
}

#[test]
fn ten_thousand_cycles_flat_rss() {
    let def = NetDef::from_json(
        r#"{"external_inputs":["a","b"],"ops":[{"type":"Add","inputs":["a","b"],"outputs":["c"]}]}"#,
    )
    .unwrap();
    let model = Model::from_file(&common::fashion_mlp_path()).unwrap();
    for i in 0..1000 {
        cycle(&def, &model, i); // warm up allocator pools
    }
    let before = rss_pages();
    for i in 0..10_000 {
        cycle(&def, &model, i);
    }
    let after = rss_pages();
    let grown_kib = after.saturating_sub(before) * 4;
    // A leak of even one small handle per cycle would show as > 1 MiB.
    assert!(grown_kib < 1024, "RSS grew by {} KiB over 10,000 cycles", grown_kib);
}

mod common;
