//! Loading a GGUF file's tensors into a context: zero-copy over the mapping on the CPU, or
//! copied into a buffer; then computing with them.

use ggml::gguf::{GgufFile, GgufWriter};
use ggml::{backend, Context, Type};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn write_model(dir: &std::path::Path) -> std::path::PathBuf {
    let w: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect(); // 3 rows of 4
    let b: Vec<f32> = vec![1.0, -1.0, 0.25];
    let h: Vec<u8> = (0..8)
        .flat_map(|i| ggml::f16::from_f32(i as f32).to_le_bytes())
        .collect();
    let mut wr = GgufWriter::new();
    wr.set("general.name", "tiny").unwrap();
    wr.add_tensor("w", Type::F32, &[4, 3], f32_bytes(&w))
        .unwrap();
    wr.add_tensor("b", Type::F32, &[3], f32_bytes(&b)).unwrap();
    wr.add_tensor("h", Type::F16, &[8], h).unwrap();
    let path = dir.join("tiny.gguf");
    wr.write_to_file(&path).unwrap();
    path
}

fn tmpdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ggml-gguf-load-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// y = w·x + b with x = [1, 1, 1, 1]: row sums of w plus b.
fn check_affine(ctx_w: &Context, cpu: &ggml::Backend) {
    let w = ctx_w.get_tensor("w").unwrap();
    let b = ctx_w.get_tensor("b").unwrap();
    let ctx = Context::init(1 << 20, false).unwrap();
    let x = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    x.set_f32(&[1.0; 4]).unwrap();
    let y = ctx.add(&ctx.mul_mat(&w, &x).unwrap(), &b).unwrap();
    cpu.graph_compute(&ctx.build_forward_expand(&y).unwrap())
        .unwrap();
    assert_eq!(
        y.get_f32().unwrap(),
        vec![3.0 + 1.0, 11.0 - 1.0, 19.0 + 0.25]
    );
}

#[test]
fn mapped_load_binds_without_copy_and_refuses_writes() {
    let dir = tmpdir("mapped");
    let path = write_model(&dir);
    let file = GgufFile::open(&path).unwrap();
    let cpu = backend::cpu_init().unwrap();
    let loaded = file.load_tensors(&cpu).unwrap();
    assert!(loaded.mapped);
    assert!(loaded.buffer.is_read_only());
    assert_eq!(loaded.buffer.name(), "CPU_Mapped");
    let names: Vec<String> = loaded.ctx.tensors().iter().map(|t| t.name()).collect();
    assert_eq!(names, ["w", "b", "h"]);

    // The tensor's bytes are the file's bytes, at the same address.
    let w = loaded.ctx.get_tensor("w").unwrap();
    let base = loaded.buffer.get_base().unwrap().as_ptr() as usize;
    assert_eq!(base, file.as_bytes().as_ptr() as usize);
    let h = loaded.ctx.get_tensor("h").unwrap();
    assert_eq!(
        h.get_f32().unwrap(),
        (0..8).map(|i| i as f32).collect::<Vec<_>>()
    );
    check_affine(&loaded.ctx, &cpu);

    // Writes are errors, not faults.
    let e = w.set_f32(&[0.0; 12]).unwrap_err().to_string();
    assert!(e.contains("read-only"), "{e}");
    let ctx = Context::init(1 << 20, false).unwrap();
    let inplace = ctx.scale_inplace(&w, 2.0).unwrap();
    let g = ctx.build_forward_expand(&inplace).unwrap();
    let e = cpu.graph_compute(&g).unwrap_err().to_string();
    assert!(e.contains("read-only"), "{e}");
    // The mapping outlives the file handle: dropping `file` keeps the buffer valid.
    drop(file);
    check_affine(&loaded.ctx, &cpu);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn copied_load_is_writable() {
    let dir = tmpdir("copied");
    let path = write_model(&dir);
    let file = GgufFile::open(&path).unwrap();
    let cpu = backend::cpu_init().unwrap();
    let loaded = file
        .load_tensors_copied(&backend::cpu_buffer_type())
        .unwrap();
    assert!(!loaded.mapped);
    assert!(!loaded.buffer.is_read_only());
    check_affine(&loaded.ctx, &cpu);
    let b = loaded.ctx.get_tensor("b").unwrap();
    b.set_f32(&[0.0; 3]).unwrap();
    assert_eq!(b.get_f32().unwrap(), vec![0.0; 3]);

    // A file read into memory (not mapped) is loaded by copying.
    let in_memory = GgufFile::from_vec(std::fs::read(&path).unwrap()).unwrap();
    let loaded = in_memory.load_tensors(&cpu).unwrap();
    assert!(!loaded.mapped);
    check_affine(&loaded.ctx, &cpu);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn loading_reports_its_progress_in_bytes() {
    let dir = tmpdir("progress");
    let path = write_model(&dir);
    let cpu = backend::cpu_init().unwrap();
    let file = GgufFile::open(&path).unwrap();
    let total: usize = file.tensors().iter().map(|t| t.size()).sum();
    // w: 3x4 f32, b: 3 f32, h: 8 f16.
    assert_eq!(total, 12 * 4 + 3 * 4 + 8 * 2);
    let mut calls = Vec::new();
    let mapped = file
        .load_tensors_with_progress(&cpu, &mut |done, all| calls.push((done, all)))
        .unwrap();
    assert!(mapped.mapped);
    // Mapping binds every byte at once.
    assert_eq!(calls, [(total, total)]);

    let in_memory = GgufFile::from_vec(std::fs::read(&path).unwrap()).unwrap();
    calls.clear();
    let copied = in_memory
        .load_tensors_with_progress(&cpu, &mut |done, all| calls.push((done, all)))
        .unwrap();
    assert!(!copied.mapped);
    // One report per tensor copied, in file order.
    assert_eq!(calls, [(48, total), (60, total), (76, total)]);
    check_affine(&copied.ctx, &cpu);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_file_without_tensors_loads_empty_either_way() {
    let dir = tmpdir("empty");
    let path = dir.join("meta.gguf");
    let mut wr = GgufWriter::new();
    wr.set("general.name", "metadata only").unwrap();
    wr.write_to_file(&path).unwrap();
    let file = GgufFile::open(&path).unwrap();
    let cpu = backend::cpu_init().unwrap();
    let mapped = file.load_tensors(&cpu).unwrap();
    let copied = file
        .load_tensors_copied(&backend::cpu_buffer_type())
        .unwrap();
    for loaded in [mapped, copied] {
        assert!(loaded.ctx.tensors().is_empty());
    }
    std::fs::remove_dir_all(&dir).ok();
}
