//! The R package `ggmlrs`: ggml-rs under ggmlR's function names. Each `#[extendr]` function
//! is one ggmlR function with its name, argument order and defaults; the R wrappers in
//! `R/extendr-wrappers.R` are generated from this file by `make_ggmlrs_wrappers`.
//!
//! Handles (contexts, tensors, graphs, backends) are R external pointers holding a
//! [`args::Slot`]; their finalizers drop the library handle, which keeps whatever it needs
//! alive, so they may run in any order. Every bad argument is an R error naming it.

mod args;
mod backend;
mod custom;
mod gguf;
mod ops;
mod quant;
mod rthread;
mod tensors;

use ops::{
    attention, binary, conv, glu, layout, matrix, norm, pool, reduce, rope, rows, scalar_ops,
    sequence, softmax, unary,
};

use args::{bytes, dim, flag, ggml_type, handle, lib, Slot};
use extendr_api::prelude::*;
use extendr_api::{Error, Result};
use ggml::{Backend, Buffer, BufferUsage, Context, ErrorKind, Graph, Tensor};

pub(crate) const CTX: &str = "ggml context";
pub(crate) const TENSOR: &str = "ggml tensor";
pub(crate) const GRAPH: &str = "ggml graph";
pub(crate) const BACKEND: &str = "ggml backend";
pub(crate) const BUFFER: &str = "ggml backend buffer";

pub(crate) fn ctx_arg(obj: &Robj) -> Result<Context> {
    handle(obj, "ctx", CTX)
}

pub(crate) fn tensor_arg(obj: &Robj, arg: &str) -> Result<Tensor> {
    handle(obj, arg, TENSOR)
}

/// `NULL` or a tensor (GGML's nullable tensor arguments).
pub(crate) fn opt_tensor(obj: &Robj, arg: &str) -> Result<Option<Tensor>> {
    if obj.is_null() {
        Ok(None)
    } else {
        tensor_arg(obj, arg).map(Some)
    }
}

/// A handle as an external pointer, or `NULL` for none (GGML's NULL returns).
pub(crate) fn wrap_opt<T: Clone + Send + 'static>(h: Option<T>) -> Robj {
    h.map(Slot::wrap).unwrap_or_else(|| ().into())
}

pub(crate) fn backend_arg(obj: &Robj) -> Result<Backend> {
    handle(obj, "backend", BACKEND)
}

pub(crate) fn graph_arg(obj: &Robj) -> Result<Graph> {
    handle(obj, "graph", GRAPH)
}

pub(crate) fn buffer_arg(obj: &Robj) -> Result<Buffer> {
    handle(obj, "buffer", BUFFER)
}

// ---- contexts -------------------------------------------------------------------------------

/// Creates a context with a budget of `mem_size` bytes (ggmlR's `ggml_init`).
/// With `no_alloc = TRUE` tensors get metadata only, for a backend buffer to hold.
/// @param mem_size Bytes of tensor memory.
/// @param no_alloc Create tensors without data.
/// @return A context (external pointer, freed by the garbage collector or `ggml_free`).
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// ggml_used_mem(ctx)
/// ggml_free(ctx)
/// @export
#[extendr]
fn ggml_init(
    #[extendr(default = "16 * 1024 * 1024")] mem_size: Robj,
    #[extendr(default = "FALSE")] no_alloc: Robj,
) -> Result<Robj> {
    let ctx = lib(
        "ggml_init",
        Context::init(bytes(&mem_size, "mem_size")?, flag(&no_alloc, "no_alloc")?),
    )?;
    Ok(Slot::wrap(ctx))
}

/// Frees a context (`ggml_free`); freeing it again is harmless. Tensors made in it keep
/// their own data and stay usable.
/// @param ctx A context from `ggml_init`.
/// @return `NULL`, invisibly.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// ggml_free(ctx)
/// ggml_free(ctx)  # harmless
/// @export
#[extendr(invisible)]
fn ggml_free(ctx: Robj) -> Result<()> {
    args::free::<Context>(&ctx, "ctx", CTX, drop)
}

/// Forgets every tensor of the context and makes its whole budget available again
/// (`ggml_reset`).
/// @param ctx A context from `ggml_init`.
/// @return `NULL`, invisibly.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16)
/// ggml_reset(ctx)
/// ggml_used_mem(ctx)  # 0
/// @export
#[extendr(invisible)]
fn ggml_reset(ctx: Robj) -> Result<()> {
    ctx_arg(&ctx)?.reset();
    Ok(())
}

/// Bytes of the context's budget used so far (`ggml_used_mem`).
/// @param ctx A context from `ggml_init`.
/// @return A number of bytes.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 256)
/// ggml_used_mem(ctx)
/// @export
#[extendr]
fn ggml_used_mem(ctx: Robj) -> Result<f64> {
    Ok(ctx_arg(&ctx)?.used_mem() as f64)
}

// ---- tensors --------------------------------------------------------------------------------

fn new_tensor(fname: &str, ctx: &Robj, ty: &Robj, ne: &[(&Robj, &str)]) -> Result<Robj> {
    let ctx = ctx_arg(ctx)?;
    let ty = ggml_type(ty, "type")?;
    let ne = ne
        .iter()
        .map(|(v, arg)| dim(v, arg))
        .collect::<Result<Vec<i64>>>()?;
    Ok(Slot::wrap(lib(fname, ctx.new_tensor(ty, &ne))?))
}

/// A new 1-d tensor (`ggml_new_tensor_1d`).
/// @param ctx A context from `ggml_init`.
/// @param type A `GGML_TYPE_*` constant.
/// @param ne0 Number of elements.
/// @return A tensor (external pointer).
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
/// ggml_nelements(t)
/// @export
#[extendr]
fn ggml_new_tensor_1d(
    ctx: Robj,
    #[extendr(default = "GGML_TYPE_F32")] r#type: Robj,
    ne0: Robj,
) -> Result<Robj> {
    new_tensor("ggml_new_tensor_1d", &ctx, &r#type, &[(&ne0, "ne0")])
}

/// A new 2-d tensor (`ggml_new_tensor_2d`): `ne0` columns (contiguous) by `ne1` rows.
/// @param ctx A context from `ggml_init`.
/// @param type A `GGML_TYPE_*` constant.
/// @param ne0,ne1 Sizes of dimensions 0 and 1.
/// @return A tensor (external pointer).
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// t <- ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2)
/// ggml_tensor_shape(t)
/// @export
#[extendr]
fn ggml_new_tensor_2d(
    ctx: Robj,
    #[extendr(default = "GGML_TYPE_F32")] r#type: Robj,
    ne0: Robj,
    ne1: Robj,
) -> Result<Robj> {
    new_tensor(
        "ggml_new_tensor_2d",
        &ctx,
        &r#type,
        &[(&ne0, "ne0"), (&ne1, "ne1")],
    )
}

/// A new 3-d tensor (`ggml_new_tensor_3d`).
/// @param ctx A context from `ggml_init`.
/// @param type A `GGML_TYPE_*` constant.
/// @param ne0,ne1,ne2 Sizes of dimensions 0 to 2.
/// @return A tensor (external pointer).
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// t <- ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 3, 2)
/// ggml_n_dims(t)
/// @export
#[extendr]
fn ggml_new_tensor_3d(
    ctx: Robj,
    #[extendr(default = "GGML_TYPE_F32")] r#type: Robj,
    ne0: Robj,
    ne1: Robj,
    ne2: Robj,
) -> Result<Robj> {
    new_tensor(
        "ggml_new_tensor_3d",
        &ctx,
        &r#type,
        &[(&ne0, "ne0"), (&ne1, "ne1"), (&ne2, "ne2")],
    )
}

/// A new 4-d tensor (`ggml_new_tensor_4d`).
/// @param ctx A context from `ggml_init`.
/// @param type A `GGML_TYPE_*` constant.
/// @param ne0,ne1,ne2,ne3 Sizes of dimensions 0 to 3.
/// @return A tensor (external pointer).
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// t <- ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 2, 2, 2)
/// ggml_nelements(t)
/// @export
#[extendr]
fn ggml_new_tensor_4d(
    ctx: Robj,
    #[extendr(default = "GGML_TYPE_F32")] r#type: Robj,
    ne0: Robj,
    ne1: Robj,
    ne2: Robj,
    ne3: Robj,
) -> Result<Robj> {
    new_tensor(
        "ggml_new_tensor_4d",
        &ctx,
        &r#type,
        &[(&ne0, "ne0"), (&ne1, "ne1"), (&ne2, "ne2"), (&ne3, "ne3")],
    )
}

/// Writes `data` into the tensor (`ggml_set_f32`); its length must be the element count.
/// @param tensor A tensor with data (F32, F16, BF16 or I32).
/// @param data A numeric vector.
/// @return `NULL`, invisibly.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3)
/// ggml_set_f32(t, c(1, 2, 3))
/// ggml_get_f32(t)
/// @export
#[extendr(invisible)]
fn ggml_set_f32(tensor: Robj, data: Robj) -> Result<()> {
    let t = tensor_arg(&tensor, "tensor")?;
    lib("ggml_set_f32", t.set_f32(&args::f32s(&data, "data")?))
}

/// The tensor's values as doubles (`ggml_get_f32`).
/// @param tensor A tensor with data (F32, F16, BF16 or I32).
/// @return A numeric vector of `ggml_nelements(tensor)` values.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F16, 2)
/// ggml_set_f32(t, c(0.1, 2))
/// ggml_get_f32(t)  # F16 precision
/// @export
#[extendr]
fn ggml_get_f32(tensor: Robj) -> Result<Vec<f64>> {
    let t = tensor_arg(&tensor, "tensor")?;
    let v = lib("ggml_get_f32", t.get_f32())?;
    Ok(v.into_iter().map(f64::from).collect())
}

/// Writes integers into the tensor (`ggml_set_i32`); the length must be the element count.
/// @param tensor A tensor with data (I32, I16, I8, F32, F16 or BF16).
/// @param data An integer vector (or doubles that are whole numbers).
/// @return `NULL`, invisibly.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3)
/// ggml_set_i32(t, 1:3)
/// ggml_get_i32(t)
/// @export
#[extendr(invisible)]
fn ggml_set_i32(tensor: Robj, data: Robj) -> Result<()> {
    let t = tensor_arg(&tensor, "tensor")?;
    lib("ggml_set_i32", t.set_i32(&args::i32s(&data, "data")?))
}

/// The tensor's values as integers (`ggml_get_i32`); float values are truncated.
/// @param tensor A tensor with data.
/// @return An integer vector of `ggml_nelements(tensor)` values.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2)
/// ggml_set_f32(t, c(1.9, -2.5))
/// ggml_get_i32(t)  # truncated: 1 -2
/// @export
#[extendr]
fn ggml_get_i32(tensor: Robj) -> Result<Vec<i32>> {
    let t = tensor_arg(&tensor, "tensor")?;
    lib("ggml_get_i32", t.get_i32())
}

/// Number of elements (`ggml_nelements`).
/// @param tensor A tensor.
/// @return A number.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// ggml_nelements(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 4))  # 12
/// @export
#[extendr]
fn ggml_nelements(tensor: Robj) -> Result<f64> {
    Ok(tensor_arg(&tensor, "tensor")?.nelements() as f64)
}

/// Size of the tensor's data in bytes (`ggml_nbytes`).
/// @param tensor A tensor.
/// @return A number of bytes.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// ggml_nbytes(ggml_new_tensor_1d(ctx, GGML_TYPE_F16, 8))  # 16
/// @export
#[extendr]
fn ggml_nbytes(tensor: Robj) -> Result<f64> {
    Ok(tensor_arg(&tensor, "tensor")?.nbytes() as f64)
}

/// Number of dimensions, ignoring trailing dimensions of size 1 (`ggml_n_dims`).
/// @param tensor A tensor.
/// @return An integer from 1 to 5.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// ggml_n_dims(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2, 3, 1))  # 2
/// @export
#[extendr]
fn ggml_n_dims(tensor: Robj) -> Result<i32> {
    Ok(tensor_arg(&tensor, "tensor")?.n_dims() as i32)
}

/// Number of rows: the product of every dimension but the first (`ggml_nrows`).
/// @param tensor A tensor.
/// @return A number.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// ggml_nrows(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2, 3, 4))  # 12
/// @export
#[extendr]
fn ggml_nrows(tensor: Robj) -> Result<f64> {
    let ne = tensor_arg(&tensor, "tensor")?.ne();
    Ok(ne[1..].iter().map(|&n| n as f64).product())
}

/// The sizes of all `GGML_MAX_DIMS` dimensions (`ggml_tensor_shape`).
/// @param tensor A tensor.
/// @return A numeric vector of length 5.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// ggml_tensor_shape(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2))
/// @export
#[extendr]
fn ggml_tensor_shape(tensor: Robj) -> Result<Vec<f64>> {
    let ne = tensor_arg(&tensor, "tensor")?.ne();
    Ok(ne.iter().map(|&n| n as f64).collect())
}

/// The tensor's type code (`ggml_tensor_type`), a `GGML_TYPE_*` value.
/// @param tensor A tensor.
/// @return An integer.
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// ggml_tensor_type(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 4)) == GGML_TYPE_I32
/// @export
#[extendr]
fn ggml_tensor_type(tensor: Robj) -> Result<i32> {
    Ok(tensor_arg(&tensor, "tensor")?.ty() as i32)
}

// ---- graphs and backends ----------------------------------------------------------------------

/// A graph computing `tensor` and everything it depends on (`ggml_build_forward_expand`).
/// @param ctx A context from `ggml_init`.
/// @param tensor The tensor to compute.
/// @return A graph (external pointer).
/// @examples
/// ctx <- ggml_init(1024 * 1024)
/// a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4)
/// graph <- ggml_build_forward_expand(ctx, ggml_relu(ctx, a))
/// @export
#[extendr]
fn ggml_build_forward_expand(ctx: Robj, tensor: Robj) -> Result<Robj> {
    let ctx = ctx_arg(&ctx)?;
    let t = tensor_arg(&tensor, "tensor")?;
    Ok(Slot::wrap(lib(
        "ggml_build_forward_expand",
        ctx.build_forward_expand(&t),
    )?))
}

/// Starts a CPU backend (`ggml_backend_cpu_init`).
/// @return A backend (external pointer, freed by the garbage collector or `ggml_backend_free`).
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ggml_backend_name(cpu)
/// ggml_backend_free(cpu)
/// @export
#[extendr]
fn ggml_backend_cpu_init() -> Result<Robj> {
    Ok(Slot::wrap(lib(
        "ggml_backend_cpu_init",
        ggml::backend::cpu_init(),
    )?))
}

/// Releases a backend after its queued work (`ggml_backend_free`); freeing it again is
/// harmless.
/// @param backend A backend.
/// @return `NULL`, invisibly.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ggml_backend_free(cpu)
/// ggml_backend_free(cpu)  # harmless
/// @export
#[extendr(invisible)]
fn ggml_backend_free(backend: Robj) -> Result<()> {
    args::free::<Backend>(&backend, "backend", BACKEND, Backend::free)
}

/// The backend's name (`ggml_backend_name`), e.g. `"CPU"`.
/// @param backend A backend.
/// @return A string.
/// @examples
/// ggml_backend_name(ggml_backend_cpu_init())
/// @export
#[extendr]
fn ggml_backend_name(backend: Robj) -> Result<String> {
    Ok(backend_arg(&backend)?.name())
}

// ---- backend buffers ----------------------------------------------------------------------------

/// Allocates every tensor of a `no_alloc = TRUE` context in one buffer of the backend (or a
/// multi-buffer past the buffer type's maximum size) (`ggml_backend_alloc_ctx_tensors`).
/// @param ctx A context made with `no_alloc = TRUE`.
/// @param backend A backend.
/// @return A buffer (external pointer, freed by the garbage collector or
///   `ggml_backend_buffer_free`).
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
/// buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
/// ggml_backend_buffer_get_size(buf)
/// @export
#[extendr]
fn ggml_backend_alloc_ctx_tensors(ctx: Robj, backend: Robj) -> Result<Robj> {
    let (c, b) = (ctx_arg(&ctx)?, backend_arg(&backend)?);
    Ok(Slot::wrap(lib(
        "ggml_backend_alloc_ctx_tensors",
        ggml::backend::alloc_ctx_tensors(&c, &b),
    )?))
}

/// Frees a buffer's memory now, after its queued work (`ggml_backend_buffer_free`); its
/// tensors can no longer be used (an R error). Freeing it again is harmless.
/// @param buffer A buffer.
/// @return `NULL`, invisibly.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
/// buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
/// ggml_backend_buffer_free(buf)
/// ggml_backend_buffer_free(buf)  # harmless
/// @export
#[extendr(invisible)]
fn ggml_backend_buffer_free(buffer: Robj) -> Result<()> {
    args::free::<Buffer>(&buffer, "buffer", BUFFER, Buffer::free)
}

/// Size of the buffer in bytes (`ggml_backend_buffer_get_size`).
/// @param buffer A buffer.
/// @return A number of bytes.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
/// buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
/// ggml_backend_buffer_get_size(buf)
/// @export
#[extendr]
fn ggml_backend_buffer_get_size(buffer: Robj) -> Result<f64> {
    Ok(buffer_arg(&buffer)?.get_size() as f64)
}

/// Name of the buffer's type (`ggml_backend_buffer_name`), e.g. `"CPU"`.
/// @param buffer A buffer.
/// @return A string.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
/// buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
/// ggml_backend_buffer_name(buf)
/// @export
#[extendr]
fn ggml_backend_buffer_name(buffer: Robj) -> Result<String> {
    Ok(buffer_arg(&buffer)?.name())
}

/// Fills every byte of the buffer with `value` (`ggml_backend_buffer_clear`).
/// @param buffer A buffer.
/// @param value A byte, 0 to 255.
/// @return `NULL`, invisibly.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
/// buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
/// ggml_backend_buffer_clear(buf, 0L)
/// ggml_get_f32(t)
/// @export
#[extendr(invisible)]
fn ggml_backend_buffer_clear(buffer: Robj, #[extendr(default = "0L")] value: Robj) -> Result<()> {
    let b = buffer_arg(&buffer)?;
    let v = args::int_in(&value, "value", 0.0, 255.0)? as u8;
    lib("ggml_backend_buffer_clear", b.clear(v))
}

/// Whether the buffer is in host memory (`ggml_backend_buffer_is_host`).
/// @param buffer A buffer.
/// @return `TRUE` or `FALSE`.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
/// buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
/// ggml_backend_buffer_is_host(buf)
/// @export
#[extendr]
fn ggml_backend_buffer_is_host(buffer: Robj) -> Result<bool> {
    Ok(buffer_arg(&buffer)?.is_host())
}

/// Whether the buffer is a multi-buffer (`ggml_backend_buffer_is_multi_buffer`).
/// @param buffer A buffer.
/// @return `TRUE` or `FALSE`.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
/// buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
/// ggml_backend_buffer_is_multi_buffer(buf)  # FALSE
/// @export
#[extendr]
fn ggml_backend_buffer_is_multi_buffer(buffer: Robj) -> Result<bool> {
    Ok(buffer_arg(&buffer)?.is_multi_buffer())
}

/// Resets the buffer's tensors' extra state (`ggml_backend_buffer_reset`).
/// @param buffer A buffer.
/// @return `NULL`, invisibly.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
/// buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
/// ggml_backend_buffer_reset(buf)
/// @export
#[extendr(invisible)]
fn ggml_backend_buffer_reset(buffer: Robj) -> Result<()> {
    lib("ggml_backend_buffer_reset", buffer_arg(&buffer)?.reset())
}

fn usage_arg(obj: &Robj) -> Result<BufferUsage> {
    Ok(match args::int_in(obj, "usage", 0.0, 2.0)? as u8 {
        1 => BufferUsage::Weights,
        2 => BufferUsage::Compute,
        _ => BufferUsage::Any,
    })
}

/// Sets the buffer's usage (`ggml_backend_buffer_set_usage`); a multi-buffer passes it to
/// every part.
/// @param buffer A buffer.
/// @param usage A `ggml_backend_buffer_usage_*()` value.
/// @return `NULL`, invisibly.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
/// buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
/// ggml_backend_buffer_set_usage(buf, ggml_backend_buffer_usage_weights())
/// ggml_backend_buffer_get_usage(buf)
/// @export
#[extendr(invisible)]
fn ggml_backend_buffer_set_usage(buffer: Robj, usage: Robj) -> Result<()> {
    let b = buffer_arg(&buffer)?;
    b.set_usage(usage_arg(&usage)?);
    Ok(())
}

/// The buffer's usage (`ggml_backend_buffer_get_usage`).
/// @param buffer A buffer.
/// @return An integer: 0 any, 1 weights, 2 compute.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024, no_alloc = TRUE)
/// t <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10)
/// buf <- ggml_backend_alloc_ctx_tensors(ctx, cpu)
/// ggml_backend_buffer_get_usage(buf)  # 0: any
/// @export
#[extendr]
fn ggml_backend_buffer_get_usage(buffer: Robj) -> Result<i32> {
    Ok(buffer_arg(&buffer)?.get_usage() as i32)
}

/// Usage "any" (`GGML_BACKEND_BUFFER_USAGE_ANY`).
/// @return `0L`.
/// @examples
/// ggml_backend_buffer_usage_any()
/// @export
#[extendr]
fn ggml_backend_buffer_usage_any() -> i32 {
    BufferUsage::Any as i32
}

/// Usage "weights" (`GGML_BACKEND_BUFFER_USAGE_WEIGHTS`).
/// @return `1L`.
/// @examples
/// ggml_backend_buffer_usage_weights()
/// @export
#[extendr]
fn ggml_backend_buffer_usage_weights() -> i32 {
    BufferUsage::Weights as i32
}

/// Usage "compute" (`GGML_BACKEND_BUFFER_USAGE_COMPUTE`).
/// @return `2L`.
/// @examples
/// ggml_backend_buffer_usage_compute()
/// @export
#[extendr]
fn ggml_backend_buffer_usage_compute() -> i32 {
    BufferUsage::Compute as i32
}

/// One buffer made of several (`ggml_backend_multi_buffer_alloc_buffer`). It takes the parts
/// over: the buffers given read as freed afterwards. A single buffer may be given bare.
/// @param buffers A list of buffers.
/// @return A multi-buffer (external pointer).
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx1 <- ggml_init(1024, no_alloc = TRUE)
/// ctx2 <- ggml_init(2048, no_alloc = TRUE)
/// a <- ggml_new_tensor_1d(ctx1, GGML_TYPE_F32, 10)
/// b <- ggml_new_tensor_1d(ctx2, GGML_TYPE_F32, 20)
/// buf1 <- ggml_backend_alloc_ctx_tensors(ctx1, cpu)
/// buf2 <- ggml_backend_alloc_ctx_tensors(ctx2, cpu)
/// multi <- ggml_backend_multi_buffer_alloc_buffer(list(buf1, buf2))
/// ggml_backend_buffer_is_multi_buffer(multi)
/// ggml_backend_buffer_free(multi)
/// @export
#[extendr]
fn ggml_backend_multi_buffer_alloc_buffer(buffers: Robj) -> Result<Robj> {
    let items: Vec<Robj> = match buffers.as_list() {
        Some(l) => l.values().collect(),
        None => vec![buffers],
    };
    // Check every element before taking any, so that an error leaves them all usable.
    for (i, b) in items.iter().enumerate() {
        handle::<Buffer>(b, &format!("buffers[[{}]]", i + 1), BUFFER)?;
        if let Some(j) = items[..i].iter().position(|o| o == b) {
            return Err(Error::Other(format!(
                "argument `buffers`: element {} is element {} again",
                i + 1,
                j + 1
            )));
        }
    }
    let parts = items
        .iter()
        .enumerate()
        .map(|(i, b)| args::take::<Buffer>(b, &format!("buffers[[{}]]", i + 1), BUFFER))
        .collect::<Result<Vec<Buffer>>>()?;
    Ok(Slot::wrap(lib(
        "ggml_backend_multi_buffer_alloc_buffer",
        ggml::backend::multi_buffer_alloc_buffer(parts),
    )?))
}

/// Sets the usage of every part of a multi-buffer (`ggml_backend_multi_buffer_set_usage`);
/// an R error for a plain buffer.
/// @param buffer A multi-buffer.
/// @param usage A `ggml_backend_buffer_usage_*()` value.
/// @return `NULL`, invisibly.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx1 <- ggml_init(1024, no_alloc = TRUE)
/// ctx2 <- ggml_init(2048, no_alloc = TRUE)
/// a <- ggml_new_tensor_1d(ctx1, GGML_TYPE_F32, 10)
/// b <- ggml_new_tensor_1d(ctx2, GGML_TYPE_F32, 20)
/// buf1 <- ggml_backend_alloc_ctx_tensors(ctx1, cpu)
/// buf2 <- ggml_backend_alloc_ctx_tensors(ctx2, cpu)
/// multi <- ggml_backend_multi_buffer_alloc_buffer(list(buf1, buf2))
/// ggml_backend_multi_buffer_set_usage(multi, ggml_backend_buffer_usage_compute())
/// @export
#[extendr(invisible)]
fn ggml_backend_multi_buffer_set_usage(buffer: Robj, usage: Robj) -> Result<()> {
    let b = buffer_arg(&buffer)?;
    lib(
        "ggml_backend_multi_buffer_set_usage",
        b.multi_buffer_set_usage(usage_arg(&usage)?),
    )
}

/// ggmlR's status for a computation: 0 on success, GGML's status code (-1 failed,
/// -2 allocation failed, 1 aborted) for a failure of the computation itself, and an R error for
/// a bad argument (a graph whose tensors have no memory, an op the backend lacks).
pub(crate) fn status(fname: &str, r: ggml::Result<()>) -> Result<i32> {
    match r {
        Ok(()) => Ok(0),
        Err(e) => match e.kind() {
            ErrorKind::Compute | ErrorKind::Aborted | ErrorKind::AllocFailed => {
                Ok(e.status() as i32)
            }
            _ => lib(fname, Err(e)),
        },
    }
}

/// Computes the graph on the backend and waits (`ggml_backend_graph_compute`). Ctrl-C stops
/// the wait with an R error; the computation, which cannot be stopped midway, finishes in the
/// background. The R functions of custom ops (`ggml_map_custom1` …) run here, on R's thread,
/// while this waits; an error in one is an R error of this call.
/// @param backend A backend.
/// @param graph A graph from `ggml_build_forward_expand`.
/// @return The status, `0` on success.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(1024 * 1024)
/// a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2)
/// ggml_set_f32(a, c(-1, 1))
/// b <- ggml_relu(ctx, a)
/// ggml_backend_graph_compute(cpu, ggml_build_forward_expand(ctx, b))  # 0
/// ggml_get_f32(b)
/// @export
#[extendr]
fn ggml_backend_graph_compute(backend: Robj, graph: Robj) -> Result<i32> {
    let (b, g) = (backend_arg(&backend)?, graph_arg(&graph)?);
    let fname = "ggml_backend_graph_compute";
    status(fname, rthread::wait(fname, move || b.graph_compute(&g))?)
}

/// Queues the graph on the backend's stream and returns at once
/// (`ggml_backend_graph_compute_async`); `ggml_backend_synchronize` waits for it. A graph with
/// custom ops whose R functions must run on R's thread is refused (an R error): compute it with
/// `ggml_backend_graph_compute`.
/// @param backend A backend.
/// @param graph A graph from `ggml_build_forward_expand`.
/// @return The status, `0` when the work was queued.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ctx <- ggml_init(16 * 1024 * 1024)
/// a <- ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 100)
/// b <- ggml_relu(ctx, a)
/// graph <- ggml_build_forward_expand(ctx, b)
/// ggml_set_f32(a, rnorm(100))
/// status <- ggml_backend_graph_compute_async(cpu, graph)
/// ggml_backend_synchronize(cpu)
/// @export
#[extendr]
fn ggml_backend_graph_compute_async(backend: Robj, graph: Robj) -> Result<i32> {
    let (b, g) = (backend_arg(&backend)?, graph_arg(&graph)?);
    custom::refuse_async("ggml_backend_graph_compute_async", &g)?;
    status(
        "ggml_backend_graph_compute_async",
        b.graph_compute_async(&g),
    )
}

/// Waits for the backend's queued work (`ggml_backend_synchronize`); an error that work raised
/// is an R error here. Ctrl-C stops the wait (an R error); the work goes on in the background.
/// @param backend A backend.
/// @return `NULL`, invisibly.
/// @examples
/// cpu <- ggml_backend_cpu_init()
/// ggml_backend_synchronize(cpu)
/// @export
#[extendr(invisible)]
fn ggml_backend_synchronize(backend: Robj) -> Result<()> {
    let b = backend_arg(&backend)?;
    let fname = "ggml_backend_synchronize";
    lib(fname, rthread::wait(fname, move || b.synchronize())?)
}

/// Called by `.onLoad`: records R's thread, and quiets panics. extendr turns an `Err` into an R
/// error by way of a caught panic, so Rust's default panic hook would print every R error a
/// second time on stderr, with a backtrace; the R error carries the message, so the hook
/// prints nothing.
#[extendr(invisible)]
fn rs_init() {
    rthread::init();
    std::panic::set_hook(Box::new(|_| {}));
}

/// The tests' Ctrl-C: the next look for an interrupt of a long call sees one.
#[extendr(invisible)]
fn rs_inject_interrupt() {
    rthread::inject_interrupt();
}

extendr_module! {
    mod ggmlrs;
    use backend;
    use gguf;
    use unary;
    use scalar_ops;
    use binary;
    use matrix;
    use reduce;
    use glu;
    use norm;
    use softmax;
    use attention;
    use rope;
    use layout;
    use rows;
    use conv;
    use pool;
    use sequence;
    use quant;
    use tensors;
    use custom;
    fn rs_init;
    fn rs_inject_interrupt;
    fn ggml_init;
    fn ggml_free;
    fn ggml_reset;
    fn ggml_used_mem;
    fn ggml_new_tensor_1d;
    fn ggml_new_tensor_2d;
    fn ggml_new_tensor_3d;
    fn ggml_new_tensor_4d;
    fn ggml_set_f32;
    fn ggml_get_f32;
    fn ggml_set_i32;
    fn ggml_get_i32;
    fn ggml_nelements;
    fn ggml_nbytes;
    fn ggml_n_dims;
    fn ggml_nrows;
    fn ggml_tensor_shape;
    fn ggml_tensor_type;
    fn ggml_build_forward_expand;
    fn ggml_backend_cpu_init;
    fn ggml_backend_free;
    fn ggml_backend_name;
    fn ggml_backend_graph_compute;
    fn ggml_backend_graph_compute_async;
    fn ggml_backend_synchronize;
    fn ggml_backend_alloc_ctx_tensors;
    fn ggml_backend_buffer_free;
    fn ggml_backend_buffer_get_size;
    fn ggml_backend_buffer_name;
    fn ggml_backend_buffer_clear;
    fn ggml_backend_buffer_is_host;
    fn ggml_backend_buffer_is_multi_buffer;
    fn ggml_backend_buffer_reset;
    fn ggml_backend_buffer_set_usage;
    fn ggml_backend_buffer_get_usage;
    fn ggml_backend_buffer_usage_any;
    fn ggml_backend_buffer_usage_weights;
    fn ggml_backend_buffer_usage_compute;
    fn ggml_backend_multi_buffer_alloc_buffer;
    fn ggml_backend_multi_buffer_set_usage;
}
