//! Finds libdp: `DP_LIB_DIR` (a directory holding libdp.so) wins; otherwise
//! the `pkg-config` executable is asked for `dp` (no crates: the build has
//! no registry). Set PKG_CONFIG_PATH to build-dir/meson-uninstalled to use
//! an uninstalled build.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=DP_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    if let Ok(dir) = env::var("DP_LIB_DIR") {
        if !dir.is_empty() {
            println!("cargo:rustc-link-search=native={}", dir);
            println!("cargo:rustc-link-lib=dylib=dp");
            return;
        }
    }
    let out = Command::new("pkg-config").args(["--libs-only-L", "--libs-only-l", "dp"]).output();
    match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            let mut linked = false;
            for flag in text.split_whitespace() {
                if let Some(dir) = flag.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={}", dir);
                } else if let Some(lib) = flag.strip_prefix("-l") {
                    println!("cargo:rustc-link-lib=dylib={}", lib);
                    linked |= lib == "dp";
                }
            }
            if !linked {
                println!("cargo:rustc-link-lib=dylib=dp");
            }
        }
        _ => {
            // Neither source: fall back to the linker's default search path.
            println!("cargo:warning=pkg-config found no 'dp' and DP_LIB_DIR is unset; linking -ldp from default paths");
            println!("cargo:rustc-link-lib=dylib=dp");
        }
    }
}
