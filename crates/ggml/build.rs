//! Records the compiler and target this crate is built with: a loadable backend library must
//! have been built with the same ones (`backend::load` checks it), since Rust types cross the
//! library boundary.

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let version = std::process::Command::new(&rustc)
        .arg("-V")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown rustc".to_string());
    println!("cargo:rustc-env=GGML_RS_RUSTC={version}");
    println!(
        "cargo:rustc-env=GGML_RS_TARGET={}",
        std::env::var("TARGET").unwrap_or_default()
    );
    println!("cargo:rerun-if-changed=build.rs");
}
