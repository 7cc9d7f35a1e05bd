//! The rest of ggmlR's context, tensor, graph and type functions: context queries, tensor
//! creation, names, flags, layout queries, element access, op parameters, graphs (CPU compute,
//! nodes, views), the graph allocator and type sizes.

use std::sync::Arc;

use crate::args::{self, bad, bytes, flag, ggml_type, handle, lib, string, Slot};
use crate::{ctx_arg, graph_arg, tensor_arg, wrap_opt};
use extendr_api::prelude::*;
use extendr_api::Result;
use ggml::{backend, Gallocr, Graph, Op, Tensor, Type, UnaryOp};

const GALLOC: &str = "ggml graph allocator";

// ---- contexts -------------------------------------------------------------------------------

/// Context queries
///
/// `ggml_get_mem_size` is the context's budget in bytes, `ggml_get_max_tensor_size` the
/// largest tensor's bytes, `ggml_tensor_num` the number of tensors, `ggml_get_no_alloc`
/// and `ggml_set_no_alloc` read and set whether new tensors get data. `ggml_get_first_tensor`
/// and `ggml_get_next_tensor` walk the tensors in creation order (`NULL` after the last).
/// `ggml_tensor_overhead` and `ggml_graph_overhead` are the bytes of budget a tensor's and a
/// graph's metadata take.
/// @param ctx A context.
/// @param no_alloc `TRUE` or `FALSE`.
/// @param tensor A tensor of the context.
/// @return A number, a logical, a tensor or `NULL`.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// ggml_get_mem_size(ctx)
/// a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
/// b <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 20)
/// ggml_tensor_num(ctx)
/// ggml_get_max_tensor_size(ctx)  # 80
/// ggml_nelements(ggml_get_next_tensor(ctx, ggml_get_first_tensor(ctx)))  # 20
/// ggml_set_no_alloc(ctx, TRUE)
/// ggml_get_no_alloc(ctx)
/// ggml_tensor_overhead()
/// ggml_graph_overhead()
/// @export
#[extendr]
fn ggml_get_mem_size(ctx: Robj) -> Result<f64> {
    Ok(ctx_arg(&ctx)?.mem_size() as f64)
}

/// @rdname ggml_get_mem_size
/// @export
#[extendr]
fn ggml_get_max_tensor_size(ctx: Robj) -> Result<f64> {
    Ok(ctx_arg(&ctx)?.get_max_tensor_size() as f64)
}

/// @rdname ggml_get_mem_size
/// @export
#[extendr]
fn ggml_tensor_num(ctx: Robj) -> Result<i32> {
    Ok(ctx_arg(&ctx)?.tensors().len() as i32)
}

/// @rdname ggml_get_mem_size
/// @export
#[extendr]
fn ggml_get_no_alloc(ctx: Robj) -> Result<bool> {
    Ok(ctx_arg(&ctx)?.get_no_alloc())
}

/// @rdname ggml_get_mem_size
/// @export
#[extendr(invisible)]
fn ggml_set_no_alloc(ctx: Robj, no_alloc: Robj) -> Result<()> {
    let c = ctx_arg(&ctx)?;
    c.set_no_alloc(flag(&no_alloc, "no_alloc")?);
    Ok(())
}

/// @rdname ggml_get_mem_size
/// @export
#[extendr]
fn ggml_get_first_tensor(ctx: Robj) -> Result<Robj> {
    Ok(wrap_opt(ctx_arg(&ctx)?.tensors().into_iter().next()))
}

/// @rdname ggml_get_mem_size
/// @export
#[extendr]
fn ggml_get_next_tensor(ctx: Robj, tensor: Robj) -> Result<Robj> {
    let all = ctx_arg(&ctx)?.tensors();
    let t = tensor_arg(&tensor, "tensor")?;
    let i = all
        .iter()
        .position(|x| x.id() == t.id())
        .ok_or_else(|| bad("tensor", "is not a tensor of `ctx`"))?;
    Ok(wrap_opt(all.get(i + 1).cloned()))
}

/// @rdname ggml_get_mem_size
/// @export
#[extendr]
fn ggml_tensor_overhead() -> f64 {
    ggml::tensor_overhead() as f64
}

/// @rdname ggml_get_mem_size
/// @export
#[extendr]
fn ggml_graph_overhead() -> f64 {
    ggml::graph_overhead() as f64
}

/// Memory a tensor needs
///
/// The context budget one tensor of this type and shape takes: its data, its metadata
/// (`ggml_tensor_overhead()`) and 256 bytes of alignment (ggmlR's estimate, with the data
/// sized by the type's rows so that quantized types count right).
/// @param type A `GGML_TYPE_*` constant.
/// @param ne0,ne1,ne2,ne3 The shape.
/// @return A number of bytes.
/// @examples
/// ggml_estimate_memory(GGML_TYPE_F32, 100, 10)
/// ctx <- ggml_init(ggml_estimate_memory(GGML_TYPE_F32, 100, 10))
/// @export
#[extendr]
fn ggml_estimate_memory(
    #[extendr(default = "GGML_TYPE_F32")] r#type: Robj,
    ne0: Robj,
    #[extendr(default = "1")] ne1: Robj,
    #[extendr(default = "1")] ne2: Robj,
    #[extendr(default = "1")] ne3: Robj,
) -> Result<f64> {
    let ty = ggml_type(&r#type, "type")?;
    let row = lib("ggml_estimate_memory", ty.row_size(args::dim(&ne0, "ne0")?))? as f64;
    let rows = args::dim(&ne1, "ne1")? as f64
        * args::dim(&ne2, "ne2")? as f64
        * args::dim(&ne3, "ne3")? as f64;
    Ok(row * rows + ggml::tensor_overhead() as f64 + 256.0)
}

// ---- tensors --------------------------------------------------------------------------------

/// More ways to make tensors
///
/// `ggml_new_tensor` makes a tensor of `n_dims` (1 to 5) dimensions, the first `n_dims`
/// elements of `ne`; `ggml_new_f32` and `ggml_new_i32` make a one-element F32 or I32 tensor
/// holding `value` (in a context with memory).
/// @param ctx A context.
/// @param type A `GGML_TYPE_*` constant.
/// @param n_dims Number of dimensions, 1 to 5.
/// @param ne The sizes (at least `n_dims` of them).
/// @param value A number.
/// @return A tensor.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// t <- ggml_new_tensor(ctx, GGML_TYPE_F32, 3, c(4, 3, 2))
/// ggml_tensor_shape(t)
/// ggml_get_f32(ggml_new_f32(ctx, 1.5))
/// ggml_get_i32(ggml_new_i32(ctx, 7L))
/// @export
#[extendr]
fn ggml_new_tensor(
    ctx: Robj,
    #[extendr(default = "GGML_TYPE_F32")] r#type: Robj,
    n_dims: Robj,
    ne: Robj,
) -> Result<Robj> {
    let c = ctx_arg(&ctx)?;
    let ty = ggml_type(&r#type, "type")?;
    let n = args::int_in(&n_dims, "n_dims", 1.0, ggml::MAX_DIMS as f64)? as usize;
    let sizes = args::f32s(&ne, "ne")?;
    let v: Vec<f64> = match ne.as_real_slice() {
        Some(d) => d.to_vec(),
        None => sizes.iter().map(|&x| f64::from(x)).collect(),
    };
    if v.len() < n {
        return Err(bad(
            "ne",
            format!("has {} sizes, fewer than n_dims = {n}", v.len()),
        ));
    }
    let dims = v[..n]
        .iter()
        .map(|&x| {
            if x >= 0.0 && x.fract() == 0.0 && x <= 9_007_199_254_740_992.0 {
                Ok(x as i64)
            } else {
                Err(bad("ne", format!("{x} is not a size")))
            }
        })
        .collect::<Result<Vec<i64>>>()?;
    Ok(Slot::wrap(lib("ggml_new_tensor", c.new_tensor(ty, &dims))?))
}

/// A one-element tensor of type `ty` in `ctx`, written by `set`.
fn one_element(
    fname: &str,
    ctx: &Robj,
    ty: Type,
    set: impl FnOnce(&Tensor) -> ggml::Result<()>,
) -> Result<Robj> {
    let t = lib(fname, ctx_arg(ctx)?.new_tensor_1d(ty, 1))?;
    lib(fname, set(&t))?;
    Ok(Slot::wrap(t))
}

/// @rdname ggml_new_tensor
/// @export
#[extendr]
fn ggml_new_f32(ctx: Robj, value: Robj) -> Result<Robj> {
    let v = args::f32_arg(&value, "value")?;
    one_element("ggml_new_f32", &ctx, Type::F32, |t| t.set_f32(&[v]))
}

/// @rdname ggml_new_tensor
/// @export
#[extendr]
fn ggml_new_i32(ctx: Robj, value: Robj) -> Result<Robj> {
    let v = args::i32_arg(&value, "value")?;
    one_element("ggml_new_i32", &ctx, Type::I32, |t| t.set_i32(&[v]))
}

/// Tensor names and flags
///
/// `ggml_set_name` names a tensor and `ggml_get_name` reads it; `ggml_set_input`,
/// `ggml_set_output` and `ggml_set_param` flag it as a graph input, output or trainable
/// parameter. The setters return the tensor, for chaining.
/// @param tensor A tensor.
/// @param name A string.
/// @return The tensor, or its name.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// t <- ggml_set_name(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4), "weights")
/// ggml_get_name(t)
/// t <- ggml_set_input(t)
/// t <- ggml_set_output(t)
/// t <- ggml_set_param(t)
/// @export
#[extendr]
fn ggml_set_name(tensor: Robj, name: Robj) -> Result<Robj> {
    tensor_arg(&tensor, "tensor")?.set_name(&string(&name, "name")?);
    Ok(tensor)
}

/// @rdname ggml_set_name
/// @export
#[extendr]
fn ggml_get_name(tensor: Robj) -> Result<String> {
    Ok(tensor_arg(&tensor, "tensor")?.name())
}

/// @rdname ggml_set_name
/// @export
#[extendr]
fn ggml_set_input(tensor: Robj) -> Result<Robj> {
    tensor_arg(&tensor, "tensor")?.set_input();
    Ok(tensor)
}

/// @rdname ggml_set_name
/// @export
#[extendr]
fn ggml_set_output(tensor: Robj) -> Result<Robj> {
    tensor_arg(&tensor, "tensor")?.set_output();
    Ok(tensor)
}

/// @rdname ggml_set_name
/// @export
#[extendr]
fn ggml_set_param(tensor: Robj) -> Result<Robj> {
    lib("ggml_set_param", tensor_arg(&tensor, "tensor")?.set_param())?;
    Ok(tensor)
}

/// Tensor layout queries
///
/// `ggml_element_size` is the bytes of one element (of one block for quantized types),
/// `ggml_tensor_nb` the 5 strides in bytes. The predicates are GGML's: `ggml_is_contiguous`
/// (= `_0`: elements packed in order), `_1` and `_2` (packed from dimension 1 or 2 on),
/// `_channels` (dimension 2 packed innermost), `_rows` (each row packed),
/// `ggml_is_contiguously_allocated` (one gap-free block), `ggml_is_permuted`,
/// `ggml_is_transposed`; `ggml_are_same_shape`, `_stride` and `_layout` compare two tensors,
/// and `ggml_can_repeat(a, b)` says whether `a` tiles `b`.
/// @param tensor A tensor.
/// @param a,b Tensors.
/// @return A number, a numeric vector or a logical.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// a <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
/// t <- ggml_transpose(ctx, a)
/// ggml_element_size(a)
/// ggml_tensor_nb(a)
/// c(ggml_is_contiguous(a), ggml_is_contiguous(t), ggml_is_transposed(t))
/// c(ggml_is_contiguous_0(a), ggml_is_contiguous_1(a), ggml_is_contiguous_2(a))
/// c(ggml_is_contiguous_channels(a), ggml_is_contiguous_rows(a))
/// c(ggml_is_contiguously_allocated(a), ggml_is_permuted(t))
/// c(ggml_are_same_shape(a, a), ggml_are_same_stride(a, t), ggml_are_same_layout(a, a))
/// ggml_can_repeat(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3), a)
/// @export
#[extendr]
fn ggml_element_size(tensor: Robj) -> Result<f64> {
    Ok(tensor_arg(&tensor, "tensor")?.ty().type_size() as f64)
}

/// @rdname ggml_element_size
/// @export
#[extendr]
fn ggml_tensor_nb(tensor: Robj) -> Result<Vec<f64>> {
    Ok(tensor_arg(&tensor, "tensor")?
        .nb()
        .iter()
        .map(|&n| n as f64)
        .collect())
}

macro_rules! predicates {
    ($($name:ident($t:ident) $body:expr;)*) => {
        $(
            #[doc = " @rdname ggml_element_size"]
            #[doc = " @export"]
            #[extendr]
            fn $name(tensor: Robj) -> Result<bool> {
                let $t = tensor_arg(&tensor, "tensor")?;
                Ok($body)
            }
        )*
    };
}

predicates! {
    ggml_is_contiguous(t) t.is_contiguous();
    ggml_is_contiguous_0(t) t.is_contiguous();
    ggml_is_contiguous_1(t) t.is_contiguous_1();
    ggml_is_contiguous_2(t) t.is_contiguous_2();
    ggml_is_contiguous_rows(t) t.is_contiguous_rows();
    ggml_is_contiguously_allocated(t) t.is_contiguously_allocated();
    ggml_is_permuted(t) t.is_permuted();
    ggml_is_transposed(t) t.is_transposed();
    ggml_is_contiguous_channels(t) {
        let nb = t.nb();
        nb[0] > nb[2] && nb[1] > nb[0] && nb[2] == t.ty().type_size()
    };
}

macro_rules! relations {
    ($($name:ident $method:ident;)*) => {
        $(
            #[doc = " @rdname ggml_element_size"]
            #[doc = " @export"]
            #[extendr]
            fn $name(a: Robj, b: Robj) -> Result<bool> {
                Ok(tensor_arg(&a, "a")?.$method(&tensor_arg(&b, "b")?))
            }
        )*
    };
}

relations! {
    ggml_are_same_shape are_same_shape;
    ggml_are_same_stride are_same_stride;
    ggml_are_same_layout are_same_layout;
    ggml_can_repeat can_repeat;
}

/// The byte offset of element `(i0, i1, i2, i3)`, each index checked against the shape.
fn element_offset(t: &Tensor, idx: [&Robj; 4]) -> Result<usize> {
    let (ne, nb) = (t.ne(), t.nb());
    let mut off = 0;
    for (d, obj) in idx.iter().enumerate() {
        let arg = ["i0", "i1", "i2", "i3"][d];
        let i = args::int_in(obj, arg, 0.0, (ne[d] - 1).max(0) as f64)? as usize;
        if ne[d] == 0 {
            return Err(bad(arg, "the tensor has no elements in that dimension"));
        }
        off += i * nb[d];
    }
    Ok(off)
}

/// Reads the element at `off` as a double.
fn read_element(t: &Tensor, off: usize) -> Result<f64> {
    let ty = t.ty();
    let mut b = vec![0u8; ty.type_size()];
    lib("ggml_get_f32_nd", t.get_bytes(&mut b, off))?;
    Ok(match ty {
        Type::F32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Type::F16 => f64::from(ggml::f16::from_le_bytes([b[0], b[1]]).to_f32()),
        Type::BF16 => f64::from(ggml::bf16::from_le_bytes([b[0], b[1]]).to_f32()),
        Type::I32 => f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Type::I16 => f64::from(i16::from_le_bytes([b[0], b[1]])),
        Type::I8 => f64::from(b[0] as i8),
        other => {
            return Err(bad(
                "tensor",
                format!("has type {}, not a float or integer type", other.name()),
            ))
        }
    })
}

/// Writes `v` as the element at `off` (integers truncate, as in GGML).
fn write_element(t: &Tensor, off: usize, v: f64) -> Result<()> {
    let b: Vec<u8> = match t.ty() {
        Type::F32 => (v as f32).to_le_bytes().to_vec(),
        Type::F16 => ggml::f16::from_f64(v).to_le_bytes().to_vec(),
        Type::BF16 => ggml::bf16::from_f64(v).to_le_bytes().to_vec(),
        Type::I32 => (v as i32).to_le_bytes().to_vec(),
        Type::I16 => (v as i16).to_le_bytes().to_vec(),
        Type::I8 => (v as i8).to_le_bytes().to_vec(),
        other => {
            return Err(bad(
                "tensor",
                format!("has type {}, not a float or integer type", other.name()),
            ))
        }
    };
    lib("ggml_set_f32_nd", t.set_bytes(&b, off))
}

/// Single elements and whole-tensor fills
///
/// `ggml_get_f32_nd` and `ggml_get_i32_nd` read the element at 0-based indices
/// `(i0, i1, i2, i3)` (as a double, or truncated to an integer); `ggml_set_f32_nd` and
/// `ggml_set_i32_nd` write one (an index out of range is an R error naming it). The tensor may
/// be F32, F16, BF16, I32, I16 or I8, and a view (its strides are followed).
/// `ggml_tensor_set_f32_scalar` sets every element to `value`, `ggml_set_zero` every byte to
/// 0, and `ggml_tensor_copy` copies `src`'s data into `dst` (same layout).
/// @param tensor A tensor with data.
/// @param i0,i1,i2,i3 0-based indices.
/// @param value A number.
/// @param dst,src Tensors of the same layout.
/// @return The element, or `NULL` invisibly.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// t <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
/// ggml_set_f32(t, 1:6)
/// ggml_get_f32_nd(t, 2, 1)  # 6
/// ggml_set_f32_nd(t, 0, 1, value = -1)
/// ggml_get_f32(t)
/// ggml_get_i32_nd(t, 1)
/// ggml_set_i32_nd(t, 1, value = 9L)
/// ggml_tensor_set_f32_scalar(t, 0.5)
/// u <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
/// ggml_tensor_copy(u, t)
/// ggml_get_f32(u)
/// ggml_set_zero(u)
/// ggml_get_f32(u)
/// @export
#[extendr]
fn ggml_get_f32_nd(
    tensor: Robj,
    i0: Robj,
    #[extendr(default = "0")] i1: Robj,
    #[extendr(default = "0")] i2: Robj,
    #[extendr(default = "0")] i3: Robj,
) -> Result<f64> {
    let t = tensor_arg(&tensor, "tensor")?;
    read_element(&t, element_offset(&t, [&i0, &i1, &i2, &i3])?)
}

/// @rdname ggml_get_f32_nd
/// @export
#[extendr]
fn ggml_get_i32_nd(
    tensor: Robj,
    i0: Robj,
    #[extendr(default = "0")] i1: Robj,
    #[extendr(default = "0")] i2: Robj,
    #[extendr(default = "0")] i3: Robj,
) -> Result<i32> {
    let t = tensor_arg(&tensor, "tensor")?;
    Ok(read_element(&t, element_offset(&t, [&i0, &i1, &i2, &i3])?)? as i32)
}

/// @rdname ggml_get_f32_nd
/// @export
#[extendr(invisible)]
fn ggml_set_f32_nd(
    tensor: Robj,
    i0: Robj,
    #[extendr(default = "0")] i1: Robj,
    #[extendr(default = "0")] i2: Robj,
    #[extendr(default = "0")] i3: Robj,
    value: Robj,
) -> Result<()> {
    let t = tensor_arg(&tensor, "tensor")?;
    let off = element_offset(&t, [&i0, &i1, &i2, &i3])?;
    write_element(&t, off, args::num(&value, "value")?)
}

/// @rdname ggml_get_f32_nd
/// @export
#[extendr(invisible)]
fn ggml_set_i32_nd(
    tensor: Robj,
    i0: Robj,
    #[extendr(default = "0")] i1: Robj,
    #[extendr(default = "0")] i2: Robj,
    #[extendr(default = "0")] i3: Robj,
    value: Robj,
) -> Result<()> {
    let t = tensor_arg(&tensor, "tensor")?;
    let off = element_offset(&t, [&i0, &i1, &i2, &i3])?;
    write_element(&t, off, f64::from(args::i32_arg(&value, "value")?))
}

/// @rdname ggml_get_f32_nd
/// @export
#[extendr(invisible)]
fn ggml_tensor_set_f32_scalar(tensor: Robj, value: Robj) -> Result<()> {
    let t = tensor_arg(&tensor, "tensor")?;
    let v = args::f32_arg(&value, "value")?;
    lib(
        "ggml_tensor_set_f32_scalar",
        t.set_f32(&vec![v; t.nelements() as usize]),
    )
}

/// @rdname ggml_get_f32_nd
/// @export
#[extendr(invisible)]
fn ggml_set_zero(tensor: Robj) -> Result<()> {
    let t = tensor_arg(&tensor, "tensor")?;
    lib("ggml_set_zero", t.set_bytes(&vec![0u8; t.nbytes()], 0))
}

/// @rdname ggml_get_f32_nd
/// @export
#[extendr(invisible)]
fn ggml_tensor_copy(dst: Robj, src: Robj) -> Result<()> {
    let (d, s) = (tensor_arg(&dst, "dst")?, tensor_arg(&src, "src")?);
    lib("ggml_tensor_copy", backend::tensor_copy(&s, &d))
}

// ---- op introspection -------------------------------------------------------------------------

fn op_arg(obj: &Robj) -> Result<Op> {
    let v = args::int_in(obj, "op", 0.0, f64::from(u32::MAX))? as u32;
    Op::from_u32(v).ok_or_else(|| bad("op", format!("{v} is not a GGML_OP_* value")))
}

fn unary_arg(obj: &Robj) -> Result<UnaryOp> {
    let v = args::i32_arg(obj, "op")?;
    UnaryOp::from_i32(v).ok_or_else(|| bad("op", format!("{v} is not a GGML_UNARY_OP_* value")))
}

/// Operations and their parameters
///
/// `ggml_op_name` and `ggml_unary_op_name` name a `GGML_OP_*` or `GGML_UNARY_OP_*` code
/// (`"ADD"`, `"RELU"`), `ggml_op_symbol` gives GGML's math symbol of an op (`"x+y"` for ADD,
/// `"X*Y"` for MUL_MAT); `ggml_op_desc` names a tensor's op (its unary op for UNARY);
/// `ggml_op_can_inplace` says whether the graph allocator may compute the op in its
/// operand's memory; `ggml_get_unary_op` is a UNARY tensor's unary op code (an R error for
/// another op). The op parameters are 64 bytes: `ggml_get_op_params` gives them raw,
/// `ggml_get_op_params_i32`/`_f32` read the 0-based 32-bit slot `index` (0 to 15), and
/// `ggml_set_op_params`, `_i32` and `_f32` write them.
/// @param op An op code.
/// @param tensor A tensor.
/// @param index A 0-based slot, 0 to 15.
/// @param value A number.
/// @param params A raw vector of at most 64 bytes, a multiple of 4.
/// @return A string, a logical, an integer, a number or a raw vector.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
/// r <- ggml_relu(ctx, a)
/// ggml_op_desc(r)
/// ggml_get_unary_op(r)
/// ggml_unary_op_name(ggml_get_unary_op(r))
/// ggml_op_name(2L)
/// ggml_op_symbol(2L)  # "x+y"
/// ggml_op_can_inplace(2L)
/// s <- ggml_scale(ctx, a, 2.5)
/// ggml_get_op_params_f32(s, 0)
/// ggml_set_op_params_f32(s, 0, 3)
/// ggml_set_op_params_i32(s, 1, 0L)
/// ggml_get_op_params_i32(s, 1)
/// p <- ggml_get_op_params(s)
/// ggml_set_op_params(s, p)
/// @export
#[extendr]
fn ggml_op_name(op: Robj) -> Result<String> {
    Ok(op_arg(&op)?.name().to_string())
}

/// GGML's math symbol of each op (`ggml_op_symbol`), by op code.
const OP_SYMBOLS: [&str; ggml::ops::OP_COUNT as usize] = [
    "none",
    "x",
    "x+y",
    "x[i]+y",
    "x+y",
    "view(x,nb,offset)+=y->x",
    "x-y",
    "x*y",
    "x/y",
    "x^2",
    "√x",
    "log(x)",
    "sin(x)",
    "cos(x)",
    "Σx",
    "Σx_k",
    "cumsum(x)",
    "Σx/n",
    "argmax(x)",
    "count_equal(x)",
    "repeat(x)",
    "repeat_back(x)",
    "concat(x, y)",
    "silu_back(x)",
    "norm(x)",
    "rms_norm(x)",
    "rms_norm_back(x)",
    "group_norm(x)",
    "l2_norm(x)",
    "X*Y",
    "X[i]*Y",
    "X*Y",
    "x*v",
    "y-\\>view(x)",
    "x-\\>y",
    "cont(x)",
    "reshape(x)",
    "view(x)",
    "permute(x)",
    "transpose(x)",
    "get_rows(x)",
    "get_rows_back(x)",
    "set_rows(x)",
    "diag(x)",
    "diag_mask_inf(x)",
    "diag_mask_zero(x)",
    "soft_max(x)",
    "soft_max_back(x)",
    "rope(x)",
    "rope_back(x)",
    "clamp(x)",
    "conv_transpose_1d(x)",
    "im2col(x)",
    "im2col_back(x)",
    "im2col_3d(x)",
    "col2im_1d(x)",
    "conv_2d(x)",
    "conv_3d(x)",
    "conv_2d_dw(x)",
    "conv_transpose_2d(x)",
    "pool_1d(x)",
    "pool_2d(x)",
    "pool_2d_back(x)",
    "upscale(x)",
    "pad(x)",
    "pad_reflect_1d(x)",
    "roll(x)",
    "arange(start, stop, step)",
    "timestep_embedding(timesteps, dim, max_period)",
    "argsort(x)",
    "top_k(x)",
    "leaky_relu(x)",
    "tri(x)",
    "fill(x, c)",
    "flash_attn_ext(x)",
    "flash_attn_back(x)",
    "ssm_conv(x)",
    "ssm_scan(x)",
    "win_part(x)",
    "win_unpart(x)",
    "get_rel_pos(x)",
    "add_rel_pos(x)",
    "rwkv_wkv6(k, v, r, tf, td, s)",
    "gated_linear_attn(k, v, q, gate, s)",
    "rwkv_wkv7(r, w, k, v, a, b, s)",
    "A X = B, A triangular, solve X",
    "gated_delta_net(q, k, v, g, beta, s)",
    "lightning_indexer(q, k, weights, mask)",
    "dsv4_hc_comb(mixes, scale, base)",
    "dsv4_hc_pre(x, weights)",
    "dsv4_hc_post(x, residual, post, comb)",
    "unary(x)",
    "map_custom(x)",
    "map_custom(x,y)",
    "map_custom(x,y,z)",
    "custom(x)",
    "cross_entropy_loss(x,y)",
    "cross_entropy_loss_back(x,y)",
    "adamw(x)",
    "sgd(x)",
    "glu(x)",
];

/// @rdname ggml_op_name
/// @export
#[extendr]
fn ggml_op_symbol(op: Robj) -> Result<String> {
    Ok(OP_SYMBOLS[op_arg(&op)? as usize].to_string())
}

/// @rdname ggml_op_name
/// @export
#[extendr]
fn ggml_unary_op_name(op: Robj) -> Result<String> {
    Ok(unary_arg(&op)?.name().to_string())
}

/// @rdname ggml_op_name
/// @export
#[extendr]
fn ggml_op_can_inplace(op: Robj) -> Result<bool> {
    Ok(op_arg(&op)?.can_inplace())
}

fn unary_of(t: &Tensor) -> Option<UnaryOp> {
    if t.op() == Op::Unary {
        UnaryOp::from_i32(t.op_params()[0])
    } else {
        None
    }
}

/// @rdname ggml_op_name
/// @export
#[extendr]
fn ggml_op_desc(tensor: Robj) -> Result<String> {
    let t = tensor_arg(&tensor, "tensor")?;
    Ok(unary_of(&t)
        .map_or(t.op().name(), UnaryOp::name)
        .to_string())
}

/// @rdname ggml_op_name
/// @export
#[extendr]
fn ggml_get_unary_op(tensor: Robj) -> Result<i32> {
    let t = tensor_arg(&tensor, "tensor")?;
    unary_of(&t)
        .map(|u| u as i32)
        .ok_or_else(|| bad("tensor", format!("its op is {}, not UNARY", t.op().name())))
}

/// @rdname ggml_op_name
/// @export
#[extendr]
fn ggml_get_op_params(tensor: Robj) -> Result<Robj> {
    let p = tensor_arg(&tensor, "tensor")?.op_params();
    let b: Vec<u8> = p.iter().flat_map(|v| v.to_le_bytes()).collect();
    Ok(Raw::from_bytes(&b).into())
}

/// The tensor and the op-parameter slot (0 to 15) an accessor names.
fn slot_of(tensor: &Robj, index: &Robj) -> Result<(Tensor, usize)> {
    let t = tensor_arg(tensor, "tensor")?;
    Ok((t, args::int_in(index, "index", 0.0, 15.0)? as usize))
}

/// Reads op-parameter slot `index` of `tensor` with `get`.
fn get_slot<T>(
    fname: &str,
    (tensor, index): (&Robj, &Robj),
    get: fn(&Tensor, usize) -> ggml::Result<T>,
) -> Result<T> {
    let (t, i) = slot_of(tensor, index)?;
    lib(fname, get(&t, i))
}

/// Writes `value` (read by `read`) into op-parameter slot `index` of `tensor` with `set`.
fn set_slot<T>(
    fname: &str,
    (tensor, index, value): (&Robj, &Robj, &Robj),
    read: fn(&Robj, &str) -> Result<T>,
    set: fn(&Tensor, usize, T) -> ggml::Result<()>,
) -> Result<()> {
    let (t, i) = slot_of(tensor, index)?;
    lib(fname, set(&t, i, read(value, "value")?))
}

/// @rdname ggml_op_name
/// @export
#[extendr]
fn ggml_get_op_params_i32(tensor: Robj, index: Robj) -> Result<i32> {
    get_slot(
        "ggml_get_op_params_i32",
        (&tensor, &index),
        Tensor::get_op_params_i32,
    )
}

/// @rdname ggml_op_name
/// @export
#[extendr]
fn ggml_get_op_params_f32(tensor: Robj, index: Robj) -> Result<f64> {
    let a = (&tensor, &index);
    get_slot("ggml_get_op_params_f32", a, Tensor::get_op_params_f32).map(f64::from)
}

/// @rdname ggml_op_name
/// @export
#[extendr(invisible)]
fn ggml_set_op_params_i32(tensor: Robj, index: Robj, value: Robj) -> Result<()> {
    let a = (&tensor, &index, &value);
    set_slot(
        "ggml_set_op_params_i32",
        a,
        args::i32_arg,
        Tensor::set_op_params_i32,
    )
}

/// @rdname ggml_op_name
/// @export
#[extendr(invisible)]
fn ggml_set_op_params_f32(tensor: Robj, index: Robj, value: Robj) -> Result<()> {
    let a = (&tensor, &index, &value);
    set_slot(
        "ggml_set_op_params_f32",
        a,
        args::f32_arg,
        Tensor::set_op_params_f32,
    )
}

/// @rdname ggml_op_name
/// @export
#[extendr(invisible)]
fn ggml_set_op_params(tensor: Robj, params: Robj) -> Result<()> {
    let t = tensor_arg(&tensor, "tensor")?;
    let b = args::raw(&params, "params")?;
    if b.len() > 64 || b.len() % 4 != 0 {
        return Err(bad(
            "params",
            format!(
                "has {} bytes; expected a multiple of 4, at most 64",
                b.len()
            ),
        ));
    }
    for (i, c) in b.chunks_exact(4).enumerate() {
        let v = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        lib("ggml_set_op_params", t.set_op_params_i32(i, v))?;
    }
    Ok(())
}

// ---- graphs ----------------------------------------------------------------------------------

/// Graphs
///
/// `ggml_graph_compute` computes the graph on a CPU backend made for the call and returns
/// when done (a failure is an R error; Ctrl-C stops the wait, the computation finishing in the
/// background); `ggml_graph_compute_with_ctx` does the same with
/// `n_threads` threads (0: the CPU backend's default). `ggml_graph_n_nodes` counts the nodes,
/// `ggml_graph_node` gives the node at 0-based index `i` (negative counts from the end),
/// `ggml_graph_get_tensor` the tensor named `name` (or `NULL`), `ggml_graph_view` the graph of
/// nodes `i0` to `i1 - 1`, `ggml_graph_print` prints the nodes and `ggml_graph_dump_dot`
/// writes the graph (nodes, leafs and their edges) as a Graphviz DOT file. `ggml_graph_reset`
/// resets a backward graph's gradients (GGML); this library builds no backward graphs, so for
/// any graph it is an R error that says so (and, as in GGML, nothing for `NULL`).
/// @param ctx A context.
/// @param graph A graph.
/// @param n_threads Number of threads (0: default).
/// @param i A 0-based node index.
/// @param name A tensor name.
/// @param i0,i1 The first and one past the last node of the view.
/// @return `NULL` invisibly, a number, a tensor or a graph.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// a <- ggml_set_name(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3), "a")
/// ggml_set_f32(a, c(-1, 0, 1))
/// out <- ggml_exp(ctx, ggml_relu(ctx, a))
/// graph <- ggml_build_forward_expand(ctx, out)
/// ggml_graph_compute(ctx, graph)
/// ggml_get_f32(out)
/// ggml_graph_compute_with_ctx(ctx, graph, 1L)
/// ggml_graph_n_nodes(graph)
/// ggml_op_desc(ggml_graph_node(graph, -1))
/// ggml_get_name(ggml_graph_get_tensor(graph, "a"))
/// ggml_graph_n_nodes(ggml_graph_view(graph, 0, 1))
/// ggml_graph_print(graph)
/// ggml_graph_reset(NULL)  # nothing to reset
/// try(ggml_graph_reset(graph))  # a forward graph has no gradients
/// dot <- tempfile(fileext = ".dot")
/// ggml_graph_dump_dot(graph, NULL, dot)
/// readLines(dot)[1]
/// @export
#[extendr(invisible)]
fn ggml_graph_compute(ctx: Robj, graph: Robj) -> Result<()> {
    compute_on_cpu("ggml_graph_compute", &ctx, &graph, 0)
}

/// @rdname ggml_graph_compute
/// @export
#[extendr(invisible)]
fn ggml_graph_compute_with_ctx(
    ctx: Robj,
    graph: Robj,
    #[extendr(default = "0L")] n_threads: Robj,
) -> Result<()> {
    let n = args::int_in(&n_threads, "n_threads", 0.0, 4096.0)? as usize;
    compute_on_cpu("ggml_graph_compute_with_ctx", &ctx, &graph, n)
}

/// Computes `graph` on a CPU backend of its own, waiting with Ctrl-C (after an interrupt the
/// backend finishes and is freed in the background).
fn compute_on_cpu(fname: &str, ctx: &Robj, graph: &Robj, n_threads: usize) -> Result<()> {
    ctx_arg(ctx)?;
    let g = graph_arg(graph)?;
    let cpu = lib(fname, backend::cpu_init())?;
    if n_threads > 0 {
        lib(fname, cpu.set_n_threads(n_threads))?;
    }
    lib(
        fname,
        crate::rthread::wait(fname, move || cpu.graph_compute(&g))?,
    )
}

/// @rdname ggml_graph_compute
/// @export
#[extendr(invisible)]
fn ggml_graph_reset(graph: Robj) -> Result<()> {
    if graph.is_null() {
        return Ok(());
    }
    let g = graph_arg(&graph)?;
    Err(bad(
        "graph",
        format!(
            "a forward graph of {} nodes has no gradients to reset; GGML's ggml_graph_reset needs \
             a backward graph, and this library builds none",
            g.n_nodes()
        ),
    ))
}

/// @rdname ggml_graph_compute
/// @export
#[extendr]
fn ggml_graph_n_nodes(graph: Robj) -> Result<i32> {
    Ok(graph_arg(&graph)?.n_nodes() as i32)
}

/// @rdname ggml_graph_compute
/// @export
#[extendr]
fn ggml_graph_node(graph: Robj, i: Robj) -> Result<Robj> {
    let g = graph_arg(&graph)?;
    let i = args::i64_arg(&i, "i")?;
    Ok(Slot::wrap(lib("ggml_graph_node", g.node(i))?))
}

/// @rdname ggml_graph_compute
/// @export
#[extendr]
fn ggml_graph_get_tensor(graph: Robj, name: Robj) -> Result<Robj> {
    let g = graph_arg(&graph)?;
    Ok(wrap_opt(g.get_tensor(&string(&name, "name")?)))
}

/// @rdname ggml_graph_compute
/// @export
#[extendr]
fn ggml_graph_view(graph: Robj, i0: Robj, i1: Robj) -> Result<Robj> {
    let g = graph_arg(&graph)?;
    let (a, b) = (bytes(&i0, "i0")?, bytes(&i1, "i1")?);
    Ok(Slot::wrap(lib("ggml_graph_view", g.graph_view(a, b))?))
}

/// @rdname ggml_graph_compute
/// @export
#[extendr(invisible)]
fn ggml_graph_print(graph: Robj) -> Result<()> {
    let g: Graph = graph_arg(&graph)?;
    rprintln!("=== GRAPH ===");
    rprintln!("n_nodes = {}", g.n_nodes());
    for (i, n) in g.nodes().iter().enumerate() {
        let ne = n.ne();
        rprintln!(
            " - {i:3}: [ {:5}, {:5}, {:5}] {:>16} {}",
            ne[0],
            ne[1],
            ne[2],
            unary_of(n).map_or(n.op().name(), UnaryOp::name),
            n.name()
        );
    }
    rprintln!("n_leafs = {}", g.n_leafs());
    for (i, l) in g.leafs().iter().enumerate() {
        let ne = l.ne();
        rprintln!(
            " - {i:3}: [ {:5}, {:5}] {:>8} {:>16}",
            ne[0],
            ne[1],
            l.op().name(),
            l.name()
        );
    }
    rprintln!("========================================");
    Ok(())
}

/// One DOT label line of a tensor: its name (or op), op and shape.
fn dot_label(t: &Tensor) -> String {
    let ne = t.ne();
    let op = unary_of(t).map_or(t.op().name(), UnaryOp::name);
    let name = t.name().replace(['"', '\\'], "_");
    format!(
        "{name} | {op} | [{}, {}, {}, {}]",
        ne[0], ne[1], ne[2], ne[3]
    )
}

/// @rdname ggml_graph_compute
/// @param leafs `NULL`, or a graph whose nodes are drawn filled (GGML's forward graph).
/// @param filename Path of the DOT file to write.
/// @export
#[extendr(invisible)]
fn ggml_graph_dump_dot(
    graph: Robj,
    #[extendr(default = "NULL")] leafs: Robj,
    filename: Robj,
) -> Result<()> {
    use std::fmt::Write as _;
    let g = graph_arg(&graph)?;
    let forward = if leafs.is_null() {
        None
    } else {
        Some(handle::<Graph>(&leafs, "leafs", crate::GRAPH)?)
    };
    let path = string(&filename, "filename")?;
    let mut dot = String::from("digraph G {\n  newrank = true;\n  rankdir = TB;\n");
    for n in g.nodes() {
        let fill = if forward.as_ref().is_some_and(|f| f.contains(&n)) {
            "filled"
        } else {
            "solid"
        };
        let _ = writeln!(
            dot,
            "  \"t{}\" [ shape = record; style = {fill}; label = \"{}\"; ]",
            n.id(),
            dot_label(&n)
        );
    }
    for l in g.leafs() {
        let _ = writeln!(
            dot,
            "  \"t{}\" [ shape = box; label = \"{}\"; ]",
            l.id(),
            dot_label(&l)
        );
    }
    for n in g.nodes() {
        for (i, s) in n.srcs().enumerate() {
            let _ = writeln!(
                dot,
                "  \"t{}\" -> \"t{}\" [ label = \"src {i}\"; ]",
                s.id(),
                n.id()
            );
        }
    }
    dot.push_str("}\n");
    std::fs::write(&path, dot).map_err(|e| bad("filename", format!("cannot write {path}: {e}")))
}

// ---- graph allocator -------------------------------------------------------------------------

fn galloc_arg(obj: &Robj) -> Result<Arc<Gallocr>> {
    handle(obj, "galloc", GALLOC)
}

/// The graph allocator
///
/// A graph allocator (`ggml_gallocr_*`) places a graph's tensors in one CPU buffer, reusing
/// memory between tensors whose lifetimes do not overlap. `ggml_gallocr_reserve` sizes the
/// buffer for a graph, `ggml_gallocr_alloc_graph` allocates its tensors (both `TRUE` on
/// success), `ggml_gallocr_get_buffer_size` gives the buffer's bytes and `ggml_gallocr_free`
/// frees it (again: harmless).
/// @param galloc An allocator from `ggml_gallocr_new`.
/// @param graph A graph of a `no_alloc = TRUE` context.
/// @param buffer_id The buffer's index, 0.
/// @return An allocator, a logical, a number, or `NULL` invisibly.
/// @examples
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8)
/// graph <- ggml_build_forward_expand(ctx, ggml_relu(ctx, a))
/// galloc <- ggml_gallocr_new()
/// ggml_gallocr_reserve(galloc, graph)
/// ggml_gallocr_alloc_graph(galloc, graph)
/// ggml_gallocr_get_buffer_size(galloc)
/// ggml_gallocr_free(galloc)
/// @export
#[extendr]
fn ggml_gallocr_new() -> Result<Robj> {
    let g = lib(
        "ggml_gallocr_new",
        Gallocr::new(&backend::cpu_buffer_type()),
    )?;
    Ok(Slot::wrap(Arc::new(g)))
}

/// @rdname ggml_gallocr_new
/// @export
#[extendr]
fn ggml_gallocr_reserve(galloc: Robj, graph: Robj) -> Result<bool> {
    let (a, g) = (galloc_arg(&galloc)?, graph_arg(&graph)?);
    lib("ggml_gallocr_reserve", a.reserve(&g))?;
    Ok(true)
}

/// @rdname ggml_gallocr_new
/// @export
#[extendr]
fn ggml_gallocr_alloc_graph(galloc: Robj, graph: Robj) -> Result<bool> {
    let (a, g) = (galloc_arg(&galloc)?, graph_arg(&graph)?);
    lib("ggml_gallocr_alloc_graph", a.alloc_graph(&g))?;
    Ok(true)
}

/// @rdname ggml_gallocr_new
/// @export
#[extendr]
fn ggml_gallocr_get_buffer_size(
    galloc: Robj,
    #[extendr(default = "0L")] buffer_id: Robj,
) -> Result<f64> {
    let a = galloc_arg(&galloc)?;
    Ok(a.get_buffer_size(args::int_in(&buffer_id, "buffer_id", 0.0, 0.0)? as usize) as f64)
}

/// @rdname ggml_gallocr_new
/// @export
#[extendr(invisible)]
fn ggml_gallocr_free(galloc: Robj) -> Result<()> {
    args::free::<Arc<Gallocr>>(&galloc, "galloc", GALLOC, drop)
}

// ---- types -------------------------------------------------------------------------------------

/// Type sizes and names
///
/// For a `GGML_TYPE_*` code: `ggml_type_name` its name, `ggml_blck_size` the elements per
/// block (1 for plain types), `ggml_type_size` the bytes per block, `ggml_type_sizef` the
/// bytes per element (fractional for quantized types), `ggml_is_quantized` whether it is a
/// block-quantized type. `ggml_ftype_to_ggml_type` maps a model file type
/// (`GGML_FTYPE_MOSTLY_*`) to the tensor type it stores (-1 for unknown).
/// @param type A `GGML_TYPE_*` code.
/// @param ftype A `GGML_FTYPE_*` code.
/// @return A string, a number, a logical or an integer.
/// @examples
/// ggml_type_name(GGML_TYPE_Q4_0)
/// ggml_blck_size(GGML_TYPE_Q4_0)
/// ggml_type_size(GGML_TYPE_Q4_0)
/// ggml_type_sizef(GGML_TYPE_Q4_0)
/// ggml_is_quantized(GGML_TYPE_Q4_0)
/// ggml_ftype_to_ggml_type(2L) == GGML_TYPE_Q4_0
/// @export
#[extendr]
fn ggml_type_name(r#type: Robj) -> Result<String> {
    Ok(ggml_type(&r#type, "type")?.name().to_string())
}

/// @rdname ggml_type_name
/// @export
#[extendr]
fn ggml_blck_size(r#type: Robj) -> Result<f64> {
    Ok(ggml_type(&r#type, "type")?.blck_size() as f64)
}

/// @rdname ggml_type_name
/// @export
#[extendr]
fn ggml_type_size(r#type: Robj) -> Result<f64> {
    Ok(ggml_type(&r#type, "type")?.type_size() as f64)
}

/// @rdname ggml_type_name
/// @export
#[extendr]
fn ggml_type_sizef(r#type: Robj) -> Result<f64> {
    let t = ggml_type(&r#type, "type")?;
    Ok(t.type_size() as f64 / t.blck_size() as f64)
}

/// @rdname ggml_type_name
/// @export
#[extendr]
fn ggml_is_quantized(r#type: Robj) -> Result<bool> {
    Ok(ggml_type(&r#type, "type")?.is_quantized())
}

/// @rdname ggml_type_name
/// @export
#[extendr]
fn ggml_ftype_to_ggml_type(ftype: Robj) -> Result<i32> {
    // GGML's `enum ggml_ftype` (4, Q4_1 with some F16, stores Q4_1; 5 and 6 are unused).
    const TYPES: [i32; 29] = [
        0, 1, 2, 3, 3, -1, -1, 8, 6, 7, 10, 11, 12, 13, 14, 16, 17, 18, 19, 20, 21, 22, 23, 29, 30,
        39, 40, 41, 42,
    ];
    let f = args::i32_arg(&ftype, "ftype")?;
    Ok(usize::try_from(f)
        .ok()
        .and_then(|i| TYPES.get(i))
        .copied()
        .unwrap_or(-1))
}

extendr_module! {
    mod tensors;
    fn ggml_get_mem_size;
    fn ggml_get_max_tensor_size;
    fn ggml_tensor_num;
    fn ggml_get_no_alloc;
    fn ggml_set_no_alloc;
    fn ggml_get_first_tensor;
    fn ggml_get_next_tensor;
    fn ggml_tensor_overhead;
    fn ggml_graph_overhead;
    fn ggml_estimate_memory;
    fn ggml_new_tensor;
    fn ggml_new_f32;
    fn ggml_new_i32;
    fn ggml_set_name;
    fn ggml_get_name;
    fn ggml_set_input;
    fn ggml_set_output;
    fn ggml_set_param;
    fn ggml_element_size;
    fn ggml_tensor_nb;
    fn ggml_is_contiguous;
    fn ggml_is_contiguous_0;
    fn ggml_is_contiguous_1;
    fn ggml_is_contiguous_2;
    fn ggml_is_contiguous_rows;
    fn ggml_is_contiguously_allocated;
    fn ggml_is_permuted;
    fn ggml_is_transposed;
    fn ggml_is_contiguous_channels;
    fn ggml_are_same_shape;
    fn ggml_are_same_stride;
    fn ggml_are_same_layout;
    fn ggml_can_repeat;
    fn ggml_get_f32_nd;
    fn ggml_get_i32_nd;
    fn ggml_set_f32_nd;
    fn ggml_set_i32_nd;
    fn ggml_tensor_set_f32_scalar;
    fn ggml_set_zero;
    fn ggml_tensor_copy;
    fn ggml_op_name;
    fn ggml_op_symbol;
    fn ggml_unary_op_name;
    fn ggml_op_can_inplace;
    fn ggml_op_desc;
    fn ggml_get_unary_op;
    fn ggml_get_op_params;
    fn ggml_get_op_params_i32;
    fn ggml_get_op_params_f32;
    fn ggml_set_op_params_i32;
    fn ggml_set_op_params_f32;
    fn ggml_set_op_params;
    fn ggml_graph_compute;
    fn ggml_graph_compute_with_ctx;
    fn ggml_graph_reset;
    fn ggml_graph_n_nodes;
    fn ggml_graph_node;
    fn ggml_graph_get_tensor;
    fn ggml_graph_view;
    fn ggml_graph_print;
    fn ggml_graph_dump_dot;
    fn ggml_gallocr_new;
    fn ggml_gallocr_reserve;
    fn ggml_gallocr_alloc_graph;
    fn ggml_gallocr_get_buffer_size;
    fn ggml_gallocr_free;
    fn ggml_type_name;
    fn ggml_blck_size;
    fn ggml_type_size;
    fn ggml_type_sizef;
    fn ggml_is_quantized;
    fn ggml_ftype_to_ggml_type;
}
