//! Property test with a deterministic PRNG: random valid files read back equal to what was
//! written; mutated files (bit flips, truncations, overwritten length/count fields, random
//! overwrites) give `Ok` or a format error, never a panic.

mod gguf_support;

use ggml::gguf::{Array, GgufFile, GgufString, GgufWriter, Value, ValueType};
use ggml::Type;
use gguf_support::{walk, Rng};

fn random_array(rng: &mut Rng, depth: usize) -> Array {
    let n = rng.below(6) as usize;
    let pick = if depth >= 3 {
        rng.below(12)
    } else {
        rng.below(13)
    };
    match pick {
        0 => Array::U8(rng.bytes(n)),
        1 => Array::I8((0..n).map(|_| rng.next() as i8).collect()),
        2 => Array::U16((0..n).map(|_| rng.next() as u16).collect()),
        3 => Array::I16((0..n).map(|_| rng.next() as i16).collect()),
        4 => Array::U32((0..n).map(|_| rng.next() as u32).collect()),
        5 => Array::I32((0..n).map(|_| rng.next() as i32).collect()),
        6 => Array::F32((0..n).map(|_| rng.f32()).collect()),
        7 => Array::Bool((0..n).map(|_| rng.next() & 1 == 1).collect()),
        8 => Array::U64((0..n).map(|_| rng.next()).collect()),
        9 => Array::I64((0..n).map(|_| rng.next() as i64).collect()),
        10 => Array::F64((0..n).map(|_| rng.f64()).collect()),
        11 => Array::String((0..n).map(|_| random_string(rng)).collect()),
        _ => Array::Array((0..n).map(|_| random_array(rng, depth + 1)).collect()),
    }
}

fn random_string(rng: &mut Rng) -> GgufString {
    let n = rng.below(12) as usize;
    if rng.below(8) == 0 {
        GgufString::from(rng.bytes(n)) // possibly not UTF-8
    } else {
        GgufString::from(
            (0..n)
                .map(|_| (b'a' + rng.below(26) as u8) as char)
                .collect::<String>(),
        )
    }
}

fn random_value(rng: &mut Rng) -> Value {
    match ValueType::ALL[rng.below(13) as usize] {
        ValueType::U8 => Value::U8(rng.next() as u8),
        ValueType::I8 => Value::I8(rng.next() as i8),
        ValueType::U16 => Value::U16(rng.next() as u16),
        ValueType::I16 => Value::I16(rng.next() as i16),
        ValueType::U32 => Value::U32(rng.next() as u32),
        ValueType::I32 => Value::I32(rng.next() as i32),
        ValueType::F32 => Value::F32(rng.f32()),
        ValueType::Bool => Value::Bool(rng.next() & 1 == 1),
        ValueType::String => Value::String(random_string(rng)),
        ValueType::Array => Value::Array(random_array(rng, 1)),
        ValueType::U64 => Value::U64(rng.next()),
        ValueType::I64 => Value::I64(rng.next() as i64),
        ValueType::F64 => Value::F64(rng.f64()),
    }
}

struct Built {
    bytes: Vec<u8>,
    kv: Vec<(String, Value)>,
    tensors: Vec<(String, Type, Vec<i64>, Vec<u8>)>,
}

fn random_file(rng: &mut Rng) -> Built {
    let mut w = GgufWriter::new();
    let mut kv = Vec::new();
    if rng.below(4) == 0 {
        let a = 1u32 << (rng.below(8) + 3);
        w.set_val_u32("general.alignment", a).unwrap();
        kv.push(("general.alignment".to_string(), Value::U32(a)));
    }
    for i in 0..rng.below(8) {
        let v = random_value(rng);
        let k = format!("key.{i}");
        w.set(&k, v.clone()).unwrap();
        kv.push((k, v));
    }
    let mut tensors = Vec::new();
    for i in 0..rng.below(5) {
        let ty = Type::ALL[rng.below(Type::ALL.len() as u64) as usize];
        let shape = gguf_support::small_shape(ty, rng);
        let data = gguf_support::tensor_bytes(ty, &shape, rng);
        let name = format!("t.{i}");
        w.add_tensor(&name, ty, &shape, data.clone()).unwrap();
        tensors.push((name, ty, shape, data));
    }
    Built {
        bytes: w.to_bytes().unwrap(),
        kv,
        tensors,
    }
}

/// Offsets of every u32 type field and u64 length/count field in a valid file, found by an
/// independent walk of the layout.
fn field_offsets(b: &[u8]) -> Vec<(usize, usize)> {
    struct W<'a> {
        b: &'a [u8],
        p: usize,
        out: Vec<(usize, usize)>,
    }
    impl W<'_> {
        fn u32(&mut self) -> u32 {
            self.out.push((self.p, 4));
            let v = u32::from_le_bytes(self.b[self.p..self.p + 4].try_into().unwrap());
            self.p += 4;
            v
        }
        fn u64(&mut self) -> u64 {
            self.out.push((self.p, 8));
            let v = u64::from_le_bytes(self.b[self.p..self.p + 8].try_into().unwrap());
            self.p += 8;
            v
        }
        fn string(&mut self) {
            let n = self.u64() as usize;
            self.p += n;
        }
        fn value(&mut self, t: u32) {
            match t {
                8 => self.string(),
                9 => {
                    let et = self.u32();
                    let n = self.u64();
                    for _ in 0..n {
                        self.value(et);
                    }
                }
                t => self.p += ValueType::from_u32(t).unwrap().fixed_size().unwrap(),
            }
        }
    }
    let mut w = W {
        b,
        p: 4,
        out: Vec::new(),
    };
    w.u32();
    let nt = w.u64();
    let nkv = w.u64();
    for _ in 0..nkv {
        w.string();
        let t = w.u32();
        w.value(t);
    }
    for _ in 0..nt {
        w.string();
        let nd = w.u32();
        for _ in 0..nd {
            w.u64();
        }
        w.u32();
        w.u64();
    }
    w.out
}

/// Parses a mutated file: `Ok` (then everything is walked) or a format error with an offset.
fn check_mutant(bytes: &[u8]) {
    match GgufFile::from_bytes(bytes) {
        Ok(f) => {
            walk(&f);
        }
        Err(e) => {
            let m = e.to_string();
            assert!(
                matches!(e, ggml::Error::Format(_)) && m.contains("at offset"),
                "{m}"
            );
        }
    }
}

const INTERESTING: [u64; 10] = [
    0,
    1,
    2,
    0x7f,
    0xffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
    u64::MAX - 1,
    1 << 32,
    1 << 40,
];

#[test]
fn random_files_round_trip_and_survive_mutation() {
    let mut rng = Rng(0x5eed);
    for case in 0..400 {
        let built = random_file(&mut rng);
        let f = GgufFile::from_bytes(&built.bytes).unwrap_or_else(|e| panic!("case {case}: {e}"));
        // Read-back equality.
        assert_eq!(f.n_kv(), built.kv.len());
        for (k, v) in &built.kv {
            assert_eq!(f.get(k), Some(v), "case {case} key {k}");
        }
        assert_eq!(f.n_tensors(), built.tensors.len());
        for (name, ty, shape, data) in &built.tensors {
            let t = f.tensor_info(name).unwrap();
            assert_eq!(t.ty(), *ty);
            assert_eq!(&t.ne()[..shape.len()], &shape[..]);
            assert_eq!(f.tensor_data(name).unwrap(), &data[..]);
        }
        let mut again = GgufWriter::new();
        again.set_kv(&f).unwrap();
        for t in f.tensors() {
            again
                .add_tensor(t.name(), t.ty(), &t.ne(), f.data_of(t))
                .unwrap();
        }
        assert_eq!(
            again.to_bytes().unwrap(),
            built.bytes,
            "case {case}: rewrite differs"
        );

        let b = &built.bytes;
        // Bit flips.
        for _ in 0..40 {
            let mut m = b.clone();
            let i = rng.below(m.len() as u64) as usize;
            m[i] ^= 1 << rng.below(8);
            check_mutant(&m);
        }
        // Truncation at every length for small files, sampled for larger ones.
        if b.len() <= 2048 {
            (0..b.len()).for_each(|n| check_mutant(&b[..n]));
        } else {
            (0..64).for_each(|_| check_mutant(&b[..rng.below(b.len() as u64) as usize]));
        }
        // Length, count and type fields overwritten with interesting and random values.
        for (off, width) in field_offsets(b) {
            for _ in 0..3 {
                let v = if rng.below(2) == 0 {
                    INTERESTING[rng.below(INTERESTING.len() as u64) as usize]
                } else {
                    rng.next() >> rng.below(64)
                };
                let mut m = b.clone();
                m[off..off + width].copy_from_slice(&v.to_le_bytes()[..width]);
                check_mutant(&m);
            }
        }
        // Random overwrites of short runs.
        for _ in 0..20 {
            let mut m = b.clone();
            let i = rng.below(m.len() as u64) as usize;
            let n = (1 + rng.below(8) as usize).min(m.len() - i);
            m[i..i + n].copy_from_slice(&rng.bytes(n));
            check_mutant(&m);
        }
    }
}
