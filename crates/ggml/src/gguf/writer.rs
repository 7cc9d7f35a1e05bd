//! Writing GGUF: [`GgufWriter`] collects metadata and tensors, then writes a version-3 file laid
//! out as GGML's `gguf_write_to_file` does (tensors packed in order, each padded to the alignment).

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use super::limits::{MAX_ARRAY_DEPTH, MAX_ARRAY_LEN, MAX_STRING_LEN, MAX_TENSOR_NAME_LEN};
use super::reader::{check_alignment, GgufFile};
use super::tensor::{checked_nbytes, file_shape, n_dims_of, MAX_DIMS};
use super::value::{Array, Value};
use super::{DEFAULT_ALIGNMENT, KEY_GENERAL_ALIGNMENT, MAGIC, VERSION};
use crate::error::{Error, Result};
use crate::types::Type;

struct PendingTensor<'a> {
    name: String,
    ne: [i64; MAX_DIMS],
    ty: Type,
    /// Bytes of data (what the shape and type need).
    size: usize,
    /// The bytes given to [`GgufWriter::add_tensor`]; `None` for [`GgufWriter::add_tensor_info`].
    data: Option<Cow<'a, [u8]>>,
}

/// Builds a GGUF file (GGML's `gguf_init_empty` + `gguf_set_*` + `gguf_add_tensor` +
/// `gguf_write_to_file`). Tensor data may be borrowed (`&'a [u8]`), owned, or made one tensor
/// at a time while the file is written ([`GgufWriter::add_tensor_info`] and
/// [`GgufWriter::write_to_with`]).
#[derive(Default)]
pub struct GgufWriter<'a> {
    kv: Vec<(String, Value)>,
    tensors: Vec<PendingTensor<'a>>,
    names: HashSet<String>,
}

impl<'a> GgufWriter<'a> {
    /// An empty file: no metadata, no tensors (`gguf_init_empty`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value` (`gguf_set_val_*`, `gguf_set_arr_*`). As in GGML, an existing key is
    /// removed first, so the key moves to the end. `Err` for an empty key, an array nested deeper
    /// than [`MAX_ARRAY_DEPTH`], or a `general.alignment` that is not a u32 power of two.
    pub fn set(&mut self, key: &str, value: impl Into<Value>) -> Result<()> {
        let value = value.into();
        if key.is_empty() {
            return Err(Error::invalid("gguf key must not be empty"));
        }
        if key.len() as u64 > MAX_STRING_LEN {
            return Err(Error::invalid(format!(
                "gguf key of {} bytes is longer than {MAX_STRING_LEN}",
                key.len()
            )));
        }
        match &value {
            Value::Array(a) if a.depth() > MAX_ARRAY_DEPTH => {
                return Err(Error::invalid(format!(
                    "gguf key {key:?}: array nested {} deep, more than {MAX_ARRAY_DEPTH}",
                    a.depth()
                )));
            }
            Value::Array(a) => check_array_limits(key, a)?,
            Value::String(s) => check_string_limit(key, s.as_bytes().len())?,
            _ => {}
        }
        if key == KEY_GENERAL_ALIGNMENT {
            check_alignment(&value).map_err(Error::invalid)?;
        }
        self.remove_key(key);
        self.kv.push((key.to_string(), value));
        Ok(())
    }

    /// Removes `key`, returning its value (`gguf_remove_key`).
    pub fn remove_key(&mut self, key: &str) -> Option<Value> {
        let i = self.kv.iter().position(|(k, _)| k == key)?;
        Some(self.kv.remove(i).1)
    }

    /// The value set for `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.kv.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Every key/value pair, in the order they will be written.
    pub fn metadata(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> + '_ {
        self.kv.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Copies every key/value pair of `src` (`gguf_set_kv`).
    pub fn set_kv(&mut self, src: &GgufFile) -> Result<()> {
        for (k, v) in src.metadata() {
            self.set(k, v.clone())?;
        }
        Ok(())
    }

    /// Number of key/value pairs.
    pub fn n_kv(&self) -> usize {
        self.kv.len()
    }

    /// Number of tensors.
    pub fn n_tensors(&self) -> usize {
        self.tensors.len()
    }

    /// Adds a tensor of type `ty` and shape `ne` (up to 5 dims, the fifth 1) whose bytes are
    /// `data` (`gguf_add_tensor` + `gguf_set_tensor_data`). `Err` for a duplicate or over-long
    /// name (GGML keeps at most 63 bytes), a bad shape, or `data` of the wrong length.
    pub fn add_tensor(
        &mut self,
        name: &str,
        ty: Type,
        ne: &[i64],
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<()> {
        let data = data.into();
        let (ne, size) = self.check_tensor(name, ty, ne)?;
        if data.len() != size {
            return Err(Error::invalid(format!(
                "tensor {name:?}: data has {} bytes, shape {:?} of {ty} needs {size}",
                data.len(),
                &ne[..n_dims_of(&ne) as usize]
            )));
        }
        self.push_tensor(name, ty, ne, size, Some(data));
        Ok(())
    }

    /// Adds a tensor whose bytes are not given now (`gguf_add_tensor` without data): they are
    /// made while the file is written, by the closure given to [`GgufWriter::write_to_with`]
    /// or [`GgufWriter::write_to_file_with`], and dropped once written, so that a file of
    /// converted tensors never holds more than one of them in memory. The checks are
    /// [`GgufWriter::add_tensor`]'s.
    pub fn add_tensor_info(&mut self, name: &str, ty: Type, ne: &[i64]) -> Result<()> {
        let (ne, size) = self.check_tensor(name, ty, ne)?;
        self.push_tensor(name, ty, ne, size, None);
        Ok(())
    }

    /// Checks a new tensor's name and shape; returns the padded shape and the byte size.
    fn check_tensor(&self, name: &str, ty: Type, ne: &[i64]) -> Result<([i64; MAX_DIMS], usize)> {
        let bad = |m: String| Error::invalid(format!("tensor {name:?}: {m}"));
        if name.len() > MAX_TENSOR_NAME_LEN {
            return Err(bad(format!(
                "name of {} bytes is longer than {MAX_TENSOR_NAME_LEN}",
                name.len()
            )));
        }
        if self.names.contains(name) {
            return Err(bad("duplicate tensor name".into()));
        }
        let ne = file_shape(ne).map_err(bad)?;
        let size = checked_nbytes(ty, &ne).map_err(bad)?;
        Ok((ne, size))
    }

    fn push_tensor(
        &mut self,
        name: &str,
        ty: Type,
        ne: [i64; MAX_DIMS],
        size: usize,
        data: Option<Cow<'a, [u8]>>,
    ) {
        self.names.insert(name.to_string());
        self.tensors.push(PendingTensor {
            name: name.to_string(),
            ne,
            ty,
            size,
            data,
        });
    }

    /// The alignment the file will use: `general.alignment` if set, else [`DEFAULT_ALIGNMENT`].
    pub fn alignment(&self) -> usize {
        self.get(KEY_GENERAL_ALIGNMENT)
            .and_then(|v| check_alignment(v).ok())
            .unwrap_or(DEFAULT_ALIGNMENT)
    }

    /// Writes the whole file to `w`; returns the bytes written. `Err` if a tensor was added
    /// without data ([`GgufWriter::add_tensor_info`]).
    pub fn write_to(&self, w: &mut impl Write) -> Result<u64> {
        self.write_to_with(w, |_| Err(self.no_data()))
    }

    /// Writes the whole file to `w`, calling `make(i)` for the bytes of tensor `i` (in the order
    /// added) when it was added without data. `make`'s `Err`, or bytes of the wrong length, stop
    /// the write with that error. Returns the bytes written.
    pub fn write_to_with(
        &self,
        w: &mut impl Write,
        mut make: impl FnMut(usize) -> Result<Vec<u8>>,
    ) -> Result<u64> {
        let mut out = Counting { w, n: 0 };
        self.write_meta_inner(&mut out)?;
        let align = self.alignment();
        for (i, t) in self.tensors.iter().enumerate() {
            match &t.data {
                Some(data) => out.put(data)?,
                None => {
                    let data = make(i)?;
                    if data.len() != t.size {
                        return Err(Error::invalid(format!(
                            "tensor {:?}: made {} bytes of data, its shape and type need {}",
                            t.name,
                            data.len(),
                            t.size
                        )));
                    }
                    out.put(&data)?;
                }
            }
            out.pad(align)?;
        }
        Ok(out.n)
    }

    /// The error for a tensor without data written by a plain write.
    fn no_data(&self) -> Error {
        let name = self
            .tensors
            .iter()
            .find(|t| t.data.is_none())
            .map(|t| &t.name);
        Error::invalid(format!(
            "tensor {name:?} was added without data: write with write_to_with or \
             write_to_file_with"
        ))
    }

    /// Writes only the header, metadata and tensor infos, padded to the alignment
    /// (`gguf_write_to_file` with `only_meta`, `gguf_get_meta_data`).
    pub fn write_meta(&self, w: &mut impl Write) -> Result<u64> {
        let mut out = Counting { w, n: 0 };
        self.write_meta_inner(&mut out)?;
        Ok(out.n)
    }

    /// Size of what [`GgufWriter::write_meta`] writes (`gguf_get_meta_size`): the offset of the
    /// data section.
    pub fn meta_size(&self) -> Result<u64> {
        self.write_meta(&mut std::io::sink())
    }

    /// The whole file in memory (`gguf_write_to_buf`).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        self.write_to(&mut v)?;
        Ok(v)
    }

    /// Writes the file to `path` atomically: into a temporary file in the same directory, synced,
    /// then renamed over `path`, so a crash leaves either the old file or the complete new one.
    pub fn write_to_file(&self, path: impl AsRef<Path>) -> Result<()> {
        self.write_to_file_with(path, |_| Err(self.no_data()))
    }

    /// [`GgufWriter::write_to_file`], with `make` giving the bytes of the tensors added without
    /// data, as for [`GgufWriter::write_to_with`]. On any error the temporary file is removed.
    pub fn write_to_file_with(
        &self,
        path: impl AsRef<Path>,
        make: impl FnMut(usize) -> Result<Vec<u8>>,
    ) -> Result<()> {
        let path = path.as_ref();
        let io = |what: &str, p: &Path, e: std::io::Error| {
            Error::Io(format!("{what} {}: {e}", p.display()))
        };
        let file_name = path.file_name().ok_or_else(|| {
            Error::invalid(format!(
                "gguf output path {} has no file name",
                path.display()
            ))
        })?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(file_name);
        tmp_name.push(format!(".{}.tmp", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        let result = (|| {
            let file = std::fs::File::create(&tmp).map_err(|e| io("creating", &tmp, e))?;
            let mut buf = std::io::BufWriter::with_capacity(1 << 20, file);
            self.write_to_with(&mut buf, make)?;
            let file = buf
                .into_inner()
                .map_err(|e| io("writing", &tmp, e.into_error()))?;
            file.sync_all().map_err(|e| io("syncing", &tmp, e))?;
            std::fs::rename(&tmp, path).map_err(|e| io("renaming onto", path, e))
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    fn write_meta_inner<W: Write>(&self, out: &mut Counting<W>) -> Result<()> {
        out.put(&MAGIC)?;
        out.put(&VERSION.to_le_bytes())?;
        out.put(&(self.tensors.len() as i64).to_le_bytes())?;
        out.put(&(self.kv.len() as i64).to_le_bytes())?;
        for (k, v) in &self.kv {
            out.string(k.as_bytes())?;
            out.put(&(v.value_type() as u32).to_le_bytes())?;
            out.value(v)?;
        }
        let align = self.alignment() as u64;
        let mut offset = 0u64;
        for t in &self.tensors {
            out.string(t.name.as_bytes())?;
            let n_dims = n_dims_of(&t.ne);
            out.put(&n_dims.to_le_bytes())?;
            for d in &t.ne[..n_dims as usize] {
                out.put(&d.to_le_bytes())?;
            }
            out.put(&(t.ty as u32).to_le_bytes())?;
            out.put(&offset.to_le_bytes())?;
            offset += (t.size as u64).div_ceil(align) * align;
        }
        out.pad(align as usize)
    }
}

/// A writer that counts bytes, for padding.
struct Counting<'w, W: Write> {
    w: &'w mut W,
    n: u64,
}

impl<W: Write> Counting<'_, W> {
    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.w
            .write_all(b)
            .map_err(|e| Error::Io(format!("writing gguf at byte {}: {e}", self.n)))?;
        self.n += b.len() as u64;
        Ok(())
    }

    fn pad(&mut self, align: usize) -> Result<()> {
        const ZEROS: [u8; 64] = [0; 64];
        let mut left = (self.n.div_ceil(align as u64) * align as u64 - self.n) as usize;
        while left > 0 {
            let k = left.min(ZEROS.len());
            self.put(&ZEROS[..k])?;
            left -= k;
        }
        Ok(())
    }

    fn string(&mut self, s: &[u8]) -> Result<()> {
        self.put(&(s.len() as u64).to_le_bytes())?;
        self.put(s)
    }

    fn value(&mut self, v: &Value) -> Result<()> {
        match v {
            Value::U8(x) => self.put(&[*x]),
            Value::I8(x) => self.put(&x.to_le_bytes()),
            Value::U16(x) => self.put(&x.to_le_bytes()),
            Value::I16(x) => self.put(&x.to_le_bytes()),
            Value::U32(x) => self.put(&x.to_le_bytes()),
            Value::I32(x) => self.put(&x.to_le_bytes()),
            Value::F32(x) => self.put(&x.to_le_bytes()),
            Value::Bool(x) => self.put(&[*x as u8]),
            Value::U64(x) => self.put(&x.to_le_bytes()),
            Value::I64(x) => self.put(&x.to_le_bytes()),
            Value::F64(x) => self.put(&x.to_le_bytes()),
            Value::String(s) => self.string(s.as_bytes()),
            Value::Array(a) => self.array(a),
        }
    }

    fn array(&mut self, a: &Array) -> Result<()> {
        self.put(&(a.elem_type() as u32).to_le_bytes())?;
        self.put(&(a.len() as u64).to_le_bytes())?;
        match a {
            Array::U8(v) => self.put(v),
            Array::I8(v) => self.each(v, |x| x.to_le_bytes()),
            Array::U16(v) => self.each(v, |x| x.to_le_bytes()),
            Array::I16(v) => self.each(v, |x| x.to_le_bytes()),
            Array::U32(v) => self.each(v, |x| x.to_le_bytes()),
            Array::I32(v) => self.each(v, |x| x.to_le_bytes()),
            Array::F32(v) => self.each(v, |x| x.to_le_bytes()),
            Array::Bool(v) => self.each(v, |x| [*x as u8]),
            Array::U64(v) => self.each(v, |x| x.to_le_bytes()),
            Array::I64(v) => self.each(v, |x| x.to_le_bytes()),
            Array::F64(v) => self.each(v, |x| x.to_le_bytes()),
            Array::String(v) => v.iter().try_for_each(|s| self.string(s.as_bytes())),
            Array::Array(v) => v.iter().try_for_each(|inner| self.array(inner)),
        }
    }

    /// Writes fixed-size elements, encoded in batches to keep writes large.
    fn each<T, const N: usize>(&mut self, v: &[T], f: impl Fn(&T) -> [u8; N]) -> Result<()> {
        const BATCH: usize = 4096;
        let mut buf = Vec::with_capacity(v.len().min(BATCH) * N);
        for chunk in v.chunks(BATCH) {
            buf.clear();
            chunk.iter().for_each(|x| buf.extend_from_slice(&f(x)));
            self.put(&buf)?;
        }
        Ok(())
    }
}

/// Convenience setters named after GGML's (`gguf_set_val_u8`, …), each `set(key, value)`.
macro_rules! typed_setters {
    ($($name:ident, $t:ty;)*) => {
        impl GgufWriter<'_> {$(
            #[doc = concat!("Sets `key` to a `", stringify!($t), "` (`gguf_", stringify!($name), "`).")]
            pub fn $name(&mut self, key: &str, value: $t) -> Result<()> {
                self.set(key, value)
            }
        )*}
    };
}

typed_setters! {
    set_val_u8, u8;
    set_val_i8, i8;
    set_val_u16, u16;
    set_val_i16, i16;
    set_val_u32, u32;
    set_val_i32, i32;
    set_val_f32, f32;
    set_val_bool, bool;
    set_val_u64, u64;
    set_val_i64, i64;
    set_val_f64, f64;
    set_val_str, &str;
    set_arr, Array;
}

/// A string value longer than the reader accepts would make a file we cannot read back.
fn check_string_limit(key: &str, len: usize) -> Result<()> {
    if len as u64 > MAX_STRING_LEN {
        return Err(Error::invalid(format!(
            "gguf key {key:?}: string of {len} bytes is longer than {MAX_STRING_LEN}"
        )));
    }
    Ok(())
}

/// The reader's array limits (element count, string lengths), checked when a value is set.
fn check_array_limits(key: &str, a: &Array) -> Result<()> {
    if a.len() as u64 > MAX_ARRAY_LEN {
        return Err(Error::invalid(format!(
            "gguf key {key:?}: array of {} elements is longer than {MAX_ARRAY_LEN}",
            a.len()
        )));
    }
    match a {
        Array::String(v) => v
            .iter()
            .try_for_each(|s| check_string_limit(key, s.as_bytes().len())),
        Array::Array(v) => v
            .iter()
            .try_for_each(|inner| check_array_limits(key, inner)),
        _ => Ok(()),
    }
}
