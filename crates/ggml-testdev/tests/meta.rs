//! The meta device over members whose memory is not host memory (test devices on server
//! threads), alone and together with the CPU: a two-layer MLP with the first layer split by
//! rows (its hidden layer equals the CPU's alone bit for bit) and the second by columns, whose
//! partial sums are all-reduced — by a butterfly of copies and adds between the members, or by
//! the first member's own all-reduce. Results after the all-reduce are held against the CPU's
//! alone (NMSE ≤ 1e-12: the sums are reordered).

use ggml::backend::{self, SplitState};
use ggml::{Backend, Context, Device, DeviceType, Tensor, Type};
mod common;

use common::input;
use ggml_testdev::Server;

/// h = relu(W1 x + b1), y = W2 h + b2, with x [32, 5], W1 [32, 24], W2 [24, 16]; returns
/// (h, y) as computed on `b`.
fn mlp(b: &Backend) -> (Vec<f32>, Vec<f32>) {
    let ctx = Context::init(1 << 20, true).unwrap();
    let new = |name: &str, ne: &[i64]| {
        let t = ctx.new_tensor(Type::F32, ne).unwrap();
        t.set_name(name);
        t
    };
    let (w1, b1, w2, b2, x) = (
        new("w1", &[32, 24]),
        new("b1", &[24]),
        new("w2", &[24, 16]),
        new("b2", &[16]),
        new("x", &[32, 5]),
    );
    let h = ctx
        .relu(&ctx.add(&ctx.mul_mat(&w1, &x).unwrap(), &b1).unwrap())
        .unwrap();
    let y = ctx.add(&ctx.mul_mat(&w2, &h).unwrap(), &b2).unwrap();
    let g = ctx.build_forward_expand(&y).unwrap();
    let _buf = backend::alloc_ctx_tensors(&ctx, b).unwrap();
    for (i, t) in [&w1, &b1, &w2, &b2, &x].into_iter().enumerate() {
        t.set_f32(&input(t.nelements() as usize, i as u32 + 1))
            .unwrap();
    }
    b.graph_compute(&g).unwrap();
    let read = |t: &Tensor| t.get_f32().unwrap();
    (read(&h), read(&y))
}

fn split(info: &backend::TensorInfo, _n: usize) -> SplitState {
    match info.name.as_str() {
        "w1" => SplitState::axis(1),
        "b1" => SplitState::axis(0),
        "w2" => SplitState::axis(0),
        _ => SplitState::mirrored(),
    }
}

fn nmse(got: &[f32], want: &[f32]) -> f64 {
    let err: f64 = got
        .iter()
        .zip(want)
        .map(|(g, w)| (*g as f64 - *w as f64).powi(2))
        .sum();
    err / want.iter().map(|w| (*w as f64).powi(2)).sum::<f64>()
}

fn check(members: &[Device]) {
    let (h_want, y_want) = mlp(&backend::cpu_init().unwrap());
    let meta = backend::meta_device(members, split).unwrap();
    let (h, y) = mlp(&meta.init(None).unwrap());
    assert_eq!(h, h_want, "the hidden layer, bit for bit");
    let e = nmse(&y, &y_want);
    assert!(e <= 1e-12, "NMSE {e}");
}

#[test]
fn members_on_two_servers_all_reduce_by_butterfly() {
    let (a, b) = (
        Server::start("meta-a").unwrap(),
        Server::start("meta-b").unwrap(),
    );
    check(&[a.device("MetaA0"), b.device("MetaB0")]);
    // Each member computed the graph in two pieces around one add of the other's partial
    // sums, which crossed between the servers through the host (they share no memory): five
    // inputs and one partner's values written to each.
    for s in [&a, &b] {
        let c = s.counts();
        assert_eq!(
            (c.computes, c.writes, c.copies, c.all_reduces),
            (3, 6, 0, 0),
            "{c:?}"
        );
    }
}

#[test]
fn a_test_device_and_the_cpu_together() {
    let s = Server::start("meta-cpu").unwrap();
    let cpu = backend::dev_by_type(DeviceType::Cpu).unwrap();
    check(&[s.device("MetaC0"), cpu.clone()]);
    check(&[cpu, s.device("MetaC1")]);
}

#[test]
fn three_members_fold_into_the_butterfly() {
    let s = Server::start("meta-three").unwrap();
    check(&[s.device("Meta3a"), s.device("Meta3b"), s.device("Meta3c")]);
    // Devices of one server copy between their buffers on the server: the third member's
    // values folded into the first's, one butterfly step between the first two, the total
    // handed back. Three pieces of graph plus three adds.
    let c = s.counts();
    assert_eq!((c.copies, c.computes), (4, 3 * 2 + 3), "{c:?}");
}

#[test]
fn the_first_members_own_all_reduce_is_used() {
    let s = Server::start("meta-own").unwrap();
    check(&[s.device_with_all_reduce("MetaOwn0"), s.device("MetaOwn1")]);
    assert_eq!(s.counts().all_reduces, 1, "one product made partial sums");
    assert_eq!(s.counts().copies, 0, "no butterfly copies");
}
