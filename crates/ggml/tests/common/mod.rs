//! Shared helpers of the operator tests: a seeded PRNG, host tensors of f64 values in logical
//! order, byte encoding written here (independent of the library's kernels), inputs with
//! several memory layouts, and a harness that computes a graph on the CPU backend with several
//! thread counts and compares the result with an f64 reference by GGML's metric
//! (`test-backend-ops`: NaN fails, infinities must match, then NMSE).
#![allow(dead_code)]

pub mod nodes;
pub mod reference;

use std::sync::OnceLock;

use ggml::{backend, Backend, Context, Tensor, Type};

/// Dimensions of a tensor.
pub const DIMS: usize = 5;
/// A full shape (unused trailing dimensions are 1).
pub type Shape = [usize; DIMS];

/// GGML's default NMSE threshold.
pub const TOL: f64 = 1e-7;
/// GGML's threshold for MUL_MAT.
pub const TOL_MATMUL: f64 = 5e-4;
/// GGML's threshold for SOFT_MAX.
pub const TOL_SOFTMAX: f64 = 1e-6;
/// Exact comparison (ARGMAX, copies between equal types).
pub const EXACT: f64 = 0.0;

/// The float types kernels compute with.
pub const FLOATS: [Type; 3] = [Type::F32, Type::F16, Type::BF16];

// ---- PRNG ------------------------------------------------------------------------------------

/// SplitMix64: small, seeded, good enough for test data.
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A generator seeded from a string (FNV-1a of its bytes).
    pub fn from_name(name: &str) -> Rng {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for b in name.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        Rng(h)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in lo..=hi.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as usize) as i64
    }

    /// One element of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

// ---- host tensors ----------------------------------------------------------------------------

/// A full shape from up to five dimensions.
pub fn shape(ne: &[i64]) -> Shape {
    let mut s = [1usize; DIMS];
    for (d, &n) in ne.iter().enumerate() {
        s[d] = n as usize;
    }
    s
}

/// The shape of a tensor.
pub fn shape_of(t: &Tensor) -> Shape {
    shape(&t.ne())
}

/// Flat position of `i` in shape `ne`, dimension 0 fastest.
pub fn flat(ne: &Shape, i: &Shape) -> usize {
    (0..DIMS).rev().fold(0, |acc, d| acc * ne[d] + i[d])
}

/// Every index of shape `ne` in logical order (dimension 0 fastest).
pub fn indices(ne: Shape) -> impl Iterator<Item = Shape> {
    let n: usize = ne.iter().product();
    (0..n).map(move |mut k| {
        let mut i = [0usize; DIMS];
        for d in 0..DIMS {
            i[d] = k % ne[d];
            k /= ne[d];
        }
        i
    })
}

/// A tensor's logical values as f64, dimension 0 fastest.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    /// Shape.
    pub ne: Shape,
    /// Values in logical order.
    pub v: Vec<f64>,
}

impl Host {
    /// The values `f(index)` for every index of `ne`.
    pub fn from_fn(ne: Shape, mut f: impl FnMut(Shape) -> f64) -> Host {
        Host {
            ne,
            v: indices(ne).map(&mut f).collect(),
        }
    }

    /// The value at `i`.
    pub fn at(&self, i: Shape) -> f64 {
        self.v[flat(&self.ne, &i)]
    }

    /// The row of elements at row index `r` (dimensions 1..5).
    pub fn row(&self, r: [usize; DIMS - 1]) -> &[f64] {
        let start = flat(&self.ne, &[0, r[0], r[1], r[2], r[3]]);
        &self.v[start..start + self.ne[0]]
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.ne[1..].iter().product()
    }

    /// Applies `f` to every row: `f(row index, row)` returns the result row; the result has
    /// shape `ne` with `ne[0]` replaced by the result rows' length `n0`.
    pub fn map_rows(&self, n0: usize, mut f: impl FnMut([usize; 4], &[f64]) -> Vec<f64>) -> Host {
        let mut ne = self.ne;
        ne[0] = n0;
        let mut v = Vec::with_capacity(ne.iter().product());
        for i in indices([1, self.ne[1], self.ne[2], self.ne[3], self.ne[4]]) {
            let r = [i[1], i[2], i[3], i[4]];
            let out = f(r, self.row(r));
            assert_eq!(out.len(), n0);
            v.extend(out);
        }
        Host { ne, v }
    }
}

// ---- encoding (written here, not the library's) ----------------------------------------------

/// f32 → bf16 bits, round to nearest even, NaN kept a quiet NaN.
fn bf16_bits(x: f32) -> u16 {
    let u = x.to_bits();
    if x.is_nan() {
        return ((u >> 16) | 0x40) as u16;
    }
    let rounding = 0x7fff + ((u >> 16) & 1);
    (u.wrapping_add(rounding) >> 16) as u16
}

/// `v` rounded to what a tensor of `ty` stores.
pub fn round_to(ty: Type, v: f64) -> f64 {
    match ty {
        Type::F32 => v as f32 as f64,
        Type::F16 => ggml::f16::from_f64(v).to_f64(),
        Type::BF16 => f32::from_bits((bf16_bits(v as f32) as u32) << 16) as f64,
        Type::I32 | Type::I64 => v,
        _ => panic!("round_to: type {ty} not handled"),
    }
}

fn encode(ty: Type, v: f64, out: &mut [u8]) {
    match ty {
        Type::F32 => out.copy_from_slice(&(v as f32).to_le_bytes()),
        Type::F16 => out.copy_from_slice(&ggml::f16::from_f64(v).to_bits().to_le_bytes()),
        Type::BF16 => out.copy_from_slice(&bf16_bits(v as f32).to_le_bytes()),
        Type::I32 => out.copy_from_slice(&(v as i32).to_le_bytes()),
        Type::I64 => out.copy_from_slice(&(v as i64).to_le_bytes()),
        _ => panic!("encode: type {ty} not handled"),
    }
}

fn decode(ty: Type, b: &[u8]) -> f64 {
    match ty {
        Type::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        Type::F16 => ggml::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        Type::BF16 => f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16) as f64,
        Type::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        Type::I64 => i64::from_le_bytes(b[..8].try_into().unwrap()) as f64,
        _ => panic!("decode: type {ty} not handled"),
    }
}

/// Writes `values` (logical order) into a tensor that owns contiguous memory.
pub fn write(t: &Tensor, values: &[f64]) {
    assert!(
        t.view_src().is_none() && t.is_contiguous(),
        "write: {t:?} is a view"
    );
    assert_eq!(values.len() as i64, t.nelements());
    let ts = t.ty().type_size();
    let mut bytes = vec![0u8; values.len() * ts];
    for (chunk, &v) in bytes.chunks_exact_mut(ts).zip(values) {
        encode(t.ty(), v, chunk);
    }
    t.set_bytes(&bytes, 0).unwrap();
}

/// A tensor's logical values, read through its own strides from its memory (the root tensor's
/// bytes for a view).
pub fn read(t: &Tensor) -> Host {
    let (root, base) = match t.view_src() {
        Some(r) => (r.clone(), t.view_offs()),
        None => (t.clone(), 0),
    };
    let bytes = root.to_bytes().unwrap();
    let (nb, ty) = (t.nb(), t.ty());
    let ts = ty.type_size();
    Host::from_fn(shape_of(t), |i| {
        let off = base + (0..DIMS).map(|d| i[d] * nb[d]).sum::<usize>();
        decode(ty, &bytes[off..off + ts])
    })
}

// ---- inputs ----------------------------------------------------------------------------------

/// How an input is laid out in memory (its logical shape is always the one asked for).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Layout {
    /// A plain contiguous tensor.
    Contiguous,
    /// A permutation (`ctx.permute(base, axes)`) of a contiguous tensor.
    Permuted([usize; 4]),
    /// `ctx.transpose(base)` of a contiguous tensor.
    Transposed,
    /// A 4-D view into a larger tensor: rows and planes padded, at a non-zero offset.
    Padded,
}

/// Every layout, for sweeps.
pub const LAYOUTS: [Layout; 5] = [
    Layout::Contiguous,
    Layout::Permuted([1, 0, 2, 3]),
    Layout::Permuted([2, 0, 3, 1]),
    Layout::Transposed,
    Layout::Padded,
];

/// A new tensor of `ty` and logical shape `ne` laid out as `layout`, holding uniform random
/// values in [lo, hi) (rounded to `ty`); returns it with its values as read back.
pub fn input(
    ctx: &Context,
    ty: Type,
    ne: &[i64],
    layout: Layout,
    rng: &mut Rng,
    lo: f64,
    hi: f64,
) -> ggml::Result<(Tensor, Host)> {
    input_with(ctx, ty, ne, layout, |_| rng.uniform(lo, hi))
}

/// As [`input`], with the value of each memory position given by `gen(position)`.
pub fn input_with(
    ctx: &Context,
    ty: Type,
    ne: &[i64],
    layout: Layout,
    mut gen: impl FnMut(usize) -> f64,
) -> ggml::Result<(Tensor, Host)> {
    let want = shape(ne);
    let ne5: Vec<i64> = want.iter().map(|&x| x as i64).collect();
    let base_ne: Vec<i64> = match layout {
        Layout::Contiguous => ne5.clone(),
        // Source dimension i goes to position axes[i], so the base has want[axes[i]] there.
        Layout::Permuted(ax) => vec![ne5[ax[0]], ne5[ax[1]], ne5[ax[2]], ne5[ax[3]], ne5[4]],
        Layout::Transposed => vec![ne5[1], ne5[0], ne5[2], ne5[3], ne5[4]],
        Layout::Padded => {
            assert_eq!(want[4], 1, "Padded inputs are at most 4-D");
            vec![ne5[0] + 3, ne5[1] + 1, ne5[2], ne5[3]]
        }
    };
    let base = ctx.new_tensor(ty, &base_ne)?;
    let n = base.nelements() as usize;
    let values: Vec<f64> = (0..n).map(&mut gen).collect();
    write(&base, &values);
    let t = match layout {
        Layout::Contiguous => base,
        Layout::Permuted(ax) => ctx.permute(&base, ax[0], ax[1], ax[2], ax[3])?,
        Layout::Transposed => ctx.transpose(&base)?,
        Layout::Padded => {
            let nb = base.nb();
            let offset = nb[1] + 2 * ty.type_size();
            ctx.view_4d(
                &base,
                [ne5[0], ne5[1], ne5[2], ne5[3]],
                nb[1],
                nb[2],
                nb[3],
                offset,
            )?
        }
    };
    assert_eq!(shape_of(&t), want, "layout {layout:?} gave the wrong shape");
    let host = read(&t);
    Ok((t, host))
}

/// A contiguous tensor of `ty` holding exactly `values`.
pub fn input_values(
    ctx: &Context,
    ty: Type,
    ne: &[i64],
    values: &[f64],
) -> ggml::Result<(Tensor, Host)> {
    input_with(ctx, ty, ne, Layout::Contiguous, |i| values[i])
}

// ---- comparison ------------------------------------------------------------------------------

/// GGML's check of a result `got` against the reference `want`: NaN anywhere fails,
/// infinities must be at the same places with the same signs, then the NMSE
/// `Σ(got − want)² / Σ want²` over the finite values must not exceed `tol` (with `tol == 0`
/// every value must be equal). Returns the NMSE.
pub fn compare(got: &Host, want: &Host, tol: f64) -> Result<f64, String> {
    if got.ne != want.ne {
        return Err(format!("shape {:?}, expected {:?}", got.ne, want.ne));
    }
    let (mut num, mut den) = (0f64, 0f64);
    let mut worst = (0usize, 0f64);
    for (k, (&g, &w)) in got.v.iter().zip(&want.v).enumerate() {
        if g.is_nan() || w.is_nan() {
            return Err(format!("NaN at {k}: got {g}, expected {w}"));
        }
        if g.is_infinite() || w.is_infinite() {
            if g != w {
                return Err(format!("infinity mismatch at {k}: got {g}, expected {w}"));
            }
            continue;
        }
        let e = (g - w) * (g - w);
        if e > worst.1 {
            worst = (k, e);
        }
        num += e;
        den += w * w;
    }
    let err = if den > 0.0 { num / den } else { num };
    let bad = if tol == 0.0 { num != 0.0 } else { err > tol };
    if bad {
        let k = worst.0;
        return Err(format!(
            "NMSE {err:.3e} > {tol:.0e}; worst at {k}: got {}, expected {}",
            got.v[k], want.v[k]
        ));
    }
    Ok(err)
}

/// `n` deterministic values in [−1, 1) from `seed` (xorshift), for tests that fill weights
/// and activations directly.
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

/// The bytes GGML's CPU quantizes the f32 row `x` (whole blocks) to, as its x86 build's
/// `type_traits_cpu[ty].from_float` does (CPY and SET_ROWS into a quantized type): Q8_0 and
/// Q8_1 by the formula of `arch/x86/quants.c`, computed here in f64 (scale `d = amax/127`
/// stored as F16, levels `v·(127/amax)` with the f32 product rounded half to even, Q8_1's
/// `s = d·Σq`), every other type by the library's reference quantizer (GGML's x86 build calls
/// the `_ref` one for those; the quant fixtures hold it to GGML's bytes).
pub fn ggml_cpu_quantize(ty: Type, x: &[f32]) -> Vec<u8> {
    if !matches!(ty, Type::Q8_0 | Type::Q8_1) {
        let mut out = vec![0u8; ty.row_size(x.len() as i64).unwrap()];
        ggml::quants::quantize_row_ref(ty, x, &mut out).unwrap();
        return out;
    }
    let mut out = Vec::new();
    for blk in x.chunks(32) {
        let amax = blk.iter().fold(0f64, |m, v| m.max((*v as f64).abs()));
        // f32 quotients: an f64 quotient of f32 operands rounds to the same f32.
        let d = (amax / 127.0) as f32;
        let id = if amax != 0.0 {
            (127.0 / amax) as f32
        } else {
            0.0
        };
        // The f32 product (exact in f64, then rounded once), rounded half to even.
        let q: Vec<i8> = blk
            .iter()
            .map(|&v| ((v as f64 * id as f64) as f32 as f64).round_ties_even() as i8)
            .collect();
        out.extend(ggml::f16::from_f32(d).to_bits().to_le_bytes());
        if ty == Type::Q8_1 {
            let sum: i64 = q.iter().map(|&v| v as i64).sum();
            let s = (d as f64 * sum as f64) as f32;
            out.extend(ggml::f16::from_f32(s).to_bits().to_le_bytes());
        }
        out.extend(q.iter().map(|&v| v as u8));
    }
    out
}

// ---- harness ---------------------------------------------------------------------------------

/// CPU backends with the default thread count and with 1 and 3 threads (shared by the tests of
/// a binary; a backend is a stream, so concurrent tests queue on it).
pub fn backends() -> &'static [(usize, Backend)] {
    static B: OnceLock<Vec<(usize, Backend)>> = OnceLock::new();
    B.get_or_init(|| {
        [0usize, 1, 3]
            .into_iter()
            .map(|n| {
                let b = backend::cpu_init().unwrap();
                if n > 0 {
                    b.set_n_threads(n).unwrap();
                }
                (n, b)
            })
            .collect()
    })
}

/// Context size of the harness.
pub const MEM: usize = 2 << 20;

/// Runs a case's `build` in a fresh context of `mem` bytes with the case's own random stream
/// (seeded by `name`, so every run of the case gets the same inputs).
fn build_case<T>(
    name: &str,
    mem: usize,
    build: impl Fn(&Context, &mut Rng) -> ggml::Result<T>,
) -> (Context, T) {
    let ctx = Context::init(mem, false).unwrap();
    let mut rng = Rng::from_name(name);
    let built =
        build(&ctx, &mut rng).unwrap_or_else(|e| panic!("{name}: building the graph failed: {e}"));
    (ctx, built)
}

/// Builds a case with `build` (which creates inputs, the op, and computes the reference from
/// the inputs' values) in a fresh context for every backend of [`backends`], computes it, and
/// compares the result with the reference rounded to the result's type. The results of all
/// thread counts must also be bit-identical. Panics (fails the test) naming `name` otherwise.
pub fn check(
    name: &str,
    tol: f64,
    build: impl Fn(&Context, &mut Rng) -> ggml::Result<(Tensor, Host)>,
) {
    check_mem(name, tol, MEM, build)
}

/// [`check`] with a context of `mem` bytes.
pub fn check_mem(
    name: &str,
    tol: f64,
    mem: usize,
    build: impl Fn(&Context, &mut Rng) -> ggml::Result<(Tensor, Host)>,
) {
    let mut first: Option<Host> = None;
    for (threads, be) in backends() {
        let (ctx, (out, want)) = build_case(name, mem, &build);
        let graph = ctx.build_forward_expand(&out).unwrap();
        be.graph_compute(&graph)
            .unwrap_or_else(|e| panic!("{name} ({threads} threads): compute failed: {e}"));
        let got = read(&out);
        let want = Host {
            ne: want.ne,
            v: want.v.iter().map(|&v| round_to(out.ty(), v)).collect(),
        };
        if let Err(msg) = compare(&got, &want, tol) {
            panic!("{name} ({threads} threads, result {}): {msg}", out.ty());
        }
        match &first {
            None => first = Some(got),
            Some(f) => assert!(
                f.v.iter()
                    .zip(&got.v)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name}: {threads} threads gave different bits than the default"
            ),
        }
    }
}

/// Builds a case with `build` and asserts that computing it with 1, 2 and 3 threads fails
/// with an error whose message contains every one of `needles` (an index operand holding a
/// value outside its range, say). Each run has a CPU stream of its own: a stream reports a
/// failure to whoever synchronizes it next, which on the shared [`backends`] could be another
/// test.
pub fn check_compute_fails(
    name: &str,
    needles: &[&str],
    build: impl Fn(&Context, &mut Rng) -> ggml::Result<Tensor>,
) {
    for threads in 1..=3 {
        let be = backend::cpu_init().unwrap();
        be.set_n_threads(threads).unwrap();
        let (ctx, out) = build_case(name, MEM, &build);
        let graph = ctx.build_forward_expand(&out).unwrap();
        let r = be.graph_compute(&graph);
        assert!(r.is_err(), "{name} ({threads} threads): compute succeeded");
        assert_err(r, needles);
    }
}

/// Asserts that `out` is an in-place result over `a`: a view of the same memory with the same
/// layout, so the kernel writes into `a`.
pub fn assert_aliases(out: &Tensor, a: &Tensor) {
    let root = |t: &Tensor| t.view_src().cloned().unwrap_or_else(|| t.clone());
    let offs = |t: &Tensor| {
        if t.view_src().is_some() {
            t.view_offs()
        } else {
            0
        }
    };
    assert!(
        out.view_src().is_some(),
        "in-place result {out:?} is not a view"
    );
    assert_eq!(root(out), root(a), "in-place result views another tensor");
    assert_eq!((offs(out), out.nb(), out.ne()), (offs(a), a.nb(), a.ne()));
}

/// Asserts that `r` is an error whose message contains every one of `needles`.
pub fn assert_err<T: std::fmt::Debug>(r: ggml::Result<T>, needles: &[&str]) {
    match r {
        Ok(v) => panic!("expected an error mentioning {needles:?}, got Ok({v:?})"),
        Err(e) => {
            let msg = e.to_string();
            for n in needles {
                assert!(msg.contains(n), "error {msg:?} does not mention {n:?}");
            }
        }
    }
}

/// Runs [`ggml::Op::validate`] on node `t` as if it had come from outside: its own
/// description, its operands' and its parameters.
pub fn validate_node(t: &Tensor) -> ggml::Result<()> {
    let src: Vec<Option<ggml::ops::Meta>> = (0..t.n_src_slots())
        .map(|i| t.src(i).map(ggml::ops::Meta::of))
        .collect();
    let params = t.op_params();
    t.op().validate(&ggml::ops::NodeMeta {
        dst: ggml::ops::Meta::of(t),
        view_offs: t.view_src().map(|_| t.view_offs()),
        src: &src,
        op_params: &params,
    })
}
