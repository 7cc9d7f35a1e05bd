//! Helpers shared by the gguf integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

mod walk;
#[allow(unused_imports)]
pub use walk::walk;

use ggml::gguf::{Array, GgufString, GgufWriter};
use ggml::Type;

/// A fresh, empty directory under the system temp dir, unique to this process and `name`.
pub fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ggml-gguf-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// SplitMix64: a small deterministic PRNG.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// A finite f32 (NaN compares unequal, so round-trip checks avoid it).
    pub fn f32(&mut self) -> f32 {
        let x = f32::from_bits(self.next() as u32);
        if x.is_finite() {
            x
        } else {
            1.5
        }
    }

    pub fn f64(&mut self) -> f64 {
        let x = f64::from_bits(self.next());
        if x.is_finite() {
            x
        } else {
            -2.25
        }
    }
}

/// Shape with `ne[0]` one or two blocks of `ty`, and a few rows.
pub fn small_shape(ty: Type, rng: &mut Rng) -> Vec<i64> {
    let ne0 = ty.blck_size() as i64 * (1 + rng.below(2) as i64);
    match rng.below(3) {
        0 => vec![ne0],
        1 => vec![ne0, 1 + rng.below(3) as i64],
        _ => vec![ne0, 2, 1 + rng.below(2) as i64, 2],
    }
}

/// Bytes for a tensor of `ty` and `shape`.
pub fn tensor_bytes(ty: Type, shape: &[i64], rng: &mut Rng) -> Vec<u8> {
    let n: i64 = shape.iter().product();
    let rows = n / shape[0];
    rng.bytes(ty.row_size(shape[0]).unwrap() * rows as usize)
}

/// A writer holding one key of every value type (nested arrays and a non-UTF-8 string
/// included) and one tensor of every `Type`.
pub fn every_type_writer(rng: &mut Rng) -> GgufWriter<'static> {
    let mut w = GgufWriter::new();
    add_every_value_type(&mut w, rng);
    for (i, ty) in Type::ALL.iter().enumerate() {
        let shape = small_shape(*ty, rng);
        let data = tensor_bytes(*ty, &shape, rng);
        w.add_tensor(&format!("blk.{i}.{}", ty.name()), *ty, &shape, data)
            .unwrap();
    }
    w
}

/// Sets one key of every value type (nested arrays, an empty array and a non-UTF-8 string
/// included).
pub fn add_every_value_type(w: &mut GgufWriter, rng: &mut Rng) {
    w.set("general.architecture", "test").unwrap();
    w.set_val_u8("t.u8", 200).unwrap();
    w.set_val_i8("t.i8", -100).unwrap();
    w.set_val_u16("t.u16", 60000).unwrap();
    w.set_val_i16("t.i16", -30000).unwrap();
    w.set_val_u32("t.u32", 4_000_000_000).unwrap();
    w.set_val_i32("t.i32", -2_000_000_000).unwrap();
    w.set_val_f32("t.f32", 0.15625).unwrap();
    w.set_val_bool("t.bool", true).unwrap();
    w.set_val_str("t.str", "héllo wörld").unwrap();
    w.set("t.str_bytes", GgufString::from(vec![0xffu8, 0xfe, b'x']))
        .unwrap();
    w.set_val_u64("t.u64", u64::MAX - 5).unwrap();
    w.set_val_i64("t.i64", i64::MIN + 7).unwrap();
    w.set_val_f64("t.f64", -1.0e300).unwrap();
    w.set("a.u8", vec![1u8, 2, 255]).unwrap();
    w.set("a.i8", vec![-1i8, 0, 127]).unwrap();
    w.set("a.u16", vec![0u16, 65535]).unwrap();
    w.set("a.i16", vec![-32768i16, 5]).unwrap();
    w.set("a.u32", (0..50u32).collect::<Vec<_>>()).unwrap();
    w.set("a.i32", vec![i32::MIN, -1, i32::MAX]).unwrap();
    w.set("a.f32", (0..20).map(|_| rng.f32()).collect::<Vec<_>>())
        .unwrap();
    w.set("a.bool", vec![true, false, true]).unwrap();
    w.set_arr("a.str", Array::from(vec!["a", "", "ünï"]))
        .unwrap();
    w.set("a.u64", vec![u64::MAX, 0]).unwrap();
    w.set("a.i64", vec![i64::MIN, 3]).unwrap();
    w.set("a.f64", (0..5).map(|_| rng.f64()).collect::<Vec<_>>())
        .unwrap();
    w.set("a.empty_u32", Vec::<u32>::new()).unwrap();
    w.set(
        "a.nested",
        Array::Array(vec![
            Array::from(vec![1i32, 2]),
            Array::from(vec!["x", "y"]),
            Array::Array(vec![Array::F64(vec![0.5]), Array::U8(vec![])]),
        ]),
    )
    .unwrap();
}

/// Little-endian byte assembly, for files written out by hand from the format description.
#[derive(Default)]
pub struct Bytes(pub Vec<u8>);

impl Bytes {
    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64).raw(s.as_bytes())
    }
    pub fn pad(&mut self, a: usize) -> &mut Self {
        while self.0.len() % a != 0 {
            self.0.push(0);
        }
        self
    }
    pub fn pos(&self) -> usize {
        self.0.len()
    }
}
