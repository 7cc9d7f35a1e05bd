//! Reading GGUF: [`GgufFile`] parses and validates a whole file (memory-mapped or in memory) and
//! hands out metadata and borrowed tensor bytes.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::cursor::{format_err, Cursor, Label};
use super::limits::{
    MAX_ALIGNMENT, MAX_ARRAY_DEPTH, MAX_ARRAY_LEN, MAX_FILE_DIMS, MAX_STRING_LEN,
    MAX_TENSOR_NAME_LEN, MIN_KV_BYTES, MIN_TENSOR_INFO_BYTES,
};
use super::tensor::{checked_nbytes, TensorInfo, MAX_DIMS};
use super::value::{Array, GgufString, Value, ValueType};
use super::{DEFAULT_ALIGNMENT, KEY_GENERAL_ALIGNMENT, MAGIC, VERSION};
use crate::error::{Error, Result};
use crate::types::Type;

/// The bytes of a GGUF file: a read-only memory map, or an owned buffer. Shared through an
/// [`Arc`] so that whatever borrows tensor data (a backend buffer) can keep it alive.
pub struct FileBytes {
    inner: Storage,
}

enum Storage {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl FileBytes {
    /// All the bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.inner {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }

    /// Address of the first byte (stable for the life of this value).
    pub fn as_ptr(&self) -> *const u8 {
        self.as_slice().as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the bytes are a memory map of a file (rather than an owned buffer).
    pub fn is_mapped(&self) -> bool {
        matches!(self.inner, Storage::Mapped(_))
    }

    /// Tells the system that bytes `range` of a mapped file will not be read for a while
    /// (`madvise(MADV_DONTNEED)`, from the start of the page holding `range.start`): their
    /// pages leave the process's resident memory and are read from the file again if touched
    /// (a weight repacked into a buffer of its own, say). Owned bytes, and systems other
    /// than Unix, are left as they are. `Err` naming the range when it is not inside the
    /// bytes, or when the system refuses.
    pub fn release(&self, range: std::ops::Range<usize>) -> Result<()> {
        if range.start > range.end || range.end > self.len() {
            return Err(Error::invalid(format!(
                "FileBytes::release: range {range:?} is not inside the {} bytes",
                self.len()
            )));
        }
        #[cfg(unix)]
        if let Storage::Mapped(m) = &self.inner {
            // Random access first: the range becomes a mapping of its own, which the
            // system's fault-around (mapping the pages near a faulted one, when a neighbouring
            // tensor is read) does not cross, so its pages stay out.
            m.advise_range(memmap2::Advice::Random, range.start, range.len())
                .map_err(|e| Error::invalid(format!("FileBytes::release({range:?}): {e}")))?;
            // SAFETY: the map is a read-only map of a file (`Mmap`), so dropping its pages
            // loses nothing: a later read faults them in again from the file with the same
            // bytes, and every reference into the map stays valid.
            unsafe {
                m.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    range.start,
                    range.len(),
                )
            }
            .map_err(|e| Error::invalid(format!("FileBytes::release({range:?}): {e}")))?;
        }
        Ok(())
    }
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileBytes")
            .field("len", &self.len())
            .field("mapped", &self.is_mapped())
            .finish()
    }
}

/// A parsed, validated GGUF file (GGML's `gguf_context` from `gguf_init_from_file`).
///
/// Validation follows GGML's reader: magic `GGUF`, version 2 or 3, no duplicate keys or tensor
/// names, `general.alignment` a u32 power of two, at most 4 dims per tensor, dims non-negative,
/// `ne[0]` a whole number of blocks, element counts and byte sizes representable. On top of
/// GGML's rules, every tensor's data must be aligned, lie inside the file and not overlap
/// another's (GGML additionally insists that tensors are packed in order; this reader does not).
/// Nested arrays, which GGML refuses, are accepted up to [`super::limits::MAX_ARRAY_DEPTH`].
#[derive(Debug, Clone)]
pub struct GgufFile {
    bytes: Arc<FileBytes>,
    version: u32,
    alignment: usize,
    data_offset: usize,
    kv: Vec<(String, Value)>,
    kv_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

impl GgufFile {
    /// Memory-maps and parses the file at `path` (`gguf_init_from_file`).
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref();
        let io = |e: std::io::Error| Error::Io(format!("{}: {e}", path.display()));
        let file = std::fs::File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let storage = if len == 0 {
            // Nothing to map (mapping zero bytes fails on some systems); parsing reports it.
            Storage::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only and its contents are treated as untrusted bytes, every
            // access being bounds-checked. As with any file map, another process truncating or
            // rewriting the file while it is mapped breaks the assumption that the bytes do not
            // change; that is the documented contract of `open` (do not modify an open model).
            Storage::Mapped(unsafe { memmap2::Mmap::map(&file) }.map_err(io)?)
        };
        Self::parse(Arc::new(FileBytes { inner: storage })).map_err(|e| prefix_path(e, path))
    }

    /// Parses a copy of `bytes` (for tests, fuzzing, and data already in memory).
    pub fn from_bytes(bytes: &[u8]) -> Result<GgufFile> {
        Self::from_vec(bytes.to_vec())
    }

    /// Parses `bytes`, taking ownership (no copy).
    pub fn from_vec(bytes: Vec<u8>) -> Result<GgufFile> {
        Self::parse(Arc::new(FileBytes {
            inner: Storage::Owned(bytes),
        }))
    }

    fn parse(bytes: Arc<FileBytes>) -> Result<GgufFile> {
        let parsed = Parser::new(bytes.as_slice()).parse()?;
        Ok(GgufFile {
            bytes,
            version: parsed.version,
            alignment: parsed.alignment,
            data_offset: parsed.data_offset,
            kv: parsed.kv,
            kv_index: parsed.kv_index,
            tensors: parsed.tensors,
            tensor_index: parsed.tensor_index,
        })
    }

    // ---- header ----

    /// Format version, 2 or 3 (`gguf_get_version`).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Alignment of the data section and of every tensor (`gguf_get_alignment`): the
    /// `general.alignment` value, or [`DEFAULT_ALIGNMENT`].
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Offset of the data section from the start of the file (`gguf_get_data_offset`).
    pub fn data_offset(&self) -> usize {
        self.data_offset
    }

    /// The whole file's bytes, shared: clone the `Arc` to keep the mapping alive.
    pub fn file_bytes(&self) -> &Arc<FileBytes> {
        &self.bytes
    }

    /// The whole file as a slice.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// The data section, from [`GgufFile::data_offset`] to the end of the file.
    pub fn data(&self) -> &[u8] {
        &self.as_bytes()[self.data_offset..]
    }

    // ---- metadata ----

    /// Number of key/value pairs (`gguf_get_n_kv`).
    pub fn n_kv(&self) -> usize {
        self.kv.len()
    }

    /// Index of `key`, if present (`gguf_find_key`).
    pub fn find_key(&self, key: &str) -> Option<usize> {
        self.kv_index.get(key).copied()
    }

    /// Key number `i`, in file order (`gguf_get_key`).
    pub fn key(&self, i: usize) -> Option<&str> {
        self.kv.get(i).map(|(k, _)| k.as_str())
    }

    /// Value number `i`, in file order.
    pub fn value_at(&self, i: usize) -> Option<&Value> {
        self.kv.get(i).map(|(_, v)| v)
    }

    /// Every key/value pair in file order (ggmlR's `gguf_metadata`).
    pub fn metadata(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> + '_ {
        self.kv.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.find_key(key).map(|i| &self.kv[i].1)
    }

    /// The value of `key`, or an error naming the missing key.
    pub fn get_val(&self, key: &str) -> Result<&Value> {
        self.get(key)
            .ok_or_else(|| Error::invalid(format!("gguf key {key:?} is not in the file")))
    }

    /// The type of `key`'s value (`gguf_get_kv_type`).
    pub fn get_kv_type(&self, key: &str) -> Result<ValueType> {
        self.get_val(key).map(Value::value_type)
    }

    /// `key`'s value as a UTF-8 string (`gguf_get_val_str`); `Err` if missing, of another type or
    /// not UTF-8 (use [`GgufFile::get_val_string`] for the raw bytes).
    pub fn get_val_str(&self, key: &str) -> Result<&str> {
        self.get_val_string(key)?
            .as_str()
            .map_err(|e| annotate(e, key))
    }

    /// `key`'s value as a [`GgufString`] (raw bytes).
    pub fn get_val_string(&self, key: &str) -> Result<&GgufString> {
        let v = self.get_val(key)?;
        v.as_string()
            .ok_or_else(|| wrong_type(key, ValueType::String, v))
    }

    /// `key`'s value as an array (`gguf_get_arr_*`).
    pub fn get_arr(&self, key: &str) -> Result<&Array> {
        let v = self.get_val(key)?;
        v.as_array()
            .ok_or_else(|| wrong_type(key, ValueType::Array, v))
    }

    /// Element type of the array at `key` (`gguf_get_arr_type`).
    pub fn get_arr_type(&self, key: &str) -> Result<ValueType> {
        self.get_arr(key).map(Array::elem_type)
    }

    /// Length of the array at `key` (`gguf_get_arr_n`).
    pub fn get_arr_n(&self, key: &str) -> Result<usize> {
        self.get_arr(key).map(Array::len)
    }

    /// Element `i` of the string array at `key` as UTF-8 (`gguf_get_arr_str`).
    pub fn get_arr_str(&self, key: &str, i: usize) -> Result<&str> {
        let arr = self.get_arr(key)?;
        let strings = arr.as_string_slice().ok_or_else(|| {
            Error::invalid(format!(
                "gguf key {key:?} is an array of {}, not of str",
                arr.elem_type()
            ))
        })?;
        strings
            .get(i)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "index {i} is out of range for gguf key {key:?} ({} elements)",
                    strings.len()
                ))
            })?
            .as_str()
            .map_err(|e| annotate(e, key))
    }

    // ---- tensors ----

    /// Number of tensors (`gguf_get_n_tensors`).
    pub fn n_tensors(&self) -> usize {
        self.tensors.len()
    }

    /// All tensor infos, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// Tensor names in file order (ggmlR's `gguf_tensor_names`).
    pub fn tensor_names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.tensors.iter().map(TensorInfo::name)
    }

    /// Index of the tensor called `name` (`gguf_find_tensor`).
    pub fn find_tensor(&self, name: &str) -> Option<usize> {
        self.tensor_index.get(name).copied()
    }

    /// The info of the tensor called `name` (ggmlR's `gguf_tensor_info`).
    pub fn tensor_info(&self, name: &str) -> Result<&TensorInfo> {
        self.find_tensor(name)
            .map(|i| &self.tensors[i])
            .ok_or_else(|| Error::invalid(format!("tensor {name:?} is not in the gguf file")))
    }

    /// The bytes of the tensor called `name`, borrowed from the file (no copy).
    pub fn tensor_data(&self, name: &str) -> Result<&[u8]> {
        Ok(self.data_of(self.tensor_info(name)?))
    }

    /// The bytes of `info`'s tensor, borrowed from the file. `info` must come from this file
    /// (its range is then known to be in bounds); a foreign info gives an empty slice if its
    /// range does not fit.
    pub fn data_of(&self, info: &TensorInfo) -> &[u8] {
        self.as_bytes().get(info.file_range()).unwrap_or(&[])
    }

    /// The tensor called `name` converted to f32 (ggmlR's `gguf_tensor_data`): the float and
    /// integer types element by element, the quantized types dequantized as GGML's `to_float`
    /// does. A type without a dequantizer (Q8_1, see [`crate::quants::has_to_float`]) is
    /// `Err(Unsupported)`.
    pub fn tensor_data_f32(&self, name: &str) -> Result<Vec<f32>> {
        let info = self.tensor_info(name)?;
        super::convert::to_f32(info.ty(), self.data_of(info))
            .map_err(|e| annotate(e, &format!("tensor {name}")))
    }
}

fn prefix_path(e: Error, path: &Path) -> Error {
    match e {
        Error::Format(m) => Error::Format(format!("{}: {m}", path.display())),
        other => other,
    }
}

fn annotate(e: Error, what: &str) -> Error {
    match e {
        Error::Format(m) => Error::Format(format!("gguf key {what:?}: {m}")),
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{what}: {m}")),
        Error::Unsupported(m) => Error::Unsupported(format!("{what}: {m}")),
        other => other,
    }
}

fn wrong_type(key: &str, want: ValueType, got: &Value) -> Error {
    Error::invalid(format!(
        "gguf key {key:?} has type {}, not {want}",
        got.value_type()
    ))
}

/// Typed getters by key (`gguf_get_val_u8`, …): `Err` when the key is missing or of another type.
macro_rules! typed_getters {
    ($($name:ident, $t:ty, $as:ident, $vt:ident;)*) => {
        impl GgufFile {$(
            #[doc = concat!("`key`'s value as `", stringify!($t), "` (`gguf_", stringify!($name),
                "`); `Err` if missing or of another type.")]
            pub fn $name(&self, key: &str) -> Result<$t> {
                let v = self.get_val(key)?;
                v.$as().ok_or_else(|| wrong_type(key, ValueType::$vt, v))
            }
        )*}
    };
}

typed_getters! {
    get_val_u8, u8, as_u8, U8;
    get_val_i8, i8, as_i8, I8;
    get_val_u16, u16, as_u16, U16;
    get_val_i16, i16, as_i16, I16;
    get_val_u32, u32, as_u32, U32;
    get_val_i32, i32, as_i32, I32;
    get_val_f32, f32, as_f32, F32;
    get_val_bool, bool, as_bool, Bool;
    get_val_u64, u64, as_u64, U64;
    get_val_i64, i64, as_i64, I64;
    get_val_f64, f64, as_f64, F64;
}

/// Everything parsed from the bytes.
struct Parsed {
    version: u32,
    alignment: usize,
    data_offset: usize,
    kv: Vec<(String, Value)>,
    kv_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

struct Parser<'a> {
    c: Cursor<'a>,
    len: usize,
}

/// Where a tensor's `offset` field was, for errors found after all infos are read.
struct PendingTensor {
    info: TensorInfo,
    offset_field_at: usize,
}

impl<'a> Parser<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Parser {
            c: Cursor::new(buf),
            len: buf.len(),
        }
    }

    fn parse(mut self) -> Result<Parsed> {
        let version = self.header_version()?;
        let n_tensors = self.header_count("header: n_tensors", MIN_TENSOR_INFO_BYTES, 0)?;
        let n_kv = self.header_count(
            "header: n_kv",
            MIN_KV_BYTES,
            n_tensors * MIN_TENSOR_INFO_BYTES,
        )?;

        let mut kv = Vec::with_capacity(n_kv as usize);
        let mut kv_index = HashMap::with_capacity(n_kv as usize);
        let mut alignment_at = 0;
        for i in 0..n_kv as usize {
            let (key, value, value_at) = self.kv_pair(i, &kv_index)?;
            if key == KEY_GENERAL_ALIGNMENT {
                alignment_at = value_at;
            }
            kv_index.insert(key.clone(), i);
            kv.push((key, value));
        }
        let alignment = match kv_index.get(KEY_GENERAL_ALIGNMENT) {
            None => DEFAULT_ALIGNMENT,
            Some(&i) => check_alignment(&kv[i].1).map_err(|m| {
                format_err(
                    &format!("kv {i} ({KEY_GENERAL_ALIGNMENT})"),
                    m,
                    alignment_at,
                )
            })?,
        };

        let mut pending = Vec::with_capacity(n_tensors as usize);
        let mut tensor_index = HashMap::with_capacity(n_tensors as usize);
        for i in 0..n_tensors as usize {
            let t = self.tensor_info(i, &tensor_index)?;
            tensor_index.insert(t.info.name.clone(), i);
            pending.push(t);
        }

        let end_of_infos = self.c.pos();
        let data_offset = if n_tensors == 0 {
            end_of_infos
        } else {
            let padded = end_of_infos.div_ceil(alignment) * alignment;
            if padded > self.len {
                return Err(format_err(
                    "data section",
                    format_args!(
                        "start {padded} (tensor infos end at {end_of_infos}, aligned to \
                         {alignment}) is past the end of the {}-byte file",
                        self.len
                    ),
                    end_of_infos,
                ));
            }
            padded
        };
        let tensors = self.place_tensors(pending, data_offset, alignment)?;
        Ok(Parsed {
            version,
            alignment,
            data_offset,
            kv,
            kv_index,
            tensors,
            tensor_index,
        })
    }

    fn header_version(&mut self) -> Result<u32> {
        let magic = self.c.take(4, &|| "header: magic".into())?;
        if magic != MAGIC {
            return Err(format_err(
                "header: magic",
                format_args!("{:?} is not \"GGUF\"", String::from_utf8_lossy(magic)),
                0,
            ));
        }
        let version = self.c.u32(&|| "header: version".into())?;
        let problem = match version {
            2 | 3 => return Ok(version),
            0 => "0 is not a GGUF version".to_string(),
            1 => "1: GGUF v1 is no longer supported (convert the file to v3)".to_string(),
            v if v & 0xffff == 0 => {
                format!("{v:#x} looks byte-swapped: big-endian GGUF files are not supported")
            }
            v => format!("{v} is newer than the supported versions (2 and {VERSION})"),
        };
        Err(format_err("header: version", problem, 4))
    }

    /// Reads an i64 count and checks it can fit in the file, `reserved` bytes being spoken for
    /// by other counts.
    fn header_count(&mut self, field: &'static str, min_size: u64, reserved: u64) -> Result<u64> {
        let at = self.c.pos();
        let n = self.c.i64(&|| field.into())?;
        if n < 0 {
            return Err(format_err(field, format_args!("{n} is negative"), at));
        }
        let avail = (self.c.remaining() as u64).saturating_sub(reserved);
        if (n as u64)
            .checked_mul(min_size)
            .is_none_or(|need| need > avail)
        {
            return Err(format_err(
                field,
                format_args!(
                    "{n} entries of at least {min_size} bytes cannot fit in the {avail} bytes left"
                ),
                at,
            ));
        }
        Ok(n as u64)
    }

    /// A string that must be UTF-8 (keys and tensor names); `what` labels errors.
    fn utf8_string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let at = self.c.pos();
        let bytes = self.c.string_bytes(MAX_STRING_LEN, what)?;
        std::str::from_utf8(bytes).map(str::to_string).map_err(|e| {
            format_err(
                &what(),
                format_args!("is not UTF-8 (bad byte at index {})", e.valid_up_to()),
                at,
            )
        })
    }

    fn kv_pair(
        &mut self,
        i: usize,
        seen: &HashMap<String, usize>,
    ) -> Result<(String, Value, usize)> {
        let key_at = self.c.pos();
        let key = self.utf8_string(&|| format!("kv {i}: key"))?;
        let label = || format!("kv {i} ({key})");
        if key.is_empty() {
            return Err(format_err(&label(), "key is empty", key_at));
        }
        if let Some(j) = seen.get(&key) {
            return Err(format_err(
                &label(),
                format_args!("duplicate key (also kv {j})"),
                key_at,
            ));
        }
        let type_at = self.c.pos();
        let ty = self.value_type(&label)?;
        let value = self.value(ty, 0, &label)?;
        Ok((key, value, type_at))
    }

    fn value_type(&mut self, label: Label) -> Result<ValueType> {
        let at = self.c.pos();
        let raw = self.c.u32(label)?;
        ValueType::from_u32(raw).map_err(|_| {
            format_err(
                &label(),
                format_args!("value type {} is not a gguf_type (0..13)", raw as i32),
                at,
            )
        })
    }

    /// A value of type `ty`; `depth` arrays enclose it.
    fn value(&mut self, ty: ValueType, depth: usize, label: Label) -> Result<Value> {
        let c = &mut self.c;
        Ok(match ty {
            ValueType::U8 => Value::U8(c.u8(label)?),
            ValueType::I8 => Value::I8(c.u8(label)? as i8),
            ValueType::U16 => Value::U16(c.u16(label)?),
            ValueType::I16 => Value::I16(c.u16(label)? as i16),
            ValueType::U32 => Value::U32(c.u32(label)?),
            ValueType::I32 => Value::I32(c.u32(label)? as i32),
            ValueType::F32 => Value::F32(f32::from_bits(c.u32(label)?)),
            ValueType::Bool => Value::Bool(c.u8(label)? != 0),
            ValueType::U64 => Value::U64(c.u64(label)?),
            ValueType::I64 => Value::I64(c.i64(label)?),
            ValueType::F64 => Value::F64(f64::from_bits(c.u64(label)?)),
            ValueType::String => Value::String(self.string(label)?),
            ValueType::Array => Value::Array(self.array(depth + 1, label)?),
        })
    }

    fn string(&mut self, label: Label) -> Result<GgufString> {
        Ok(self.c.string_bytes(MAX_STRING_LEN, label)?.into())
    }

    /// An array (element type, count, elements) at nesting `depth` (1 for a top-level array).
    fn array(&mut self, depth: usize, label: Label) -> Result<Array> {
        let start = self.c.pos();
        if depth > MAX_ARRAY_DEPTH {
            return Err(format_err(
                &label(),
                format_args!("arrays nested deeper than {MAX_ARRAY_DEPTH}"),
                start,
            ));
        }
        let et = self.value_type(label)?;
        let count_at = self.c.pos();
        let n = self.c.u64(label)?;
        if n > MAX_ARRAY_LEN {
            return Err(format_err(
                &label(),
                format_args!("array of {n} elements exceeds the limit of {MAX_ARRAY_LEN}"),
                count_at,
            ));
        }
        let min = et.min_encoded_size() as u64;
        self.c.check_fits(n, min, count_at, label, "array count")?;
        let n = n as usize;
        // Fixed-size elements: the whole run is in bounds, decode it in one pass.
        if let Some(size) = et.fixed_size() {
            let raw = self.c.take(n * size, label)?;
            return Ok(decode_fixed(et, raw));
        }
        // Strings and arrays: grow as elements actually decode.
        let cap = n.min(4096);
        Ok(if et == ValueType::String {
            let mut v = Vec::with_capacity(cap);
            for _ in 0..n {
                v.push(self.string(label)?);
            }
            Array::String(v)
        } else {
            let mut v = Vec::with_capacity(cap);
            for _ in 0..n {
                v.push(self.array(depth + 1, label)?);
            }
            Array::Array(v)
        })
    }

    fn tensor_info(&mut self, i: usize, seen: &HashMap<String, usize>) -> Result<PendingTensor> {
        let name_at = self.c.pos();
        let name = self.utf8_string(&|| format!("tensor {i}: name"))?;
        let label = || format!("tensor {i} ({name})");
        if name.len() > MAX_TENSOR_NAME_LEN {
            return Err(format_err(
                &label(),
                format_args!(
                    "name of {} bytes is longer than GGML's limit of {MAX_TENSOR_NAME_LEN}",
                    name.len()
                ),
                name_at,
            ));
        }
        if let Some(j) = seen.get(&name) {
            return Err(format_err(
                &label(),
                format_args!("duplicate tensor name (also tensor {j})"),
                name_at,
            ));
        }

        let dims_at = self.c.pos();
        let n_dims = self.c.u32(&label)?;
        if n_dims as usize > MAX_FILE_DIMS {
            return Err(format_err(
                &label(),
                format_args!("n_dims = {n_dims} is more than {MAX_FILE_DIMS}"),
                dims_at,
            ));
        }
        let mut ne = [1i64; MAX_DIMS];
        for (j, slot) in ne.iter_mut().enumerate().take(n_dims as usize) {
            let at = self.c.pos();
            *slot = self.c.i64(&label)?;
            if *slot < 0 {
                return Err(format_err(
                    &label(),
                    format_args!("ne[{j}] = {}", *slot),
                    at,
                ));
            }
        }
        let type_at = self.c.pos();
        let raw_type = self.c.u32(&label)?;
        let ty = Type::from_u32(raw_type).map_err(|_| {
            format_err(
                &label(),
                format_args!("type {} is not a GGML type", raw_type as i32),
                type_at,
            )
        })?;
        let size = checked_nbytes(ty, &ne).map_err(|m| format_err(&label(), m, dims_at))?;
        let offset_field_at = self.c.pos();
        let offset = self.c.u64(&label)?;
        Ok(PendingTensor {
            info: TensorInfo {
                name,
                n_dims,
                ne,
                ty,
                offset,
                size,
                file_range: 0..0,
            },
            offset_field_at,
        })
    }

    /// Checks alignment, bounds and overlap, and fills in each tensor's file range.
    fn place_tensors(
        &self,
        pending: Vec<PendingTensor>,
        data_offset: usize,
        alignment: usize,
    ) -> Result<Vec<TensorInfo>> {
        let data_len = (self.len - data_offset) as u64;
        let mut tensors = Vec::with_capacity(pending.len());
        let mut fields = Vec::with_capacity(pending.len());
        for (i, p) in pending.into_iter().enumerate() {
            let mut t = p.info;
            let label = || format!("tensor {i} ({})", t.name);
            if t.offset % alignment as u64 != 0 {
                return Err(format_err(
                    &label(),
                    format_args!(
                        "data offset {} is not a multiple of the alignment {alignment}",
                        t.offset
                    ),
                    p.offset_field_at,
                ));
            }
            let end = t.offset.checked_add(t.size as u64);
            if end.is_none_or(|end| end > data_len) {
                return Err(format_err(
                    &label(),
                    format_args!(
                        "data [{}, +{}) runs past the end of the {data_len}-byte data section",
                        t.offset, t.size
                    ),
                    p.offset_field_at,
                ));
            }
            let start = data_offset + t.offset as usize;
            t.file_range = start..start + t.size;
            tensors.push(t);
            fields.push(p.offset_field_at);
        }
        let mut order: Vec<usize> = (0..tensors.len())
            .filter(|&i| tensors[i].size > 0)
            .collect();
        order.sort_by_key(|&i| tensors[i].file_range.start);
        for w in order.windows(2) {
            let (a, b) = (&tensors[w[0]], &tensors[w[1]]);
            if b.file_range.start < a.file_range.end {
                return Err(format_err(
                    &format!("tensor {} ({})", w[1], b.name),
                    format_args!(
                        "data [{}, +{}) overlaps tensor {} ({}) at [{}, +{})",
                        b.offset, b.size, w[0], a.name, a.offset, a.size
                    ),
                    fields[w[1]],
                ));
            }
        }
        Ok(tensors)
    }
}

/// Decodes a run of little-endian fixed-size elements (`raw.len()` is a multiple of the size).
fn decode_fixed(et: ValueType, raw: &[u8]) -> Array {
    fn le<T, const N: usize>(raw: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
        raw.chunks_exact(N)
            .map(|c| {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                f(a)
            })
            .collect()
    }
    match et {
        ValueType::U8 => Array::U8(raw.to_vec()),
        ValueType::I8 => Array::I8(raw.iter().map(|&b| b as i8).collect()),
        ValueType::Bool => Array::Bool(raw.iter().map(|&b| b != 0).collect()),
        ValueType::U16 => Array::U16(le(raw, u16::from_le_bytes)),
        ValueType::I16 => Array::I16(le(raw, i16::from_le_bytes)),
        ValueType::U32 => Array::U32(le(raw, u32::from_le_bytes)),
        ValueType::I32 => Array::I32(le(raw, i32::from_le_bytes)),
        ValueType::F32 => Array::F32(le(raw, f32::from_le_bytes)),
        ValueType::U64 => Array::U64(le(raw, u64::from_le_bytes)),
        ValueType::I64 => Array::I64(le(raw, i64::from_le_bytes)),
        ValueType::F64 => Array::F64(le(raw, f64::from_le_bytes)),
        // Not fixed-size; the caller never passes these.
        ValueType::String => Array::String(Vec::new()),
        ValueType::Array => Array::Array(Vec::new()),
    }
}

/// `general.alignment` must be a u32, a non-zero power of two, at most [`MAX_ALIGNMENT`].
pub(crate) fn check_alignment(v: &Value) -> std::result::Result<usize, String> {
    let Some(a) = v.as_u32() else {
        return Err(format!(
            "{KEY_GENERAL_ALIGNMENT} has type {}, must be u32",
            v.value_type()
        ));
    };
    if a == 0 || !a.is_power_of_two() {
        return Err(format!(
            "{KEY_GENERAL_ALIGNMENT} = {a} is not a power of two"
        ));
    }
    if a as u64 > MAX_ALIGNMENT {
        return Err(format!(
            "{KEY_GENERAL_ALIGNMENT} = {a} exceeds the limit of {MAX_ALIGNMENT}"
        ));
    }
    Ok(a as usize)
}
