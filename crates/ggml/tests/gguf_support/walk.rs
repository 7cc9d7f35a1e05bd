//! Touches everything a parsed file exposes (shared by the tests and the fuzz target).

use ggml::gguf::{Array, GgufFile, Value};

/// Walks every key, value, array element and tensor byte of `f`; returns a checksum so the work
/// cannot be optimised away.
pub fn walk(f: &GgufFile) -> u64 {
    let mut sum = f.version() as u64 ^ f.alignment() as u64 ^ f.data_offset() as u64;
    for (i, (k, v)) in f.metadata().enumerate() {
        assert_eq!(f.find_key(k), Some(i));
        assert!(f.get(k).is_some());
        sum = sum.wrapping_add(walk_value(v));
    }
    for (i, t) in f.tensors().iter().enumerate() {
        assert_eq!(f.find_tensor(t.name()), Some(i));
        let data = f.data_of(t);
        assert_eq!(data.len(), t.size());
        assert!(t.file_range().end <= f.as_bytes().len());
        sum = data
            .iter()
            .fold(sum, |s, &b| s.wrapping_mul(31).wrapping_add(b as u64));
        sum = sum.wrapping_add(t.n_elements() as u64 + t.shape().len() as u64);
        if t.size() <= 4096 {
            if let Ok(v) = f.tensor_data_f32(t.name()) {
                sum = sum.wrapping_add(v.len() as u64);
            }
        }
    }
    sum
}

fn walk_value(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.len() as u64 + s.as_str().is_ok() as u64,
        Value::Array(a) => walk_array(a),
        other => other.as_integer().map_or(1, |x| x as u64),
    }
}

fn walk_array(a: &Array) -> u64 {
    let mut sum = a.len() as u64 + a.depth() as u64;
    match a {
        Array::Array(inner) => inner
            .iter()
            .for_each(|x| sum = sum.wrapping_add(walk_array(x))),
        Array::String(s) => s
            .iter()
            .for_each(|x| sum = sum.wrapping_add(x.to_string_lossy().len() as u64)),
        _ => {
            if let Some(v) = a.get(a.len().saturating_sub(1)) {
                sum = sum.wrapping_add(walk_value(&v));
            }
        }
    }
    sum
}
