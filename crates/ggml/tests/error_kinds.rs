//! Errors tell their kind apart (`Error::kind`), and each "does not fit" error names the
//! function that sizes what did not fit.

use ggml::gguf::GgufFile;
use ggml::{backend, quants, Context, ErrorKind, Status, Type};

#[test]
fn full_contexts_name_the_overhead_of_what_did_not_fit() {
    let ctx = Context::init(ggml::tensor_overhead(), true).unwrap();
    ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let e = ctx.new_tensor_1d(Type::F32, 4).unwrap_err();
    assert_eq!(
        (e.kind(), e.status()),
        (ErrorKind::AllocFailed, Status::AllocFailed)
    );
    assert!(e.message().contains("tensor_overhead() per tensor"), "{e}");
    assert!(
        !e.message().contains("data"),
        "no data in a no_alloc context: {e}"
    );

    let with_data = Context::init(ggml::tensor_overhead() + 16, false).unwrap();
    let e = with_data.new_tensor_1d(Type::F32, 64).unwrap_err();
    assert!(e.message().contains("plus each tensor's data"), "{e}");

    let e = ctx.new_graph().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AllocFailed);
    assert!(
        e.message().contains("graph_overhead_custom(2048, false)"),
        "{e}"
    );
    assert!(
        e.message().contains("graph_overhead() per default graph"),
        "{e}"
    );
    assert!(!e.message().contains("tensor_overhead"), "{e}");
}

#[test]
fn full_graphs_and_buffers_say_how_to_size_them() {
    let ctx = Context::for_metadata(4, 2).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let b = ctx
        .relu(&ctx.relu(&ctx.relu(&a).unwrap()).unwrap())
        .unwrap();
    let g = ctx.new_graph_custom(2, false).unwrap();
    let e = g.build_forward_expand(&b).unwrap_err();
    assert!(e.message().contains("new_graph_custom(larger size)"), "{e}");
    assert!(e.message().contains("graph_overhead_custom"), "{e}");

    let cpu = backend::cpu_init().unwrap();
    let buf = cpu.alloc_buffer(8).unwrap();
    let e = backend::tensor_alloc(&buf, &a, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AllocFailed);
    assert!(e.message().contains("get_alloc_size"), "{e}");
}

#[test]
fn kinds_tell_arguments_support_io_format_and_use_after_free_apart() {
    let ctx = Context::for_metadata(2, 0).unwrap();
    assert_eq!(
        ctx.new_tensor_1d(Type::Q4_0, 33).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let mut out = vec![0u8; Type::Q8_K.row_size(256).unwrap()];
    let e = quants::quantize_chunk(Type::Q8_K, &[0.0; 256], &mut out, 0, 1, 256, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    let missing = std::env::temp_dir().join(format!("ggml-no-such-{}.gguf", std::process::id()));
    assert_eq!(GgufFile::open(&missing).unwrap_err().kind(), ErrorKind::Io);
    assert_eq!(
        GgufFile::from_bytes(b"junk").unwrap_err().kind(),
        ErrorKind::Format
    );

    let cpu = backend::cpu_init().unwrap();
    let t = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let buf = backend::alloc_ctx_tensors(&ctx, &cpu).unwrap();
    buf.free();
    let e = t.get_f32().unwrap_err();
    assert_eq!((e.kind(), e.status()), (ErrorKind::Freed, Status::Failed));
    // The message is the Display text without the kind's prefix.
    assert_eq!(e.to_string(), format!("use after free: {}", e.message()));
}
