//! Fails when dp.h declares a function that the binding does not declare in
//! src/sys.rs or does not call from a safe module.
use std::fs;
use std::path::PathBuf;

fn declared_in_header() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let header = fs::read_to_string(root.join("../../include/dp/dp.h")).expect("read include/dp/dp.h");
    // Strip comments so prose mentioning DP_API does not count.
    let mut text = String::new();
    let mut rest = header.as_str();
    while let Some(i) = rest.find("/*") {
        text.push_str(&rest[..i]);
        rest = match rest[i..].find("*/") {
            Some(j) => &rest[i + j + 2..],
            None => "",
        };
    }
    text.push_str(rest);
    let mut names = Vec::new();
    for (i, _) in text.match_indices("DP_API ") {
        let decl = &text[i..];
        let paren = match decl.find('(') {
            Some(p) => p,
            None => continue,
        };
        let head = &decl[..paren];
        if head.contains('#') || head.contains('\n') && head.contains("define") {
            continue;
        }
        let ident: String = head
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect::<String>()
            .chars()
            .rev()
            .collect();
        if ident.starts_with("dp_") {
            names.push(ident);
        }
    }
    names.sort();
    names.dedup();
    names
}

#[test]
fn every_header_function_is_wrapped() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let names = declared_in_header();
    assert!(names.len() >= 130, "parsed only {} DP_API functions from dp.h", names.len());
    let sys = fs::read_to_string(root.join("src/sys.rs")).unwrap();
    let mut safe = String::new();
    for e in fs::read_dir(root.join("src")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().map_or(false, |x| x == "rs") && p.file_name().unwrap() != "sys.rs" {
            safe.push_str(&fs::read_to_string(&p).unwrap());
        }
    }
    let mut missing_sys = Vec::new();
    let mut missing_safe = Vec::new();
    for n in &names {
        if !sys.contains(&format!("pub fn {}(", n)) {
            missing_sys.push(n.clone());
        }
        if !safe.contains(&format!("sys::{}(", n)) {
            missing_safe.push(n.clone());
        }
    }
    assert!(missing_sys.is_empty(), "not declared in src/sys.rs: {:?}", missing_sys);
    assert!(missing_safe.is_empty(), "not called from the safe API: {:?}", missing_safe);
}

#[test]
fn header_version_matches_library() {
    assert_eq!(dp::version_number(), dp::sys::DP_VERSION_NUMBER);
    assert_eq!(
        dp::version(),
        format!("{}.{}.{}", dp::sys::DP_VERSION_MAJOR, dp::sys::DP_VERSION_MINOR, dp::sys::DP_VERSION_PATCH)
    );
}

#[test]
fn struct_sizes_are_the_c_ones() {
    use dp::sys::*;
    use std::mem::size_of;
    // x86-64/aarch64 LP64 layouts of dp.h's structs.
    assert_eq!(size_of::<dp_workspace_options>(), 16);
    assert_eq!(size_of::<dp_net_options>(), 36);
    assert_eq!(size_of::<dp_gradient_options>(), 72);
    assert_eq!(size_of::<dp_training_options>(), 48);
    assert_eq!(size_of::<dp_inference_options>(), 8);
    assert_eq!(size_of::<dp_checkpoint_save_options>(), 32);
    assert_eq!(size_of::<dp_checkpoint_load_options>(), 40);
    assert_eq!(size_of::<dp_build_info>(), 120);
    assert_eq!(size_of::<dp_memory_stats>(), 48);
    assert_eq!(size_of::<dp_net_memory>(), 48);
    assert_eq!(size_of::<dp_optimizer_info>(), 128);
    assert_eq!(size_of::<dp_parallel_options>(), 184);
    assert_eq!(size_of::<dp_loader_options>(), 64);
    assert_eq!(size_of::<dp_loader_input>(), 32);
    assert_eq!(size_of::<dp_onnx_import_options>(), 24);
    assert_eq!(size_of::<dp_onnx_export_options>(), 32);
}
