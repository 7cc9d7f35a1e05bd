//! GGUF reading under ggmlR's names (`gguf_load`, `gguf_metadata`, `gguf_tensor_*`,
//! `gguf_free`). A loaded file is ggmlR's S3 object: a list of class `"gguf"` whose `ptr`
//! holds the library's reader.

use std::sync::Arc;

use crate::args::{self, bad, flag, handle, lib, string, Slot};
use extendr_api::prelude::*;
use extendr_api::Result;
use ggml::gguf::{Array, GgufFile, Value};

const GGUF: &str = "gguf file";

/// The reader of a `"gguf"` object given as `x`.
fn file_arg(x: &Robj) -> Result<(Arc<GgufFile>, bool)> {
    if !x.inherits("gguf") {
        return Err(bad("x", "expected a gguf object (from gguf_load)"));
    }
    let ptr = x.dollar("ptr").map_err(|_| bad("x", "has no `ptr`"))?;
    let meta_only = x
        .dollar("meta_only")
        .ok()
        .and_then(|m| m.as_bool())
        .unwrap_or(false);
    Ok((handle(&ptr, "x", GGUF)?, meta_only))
}

/// Reading GGUF files
///
/// `gguf_load` opens a GGUF file (memory-mapped; Ctrl-C stops the wait) and returns a list of class `"gguf"` with
/// `ptr`, `path`, `version`, `n_tensors`, `n_kv` and `meta_only` (with `meta_only = TRUE`
/// the tensor data cannot be read). `gguf_metadata` gives the key-value pairs as a named list
/// (numbers as doubles, booleans as logicals, strings as character, arrays as vectors or
/// lists); `gguf_tensor_names` the tensor names; `gguf_tensor_info` a tensor's `name`,
/// `shape`, `type` (its type name) and `size_bytes`; `gguf_tensor_data` its values (of any
/// type, dequantized) as a numeric array whose `dim` is its shape. `gguf_free` releases the
/// file (again: harmless); a freed file's functions raise R errors.
/// @param path Path of a `.gguf` file.
/// @param meta_only Read only the header and metadata.
/// @param x A `"gguf"` object from `gguf_load`.
/// @param name A tensor name.
/// @return See the description.
/// @examples
/// path <- tempfile(fileext = ".gguf")
/// con <- file(path, "wb")
/// writeBin(charToRaw("GGUF"), con)
/// writeBin(3L, con, size = 4)                     # version
/// writeBin(c(1L, 0L, 1L, 0L), con, size = 4)      # 1 tensor, 1 key (as 64-bit counts)
/// writeBin(c(4L, 0L), con, size = 4); writeBin(charToRaw("name"), con)
/// writeBin(8L, con, size = 4)                     # a string value
/// writeBin(c(3L, 0L), con, size = 4); writeBin(charToRaw("toy"), con)
/// writeBin(c(1L, 0L), con, size = 4); writeBin(charToRaw("w"), con)
/// writeBin(1L, con, size = 4)                     # 1 dimension
/// writeBin(c(4L, 0L), con, size = 4)              # of 4 elements
/// writeBin(0L, con, size = 4)                     # F32
/// writeBin(c(0L, 0L), con, size = 4)              # at offset 0
/// pad <- (32 - seek(con) %% 32) %% 32
/// writeBin(as.raw(rep(0, pad)), con)
/// writeBin(c(1, 2, 3, 4), con, size = 4)
/// close(con)
/// g <- gguf_load(path)
/// gguf_metadata(g)
/// gguf_tensor_names(g)
/// str(gguf_tensor_info(g, "w"))
/// gguf_tensor_data(g, "w")
/// gguf_free(g)
/// @export
#[extendr]
fn gguf_load(path: Robj, #[extendr(default = "FALSE")] meta_only: Robj) -> Result<Robj> {
    let p = string(&path, "path")?;
    let meta = flag(&meta_only, "meta_only")?;
    let path_owned = p.clone();
    let opened = crate::rthread::wait("gguf_load", move || GgufFile::open(&path_owned))?;
    let f = lib("gguf_load", opened)?;
    let (version, n_tensors, n_kv) = (f.version(), f.n_tensors(), f.n_kv());
    let full = std::fs::canonicalize(&p)
        .map(|q| q.to_string_lossy().into_owned())
        .unwrap_or(p);
    let mut obj: Robj = list!(
        ptr = Slot::wrap(Arc::new(f)),
        path = full,
        version = f64::from(version),
        n_tensors = n_tensors as f64,
        n_kv = n_kv as f64,
        meta_only = meta
    )
    .into();
    obj.set_class(["gguf"])?;
    Ok(obj)
}

/// @rdname gguf_load
/// @export
#[extendr(invisible)]
fn gguf_free(x: Robj) -> Result<()> {
    if !x.inherits("gguf") {
        return Err(bad("x", "expected a gguf object (from gguf_load)"));
    }
    let ptr = x.dollar("ptr").map_err(|_| bad("x", "has no `ptr`"))?;
    args::free::<Arc<GgufFile>>(&ptr, "x", GGUF, drop)
}

fn num_vec<T: Copy + Into<f64>>(v: &[T]) -> Robj {
    v.iter().map(|&x| x.into()).collect::<Vec<f64>>().into()
}

fn big_vec<T: Copy>(v: &[T], f: fn(T) -> f64) -> Robj {
    v.iter().map(|&x| f(x)).collect::<Vec<f64>>().into()
}

fn array_robj(a: &Array) -> Robj {
    match a {
        Array::U8(v) => num_vec(v),
        Array::I8(v) => num_vec(v),
        Array::U16(v) => num_vec(v),
        Array::I16(v) => num_vec(v),
        Array::U32(v) => num_vec(v),
        Array::I32(v) => num_vec(v),
        Array::F32(v) => num_vec(v),
        Array::U64(v) => big_vec(v, |x| x as f64),
        Array::I64(v) => big_vec(v, |x| x as f64),
        Array::F64(v) => num_vec(v),
        Array::Bool(v) => v.clone().into(),
        Array::String(v) => v
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect::<Vec<String>>()
            .into(),
        Array::Array(v) => List::from_values(v.iter().map(array_robj)).into(),
    }
}

fn value_robj(v: &Value) -> Robj {
    match v {
        Value::U8(x) => f64::from(*x).into(),
        Value::I8(x) => f64::from(*x).into(),
        Value::U16(x) => f64::from(*x).into(),
        Value::I16(x) => f64::from(*x).into(),
        Value::U32(x) => f64::from(*x).into(),
        Value::I32(x) => f64::from(*x).into(),
        Value::F32(x) => f64::from(*x).into(),
        Value::U64(x) => (*x as f64).into(),
        Value::I64(x) => (*x as f64).into(),
        Value::F64(x) => (*x).into(),
        Value::Bool(x) => (*x).into(),
        Value::String(s) => s.to_string_lossy().into_owned().into(),
        Value::Array(a) => array_robj(a),
    }
}

/// @rdname gguf_load
/// @export
#[extendr]
fn gguf_metadata(x: Robj) -> Result<Robj> {
    let (f, _) = file_arg(&x)?;
    let (keys, values): (Vec<&str>, Vec<Robj>) =
        f.metadata().map(|(k, v)| (k, value_robj(v))).unzip();
    Ok(List::from_names_and_values(keys, values)?.into())
}

/// @rdname gguf_load
/// @export
#[extendr]
fn gguf_tensor_names(x: Robj) -> Result<Vec<String>> {
    let (f, _) = file_arg(&x)?;
    Ok(f.tensor_names().map(str::to_string).collect())
}

/// @rdname gguf_load
/// @export
#[extendr]
fn gguf_tensor_info(x: Robj, name: Robj) -> Result<Robj> {
    let (f, _) = file_arg(&x)?;
    let n = string(&name, "name")?;
    let info = lib("gguf_tensor_info", f.tensor_info(&n))?;
    let values: [Robj; 4] = [
        info.name().into(),
        info.shape()
            .iter()
            .map(|&d| d as f64)
            .collect::<Vec<f64>>()
            .into(),
        info.ty().name().into(),
        (info.size() as f64).into(),
    ];
    Ok(List::from_names_and_values(["name", "shape", "type", "size_bytes"], values)?.into())
}

/// @rdname gguf_load
/// @export
#[extendr]
fn gguf_tensor_data(x: Robj, name: Robj) -> Result<Robj> {
    let (f, meta_only) = file_arg(&x)?;
    if meta_only {
        return Err(bad(
            "x",
            "was loaded with meta_only = TRUE; reload it with gguf_load(path) to read tensor data",
        ));
    }
    let n = string(&name, "name")?;
    let info = lib("gguf_tensor_data", f.tensor_info(&n))?;
    let dims: Vec<i32> = info.shape().iter().map(|&d| d as i32).collect();
    let values = lib("gguf_tensor_data", f.tensor_data_f32(&n))?;
    let mut out: Robj = values
        .into_iter()
        .map(f64::from)
        .collect::<Vec<f64>>()
        .into();
    out.set_attrib("dim", dims)?;
    Ok(out)
}

extendr_module! {
    mod gguf;
    fn gguf_load;
    fn gguf_free;
    fn gguf_metadata;
    fn gguf_tensor_names;
    fn gguf_tensor_info;
    fn gguf_tensor_data;
}
