//! Metadata values: the 13 `gguf_type`s, strings that keep their bytes, and (nested) arrays.

use crate::error::{Error, Result};

/// A metadata value type, with GGUF's numeric id (`enum gguf_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    /// `GGUF_TYPE_UINT8`.
    U8 = 0,
    /// `GGUF_TYPE_INT8`.
    I8 = 1,
    /// `GGUF_TYPE_UINT16`.
    U16 = 2,
    /// `GGUF_TYPE_INT16`.
    I16 = 3,
    /// `GGUF_TYPE_UINT32`.
    U32 = 4,
    /// `GGUF_TYPE_INT32`.
    I32 = 5,
    /// `GGUF_TYPE_FLOAT32`.
    F32 = 6,
    /// `GGUF_TYPE_BOOL` (one byte on disk).
    Bool = 7,
    /// `GGUF_TYPE_STRING` (u64 length, then bytes; no terminator).
    String = 8,
    /// `GGUF_TYPE_ARRAY` (element type, u64 count, elements).
    Array = 9,
    /// `GGUF_TYPE_UINT64`.
    U64 = 10,
    /// `GGUF_TYPE_INT64`.
    I64 = 11,
    /// `GGUF_TYPE_FLOAT64`.
    F64 = 12,
}

impl ValueType {
    /// All 13 value types in id order.
    pub const ALL: [ValueType; 13] = [
        ValueType::U8,
        ValueType::I8,
        ValueType::U16,
        ValueType::I16,
        ValueType::U32,
        ValueType::I32,
        ValueType::F32,
        ValueType::Bool,
        ValueType::String,
        ValueType::Array,
        ValueType::U64,
        ValueType::I64,
        ValueType::F64,
    ];

    /// The value type with GGUF id `id`; `Err` for ids outside `0..13`.
    pub fn from_u32(id: u32) -> Result<ValueType> {
        ValueType::ALL
            .get(id as usize)
            .copied()
            .ok_or_else(|| Error::invalid(format!("gguf value type id {id} is not in 0..13")))
    }

    /// GGML's short name (`gguf_type_name`): `"u8"`, `"str"`, `"arr"`, …
    pub fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::String => "str",
            ValueType::Array => "arr",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }

    /// Bytes one value takes on disk, for the fixed-size types (`gguf_type_size`); `None` for
    /// strings and arrays.
    pub fn fixed_size(self) -> Option<usize> {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => Some(1),
            ValueType::U16 | ValueType::I16 => Some(2),
            ValueType::U32 | ValueType::I32 | ValueType::F32 => Some(4),
            ValueType::U64 | ValueType::I64 | ValueType::F64 => Some(8),
            ValueType::String | ValueType::Array => None,
        }
    }

    /// The fewest bytes one value of this type can take on disk (a string: its length field; an
    /// array: its element type and count). Used to refuse counts a file cannot hold.
    pub fn min_encoded_size(self) -> usize {
        match self {
            ValueType::String => 8,
            ValueType::Array => 12,
            fixed => fixed.fixed_size().unwrap_or(1),
        }
    }
}

impl std::fmt::Display for ValueType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A GGUF string: the exact bytes of the file.
///
/// GGUF says strings are UTF-8, but GGML keeps whatever bytes a file holds, and so does this
/// type: nothing is lost on read or write. [`GgufString::as_str`] checks the encoding and answers
/// `Err` for bytes that are not UTF-8; [`GgufString::to_string_lossy`] replaces them. (Keys and
/// tensor names, in contrast, must be UTF-8: the reader refuses a file whose key is not.)
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GgufString(Vec<u8>);

impl GgufString {
    /// The string's bytes, as stored in the file.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The string as UTF-8; `Err` naming the first bad byte when it is not.
    pub fn as_str(&self) -> Result<&str> {
        std::str::from_utf8(&self.0).map_err(|e| {
            Error::Format(format!(
                "string of {} bytes is not UTF-8 (bad byte at index {})",
                self.0.len(),
                e.valid_up_to()
            ))
        })
    }

    /// The string with any invalid UTF-8 replaced by U+FFFD.
    pub fn to_string_lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }

    /// The owned bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the string has no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for GgufString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.as_str() {
            Ok(s) => write!(f, "{s:?}"),
            Err(_) => write!(f, "GgufString(bytes {:?})", self.0),
        }
    }
}

impl From<&str> for GgufString {
    fn from(s: &str) -> Self {
        GgufString(s.as_bytes().to_vec())
    }
}

impl From<String> for GgufString {
    fn from(s: String) -> Self {
        GgufString(s.into_bytes())
    }
}

impl From<Vec<u8>> for GgufString {
    fn from(b: Vec<u8>) -> Self {
        GgufString(b)
    }
}

impl From<&[u8]> for GgufString {
    fn from(b: &[u8]) -> Self {
        GgufString(b.to_vec())
    }
}

/// A metadata array: its element type is the variant, so an empty array keeps its type.
///
/// Arrays of arrays are allowed by the format (each inner array carries its own element type);
/// GGML's own reader refuses them, the `gguf` Python package reads them. This crate reads and
/// writes them, up to [`crate::gguf::limits::MAX_ARRAY_DEPTH`] levels deep.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    /// Array of `u8`.
    U8(Vec<u8>),
    /// Array of `i8`.
    I8(Vec<i8>),
    /// Array of `u16`.
    U16(Vec<u16>),
    /// Array of `i16`.
    I16(Vec<i16>),
    /// Array of `u32`.
    U32(Vec<u32>),
    /// Array of `i32`.
    I32(Vec<i32>),
    /// Array of `f32`.
    F32(Vec<f32>),
    /// Array of `bool`.
    Bool(Vec<bool>),
    /// Array of strings.
    String(Vec<GgufString>),
    /// Array of arrays (each with its own element type).
    Array(Vec<Array>),
    /// Array of `u64`.
    U64(Vec<u64>),
    /// Array of `i64`.
    I64(Vec<i64>),
    /// Array of `f64`.
    F64(Vec<f64>),
}

/// Applies `$body` to the vector inside any [`Array`] variant, bound as `$v`.
macro_rules! with_array {
    ($arr:expr, $v:ident => $body:expr) => {
        match $arr {
            Array::U8($v) => $body,
            Array::I8($v) => $body,
            Array::U16($v) => $body,
            Array::I16($v) => $body,
            Array::U32($v) => $body,
            Array::I32($v) => $body,
            Array::F32($v) => $body,
            Array::Bool($v) => $body,
            Array::String($v) => $body,
            Array::Array($v) => $body,
            Array::U64($v) => $body,
            Array::I64($v) => $body,
            Array::F64($v) => $body,
        }
    };
}

impl Array {
    /// The element type (`gguf_get_arr_type`).
    pub fn elem_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::F32(_) => ValueType::F32,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::Array(_) => ValueType::Array,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F64(_) => ValueType::F64,
        }
    }

    /// Number of elements (`gguf_get_arr_n`).
    pub fn len(&self) -> usize {
        with_array!(self, v => v.len())
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as a [`Value`] (a copy; `None` past the end).
    pub fn get(&self, i: usize) -> Option<Value> {
        Some(match self {
            Array::U8(v) => Value::U8(*v.get(i)?),
            Array::I8(v) => Value::I8(*v.get(i)?),
            Array::U16(v) => Value::U16(*v.get(i)?),
            Array::I16(v) => Value::I16(*v.get(i)?),
            Array::U32(v) => Value::U32(*v.get(i)?),
            Array::I32(v) => Value::I32(*v.get(i)?),
            Array::F32(v) => Value::F32(*v.get(i)?),
            Array::Bool(v) => Value::Bool(*v.get(i)?),
            Array::String(v) => Value::String(v.get(i)?.clone()),
            Array::Array(v) => Value::Array(v.get(i)?.clone()),
            Array::U64(v) => Value::U64(*v.get(i)?),
            Array::I64(v) => Value::I64(*v.get(i)?),
            Array::F64(v) => Value::F64(*v.get(i)?),
        })
    }

    /// Deepest nesting: 1 for an array of scalars or strings, 2 for an array of such arrays, …
    pub fn depth(&self) -> usize {
        match self {
            Array::Array(v) => 1 + v.iter().map(Array::depth).max().unwrap_or(0),
            _ => 1,
        }
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `f32`.
    F32(f32),
    /// `bool` (on read, any non-zero byte is `true`, as in GGML).
    Bool(bool),
    /// A string (bytes kept exactly; see [`GgufString`]).
    String(GgufString),
    /// An array.
    Array(Array),
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f64`.
    F64(f64),
}

impl Value {
    /// The value's type (`gguf_get_kv_type`: [`ValueType::Array`] for arrays).
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// The array inside, if this is an array.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The string inside, if this is a string.
    pub fn as_string(&self) -> Option<&GgufString> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an `i128` when it is an integer type (any width or sign), for callers that
    /// accept any integer (`general.file_type` is u32 in some files, i32 in others).
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(x) => x.into(),
            Value::I8(x) => x.into(),
            Value::U16(x) => x.into(),
            Value::I16(x) => x.into(),
            Value::U32(x) => x.into(),
            Value::I32(x) => x.into(),
            Value::U64(x) => x.into(),
            Value::I64(x) => x.into(),
            _ => return None,
        })
    }
}

/// `From` conversions into [`Value`] and [`Array`] for the scalar types and their vectors.
macro_rules! value_from {
    ($($t:ty => $var:ident),* $(,)?) => {$(
        impl From<$t> for Value {
            fn from(x: $t) -> Value {
                Value::$var(x)
            }
        }
        impl From<Vec<$t>> for Array {
            fn from(v: Vec<$t>) -> Array {
                Array::$var(v)
            }
        }
        impl From<Vec<$t>> for Value {
            fn from(v: Vec<$t>) -> Value {
                Value::Array(Array::$var(v))
            }
        }
    )*};
}

value_from!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, GgufString => String, Array => Array, u64 => U64, i64 => I64, f64 => F64,
);

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.into())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s.into())
    }
}

impl From<Vec<&str>> for Array {
    fn from(v: Vec<&str>) -> Array {
        Array::String(v.into_iter().map(GgufString::from).collect())
    }
}

impl From<Vec<String>> for Array {
    fn from(v: Vec<String>) -> Array {
        Array::String(v.into_iter().map(GgufString::from).collect())
    }
}

/// Typed accessors on [`Value`] (`as_u32`, …) and typed slice accessors on [`Array`]
/// (`as_u32_slice`, …), each `None` for another type.
macro_rules! typed_access {
    ($($t:ty, $var:ident, $as_val:ident, $as_slice:ident;)*) => {
        impl Value {$(
            #[doc = concat!("The `", stringify!($t), "` inside, if the value has exactly that type.")]
            pub fn $as_val(&self) -> Option<$t> {
                match self {
                    Value::$var(x) => Some(*x),
                    _ => None,
                }
            }
        )*}
        impl Array {$(
            #[doc = concat!("The elements, if this is an array of `", stringify!($t), "`.")]
            pub fn $as_slice(&self) -> Option<&[$t]> {
                match self {
                    Array::$var(v) => Some(v),
                    _ => None,
                }
            }
        )*}
    };
}

typed_access! {
    u8, U8, as_u8, as_u8_slice;
    i8, I8, as_i8, as_i8_slice;
    u16, U16, as_u16, as_u16_slice;
    i16, I16, as_i16, as_i16_slice;
    u32, U32, as_u32, as_u32_slice;
    i32, I32, as_i32, as_i32_slice;
    f32, F32, as_f32, as_f32_slice;
    bool, Bool, as_bool, as_bool_slice;
    u64, U64, as_u64, as_u64_slice;
    i64, I64, as_i64, as_i64_slice;
    f64, F64, as_f64, as_f64_slice;
}

impl Array {
    /// The elements, if this is an array of strings.
    pub fn as_string_slice(&self) -> Option<&[GgufString]> {
        match self {
            Array::String(v) => Some(v),
            _ => None,
        }
    }

    /// The elements, if this is an array of arrays.
    pub fn as_array_slice(&self) -> Option<&[Array]> {
        match self {
            Array::Array(v) => Some(v),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_ids_and_names_match_gguf_h() {
        for (i, t) in ValueType::ALL.iter().enumerate() {
            assert_eq!(*t as u32, i as u32);
            assert_eq!(ValueType::from_u32(i as u32).unwrap(), *t);
        }
        assert_eq!(ValueType::Bool as u32, 7);
        assert_eq!(ValueType::U64 as u32, 10);
        assert_eq!(ValueType::String.name(), "str");
        let e = ValueType::from_u32(13).unwrap_err().to_string();
        assert!(e.contains("13"), "{e}");
    }

    #[test]
    fn strings_keep_bytes() {
        let s = GgufString::from(vec![b'a', 0xff, b'b']);
        assert_eq!(s.as_bytes(), &[b'a', 0xff, b'b']);
        assert!(s.as_str().unwrap_err().to_string().contains("index 1"));
        assert_eq!(s.to_string_lossy(), "a\u{fffd}b");
        assert_eq!(GgufString::from("héllo").as_str().unwrap(), "héllo");
    }

    #[test]
    fn arrays_know_type_len_depth() {
        let a = Array::from(vec![1u32, 2, 3]);
        assert_eq!(a.elem_type(), ValueType::U32);
        assert_eq!(a.len(), 3);
        assert_eq!(a.get(1), Some(Value::U32(2)));
        assert_eq!(a.get(3), None);
        let nested = Array::Array(vec![a.clone(), Array::Array(vec![Array::F32(vec![])])]);
        assert_eq!(nested.depth(), 3);
        assert_eq!(Array::Bool(vec![]).elem_type(), ValueType::Bool);
        assert_eq!(
            Value::from(Array::from(vec!["x", "y"])).value_type(),
            ValueType::Array
        );
        assert_eq!(Value::I16(-3).as_integer(), Some(-3));
        assert_eq!(Value::F32(1.0).as_integer(), None);
    }
}
