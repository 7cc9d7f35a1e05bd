use ggml::{backend, Context, Type};

#[test]
fn relu_async_roundtrip() {
    let cpu = backend::cpu_init().unwrap();
    let ctx = Context::init(16 * 1024 * 1024, false).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 100).unwrap();
    let b = ctx.relu(&a).unwrap();
    let graph = ctx.build_forward_expand(&b).unwrap();
    let input: Vec<f32> = (0..100).map(|i| i as f32 - 50.0).collect();
    a.set_f32(&input).unwrap();
    cpu.graph_compute_async(&graph).unwrap();
    cpu.synchronize().unwrap();
    let out = b.get_f32().unwrap();
    let want: Vec<f32> = input.iter().map(|x| x.max(0.0)).collect();
    assert_eq!(out, want);
}

#[test]
fn mul_mat_small() {
    let cpu = backend::cpu_init().unwrap();
    let ctx = Context::init(1 << 20, false).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 2, 3).unwrap(); // 3 rows of 2
    let b = ctx.new_tensor_2d(Type::F32, 2, 2).unwrap(); // 2 rows of 2
    a.set_f32(&[1., 2., 3., 4., 5., 6.]).unwrap();
    b.set_f32(&[1., 0., 0., 1.]).unwrap();
    let c = ctx.mul_mat(&a, &b).unwrap();
    let g = ctx.build_forward_expand(&c).unwrap();
    cpu.graph_compute(&g).unwrap();
    assert_eq!(c.ne()[..2], [3, 2]);
    assert_eq!(c.get_f32().unwrap(), vec![1., 3., 5., 2., 4., 6.]);
}
