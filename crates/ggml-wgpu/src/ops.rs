//! Which nodes the device computes, with which kernel and parameters, and the recording of a
//! graph as one command buffer.

use ggml::backend::{Place, PlacedGraph};
use ggml::ops::{
    read_params, ConcatParams, FlashAttnExtParams, GluOp, GluParams, Im2col3dParams, Im2colParams,
    RopeParams, ScaleMode, UnaryOp, UpscaleParams, SCALE_FLAG_ALIGN_CORNERS, SCALE_FLAG_ANTIALIAS,
};
use ggml::{Error, Op, Result, Tensor, Type};

use crate::buffer::{StagedRead, WgpuBuffer};
use crate::wgsl::{self, Kernel, DESC_WORDS, OP_AT, PARAM_WORDS, X_AT};
use crate::Gpu;

/// Invocations per workgroup of every kernel.
const WG: u64 = 64;

/// Columns of `b` per workgroup of the MUL_MAT kernel.
const MUL_MAT_COLS: u64 = 16;

/// Workgroups per dimension of a dispatch (WebGPU's guaranteed minimum).
const MAX_GROUPS_X: u64 = 65_535;

/// How a node is computed.
enum Kind {
    /// Nothing to compute: a leaf or a view.
    Skip,
    /// `elem.wgsl`: `expr` of `x` (from operand 0, read in the result's linear order when
    /// `linear`, else broadcast) and, when `with_b`, `y` (operand 1, broadcast).
    Elem {
        expr: String,
        linear: bool,
        with_b: bool,
    },
    /// `elem.wgsl` over a GLU: `x` and `y` are operand 0's two halves (fused form, swapped or
    /// not) or operands 0 and 1 (split form).
    Glu {
        expr: &'static str,
    },
    /// `concat.wgsl`.
    Concat,
    /// `pad.wgsl`: PAD (false) or PAD_REFLECT_1D (true).
    Pad {
        reflect: bool,
    },
    /// `im2col.wgsl`: IM2COL (false) or IM2COL_3D (true).
    Im2col {
        three_d: bool,
    },
    /// `upscale.wgsl`.
    Upscale,
    /// `quantize.wgsl`: a copy (CPY, DUP, CONT) or SET_ROWS (`rows`) into a quantized type of
    /// code `qt`.
    Quantize {
        qt: u32,
        rows: bool,
    },
    /// `copy_blocks.wgsl`: a copy between tensors of one quantized type.
    CopyBlocks,
    GetRows,
    SetRows,
    /// `norm.wgsl`: RMS_NORM (0), NORM (1), L2_NORM (2), SUM_ROWS (3), MEAN (4).
    Norm(u32),
    SoftMax,
    Rope,
    MulMat,
    MulMatId,
    FlashAttn,
    Argsort,
}

fn float(ty: Type) -> bool {
    matches!(ty, Type::F32 | Type::F16 | Type::BF16)
}

/// GELU or GELU_QUICK (`quick`) of an operand of `ty` in `x`, as the CPU computes them, GGML's
/// way: its F32 and F16 kernels read tables of F16 values (`x` rounded to F16, the function,
/// rounded to F16: `gelu_t` and `gelu_h` over the CPU's table, `wgsl::gelu_table_fns`;
/// `gelu_quick_t` in `common.wgsl`), its BF16 ones compute.
fn gelu_expr(quick: bool, ty: Type) -> &'static str {
    match (quick, ty) {
        (false, Type::F32) => "gelu_t(x)",
        (false, Type::F16) => "gelu_h(x)",
        (true, Type::F32 | Type::F16) => "gelu_quick_t(x)",
        (false, _) => "gelu_(x)",
        (true, _) => "gelu_quick_(x)",
    }
}

/// The GGML expression of a unary sub-op, in `x` (an operand of `ty`).
fn unary_expr(op: UnaryOp, ty: Type) -> &'static str {
    match op {
        UnaryOp::Abs => "abs(x)",
        UnaryOp::Sgn => "sign(x)",
        UnaryOp::Neg => "-x",
        UnaryOp::Step => "select(0.0, 1.0, x > 0.0)",
        UnaryOp::Tanh => "tanh_(x)",
        UnaryOp::Elu => "select(exp(x) - 1.0, x, x > 0.0)",
        UnaryOp::Relu => "select(0.0, x, x > 0.0)",
        UnaryOp::Sigmoid => "sigmoid_(x)",
        UnaryOp::Gelu => gelu_expr(false, ty),
        UnaryOp::GeluQuick => gelu_expr(true, ty),
        UnaryOp::Silu => "silu_(x)",
        UnaryOp::Hardswish => "x * clamp((x + 3.0) / 6.0, 0.0, 1.0)",
        UnaryOp::Hardsigmoid => "clamp((x + 3.0) / 6.0, 0.0, 1.0)",
        UnaryOp::Exp => "exp_(x)",
        UnaryOp::Expm1 => "expm1_(x)",
        UnaryOp::Softplus => "select(log(1.0 + exp(x)), x, x > 20.0)",
        UnaryOp::GeluErf => "gelu_erf_(x)",
        UnaryOp::Floor => "floor(x)",
        UnaryOp::Ceil => "ceil(x)",
        UnaryOp::Round => "round_(x)",
        UnaryOp::Trunc => "trunc(x)",
        // op_params 1..4: αₙ, αₚ, β, eps (as `ggml::Context::xielu` stores them).
        UnaryOp::Xielu => {
            "select((expm1_(min(x, opf(4u))) - x) * opf(1u) + opf(3u) * x, \
             opf(2u) * x * x + opf(3u) * x, x > 0.0)"
        }
    }
}

/// The expression of a GLU op, in `x` (the activation's input, of `ty`) and `y` (the gate).
fn glu_expr(op: GluOp, ty: Type) -> &'static str {
    match op {
        GluOp::Reglu => "select(0.0, x, x > 0.0) * y",
        // GGML's F32 GEGLU: 0 at or below −10, whatever the gate (`geglu_t`).
        GluOp::Geglu if ty == Type::F32 => "geglu_t(x, y)",
        GluOp::Geglu if ty == Type::F16 => "gelu_h(x) * y",
        GluOp::Geglu => "gelu_(x) * y",
        GluOp::Swiglu => "silu_(x) * y",
        GluOp::SwigluOai => {
            "min(x, opf(3u)) / (1.0 + exp(-opf(2u) * min(x, opf(3u)))) * (clamp(y, -opf(3u), opf(3u)) + 1.0)"
        }
        GluOp::GegluErf => "gelu_erf_(x) * y",
        GluOp::GegluQuick if matches!(ty, Type::F32 | Type::F16) => "gelu_quick_t(x) * y",
        GluOp::GegluQuick => "gelu_quick_(x) * y",
        GluOp::SwigluClamp => "silu_(min(x, opf(3u))) * clamp(y, -opf(3u), opf(3u))",
    }
}

/// Whether every dimension of `small` divides that of `big` (GGML's `can_repeat`).
fn repeats(small: &Tensor, big: &Tensor) -> bool {
    (small.ne().iter().zip(big.ne())).all(|(&s, b)| s > 0 && b % s == 0)
}

/// Operand `i`'s type, when present.
fn src_ty(t: &Tensor, i: usize) -> Option<Type> {
    t.src(i).map(Tensor::ty)
}

/// How `t` is computed, or `None` when the device does not compute it as it is.
fn kind(t: &Tensor) -> Option<Kind> {
    let a = src_ty(t, 0);
    let dst_ok = wgsl::storable(t.ty());
    let float_a = a.is_some_and(float) && dst_ok;
    let simple = |expr: &str| {
        let a = t.src(0)?;
        (float_a && repeats(a, t)).then(|| Kind::Elem {
            expr: expr.to_string(),
            linear: false,
            with_b: false,
        })
    };
    let op = t.op();
    match op {
        Op::None | Op::View | Op::Reshape | Op::Permute | Op::Transpose => Some(Kind::Skip),
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Add1 => {
            let (x, y) = (t.src(0)?, t.src(1)?);
            let ok = float_a && float(y.ty()) && x.ne() == t.ne() && repeats(y, t);
            let expr = match op {
                Op::Add | Op::Add1 => "x + y",
                Op::Sub => "x - y",
                Op::Mul => "x * y",
                _ => "x / y",
            };
            ok.then(|| Kind::Elem {
                expr: expr.into(),
                linear: false,
                with_b: true,
            })
        }
        Op::Scale => simple("x * opf(0u) + opf(1u)"),
        Op::Sqr => simple("x * x"),
        Op::Sqrt => simple("sqrt(x)"),
        Op::Log => simple("log(x)"),
        Op::Sin => simple("sin(x)"),
        Op::Cos => simple("cos(x)"),
        Op::Clamp => simple("max(min(x, opf(1u)), opf(0u))"),
        Op::LeakyRelu => simple("max(x, 0.0) + opf(0u) * min(x, 0.0)"),
        Op::Repeat => simple("x"),
        Op::Unary => {
            let sub = UnaryOp::from_i32(t.get_op_params_i32(0).ok()?)?;
            simple(unary_expr(sub, a?))
        }
        Op::Cpy | Op::Dup | Op::Cont => {
            let x = t.src(0)?;
            let same_n = x.nelements() == t.nelements();
            if t.ty().is_quantized() {
                // Whole blocks of a contiguous result, one invocation each.
                let into = t.is_contiguous() && same_n;
                if let Some(qt) = wgsl::quantizer(t.ty()).filter(|_| float(x.ty()) && into) {
                    return Some(Kind::Quantize { qt, rows: false });
                }
                let rows = x.ty() == t.ty() && x.ne()[0] == t.ne()[0] && x.nb()[0] == t.nb()[0];
                return (into && rows).then_some(Kind::CopyBlocks);
            }
            let ok = a.is_some_and(wgsl::loadable) && dst_ok && x.nelements() == t.nelements();
            ok.then(|| Kind::Elem {
                expr: "x".into(),
                linear: true,
                with_b: false,
            })
        }
        Op::Glu => {
            let p: GluParams = read_params(&t.op_params());
            let g = GluOp::from_i32(p.op)?;
            let split_ok = src_ty(t, 1).is_none_or(float);
            let expr = glu_expr(g, a?);
            (float_a && split_ok).then_some(Kind::Glu { expr })
        }
        Op::Concat => {
            let dim = read_params::<ConcatParams>(&t.op_params()).dim;
            let ok = float_a && src_ty(t, 1).is_some_and(float) && (0..4).contains(&dim);
            ok.then_some(Kind::Concat)
        }
        Op::Pad | Op::PadReflect1d => {
            let ok = float_a && t.src(0)?.ne()[4] == t.ne()[4];
            ok.then_some(Kind::Pad {
                reflect: op == Op::PadReflect1d,
            })
        }
        Op::Argsort => {
            let ok = a.is_some_and(float)
                && t.ty() == Type::I32
                && t.src(0)?.ne()[0] <= i64::from(wgsl::ARGSORT_MAX);
            ok.then_some(Kind::Argsort)
        }
        Op::Im2col | Op::Im2col3d => {
            let three_d = op == Op::Im2col3d;
            let b = t.src(1)?;
            let ic = read_params::<Im2col3dParams>(&t.op_params()).ic;
            let ic_ok = !three_d || (ic > 0 && b.ne()[3] % i64::from(ic) == 0);
            let ok = matches!(t.ty(), Type::F32 | Type::F16)
                && a.is_some_and(wgsl::loadable)
                && float(b.ty())
                && ic_ok
                && t.srcs().chain([t]).all(|x| x.ne()[4] == 1);
            ok.then_some(Kind::Im2col { three_d })
        }
        Op::Upscale => {
            let ok = a == Some(Type::F32)
                && t.ty() == Type::F32
                && t.srcs().chain([t]).all(|x| x.ne()[4] == 1);
            ok.then_some(Kind::Upscale)
        }
        Op::GetRows => {
            let ok = a.is_some_and(wgsl::loadable)
                && src_ty(t, 1) == Some(Type::I32)
                && dst_ok
                && t.ne()[4] == 1;
            ok.then_some(Kind::GetRows)
        }
        Op::SetRows => {
            let ok = a.is_some_and(float) && matches!(src_ty(t, 1), Some(Type::I32 | Type::I64));
            if let Some(qt) = wgsl::quantizer(t.ty()) {
                return ok.then_some(Kind::Quantize { qt, rows: true });
            }
            (ok && dst_ok).then_some(Kind::SetRows)
        }
        Op::RmsNorm | Op::Norm | Op::L2Norm => {
            let mode = match op {
                Op::RmsNorm => 0,
                Op::Norm => 1,
                _ => 2,
            };
            float_a.then_some(Kind::Norm(mode))
        }
        Op::SumRows | Op::Mean => {
            let mode = if op == Op::SumRows { 3 } else { 4 };
            float_a.then_some(Kind::Norm(mode))
        }
        Op::DiagMaskInf | Op::DiagMaskZero => {
            let masked = if op == Op::DiagMaskInf {
                "bitcast<f32>(0xff800000u)"
            } else {
                "0.0"
            };
            let expr =
                format!("select(x, {masked}, i32(ix.i.x) > bitcast<i32>(p.op[0].x) + i32(ix.i.y))");
            simple(&expr)
        }
        Op::SoftMax => {
            let mask_ok = src_ty(t, 1).is_none_or(|m| matches!(m, Type::F32 | Type::F16));
            let sinks_ok = src_ty(t, 2).is_none_or(|s| s == Type::F32);
            (float_a && mask_ok && sinks_ok).then_some(Kind::SoftMax)
        }
        Op::Rope => {
            let p: RopeParams = read_params(&t.op_params());
            let ok = matches!(p.mode, ggml::ROPE_TYPE_NORMAL | ggml::ROPE_TYPE_NEOX)
                && matches!(a, Some(Type::F32 | Type::F16))
                && t.ty() == a?
                && src_ty(t, 1) == Some(Type::I32)
                && src_ty(t, 2).is_none_or(|c| c == Type::F32);
            ok.then_some(Kind::Rope)
        }
        Op::MulMat => {
            let ok = a.is_some_and(wgsl::loadable)
                && src_ty(t, 1).is_some_and(float)
                && t.ty() == Type::F32
                && t.srcs().chain([t]).all(|x| x.ne()[4] == 1);
            ok.then_some(Kind::MulMat)
        }
        Op::MulMatId => {
            let ok = a.is_some_and(wgsl::loadable)
                && src_ty(t, 1).is_some_and(float)
                && src_ty(t, 2) == Some(Type::I32)
                && t.ty() == Type::F32
                && t.srcs()
                    .chain([t])
                    .all(|x| x.ne()[3] == 1 && x.ne()[4] == 1);
            ok.then_some(Kind::MulMatId)
        }
        Op::FlashAttnExt => {
            let (k, v) = (t.src(1)?, t.src(2)?);
            let ok = a == Some(Type::F32)
                && wgsl::loadable(k.ty())
                && wgsl::loadable(v.ty())
                && src_ty(t, 3).is_none_or(|m| m == Type::F16)
                && src_ty(t, 4).is_none_or(|s| s == Type::F32)
                && dst_ok
                && k.ne()[0] <= FLASH_ATTN_MAX_D
                && v.ne()[0] <= FLASH_ATTN_MAX_D;
            ok.then_some(Kind::FlashAttn)
        }
        _ => None,
    }
}

/// The largest K and V row the FLASH_ATTN_EXT kernel holds (`MAX_D` in `flash_attn.wgsl`).
const FLASH_ATTN_MAX_D: i64 = 512;

/// ALiBi's constants for `n_head` heads (x3 = m0, x4 = m1, x5 = n_head_log2 of `alibi()` in
/// `common.wgsl`).
fn alibi(x: &mut [u32; 12], max_bias: f32, n_head: u32) {
    let nhl2 = if n_head == 0 {
        1
    } else {
        1u32 << n_head.ilog2()
    };
    x[3] = 2f32.powf(-max_bias / nhl2 as f32).to_bits();
    x[4] = 2f32.powf(-(max_bias / 2.0) / nhl2 as f32).to_bits();
    x[5] = nhl2;
}

/// Whether the kernels' 32-bit indices and byte addresses reach every element of `t` and its
/// operands, and each of them fits in one of `gpu`'s buffers (a kernel binds whole buffers; a
/// larger operand, e.g. a vocabulary's embeddings in host memory, could not be copied in).
fn fits(gpu: &Gpu, t: &Tensor) -> bool {
    let max = u64::from(u32::MAX);
    let max_buffer = crate::buffer::max_buffer_size(gpu);
    t.srcs().chain([t]).all(|x| {
        let sizes_fit = (x.ne().iter()).all(|&n| u64::try_from(n).is_ok_and(|n| n < max));
        let strides_fit = x.nb().iter().all(|&b| (b as u64) < max);
        sizes_fit
            && strides_fit
            && (x.nelements() as u64) < max
            && (x.nbytes() as u64) < max
            && x.nbytes() <= max_buffer
    })
}

/// Whether `gpu` computes `t` as it is.
pub(crate) fn supports(gpu: &Gpu, t: &Tensor) -> bool {
    kind(t).is_some() && fits(gpu, t)
}

/// A value as `u32`, or `Err` naming `what`.
fn word(v: impl TryInto<u32> + Copy + std::fmt::Debug, what: &str) -> Result<u32> {
    v.try_into()
        .map_err(|_| Error::invalid(format!("wgpu kernels: {what} = {v:?} exceeds 32 bits")))
}

/// A tensor's 12-word descriptor (`struct T`): shape, strides, byte offset, elements.
fn desc(t: &Tensor, off: usize) -> Result<[u32; DESC_WORDS]> {
    let (ne, nb) = (t.ne(), t.nb());
    let mut d = [0u32; DESC_WORDS];
    for k in 0..4 {
        d[k] = word(ne[k], "ne")?;
        d[4 + k] = word(nb[k], "nb")?;
    }
    d[8] = word(off, "offset")?;
    d[9] = word(ne[4], "ne")?;
    d[10] = word(nb[4], "nb")?;
    d[11] = word(t.nelements(), "nelements")?;
    Ok(d)
}

/// One operand as a kernel binds it.
struct Operand {
    ty: Type,
    desc: [u32; DESC_WORDS],
    buffer: wgpu::Buffer,
}

/// A node ready to record: its kernel, parameter block, buffers (result first) and workgroups.
#[derive(Clone)]
struct Step {
    kernel: Kernel,
    params: [u32; PARAM_WORDS],
    buffers: Vec<wgpu::Buffer>,
    groups: u64,
}

/// The wgpu buffer of `place`, which must be on `gpu`.
fn buffer_of<'a>(gpu: &Gpu, place: Option<Place<'a>>, what: &str) -> Result<&'a wgpu::Buffer> {
    place
        .and_then(|p| p.downcast::<WgpuBuffer>())
        .filter(|(b, _)| b.gpu.id == gpu.id)
        .map(|(b, _)| &b.buf)
        .ok_or_else(|| {
            Error::unsupported(format!(
                "{} graph_compute: {what} is not in this device's memory",
                gpu.name
            ))
        })
}

/// Workgroups for one invocation per item.
fn per_item(items: u64) -> u64 {
    items.div_ceil(WG)
}

/// Prepares node `i` of `graph`, computed as `kind`: its steps (a MUL_MAT with quantized weights
/// first rounds its activations into `scratch`, which must then be given).
fn plan(
    gpu: &Gpu,
    graph: &PlacedGraph<'_>,
    i: usize,
    kind: &Kind,
    scratch: Option<&wgpu::Buffer>,
) -> Result<Vec<Step>> {
    let n = &graph.nodes()[i];
    let place = graph
        .place(i)
        .ok_or_else(|| Error::invalid(format!("{}: node {:?} has no place", gpu.name, n.name())))?;
    let dst_buf = buffer_of(gpu, Some(place), "the result")?.clone();
    let mut params = [0u32; PARAM_WORDS];
    params[..DESC_WORDS].copy_from_slice(&desc(n, place.offset())?);
    let op_params = n.op_params();
    params[OP_AT..X_AT].copy_from_slice(&op_params.map(|v| v as u32));
    let operand = |j: usize| -> Result<Operand> {
        let s = n.src(j).ok_or_else(|| {
            Error::invalid(format!(
                "{}: node {:?} lacks operand {j}",
                gpu.name,
                n.name()
            ))
        })?;
        let p = graph.src_place(i, j);
        let buffer = buffer_of(gpu, p, "an operand")?.clone();
        let off = p.map_or(0, |p| p.offset());
        Ok(Operand {
            ty: s.ty(),
            desc: desc(s, off)?,
            buffer,
        })
    };
    let present = |j: usize| n.src(j).is_some();
    // An absent optional operand is bound to a stand-in (the kernel reads a flag, not it).
    let optional = |j: usize, a: &Operand| -> Result<Operand> {
        if present(j) {
            operand(j)
        } else {
            Ok(stand_in(a))
        }
    };
    let mut x = [0u32; 12];
    let mut steps = Vec::with_capacity(1);
    let d_n = n.nelements() as u64;
    let (name, body, operands, groups): (&str, String, Vec<Operand>, u64) = match kind {
        Kind::Skip => return Err(Error::invalid("wgpu: a node without work was planned")),
        Kind::Elem {
            expr,
            linear,
            with_b,
        } => {
            let mut ops = vec![operand(0)?];
            if *with_b {
                ops.push(operand(1)?);
            }
            let body = with_gelu_table(gpu, expr, &mut ops, elem_body(expr, *linear, *with_b));
            ("elem", body, ops, per_item(d_n))
        }
        Kind::Glu { expr } => {
            let p: GluParams = read_params(&op_params);
            let ops = if present(1) {
                vec![operand(0)?, operand(1)?]
            } else {
                // The fused form: x and g are the halves of each row of operand 0.
                let a = operand(0)?;
                let nc = params[0];
                let half = nc
                    .checked_mul(a.desc[4])
                    .ok_or_else(|| Error::invalid("wgpu GLU: row offset exceeds 32 bits"))?;
                let (xo, go) = if p.swapped != 0 { (half, 0) } else { (0, half) };
                let mut xd = a.desc;
                xd[0] = nc;
                let mut gd = xd;
                xd[8] += xo;
                gd[8] += go;
                vec![
                    Operand {
                        ty: a.ty,
                        desc: xd,
                        buffer: a.buffer.clone(),
                    },
                    Operand {
                        ty: a.ty,
                        desc: gd,
                        buffer: a.buffer,
                    },
                ]
            };
            let mut ops = ops;
            let body = with_gelu_table(gpu, expr, &mut ops, elem_body(expr, false, true));
            ("glu", body, ops, per_item(d_n))
        }
        Kind::Concat => (
            "concat",
            format!("{}{}", wgsl::CONCAT, wgsl::PER_ELEM),
            vec![operand(0)?, operand(1)?],
            per_item(d_n),
        ),
        Kind::Pad { reflect } => {
            x[0] = u32::from(*reflect);
            let body = format!("{}{}", wgsl::PAD, wgsl::PER_ELEM);
            ("pad", body, vec![operand(0)?], per_item(d_n))
        }
        Kind::Argsort => {
            let a = operand(0)?;
            let rows = n.src(0).map_or(0, |a| a.nrows()) as u64;
            x[0] = word(rows, "rows")?;
            x[1] = a.desc[0].next_power_of_two();
            ("argsort", wgsl::ARGSORT.to_string(), vec![a], rows)
        }
        Kind::Im2col { three_d } => {
            let (a, mut b) = (operand(0)?, operand(1)?);
            let d = &mut params[..DESC_WORDS];
            x = im2col_views(&op_params, *three_d, &a.desc, &mut b.desc, d)?;
            let body = format!("{}{}", wgsl::IM2COL, wgsl::PER_ELEM);
            ("im2col", body, vec![a, b], per_item(d_n))
        }
        Kind::Upscale => {
            let a = operand(0)?;
            let flags = read_params::<UpscaleParams>(&op_params).mode as u32;
            let (src, dst) = (&a.desc[..4], &params[..4]);
            let mut sf: [f32; 4] = std::array::from_fn(|k| dst[k] as f32 / src[k] as f32);
            let mut offset = 0.5f32;
            if flags & SCALE_FLAG_ALIGN_CORNERS != 0 {
                offset = 0.0;
                for k in 0..2 {
                    if dst[k] > 1 && src[k] > 1 {
                        sf[k] = (dst[k] - 1) as f32 / (src[k] - 1) as f32;
                    }
                }
            }
            for (w, f) in x.iter_mut().zip(sf) {
                *w = f.to_bits();
            }
            x[4] = offset.to_bits();
            x[5] = match flags & 0xff {
                m if m == ScaleMode::Nearest as u32 => 0,
                m if m == ScaleMode::Bilinear as u32 => 1,
                _ => 2,
            };
            x[6] = u32::from(flags & SCALE_FLAG_ANTIALIAS != 0);
            let body = format!("{}{}", wgsl::UPSCALE, wgsl::PER_ELEM);
            ("upscale", body, vec![a], per_item(d_n))
        }
        Kind::Quantize { qt, rows } => {
            let a = operand(0)?;
            let blocks = u64::from(a.desc[11]) / 32;
            x[3] = word(blocks, "blocks")?;
            let (at, ops) = if *rows {
                let b = operand(1)?;
                x[0] = u32::from(b.ty == Type::I64);
                let at = wgsl::fault(1, 2) + wgsl::ROWS_INDEX + wgsl::QUANTIZE_ROWS;
                (at, vec![a, b])
            } else {
                (wgsl::QUANTIZE_CPY.to_string(), vec![a])
            };
            let body = (at + &wgsl::QUANTIZE.replace("{QT}", &qt.to_string()))
                .replace("{BYTES}", &n.ty().type_size().to_string());
            ("quantize", body, ops, per_item(blocks))
        }
        Kind::CopyBlocks => {
            let per_row = n.ne()[0] as u64 / n.ty().blck_size() as u64;
            let blocks = d_n / n.ty().blck_size() as u64;
            x[0] = word(blocks, "blocks")?;
            x[1] = word(per_row, "blocks per row")?;
            x[2] = word(n.ty().type_size(), "block size")?;
            let body = wgsl::COPY_BLOCKS.to_string();
            ("copy_blocks", body, vec![operand(0)?], per_item(blocks))
        }
        Kind::GetRows => (
            "get_rows",
            format!("{}{}", wgsl::fault(1, 2), wgsl::GET_ROWS),
            vec![operand(0)?, operand(1)?],
            per_item(d_n),
        ),
        Kind::SetRows => {
            let ops = vec![operand(0)?, operand(1)?];
            x[0] = (ops[1].ty == Type::I64) as u32;
            let items = u64::from(ops[0].desc[11]);
            let body = wgsl::fault(1, 2) + wgsl::ROWS_INDEX + wgsl::SET_ROWS;
            ("set_rows", body, ops, per_item(items))
        }
        Kind::MulMatId => (
            "mul_mat_id",
            format!("{}{}", wgsl::fault(2, 3), wgsl::MUL_MAT_ID),
            vec![operand(0)?, operand(1)?, operand(2)?],
            per_item(d_n),
        ),
        Kind::Norm(mode) => {
            let rows = n.src(0).map_or(0, |a| a.nrows()) as u64;
            x[0] = word(rows, "rows")?;
            x[1] = *mode;
            let body = format!("{}{}", wgsl::NORM, wgsl::norm_sq_mean(gpu));
            ("norm", body, vec![operand(0)?], rows)
        }
        Kind::SoftMax => {
            let a = operand(0)?;
            let rows = n.src(0).map_or(0, |a| a.nrows()) as u64;
            let max_bias = f32::from_bits(op_params[1] as u32);
            x[0] = word(rows, "rows")?;
            x[1] = present(1) as u32;
            x[2] = present(2) as u32;
            alibi(&mut x, max_bias, a.desc[2]);
            let mask = optional(1, &a)?;
            let sinks = optional(2, &a)?;
            let ops = vec![a, mask, sinks];
            let body = format!("{}{}", wgsl::SOFT_MAX, wgsl::soft_max_sum(gpu));
            ("soft_max", body, ops, rows)
        }
        Kind::Rope => {
            let p: RopeParams = read_params(&op_params);
            let a = operand(0)?;
            let ne0 = a.desc[0];
            let n_dims = word(p.n_dims, "n_dims")?;
            let n_offs = word(p.n_offs, "n_offs")?;
            if n_dims % 2 != 0 || n_offs + n_dims > ne0 {
                return Err(Error::invalid(format!(
                    "wgpu ROPE: n_dims {n_dims} and n_offs {n_offs} do not fit rows of {ne0}"
                )));
            }
            let per_row = ne0 - n_dims / 2;
            let rows = n.src(0).map_or(0, |a| a.nrows()) as u64;
            let items = rows * u64::from(per_row);
            let corr = ggml::ops::rope_yarn_corr_dims(
                p.n_dims,
                p.n_ctx_orig,
                p.freq_base,
                p.beta_fast,
                p.beta_slow,
            );
            x[0] = word(items, "rope items")?;
            x[1] = per_row;
            x[2] = n_dims;
            x[3] = (p.mode == ggml::ROPE_TYPE_NEOX) as u32;
            x[4] = n_offs;
            x[5] = p.freq_base.powf(-2.0 / p.n_dims as f32).to_bits();
            x[6] = corr[0].to_bits();
            x[7] = corr[1].to_bits();
            x[8] = present(2) as u32;
            // (as the CPU: GGML's build fuses it)
            x[9] = 0.1f32.mul_add((1.0 / p.freq_scale).ln(), 1.0).to_bits();
            let pos = operand(1)?;
            let ff = optional(2, &a)?;
            // The CPU's angles for the first positions (without frequency factors, which
            // are device data): a table the host computes with the CPU's cosf and sinf.
            let table = if present(2) {
                x[10] = 0;
                stand_in(&a)
            } else {
                let t = RopeTable {
                    half: n_dims / 2,
                    theta_scale: f32::from_bits(x[5]),
                    freq_scale: p.freq_scale,
                    ext_factor: p.ext_factor,
                    attn_factor: p.attn_factor,
                    corr,
                    mscale_factor: f32::from_bits(x[9]),
                };
                x[10] = ROPE_TABLE_POSITIONS;
                Operand {
                    ty: Type::F32,
                    desc: [0; DESC_WORDS],
                    buffer: gpu.rope_table(t),
                }
            };
            (
                "rope",
                wgsl::ROPE.to_string(),
                vec![a, pos, ff, table],
                per_item(items),
            )
        }
        Kind::MulMat => {
            let (a, mut b) = (operand(0)?, operand(1)?);
            let qb = act_block(a.ty);
            if qb > 0 {
                let scratch = scratch.ok_or_else(|| {
                    Error::invalid("wgpu MUL_MAT: no scratch buffer for the activations")
                })?;
                steps.push(round_activations(gpu, &b, qb, scratch)?);
                // The kernel reads the scratch (as words), with b's shape.
                b = Operand {
                    ty: Type::F32,
                    desc: b.desc,
                    buffer: scratch.clone(),
                };
            }
            let d = &params[..4];
            let blocks = u64::from(d[1]).div_ceil(MUL_MAT_COLS);
            let row_groups = u64::from(d[0]).div_ceil(WG);
            let groups = row_groups * blocks * u64::from(d[2]) * u64::from(d[3]);
            x[0] = word(groups, "mul_mat workgroups")?;
            x[1] = word(blocks, "mul_mat column blocks")?;
            x[2] = b.desc[2] / a.desc[2].max(1);
            x[3] = b.desc[3] / a.desc[3].max(1);
            x[4] = word(row_groups, "mul_mat row groups")?;
            // The k-quants' float order depends on the columns (GGML's tiled product from
            // BAND_MIN_COLS on, its row dot below).
            x[5] = u32::from(d[1] >= BAND_MIN_COLS);
            let dots = if let Some(lt) = lanes_type(a.ty) {
                wgsl::MUL_MAT_LANES
                    .replace("{LT}", &lt.to_string())
                    .replace("{QB}", &qb.to_string())
                    .replace("{BS}", &a.ty.type_size().to_string())
            } else if qb > 0 {
                wgsl::MUL_MAT_QUANT.replace("{QB}", &qb.to_string())
            } else {
                x[6] = f16_order(&a, &b, &params[..DESC_WORDS]);
                wgsl::mul_mat_float(gpu, float_act_rounding(a.ty))
            };
            let body = format!("{}{dots}", wgsl::MUL_MAT);
            ("mul_mat", body, vec![a, b], groups)
        }
        Kind::FlashAttn => {
            let p: FlashAttnExtParams = read_params(&op_params);
            let (q, k, v) = (operand(0)?, operand(1)?, operand(2)?);
            let n_head = q.desc[2];
            let rows = u64::from(q.desc[1]) * u64::from(n_head) * u64::from(q.desc[3]);
            x[0] = word(rows, "attention rows")?;
            x[1] = present(3) as u32;
            x[2] = present(4) as u32;
            alibi(&mut x, p.max_bias, n_head);
            x[6] = n_head / k.desc[2].max(1);
            x[7] = n_head / v.desc[2].max(1);
            let scale = if p.logit_softcap != 0.0 {
                p.scale / p.logit_softcap
            } else {
                p.scale
            };
            x[8] = scale.to_bits();
            x[9] = flash_attn_roundings(q.desc[1], k.ty, v.ty);
            let mask = optional(3, &q)?;
            let sinks = optional(4, &q)?;
            let ops = vec![q, k, v, mask, sinks];
            ("flash_attn", wgsl::FLASH_ATTN.to_string(), ops, rows)
        }
    };
    for (k, o) in operands.iter().enumerate() {
        params[DESC_WORDS * (k + 1)..DESC_WORDS * (k + 2)].copy_from_slice(&o.desc);
    }
    params[X_AT..wgsl::KEEP_AT].copy_from_slice(&x);
    let types: Vec<Type> = operands.iter().map(|o| o.ty).collect();
    let key = format!("{name}|{}|{}|{:?}", kernel_variant(kind), n.ty(), types);
    // The kernels that check indices bind the fault slots after their operands.
    let n_bindings = operands.len() + usize::from(index_operand(kind).is_some());
    let kernel = gpu.kernels.kernel(gpu, &key, n_bindings, || {
        wgsl::source(&body, n.ty(), &types, gpu)
    })?;
    let mut buffers = vec![dst_buf];
    buffers.extend(operands.into_iter().map(|o| o.buffer));
    steps.push(Step {
        kernel,
        params,
        buffers,
        groups,
    });
    Ok(steps)
}

/// Words of `mul_mat_q8.wgsl`'s scratch for activations `b` (`ne`) rounded in blocks of `qb`.
fn act_words(ne: [u64; 4], qb: u32) -> u64 {
    let qb = u64::from(qb);
    ne[1] * ne[2] * ne[3] * (ne[0] / qb) * (qb / 4 + 1)
}

/// The step of `mul_mat_q8.wgsl`: MUL_MAT's activations `b` rounded to the CPU's 8-bit levels
/// in blocks of `qb` values, into `scratch`.
fn round_activations(gpu: &Gpu, b: &Operand, qb: u32, scratch: &wgpu::Buffer) -> Result<Step> {
    let mut params = [0u32; PARAM_WORDS];
    params[DESC_WORDS..2 * DESC_WORDS].copy_from_slice(&b.desc);
    let blocks = b.desc[0] / qb;
    let total = u64::from(b.desc[1]) * u64::from(b.desc[2]) * u64::from(b.desc[3]);
    let total = total * u64::from(blocks);
    params[X_AT] = word(total, "activation blocks")?;
    params[X_AT + 1] = blocks;
    let key = format!("mul_mat_q8|{qb}|{}", b.ty);
    let kernel = gpu.kernels.kernel(gpu, &key, 1, || {
        let body = wgsl::MUL_MAT_Q8.replace("{QB}", &qb.to_string());
        wgsl::source(&body, Type::F32, &[b.ty], gpu)
    })?;
    Ok(Step {
        kernel,
        params,
        buffers: vec![scratch.clone(), b.buffer.clone()],
        groups: per_item(total),
    })
}

/// IM2COL's and IM2COL_3D's views for `im2col.wgsl`: the input descriptor `b` rewritten as
/// (x, y, z, channel, batch) and the result's `d` as (j, ox, oy, oz, batch), from the kernel
/// descriptor `a` and the op's parameters; returns the kernel's per-axis taps, strides,
/// paddings and dilations (unused axes: one tap, no padding).
fn im2col_views(
    op_params: &[i32; 16],
    three_d: bool,
    a: &[u32; DESC_WORDS],
    b: &mut [u32; DESC_WORDS],
    d: &mut [u32],
) -> Result<[u32; 12]> {
    let big = || Error::invalid("wgpu IM2COL: a stride exceeds 32 bits");
    let (ne_b, nb_b, ne_d, nb_d) = (
        [b[0], b[1], b[2], b[3]],
        [b[4], b[5], b[6], b[7]],
        [d[0], d[1], d[2], d[3]],
        [d[4], d[5], d[6], d[7]],
    );
    // (ne 0..3, ne4), (nb 0..3, nb4) of each view.
    let (bv, dv, taps, s, pad, dil);
    if three_d {
        let p: Im2col3dParams = read_params(op_params);
        let ic = p.ic as u32;
        let n = ne_b[3] / ic.max(1);
        let od = ne_d[3] / n.max(1);
        bv = (
            [ne_b[0], ne_b[1], ne_b[2], ic, n],
            [
                nb_b[0],
                nb_b[1],
                nb_b[2],
                nb_b[3],
                ic.checked_mul(nb_b[3]).ok_or_else(big)?,
            ],
        );
        dv = (
            [ne_d[0], ne_d[1], ne_d[2], od, n],
            [
                nb_d[0],
                nb_d[1],
                nb_d[2],
                nb_d[3],
                od.checked_mul(nb_d[3]).ok_or_else(big)?,
            ],
        );
        taps = [a[0], a[1], a[2]];
        (s, pad, dil) = ([p.s0, p.s1, p.s2], [p.p0, p.p1, p.p2], [p.d0, p.d1, p.d2]);
    } else {
        let p: Im2colParams = read_params(op_params);
        if p.is_2d == 1 {
            bv = (
                [ne_b[0], ne_b[1], 1, ne_b[2], ne_b[3]],
                [nb_b[0], nb_b[1], 0, nb_b[2], nb_b[3]],
            );
            dv = (
                [ne_d[0], ne_d[1], ne_d[2], 1, ne_d[3]],
                [nb_d[0], nb_d[1], nb_d[2], 0, nb_d[3]],
            );
            taps = [a[0], a[1], 1];
            (s, pad, dil) = ([p.s0, p.s1, 1], [p.p0, p.p1, 0], [p.d0, p.d1, 1]);
        } else {
            bv = (
                [ne_b[0], 1, 1, ne_b[1], ne_b[2]],
                [nb_b[0], 0, 0, nb_b[1], nb_b[2]],
            );
            dv = (
                [ne_d[0], ne_d[1], 1, 1, ne_d[2]],
                [nb_d[0], nb_d[1], 0, 0, nb_d[2]],
            );
            taps = [a[0], 1, 1];
            (s, pad, dil) = ([p.s0, 1, 1], [p.p0, 0, 0], [p.d0, 1, 1]);
        }
    }
    for (desc, (ne, nb)) in [(&mut b[..], bv), (d, dv)] {
        desc[..4].copy_from_slice(&ne[..4]);
        desc[4..8].copy_from_slice(&nb[..4]);
        desc[9] = ne[4];
        desc[10] = nb[4];
    }
    let mut x = [0u32; 12];
    x[..3].copy_from_slice(&taps);
    for k in 0..3 {
        x[3 + k] = s[k] as u32;
        x[6 + k] = pad[k] as u32;
        x[9 + k] = dil[k] as u32;
    }
    Ok(x)
}

/// The roundings of the CPU's FLASH_ATTN_EXT (`x9` of `flash_attn.wgsl`) for `n_q` query rows
/// and K and V of types `k` and `v`: none on its tiled path (K and V both F32 or both F16, at
/// least 64 rows: Q stays F32, the accumulator f32), else its rows path's: Q rounded to K's
/// F16 or BF16 (1, 2) and an F16 value accumulator for F16 V (4), in AVX-512 FP16's steps
/// where the CPU takes them (8, [`cpu_half_native`]).
fn flash_attn_roundings(n_q: u32, k: Type, v: Type) -> u32 {
    const TILE_ROWS: u32 = 64;
    if k == v && matches!(k, Type::F32 | Type::F16) && n_q >= TILE_ROWS {
        return 0;
    }
    let q = match k {
        Type::F16 => 1,
        Type::BF16 => 2,
        _ => 0,
    };
    let acc = match v {
        Type::F16 if cpu_half_native() => 4 | 8,
        Type::F16 => 4,
        _ => 0,
    };
    q | acc
}

/// Whether the CPU's kernels take their AVX-512 path: the CPU has AVX2, FMA, F16C and AVX-512
/// (F, BW, VL, VNNI), and `GGML_CPU_FORCE` does not name a narrower path (as the CPU backend
/// decides).
pub(crate) fn cpu_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let narrower = matches!(
            std::env::var("GGML_CPU_FORCE").as_deref(),
            Ok("scalar" | "avx2")
        );
        !narrower
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether the CPU's FLASH_ATTN_EXT takes AVX-512 FP16 steps for an F16 value accumulator (as
/// GGML built for such a CPU does): its AVX-512 path on a CPU with FP16. The device then
/// rounds as it does.
fn cpu_half_native() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        cpu_avx512() && std::arch::is_x86_feature_detected!("avx512fp16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The float order of MUL_MAT with weights `a` and activations `b` giving the result `d`
/// (its descriptor), `x6` of `mul_mat_float.wgsl`: the CPU's AVX-512 F16 product
/// (F16 weights with packed rows, F32 result): 2 tinyBLAS's (2 columns or more per batch,
/// weight rows a multiple of 4, `b` F32 or contiguous F16), else 1 `ggml_vec_dot_f16`'s;
/// 0 (one sum in order of k) for other weights or CPUs.
fn f16_order(a: &Operand, b: &Operand, d: &[u32]) -> u32 {
    let (ad, bd) = (&a.desc, &b.desc);
    if a.ty != Type::F16 || ad[4] != 2 || d[4] != 4 || !cpu_avx512() {
        return 0;
    }
    let b_packed =
        bd[4] == 2 && bd[5] == 2 * bd[0] && bd[6] == bd[5] * bd[1] && bd[7] == bd[6] * bd[2];
    if d[1] >= 2 && ad[1] % 4 == 0 && (b.ty != Type::F16 || b_packed) {
        2
    } else {
        1
    }
}

/// Values per block of the 8-bit rounding the CPU gives MUL_MAT's activations for weights of
/// type `ty` (GGML's `vec_dot_type`: Q8_0 or Q8_1 for the legacy quantized types and IQ4_NL,
/// Q8_K for the k-quants and IQ4_XS), or 0 for float weights and the quantized types the CPU
/// has no integer dot for, whose weights it dequantizes (activations used as they are).
fn act_block(ty: Type) -> u32 {
    match ty {
        Type::Q4_0 | Type::Q4_1 | Type::Q5_0 | Type::Q5_1 | Type::Q8_0 | Type::IQ4_NL => 32,
        Type::Q2_K | Type::Q3_K | Type::Q4_K | Type::Q5_K | Type::Q6_K | Type::IQ4_XS => 256,
        _ => 0,
    }
}

/// Positions 0.. whose ROPE angles the device reads from a table the host computes
/// ([`RopeTable`]); beyond them it computes them (`rope.wgsl`'s `cos_sin_`).
const ROPE_TABLE_POSITIONS: u32 = 4096;

/// What ROPE's angles depend on besides the position and the pair (without frequency
/// factors): the key of a device's ROPE tables.
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct RopeTable {
    /// Pairs per row (n_dims / 2).
    pub(crate) half: u32,
    pub(crate) theta_scale: f32,
    pub(crate) freq_scale: f32,
    pub(crate) ext_factor: f32,
    pub(crate) attn_factor: f32,
    /// YaRN's correction dimensions.
    pub(crate) corr: [f32; 2],
    /// YaRN's factor of mscale, `fma(0.1, ln(1/freq_scale), 1)`.
    pub(crate) mscale_factor: f32,
}

impl RopeTable {
    /// The words of the key (bit patterns, so that equal parameters share a table).
    pub(crate) fn key(&self) -> [u32; 8] {
        [
            self.half,
            self.theta_scale.to_bits(),
            self.freq_scale.to_bits(),
            self.ext_factor.to_bits(),
            self.attn_factor.to_bits(),
            self.corr[0].to_bits(),
            self.corr[1].to_bits(),
            self.mscale_factor.to_bits(),
        ]
    }

    /// `(cos, sin)` times mscale of every pair of positions 0..[`ROPE_TABLE_POSITIONS`], in
    /// that order, as the CPU's ROPE computes them (GGML's `rope_yarn` over its cache: the
    /// angle of pair j + 1 that of pair j times `theta_scale`, in f32; YaRN's ramp with its
    /// fused multiply-add; the C library's `cosf` and `sinf`, which Rust's `f32::cos`/`sin`
    /// call, as GGML's C does).
    pub(crate) fn values(&self) -> Vec<f32> {
        let mut out = Vec::with_capacity(2 * (ROPE_TABLE_POSITIONS * self.half) as usize);
        for pos in 0..ROPE_TABLE_POSITIONS {
            let mut theta = pos as f32;
            for j in 0..self.half {
                let interp = self.freq_scale * theta;
                let (mut th, mut mscale) = (interp, self.attn_factor);
                if self.ext_factor != 0.0 {
                    let [low, high] = self.corr;
                    let y = (j as f32 - low) / (high - low).max(0.001);
                    let ramp = 1.0 - y.clamp(0.0, 1.0);
                    let mix = ramp * self.ext_factor;
                    th = interp.mul_add(1.0 - mix, theta * mix);
                    mscale *= self.mscale_factor;
                }
                out.push(th.cos() * mscale);
                out.push(th.sin() * mscale);
                theta *= self.theta_scale;
            }
        }
        out
    }
}

/// Columns of `b` from which the CPU computes k-quant products in GGML's tiled order (its
/// `BAND_MIN_COLS`; below, in its row dot's).
const BAND_MIN_COLS: u32 = 8;

/// The code of `mul_mat_lanes.wgsl` (its LT) for weights of type `ty`, if the CPU computes
/// their products in GGML's x86 float order (its row dots, tiled and tinyBLAS products): the
/// device then takes the same steps, so that its outputs have the CPU's bits.
fn lanes_type(ty: Type) -> Option<u32> {
    Some(match ty {
        Type::Q4_0 => 0,
        Type::Q5_0 => 1,
        Type::Q8_0 => 2,
        Type::IQ4_NL => 3,
        Type::Q4_K => 4,
        Type::Q6_K => 5,
        _ => return None,
    })
}

/// The rounding the CPU gives MUL_MAT's activations for float weights of type `ty` (GGML's
/// `vec_dot_type`): 1 to F16 for F16 weights, 2 to BF16 for BF16 weights, else 0 (none).
fn float_act_rounding(ty: Type) -> u32 {
    match ty {
        Type::F16 => 1,
        Type::BF16 => 2,
        _ => 0,
    }
}

/// The operand whose values `kind`'s kernel checks as indices, recording faults
/// (`fault.wgsl`), if any.
fn index_operand(kind: &Kind) -> Option<usize> {
    match kind {
        Kind::GetRows | Kind::SetRows | Kind::Quantize { rows: true, .. } => Some(1),
        Kind::MulMatId => Some(2),
        _ => None,
    }
}

/// A node whose kernel checks its indices: its fault slot is the `k`-th of the graph's.
struct Checked {
    /// The node's position in the graph.
    index: usize,
    /// Its op and name, for the error.
    op: &'static str,
    name: String,
    /// Its index operand's slot and shape (dims 0..2, to turn a position back into
    /// coordinates).
    slot: usize,
    idx_ne: [u32; 3],
}

/// The fault slots of a submitted graph, being read back.
pub(crate) struct FaultCheck {
    read: StagedRead,
    nodes: Vec<Checked>,
}

/// Words per fault slot (`fault.wgsl`).
const FAULT_WORDS: usize = 4;

impl FaultCheck {
    /// Waits for the slots and returns the CPU's error for the first node that met an index
    /// outside its range (the earliest position in it, dimension 2 slowest), if any.
    pub(crate) fn finish(self, gpu: &Gpu) -> Result<()> {
        let mut bytes = vec![0u8; 4 * FAULT_WORDS * self.nodes.len()];
        self.read.finish(gpu, &mut bytes)?;
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        for (slot, c) in words.chunks_exact(FAULT_WORDS).zip(&self.nodes) {
            let pos = slot[0];
            if pos == u32::MAX {
                continue;
            }
            let [n0, n1, _] = c.idx_ne.map(|n| n.max(1));
            let at = [pos % n0, pos / n0 % n1, pos / (n0 * n1)];
            let value = (u64::from(slot[2]) << 32 | u64::from(slot[1])) as i64;
            return Err(Error::Compute(format!(
                "{} (graph node {}, {:?}): src{} index {value} at {at:?} is outside 0..{}",
                c.op, c.index, c.name, c.slot, slot[3]
            )));
        }
        Ok(())
    }
}

/// The part of a kernel's key that its types do not give (an element-wise expression).
fn kernel_variant(kind: &Kind) -> String {
    match kind {
        Kind::Elem {
            expr,
            linear,
            with_b,
        } => format!("{expr}|{linear}|{with_b}"),
        Kind::Glu { expr } => expr.to_string(),
        _ => String::new(),
    }
}

/// `body` with the GELU table's functions where `expr` reads them, the table ([`Gpu`]'s,
/// `wgsl::gelu_table`) bound as the operand after `ops`.
fn with_gelu_table(gpu: &Gpu, expr: &str, ops: &mut Vec<Operand>, body: String) -> String {
    if !wgsl::uses_gelu_table(expr) {
        return body;
    }
    let name = wgsl::OPERANDS[ops.len()];
    ops.push(Operand {
        ty: Type::F32,
        desc: [0; DESC_WORDS],
        buffer: gpu.gelu_table().clone(),
    });
    wgsl::gelu_table_fns(name) + &body
}

/// An operand slot the kernel declares but does not read: bound to `a`'s buffer as F32.
fn stand_in(a: &Operand) -> Operand {
    Operand {
        ty: Type::F32,
        desc: [0; DESC_WORDS],
        buffer: a.buffer.clone(),
    }
}

/// `elem.wgsl` for `expr`.
fn elem_body(expr: &str, linear: bool, with_b: bool) -> String {
    let a_index = if linear {
        "unravel(t, p.a.ne)"
    } else {
        "bcast(ix, p.a)"
    };
    let b = if with_b {
        "let ib = bcast(ix, p.b);\n    let y = ld_b(row_of(p.b, ib), ib.i.x);"
    } else {
        ""
    };
    let value = wgsl::ELEM
        .replace("{A_INDEX}", a_index)
        .replace("{B}", b)
        .replace("{EXPR}", expr);
    value + wgsl::PER_ELEM
}

/// Records every node of `graph` the device computes into one command buffer with one compute
/// pass, and submits it; `None` when there was nothing to compute. Nodes that check indices get
/// a fault slot each, whose read-back is queued after the graph (the returned check).
pub(crate) fn record(
    gpu: &Gpu,
    graph: &PlacedGraph<'_>,
) -> Result<Option<(wgpu::SubmissionIndex, Option<FaultCheck>)>> {
    let n_checked = graph
        .nodes()
        .iter()
        .filter(|n| !n.is_empty() && kind(n).is_some_and(|k| index_operand(&k).is_some()))
        .count();
    let fault_words: Vec<u8> = (0..n_checked)
        .flat_map(|_| [u32::MAX, 0, 0, 0])
        .flat_map(u32::to_le_bytes)
        .collect();
    let faults = (n_checked > 0).then(|| {
        wgpu::util::DeviceExt::create_buffer_init(
            &gpu.device,
            &wgpu::util::BufferInitDescriptor {
                label: Some("ggml index faults"),
                contents: &fault_words,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            },
        )
    });
    // One scratch for every MUL_MAT's rounded activations (the dispatches run in order).
    let scratch_words = (graph.nodes().iter())
        .filter(|n| !n.is_empty() && matches!(kind(n), Some(Kind::MulMat)))
        .filter_map(|n| {
            let (a, b) = (n.src(0)?, n.src(1)?);
            let qb = act_block(a.ty());
            let ne = b.ne().map(|v| v as u64);
            (qb > 0).then(|| act_words([ne[0], ne[1], ne[2], ne[3]], qb))
        })
        .max();
    let scratch = scratch_words.map(|w| {
        gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("ggml mul_mat activations"),
            size: (4 * w).max(4),
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        })
    });
    let mut checked = Vec::with_capacity(n_checked);
    let mut steps = Vec::new();
    for (i, n) in graph.nodes().iter().enumerate() {
        if n.is_empty() {
            continue;
        }
        let k = kind(n).filter(|_| fits(gpu, n)).ok_or_else(|| {
            Error::unsupported(format!(
                "{}: cannot compute {} into {} (node {:?})",
                gpu.name,
                n.op().name(),
                n.ty(),
                n.name()
            ))
        })?;
        if matches!(k, Kind::Skip) {
            continue;
        }
        let mut planned = plan(gpu, graph, i, &k, scratch.as_ref())?;
        let Some(mut step) = planned.pop() else {
            continue;
        };
        steps.extend(planned);
        if let (Some(slot), Some(f)) = (index_operand(&k), &faults) {
            step.params[X_AT + 1] = checked.len() as u32;
            step.buffers.push(f.clone());
            let idx = n.src(slot).map_or([1; 5], |b| b.ne().map(|v| v as u32));
            checked.push(Checked {
                index: i,
                op: n.op().name(),
                name: n.name(),
                slot,
                idx_ne: [idx[0], idx[1], idx[2]],
            });
            let mut report = step.clone();
            report.params[X_AT + 2] = 1;
            report.groups = 1;
            steps.push(step);
            steps.push(report);
        } else {
            steps.push(step);
        }
    }
    if steps.is_empty() {
        return Ok(None);
    }
    let align = (gpu.limits.min_uniform_buffer_offset_alignment as usize).max(16);
    let block = PARAM_WORDS * 4;
    let stride = block.next_multiple_of(align);
    let mut bytes = vec![0u8; stride * steps.len()];
    for (k, s) in steps.iter().enumerate() {
        let mut params = s.params;
        params[wgsl::KEEP_AT..].copy_from_slice(&wgsl::KEEP);
        for (w, v) in params.iter().enumerate() {
            bytes[k * stride + 4 * w..k * stride + 4 * w + 4].copy_from_slice(&v.to_le_bytes());
        }
    }
    let uniform = wgpu::util::DeviceExt::create_buffer_init(
        &gpu.device,
        &wgpu::util::BufferInitDescriptor {
            label: Some("ggml params"),
            contents: &bytes,
            usage: wgpu::BufferUsages::UNIFORM,
        },
    );
    let groups: Vec<wgpu::BindGroup> = steps
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let mut entries = vec![wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &uniform,
                    offset: (k * stride) as u64,
                    size: wgpu::BufferSize::new(block as u64),
                }),
            }];
            entries.extend(
                s.buffers
                    .iter()
                    .enumerate()
                    .map(|(j, b)| wgpu::BindGroupEntry {
                        binding: j as u32 + 1,
                        resource: b.as_entire_binding(),
                    }),
            );
            gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &s.kernel.group,
                entries: &entries,
            })
        })
        .collect();
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("ggml graph"),
            timestamp_writes: None,
        });
        for (s, g) in steps.iter().zip(&groups) {
            let max_x =
                u64::from(gpu.limits.max_compute_workgroups_per_dimension).clamp(1, MAX_GROUPS_X);
            let x = s.groups.min(max_x);
            let y = s.groups.div_ceil(max_x);
            pass.set_pipeline(&s.kernel.pipeline);
            pass.set_bind_group(0, g, &[]);
            pass.dispatch_workgroups(word(x, "workgroups")?, word(y, "workgroups")?, 1);
        }
    }
    let index = gpu.queue.submit(std::iter::once(enc.finish()));
    let check = faults.map(|f| FaultCheck {
        read: crate::buffer::stage_read(gpu, &f, 0, fault_words.len()),
        nodes: checked,
    });
    Ok(Some((index, check)))
}
