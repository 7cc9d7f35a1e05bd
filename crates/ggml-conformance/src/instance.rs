//! A case made concrete: its inputs created and initialised from the seed, its graph built in a
//! metadata-only context. The runner allocates and computes it; the exporter writes it out.

use ggml::{Context, Graph, Tensor, Type};

use crate::case::{Case, Init, Input, Layout};
use crate::host::{encode, indices, is_plain, read_strided, shape, Host, DIMS};
use crate::rng::{case_seed, Rng};

/// Context budget of one case: room for a few hundred tensors and one graph.
const CTX_MEM: usize = 512 * ggml::tensor_overhead() + (1 << 20);
/// Nodes and leafs one case's graph may hold.
const GRAPH_SIZE: usize = 256;

/// A built case.
pub(crate) struct Instance {
    /// The metadata-only context holding every tensor of the case.
    pub ctx: Context,
    /// The tensors that own the inputs' memory, with the bytes they must hold.
    pub bases: Vec<(Tensor, Vec<u8>)>,
    /// The inputs' logical values, as the reference reads them.
    pub hosts: Vec<Host>,
    /// The builder's outputs.
    pub outputs: Vec<Tensor>,
    /// The graph computing the outputs.
    pub graph: Graph,
}

/// Creates `case`'s inputs (seeded by `base_seed` and the case's name) and builds its graph.
pub(crate) fn instantiate(case: &Case, base_seed: u64) -> Result<Instance, String> {
    let ctx = Context::init(CTX_MEM, true).map_err(|e| e.to_string())?;
    let mut rng = Rng::new(case_seed(base_seed, case.name()));
    let mut inputs = Vec::new();
    let mut bases = Vec::new();
    let mut hosts = Vec::new();
    for (k, spec) in case.inputs.iter().enumerate() {
        let (t, base, bytes) = make_input(&ctx, spec, &mut rng)
            .map_err(|e| format!("input {k} ({} {:?}): {e}", spec.ty, spec.ne))?;
        let offs = if t.view_src().is_some() {
            t.view_offs()
        } else {
            0
        };
        hosts.push(read_strided(t.ty(), shape(&t.ne()), t.nb(), &bytes, offs)?);
        inputs.push(t);
        bases.push((base, bytes));
    }
    let outputs = case
        .build(&ctx, &inputs)
        .map_err(|e| format!("building the graph failed: {e}"))?;
    if outputs.is_empty() {
        return Err("the builder returned no output".into());
    }
    let graph = ctx
        .new_graph_custom(GRAPH_SIZE, false)
        .map_err(|e| e.to_string())?;
    for t in &outputs {
        t.set_output();
        graph.build_forward_expand(t).map_err(|e| e.to_string())?;
    }
    Ok(Instance {
        ctx,
        bases,
        hosts,
        outputs,
        graph,
    })
}

/// The shape of the tensor to allocate so that `layout` of it has logical shape `ne`, and the
/// view's byte offset into it.
fn base_shape(spec: &Input, ne: [i64; DIMS]) -> Result<[i64; DIMS], String> {
    Ok(match spec.layout {
        Layout::Contiguous => ne,
        Layout::Permuted(ax) => {
            let mut seen = [false; 4];
            for &a in &ax {
                if a >= 4 || std::mem::replace(&mut seen[a], true) {
                    return Err(format!("Permuted({ax:?}) is not a permutation of 0..4"));
                }
            }
            [ne[ax[0]], ne[ax[1]], ne[ax[2]], ne[ax[3]], ne[4]]
        }
        Layout::Transposed => [ne[1], ne[0], ne[2], ne[3], ne[4]],
        Layout::Padded => {
            if ne[4] != 1 {
                return Err("Padded inputs are at most 4-D".into());
            }
            let pad = if is_plain(spec.ty) {
                3
            } else {
                spec.ty.blck_size() as i64
            };
            [ne[0] + pad, ne[1] + 1, ne[2], ne[3], 1]
        }
    })
}

fn make_input(
    ctx: &Context,
    spec: &Input,
    rng: &mut Rng,
) -> Result<(Tensor, Tensor, Vec<u8>), String> {
    if spec.ne.is_empty() || spec.ne.len() > DIMS {
        return Err(format!("{} dimensions; 1 to {DIMS} allowed", spec.ne.len()));
    }
    let mut ne = [1i64; DIMS];
    ne[..spec.ne.len()].copy_from_slice(&spec.ne);
    check_init(&spec.init)?;
    let bne = base_shape(spec, ne)?;
    let base = ctx.new_tensor(spec.ty, &bne).map_err(|e| e.to_string())?;
    let values = generate(&spec.init, shape(&bne), rng);
    let bytes = to_bytes(spec.ty, bne[0] as usize, &values)?;
    let e = |r: ggml::Result<Tensor>| r.map_err(|e| e.to_string());
    let t = match spec.layout {
        Layout::Contiguous => base.clone(),
        Layout::Permuted(a) => e(ctx.permute(&base, a[0], a[1], a[2], a[3]))?,
        Layout::Transposed => e(ctx.transpose(&base))?,
        Layout::Padded => {
            let nb = base.nb();
            let offs = nb[1] + spec.ty.type_size() * if is_plain(spec.ty) { 2 } else { 1 };
            e(ctx.view_4d(
                &base,
                [ne[0], ne[1], ne[2], ne[3]],
                nb[1],
                nb[2],
                nb[3],
                offs,
            ))?
        }
    };
    if t.ne() != ne {
        return Err(format!("layout {:?} gave shape {:?}", spec.layout, t.ne()));
    }
    Ok((t, base, bytes))
}

/// `Err` for a range that is empty, backwards or not finite.
fn check_init(init: &Init) -> Result<(), String> {
    let ok = match *init {
        Init::Uniform(lo, hi) | Init::Distinct(lo, hi) => {
            lo.is_finite() && hi.is_finite() && lo <= hi
        }
        Init::Ints(lo, hi) => lo <= hi && hi.checked_sub(lo).is_some_and(|s| s < i64::MAX),
        Init::Custom(_) => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("initialisation {init:?} is not a usable range"))
    }
}

/// Values for a tensor of shape `ne`, in memory (logical) order.
fn generate(init: &Init, ne: [usize; DIMS], rng: &mut Rng) -> Vec<f64> {
    match init {
        Init::Uniform(lo, hi) => indices(ne).map(|_| rng.uniform(*lo, *hi)).collect(),
        Init::Ints(lo, hi) => indices(ne).map(|_| rng.int(*lo, *hi) as f64).collect(),
        Init::Custom(f) => indices(ne).map(|i| f(rng, i)).collect(),
        Init::Distinct(lo, hi) => {
            let n0 = ne[0];
            let rows: usize = ne[1..].iter().product();
            let step = (hi - lo) / n0.max(1) as f64;
            let mut out = Vec::with_capacity(n0 * rows);
            let mut row: Vec<f64> = Vec::with_capacity(n0);
            for _ in 0..rows {
                row.clear();
                row.extend((0..n0).map(|k| lo + step * k as f64));
                rng.shuffle(&mut row);
                out.extend_from_slice(&row);
            }
            out
        }
    }
}

/// The bytes of a contiguous tensor of `ty` holding `values` (rows of `ne0`); quantized types
/// through `ggml::quantize_chunk`.
fn to_bytes(ty: Type, ne0: usize, values: &[f64]) -> Result<Vec<u8>, String> {
    if is_plain(ty) {
        let ts = ty.type_size();
        let mut bytes = vec![0u8; values.len() * ts];
        for (chunk, &v) in bytes.chunks_exact_mut(ts).zip(values) {
            encode(ty, v, chunk);
        }
        return Ok(bytes);
    }
    if values.is_empty() {
        return Ok(Vec::new());
    }
    let src: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    let rows = values.len() / ne0;
    let row_size = ty.row_size(ne0 as i64).map_err(|e| e.to_string())?;
    let mut bytes = vec![0u8; rows * row_size];
    let ones = vec![1f32; ne0];
    let imatrix = ggml::quantize_requires_imatrix(ty).then_some(ones.as_slice());
    ggml::quantize_chunk(ty, &src, &mut bytes, 0, rows, ne0, imatrix).map_err(|e| e.to_string())?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Vars;

    fn one_input(input: Input) -> Case {
        Case::new(
            "DUP",
            Vars::new(),
            vec![input],
            |ctx, x| ctx.dup(&x[0]),
            |x| x[0].clone(),
        )
    }

    #[test]
    fn layouts_give_the_logical_shape_and_values() {
        for layout in [
            Layout::Contiguous,
            Layout::Permuted([2, 0, 1, 3]),
            Layout::Transposed,
            Layout::Padded,
        ] {
            let init = Init::Custom(std::sync::Arc::new(|_: &mut Rng, i: [usize; DIMS]| {
                (i[0] + 100 * i[1] + 10_000 * i[2] + 1_000_000 * i[3]) as f64
            }));
            let c = one_input(
                Input::new(Type::F32, &[4, 3, 2, 2])
                    .layout(layout)
                    .init(init),
            );
            let inst = instantiate(&c, 1).unwrap();
            assert_eq!(inst.outputs[0].ne(), [4, 3, 2, 2, 1], "{layout:?}");
            assert_eq!(inst.hosts[0].ne, [4, 3, 2, 2, 1]);
            // The logical value at i is the base's value at the index the layout maps i to.
            let h = &inst.hosts[0];
            let base =
                |j: [usize; 4]| (j[0] + 100 * j[1] + 10_000 * j[2] + 1_000_000 * j[3]) as f64;
            for i in indices(h.ne) {
                let want = match layout {
                    Layout::Contiguous => base([i[0], i[1], i[2], i[3]]),
                    // Source dimension d went to position ax[d]: base index d = logical ax[d].
                    Layout::Permuted(ax) => base([i[ax[0]], i[ax[1]], i[ax[2]], i[ax[3]]]),
                    Layout::Transposed => base([i[1], i[0], i[2], i[3]]),
                    Layout::Padded => base([i[0] + 2, i[1] + 1, i[2], i[3]]),
                };
                assert_eq!(h.at(i), want, "{layout:?} at {i:?}");
            }
            assert_eq!(inst.outputs.len(), 1);
        }
    }

    #[test]
    fn inputs_are_deterministic_and_distinct_rows_have_no_ties() {
        let c = one_input(Input::new(Type::F16, &[9, 4]).init(Init::Distinct(-3.0, 3.0)));
        let a = instantiate(&c, 5).unwrap();
        let b = instantiate(&c, 5).unwrap();
        let other = instantiate(&c, 6).unwrap();
        assert_eq!(a.bases[0].1, b.bases[0].1);
        assert_ne!(a.bases[0].1, other.bases[0].1);
        for r in 0..4 {
            let mut row = a.hosts[0].row([0, r, 0, 0, 0]).to_vec();
            row.sort_by(f64::total_cmp);
            row.dedup();
            assert_eq!(row.len(), 9);
        }
    }

    #[test]
    fn quantized_inputs_read_back_dequantized() {
        let c = one_input(Input::new(Type::Q8_0, &[64, 3]).layout(Layout::Padded));
        let inst = instantiate(&c, 1).unwrap();
        let h = &inst.hosts[0];
        assert_eq!(h.ne, [64, 3, 1, 1, 1]);
        // Q8_0 keeps uniform [-1, 1) values to within half a step of 1/127 of the block maximum.
        assert!(h.v.iter().all(|v| v.abs() <= 1.0));
        assert!(h.v.iter().any(|v| v.abs() > 0.5));
        let e = instantiate(
            &one_input(Input::new(Type::F32, &[2, 2, 1, 1, 2]).layout(Layout::Padded)),
            1,
        );
        assert!(e.err().unwrap().contains("at most 4-D"));
    }

    #[test]
    fn unusable_ranges_are_refused() {
        for init in [
            Init::Ints(3, 2),
            Init::Ints(i64::MIN, i64::MAX),
            Init::Uniform(1.0, 0.0),
            Init::Distinct(0.0, f64::INFINITY),
        ] {
            let c = one_input(Input::new(Type::I32, &[2]).init(init));
            let e = instantiate(&c, 1).err().unwrap();
            assert!(e.contains("is not a usable range"), "{e}");
        }
    }
}
