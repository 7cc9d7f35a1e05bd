//! Random graphs of element-wise ops and views, some tensors marked output, placed by the graph
//! allocator and computed, must give what the same graph gives with every tensor in memory of
//! its own.

mod gallocr_support;

use gallocr_support::{assert_same_values, data_ctx, graph_of, meta_ctx, Rng};
use ggml::alloc::Gallocr;
use ggml::tensor::flags;
use ggml::{backend, Context, Graph, Tensor, Type};

const COLS: i64 = 32;
const ROWS: i64 = 3;

/// Tensors from another buffer that graphs use as operands.
struct Weights {
    full: Tensor,
    row: Tensor,
    buffer: ggml::Buffer,
}

fn weights() -> Weights {
    let ctx = Context::init(1 << 20, true).unwrap();
    let full = ctx.new_tensor_2d(Type::F32, COLS, ROWS).unwrap();
    let row = ctx.new_tensor_2d(Type::F32, COLS, 1).unwrap();
    let buffer = backend::alloc_ctx_tensors(&ctx, &backend::cpu_init().unwrap()).unwrap();
    let mut rng = Rng::new(1234);
    full.set_f32(&rng.values((COLS * ROWS) as usize, -1.0, 1.0))
        .unwrap();
    row.set_f32(&rng.values(COLS as usize, 0.5, 1.5)).unwrap();
    Weights { full, row, buffer }
}

/// A random index into a list of `len`, favouring recent entries.
fn pick(rng: &mut Rng, len: usize) -> usize {
    len - 1 - rng.below(len).min(rng.below(len))
}

/// One random graph, the same for the same seed: its inputs and the tensors to compare (those
/// marked output, and those nothing uses).
fn build(ctx: &Context, seed: u64, w: &Weights) -> (Vec<Tensor>, Vec<Tensor>) {
    let mut rng = Rng::new(seed);
    let n_inputs = 1 + rng.below(3);
    let mut full: Vec<Tensor> = (0..n_inputs)
        .map(|_| ctx.new_tensor_2d(Type::F32, COLS, ROWS).unwrap())
        .collect();
    let mut rows = vec![ctx.new_tensor_2d(Type::F32, COLS, 1).unwrap()];
    let inputs: Vec<Tensor> = full.iter().chain(&rows).cloned().collect();
    for t in &inputs {
        if rng.below(2) == 0 {
            t.set_input();
        }
    }
    full.push(w.full.clone());
    rows.push(w.row.clone());

    let mut made: Vec<Tensor> = Vec::new();
    let n_ops = 5 + rng.below(36);
    for _ in 0..n_ops {
        let x = full[pick(&mut rng, full.len())].clone();
        let (t, is_row) = match rng.below(10) {
            0..=2 => {
                let y = if rng.below(3) == 0 {
                    rows[pick(&mut rng, rows.len())].clone()
                } else {
                    full[pick(&mut rng, full.len())].clone()
                };
                let t = match rng.below(3) {
                    0 => ctx.add(&x, &y),
                    1 => ctx.sub(&x, &y),
                    _ => ctx.mul(&x, &y),
                };
                (t.unwrap(), false)
            }
            3 | 4 => {
                let t = match rng.below(5) {
                    0 => ctx.relu(&x),
                    1 => ctx.neg(&x),
                    2 => ctx.sin(&x),
                    3 => ctx.cos(&x),
                    _ => ctx.tanh(&x),
                };
                (t.unwrap(), false)
            }
            5 => (ctx.scale(&x, rng.uniform(0.5, 1.5)).unwrap(), false),
            6 => {
                // Two views in a row: a reshape of a reshape.
                let flat = ctx.reshape_1d(&x, COLS * ROWS).unwrap();
                made.push(flat.clone());
                (ctx.reshape_2d(&flat, COLS, ROWS).unwrap(), false)
            }
            7 => {
                // Transposed copies (CONT is not computed in place) and back.
                let t1 = ctx.transpose(&x).unwrap();
                let tr = ctx.cont(&t1).unwrap();
                let t2 = ctx.transpose(&tr).unwrap();
                made.extend([t1, tr, t2.clone()]);
                (ctx.cont(&t2).unwrap(), false)
            }
            8 => {
                let nb1 = x.nb()[1];
                let r = rng.below(ROWS as usize);
                (ctx.view_2d(&x, COLS, 1, nb1, r * nb1).unwrap(), true)
            }
            _ => {
                let a = rows[pick(&mut rng, rows.len())].clone();
                let b = rows[pick(&mut rng, rows.len())].clone();
                (ctx.add(&a, &b).unwrap(), true)
            }
        };
        if rng.below(6) == 0 {
            t.set_output();
        }
        made.push(t.clone());
        if is_row {
            rows.push(t);
        } else {
            full.push(t);
        }
    }

    // Every tensor made is in `made`, so this finds every use.
    let used = |t: &Tensor| made.iter().any(|m| m.srcs().any(|s| s == t));
    let compared = made
        .iter()
        .filter(|t| t.flags() & flags::OUTPUT != 0 || !used(t))
        .cloned()
        .collect();
    (inputs, compared)
}

fn run(graph: &Graph, inputs: &[Tensor], outputs: &[Tensor], seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(seed ^ 0x5eed);
    for t in inputs {
        let values = rng.values(t.nelements() as usize, -2.0, 2.0);
        // An input nothing uses is not in the graph and gets no memory.
        if graph.contains(t) {
            t.set_f32(&values).unwrap();
        }
    }
    backend::cpu_init().unwrap().graph_compute(graph).unwrap();
    outputs.iter().map(|t| t.get_f32().unwrap()).collect()
}

#[test]
fn random_graphs_compute_as_if_every_tensor_had_its_own_memory() {
    let w = weights();
    let galloc = Gallocr::new(&backend::cpu_buffer_type()).unwrap();
    let mut max_size = 0;
    for seed in 1..=300u64 {
        let rctx = data_ctx(1 << 20);
        let (rin, rout) = build(&rctx, seed, &w);
        let want = run(
            &graph_of(&rout.iter().collect::<Vec<_>>()),
            &rin,
            &rout,
            seed,
        );

        let ctx = meta_ctx();
        let (inputs, outputs) = build(&ctx, seed, &w);
        let graph = graph_of(&outputs.iter().collect::<Vec<_>>());
        // A new graph: plan it (the allocator and its buffers are reused across graphs).
        galloc.reserve(&graph).unwrap();
        galloc.alloc_graph(&graph).unwrap();
        let size = galloc.get_buffer_size(0);
        assert!(size >= max_size, "seed {seed}: the buffer never shrinks");
        max_size = size;
        let nodes = graph.nodes();
        for t in graph.leafs().iter().chain(&nodes) {
            assert!(
                t.is_allocated(),
                "seed {seed}: {:?} has no memory",
                t.name()
            );
        }
        let got = run(&graph, &inputs, &outputs, seed);
        for (i, (g, r)) in got.iter().zip(&want).enumerate() {
            assert_same_values(&format!("seed {seed}, output {i}"), g, r);
        }
        // The weights were not moved.
        assert_eq!(w.full.buffer(), Some(w.buffer.clone()));
    }
}
