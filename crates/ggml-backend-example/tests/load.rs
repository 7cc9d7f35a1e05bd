//! The example backend as a shared library: loaded with `backend::load`, computing a graph,
//! found by `load_all_from_path` under GGML's file names, and unloaded. One test, because the
//! registry is process-wide.

use std::path::{Path, PathBuf};

use ggml::{backend, Context, Type};

/// The example's shared library, built by cargo with this test (the crate is a `cdylib`);
/// built with cargo here if it is missing.
fn library() -> PathBuf {
    let name = format!(
        "{}ggml_backend_example{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    let candidates = [deps.join(&name), deps.parent().unwrap().join(&name)];
    if let Some(p) = candidates.iter().find(|p| p.is_file()) {
        return p.clone();
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["build", "-p", "ggml-backend-example", "--lib"]);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    assert!(
        cmd.status().unwrap().success(),
        "cargo build of the example"
    );
    candidates.into_iter().find(|p| p.is_file()).expect("built")
}

fn scratch_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ggml-load-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `a + b` then `(a + b) * b` on the example device; returns the result.
fn compute_on(stream: &ggml::Backend, a: &[f32], b: &[f32]) -> ggml::Result<Vec<f32>> {
    let ctx = Context::init(1 << 20, true)?;
    let ta = ctx.new_tensor_1d(Type::F32, a.len() as i64)?;
    let tb = ctx.new_tensor_1d(Type::F32, b.len() as i64)?;
    let out = ctx.mul(&ctx.add(&ta, &tb)?, &tb)?;
    let g = ctx.build_forward_expand(&out)?;
    let _buf = backend::alloc_ctx_tensors(&ctx, stream)?;
    ta.set_f32(a)?;
    tb.set_f32(b)?;
    stream.graph_compute(&g)?;
    out.get_f32()
}

fn err_text<T: std::fmt::Debug>(r: ggml::Result<T>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn load_compute_unload_and_search() {
    let lib = library();
    let n_regs = backend::reg_count();

    // Errors first: each names the path and what is wrong.
    let missing = Path::new("/nonexistent/libggml-none.so");
    assert!(err_text(backend::load(missing)).contains("/nonexistent/libggml-none.so"));
    let junk = scratch_dir("junk").join("libggml-junk.so");
    std::fs::write(&junk, b"not a library").unwrap();
    assert!(err_text(backend::load(&junk)).contains("cannot open"));
    assert_eq!(backend::reg_count(), n_regs);

    // Load, compute.
    let reg = backend::load(&lib).unwrap();
    assert_eq!(reg.name(), "Example");
    assert_eq!(backend::reg_count(), n_regs + 1);
    assert!(backend::loaded_libraries()
        .iter()
        .any(|(p, r)| p == &lib && r == &reg));
    let dev = backend::dev_by_name("example0").expect("its device is registered");
    let stream = dev.init(None).unwrap();
    let got = compute_on(&stream, &[1.0, 2.0, -3.0], &[4.0, 0.5, 2.0]).unwrap();
    assert_eq!(got, vec![20.0, 1.25, -2.0]);
    assert!(err_text(dev.init(Some("x"))).contains("not understood"));

    // Unload: the registry and device leave, the device refuses new streams, and a stream made
    // before refuses graphs (an Err, never a call into unmapped code: the code stays mapped).
    backend::unload(reg.clone()).unwrap();
    assert_eq!(backend::reg_count(), n_regs);
    assert!(backend::dev_by_name("Example0").is_none());
    assert!(err_text(dev.init(None)).contains("unloaded"));
    assert!(!dev.supports_op(
        &Context::init(1 << 12, true)
            .unwrap()
            .new_tensor_1d(Type::F32, 1)
            .unwrap()
    ));
    assert!(err_text(compute_on(&stream, &[1.0], &[2.0])).contains("cannot use"));
    assert!(err_text(backend::unload(reg)).contains("not loaded"));

    // GGML's search: a variant `libggml-<name>-<variant>.so` with a score above 0 is found.
    let dir = scratch_dir("search");
    std::fs::copy(
        &lib,
        dir.join(format!(
            "libggml-cpu-example{}",
            std::env::consts::DLL_SUFFIX
        )),
    )
    .unwrap();
    let found = backend::load_all_from_path(&dir);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].name(), "Example");
    assert!(backend::dev_by_name("Example0").is_some());
    backend::unload(found[0].clone()).unwrap();
    assert!(backend::load_all_from_path(scratch_dir("empty")).is_empty());
    assert_eq!(backend::reg_count(), n_regs);
}
