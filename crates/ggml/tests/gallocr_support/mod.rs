//! Helpers shared by the graph allocator tests: host buffer types with chosen limits, memory
//! probes that tell whether two tensors share bytes, and reference computations.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ggml::backend::{BufferImpl, BufferTypeImpl, HostMemory};
use ggml::{BufferType, Context, Error, Graph, Result, Tensor};

/// A host-memory buffer type with a chosen name, alignment and maximum size, that counts its
/// allocations and can be told to refuse them.
pub struct TestBuft {
    pub name: String,
    pub alignment: usize,
    pub max_size: usize,
    pub fail: bool,
    pub allocations: Arc<AtomicUsize>,
}

impl TestBuft {
    pub fn new(name: &str, max_size: usize) -> TestBuft {
        TestBuft {
            name: name.to_string(),
            alignment: 32,
            max_size,
            fail: false,
            allocations: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl BufferTypeImpl for TestBuft {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn BufferImpl>> {
        if self.fail {
            return Err(Error::AllocFailed(format!(
                "{} refuses to allocate {size} bytes",
                self.name
            )));
        }
        self.allocations.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(HostMemory::new(size)?))
    }
    fn alignment(&self) -> usize {
        self.alignment
    }
    fn max_size(&self) -> usize {
        self.max_size
    }
    fn is_host(&self) -> bool {
        true
    }
}

/// A buffer type handle over a [`TestBuft`], and its allocation counter.
pub fn test_buft(name: &str, max_size: usize) -> (BufferType, Arc<AtomicUsize>) {
    let b = TestBuft::new(name, max_size);
    let count = b.allocations.clone();
    (BufferType::new(b), count)
}

/// A context for tensor metadata only (the graph allocator gives the memory).
pub fn meta_ctx() -> Context {
    Context::init(64 << 20, true).unwrap()
}

/// A context that gives every tensor memory of its own, for reference results.
pub fn data_ctx(bytes: usize) -> Context {
    Context::init(bytes + ggml::graph_overhead() + (1 << 20), false).unwrap()
}

/// Whether `x` and `y` share at least one byte: writes a pattern into each in turn and looks
/// for the second in the first. Destroys both tensors' contents.
pub fn overlaps(x: &Tensor, y: &Tensor) -> bool {
    if x.buffer() != y.buffer() || x.nbytes() == 0 || y.nbytes() == 0 {
        return false;
    }
    x.set_bytes(&vec![0x11; x.nbytes()], 0).unwrap();
    y.set_bytes(&vec![0x22; y.nbytes()], 0).unwrap();
    x.to_bytes().unwrap().contains(&0x22)
}

/// Whether `x` and `y` are the same bytes (same buffer, same place, same size): a pattern
/// written through one is read back through the other. Destroys both tensors' contents.
pub fn same_memory(x: &Tensor, y: &Tensor) -> bool {
    if x.buffer() != y.buffer() || x.nbytes() != y.nbytes() {
        return false;
    }
    let pattern: Vec<u8> = (0..x.nbytes()).map(|i| (i % 251) as u8 + 1).collect();
    x.set_bytes(&pattern, 0).unwrap();
    y.to_bytes().unwrap() == pattern
}

/// Deterministic pseudo-random numbers (xorshift64*), so failures reproduce.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    pub fn values(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// The graph of `out` in a small metadata context of its own.
pub fn graph_of(outs: &[&Tensor]) -> Graph {
    let ctx = Context::init(ggml::graph_overhead() + 4096, true).unwrap();
    let g = ctx.new_graph().unwrap();
    for o in outs {
        g.build_forward_expand(o).unwrap();
    }
    g
}

/// Bitwise equality of two f32 vectors, reporting the first difference.
pub fn assert_same_values(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        panic!(
            "{what}: element {i} is {} but should be {}",
            got[i], want[i]
        );
    }
}

/// A graph built by a test: its inputs (filled with values before computing), its outputs
/// (compared after), and the graph of the outputs.
pub struct Built {
    pub inputs: Vec<Tensor>,
    pub outputs: Vec<Tensor>,
    pub graph: Graph,
}

/// What a test graph builder does: makes tensors in a context and returns the inputs and the
/// outputs.
pub type Builder<'a> = dyn Fn(&Context) -> (Vec<Tensor>, Vec<Tensor>) + 'a;

/// Builds with `build` (which returns inputs and outputs) in `ctx` and makes the graph.
pub fn build_in(ctx: &Context, build: &Builder) -> Built {
    let (inputs, outputs) = build(ctx);
    let graph = graph_of(&outputs.iter().collect::<Vec<_>>());
    Built {
        inputs,
        outputs,
        graph,
    }
}

/// Input values for `b`'s inputs, from `seed`.
pub fn input_values(b: &Built, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(seed);
    b.inputs
        .iter()
        .map(|t| rng.values(t.nelements() as usize, -2.0, 2.0))
        .collect()
}

/// Fills the inputs, computes the graph on a CPU backend and returns the outputs' values.
pub fn compute(b: &Built, values: &[Vec<f32>]) -> Vec<Vec<f32>> {
    for (t, v) in b.inputs.iter().zip(values) {
        t.set_f32(v).unwrap();
    }
    let cpu = ggml::backend::cpu_init().unwrap();
    cpu.graph_compute(&b.graph).unwrap();
    b.outputs.iter().map(|t| t.get_f32().unwrap()).collect()
}

/// The outputs of `build`'s graph computed with every tensor in memory of its own.
pub fn reference(build: &Builder, values: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let ctx = data_ctx(32 << 20);
    compute(&build_in(&ctx, build), values)
}

/// Checks outputs against reference outputs, bit for bit.
pub fn assert_outputs(got: &[Vec<f32>], want: &[Vec<f32>]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_same_values(&format!("output {i}"), g, w);
    }
}
