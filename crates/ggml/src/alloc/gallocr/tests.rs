//! Unit tests of the graph allocator that look at exact placements (buffer and offset).

use super::Gallocr;
use crate::backend::{host_buffer_type, Buffer};
use crate::context::Context;
use crate::tensor::Tensor;
use crate::types::Type;

/// CPU buffers align tensors to 32 bytes; 8 f32 = 32 bytes, so sizes below are exact.
const N: i64 = 8;
const BYTES: usize = 32;

fn ctx() -> Context {
    Context::init(4 << 20, true).unwrap()
}

fn place(t: &Tensor) -> (Buffer, usize) {
    let b = t.binding().expect("tensor has memory");
    (b.buffer, b.offset)
}

fn offset(t: &Tensor) -> usize {
    place(t).1
}

/// Builds the graph of `out` and places it with a CPU graph allocator.
fn alloc(out: &Tensor) -> (Gallocr, crate::Graph) {
    let meta = Context::init(crate::graph_overhead() + 1024, true).unwrap();
    let g = meta.build_forward_expand(out).unwrap();
    let galloc = Gallocr::new(&host_buffer_type()).unwrap();
    galloc.alloc_graph(&g).unwrap();
    (galloc, g)
}

#[test]
fn chain_runs_in_place_on_the_first_leaf() {
    let c = ctx();
    let a = c.new_tensor_1d(Type::F32, N).unwrap();
    let b = c.new_tensor_1d(Type::F32, N).unwrap();
    let x = c.add(&a, &b).unwrap();
    let y = c.relu(&x).unwrap();
    let z = c.scale(&y, 2.0).unwrap();
    let (galloc, _g) = alloc(&z);
    // Leafs a and b first; x takes over a (its only use), y over x, z over y.
    assert_eq!(offset(&a), 0);
    assert_eq!(offset(&b), BYTES);
    for t in [&x, &y, &z] {
        assert_eq!(offset(t), 0, "{t:?}");
        assert_eq!(place(t).0, place(&a).0);
    }
    assert_eq!(galloc.get_buffer_size(0), 2 * BYTES);
}

#[test]
fn an_operand_with_two_uses_is_not_taken_over() {
    let c = ctx();
    let a = c.new_tensor_1d(Type::F32, N).unwrap();
    let x = c.relu(&a).unwrap(); // in a's place
    let y = c.neg(&x).unwrap(); // x has two uses: new place
    let z = c.add(&y, &x).unwrap(); // y has one use: y's place
    let (_galloc, _g) = alloc(&z);
    assert_eq!(offset(&x), offset(&a));
    assert_eq!(offset(&y), BYTES);
    assert_eq!(offset(&z), BYTES);
}

#[test]
fn outputs_are_neither_taken_over_nor_freed() {
    let c = ctx();
    let a = c.new_tensor_1d(Type::F32, N).unwrap();
    let x = c.relu(&a).unwrap(); // a's place
    x.set_output();
    let y = c.neg(&x).unwrap(); // x is an output: new place
    let z = c.neg(&y).unwrap(); // y's place
    let w = c.new_tensor_1d(Type::F32, N).unwrap();
    let v = c.mul(&z, &w).unwrap(); // z's place
    let (_galloc, _g) = alloc(&v);
    // Leafs first: a, then w.
    assert_eq!(offset(&a), 0);
    assert_eq!(offset(&w), BYTES);
    assert_eq!(offset(&x), 0);
    assert_eq!(offset(&y), 2 * BYTES);
    assert_eq!(offset(&z), 2 * BYTES);
    assert_eq!(offset(&v), 2 * BYTES);
}

#[test]
fn freed_memory_is_reused_best_fit() {
    let c = ctx();
    let a = c.new_tensor_1d(Type::F32, N).unwrap();
    let big = c
        .repeat(&a, &c.new_tensor_1d(Type::F32, 4 * N).unwrap())
        .unwrap();
    let s = c.sum(&big).unwrap(); // big is freed after this
    let t = c
        .repeat(&s, &c.new_tensor_1d(Type::F32, 2 * N).unwrap())
        .unwrap();
    let (_galloc, _g) = alloc(&t);
    // REPEAT's shape tensors are not operands, so the only leaf is a (0..32).
    // big: 32..160 (REPEAT is not computed in place), then a is freed; s (32 bytes, SUM is not
    // in place either) fits a's range exactly; then big is freed and t (64 bytes) goes to the
    // start of big's range.
    assert_eq!(offset(&a), 0);
    assert_eq!(offset(&big), BYTES);
    assert_eq!(offset(&s), 0);
    assert_eq!(offset(&t), BYTES);
}

#[test]
fn views_keep_their_source_alive_and_are_never_taken_over() {
    let c = ctx();
    let a = c.new_tensor_1d(Type::F32, 2 * N).unwrap();
    let x = c.relu(&a).unwrap(); // a's place (0..64)
    let v = c.view_1d(&x, N, 0).unwrap(); // a VIEW node of x
    let y = c.neg(&v).unwrap(); // v is a view: not taken over; new place
    let z = c.neg(&y).unwrap(); // y's place
    let zz = c.neg(&z).unwrap();
    let (_galloc, _g) = alloc(&zz);
    assert_eq!(offset(&x), 0);
    assert_eq!(offset(&v), 0);
    assert_eq!(place(&v).0, place(&x).0);
    assert_eq!(offset(&y), 2 * BYTES);
    assert_eq!(offset(&z), 2 * BYTES);
    assert_eq!(offset(&zz), 2 * BYTES);
}

#[test]
fn inputs_get_memory_before_anything_is_reused() {
    // p is a parameter: a node without an op, placed when its turn in the node order comes,
    // which is after y was freed. Flagged INPUT, it is placed before any node instead.
    for input in [false, true] {
        let c = ctx();
        let a = c.new_tensor_1d(Type::F32, N).unwrap();
        let b = c.new_tensor_1d(Type::F32, N).unwrap();
        let x = c.add(&a, &b).unwrap(); // a's place
        let y = c.relu(&x).unwrap(); // a's place too
        let s = c.sum(&y).unwrap(); // y is freed after this
        let w = c.add(&b, &s).unwrap(); // b's place (its last use)
        let p = c.new_tensor_1d(Type::F32, N).unwrap();
        p.set_param().unwrap();
        if input {
            p.set_input();
        }
        let z = c.add(&w, &p).unwrap(); // w's place
        let (_galloc, g) = alloc(&z);
        assert_eq!(
            g.nodes(),
            vec![
                x.clone(),
                y.clone(),
                s.clone(),
                w.clone(),
                p.clone(),
                z.clone()
            ]
        );
        // The graph meets b first (as w's operand), so the leafs are b, a.
        assert_eq!(g.leafs(), vec![b.clone(), a.clone()]);
        assert_eq!((offset(&b), offset(&a)), (0, BYTES));
        assert_eq!((offset(&x), offset(&y)), (BYTES, BYTES));
        assert_eq!((offset(&w), offset(&z)), (0, 0));
        if input {
            assert_eq!(offset(&p), 2 * BYTES, "p has a range of its own");
            assert_eq!(offset(&s), 3 * BYTES);
        } else {
            assert_eq!(offset(&s), 2 * BYTES);
            assert_eq!(offset(&p), BYTES, "p reuses y's range");
        }
    }
}
