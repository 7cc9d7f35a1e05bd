//! Interoperability with the `gguf` Python package (gguf-py 0.19.0), through committed fixtures
//! made by `tools/gguf_interop/gguf_interop.py`:
//! (a) files written by gguf-py, with a JSON dump of what gguf-py read: we must read the same;
//! (b) files written by our writer (`ours_*.gguf`, produced by this test with
//!     `GGML_GGUF_REGEN=1`), with a JSON dump of what gguf-py read: it must be what we wrote.

mod gguf_support;

use std::path::PathBuf;

use ggml::gguf::{Array, GgufFile, GgufString, GgufWriter, Value};
use ggml::Type;
use gguf_support::Rng;
use serde_json::{json, Value as J};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gguf")
        .join(name)
}

fn load_json(name: &str) -> J {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

// ---- our model in the dump's JSON schema (see the script's docstring) ----

fn float_json(x: f64) -> J {
    if x.is_nan() {
        json!("nan")
    } else if x.is_infinite() {
        json!(if x > 0.0 { "inf" } else { "-inf" })
    } else {
        json!(x)
    }
}

fn string_json(s: &GgufString) -> J {
    match s.as_str() {
        Ok(t) => json!(t),
        Err(_) => json!({ "hex": hex(s.as_bytes()) }),
    }
}

fn array_json(a: &Array) -> J {
    let items: Vec<J> = (0..a.len())
        .map(|i| value_json(&a.get(i).unwrap()))
        .collect();
    json!({ "elem": a.elem_type().name(), "items": items })
}

fn value_json(v: &Value) -> J {
    match v {
        Value::F32(x) => float_json(*x as f64),
        Value::F64(x) => float_json(*x),
        Value::Bool(b) => json!(b),
        Value::String(s) => string_json(s),
        Value::Array(a) => array_json(a),
        Value::U64(x) => json!(x),
        Value::I64(x) => json!(x),
        other => json!(other.as_integer().unwrap() as i64),
    }
}

fn kv_json<'a>(kv: impl Iterator<Item = (&'a str, &'a Value)>) -> J {
    kv.map(|(k, v)| json!({ "key": k, "type": v.value_type().name(), "value": value_json(v) }))
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn file_json(f: &GgufFile) -> J {
    let tensors: Vec<J> = f
        .tensors()
        .iter()
        .map(|t| {
            json!({
                "name": t.name(),
                "type_id": t.ty() as u32,
                "ne": t.shape(),
                "offset": t.offset(),
                "n_bytes": t.size(),
                "data_hex": hex(f.data_of(t)),
            })
        })
        .collect();
    json!({
        "version": f.version(),
        "alignment": f.alignment(),
        "data_offset": f.data_offset(),
        "kv": kv_json(f.metadata()),
        "tensors": tensors,
    })
}

/// Compares two dumps field by field so a mismatch names the key or tensor.
fn assert_same_dump(ours: &J, python: &J, what: &str) {
    for field in ["version", "alignment", "data_offset"] {
        assert_eq!(ours[field], python[field], "{what}: {field}");
    }
    for list in ["kv", "tensors"] {
        let (a, b) = (
            ours[list].as_array().unwrap(),
            python[list].as_array().unwrap(),
        );
        assert_eq!(a.len(), b.len(), "{what}: number of {list}");
        for (x, y) in a.iter().zip(b) {
            assert_eq!(x, y, "{what}: {list} entry");
        }
    }
}

// ---- (a) files written by gguf-py ----

/// gguf-py 0.19.0 has no q2_0, and sizes q8_1 blocks as 40 bytes where GGML's are 36 (q8_1 is
/// an activation type, never stored in model files): both stay out of the fixtures.
fn py_can_write(t: Type) -> bool {
    !matches!(t, Type::Q2_0 | Type::Q8_1)
}

#[test]
fn reads_what_gguf_py_wrote() {
    for name in ["py_every_type", "py_aligned"] {
        let f = GgufFile::open(fixture(&format!("{name}.gguf"))).unwrap();
        let python = load_json(&format!("{name}.json"));
        assert_same_dump(&file_json(&f), &python, name);
    }
    // Spot checks against values the script wrote, independent of the dump.
    let f = GgufFile::open(fixture("py_every_type.gguf")).unwrap();
    assert_eq!(f.get_val_u64("t.u64").unwrap(), u64::MAX - 5);
    assert_eq!(
        f.get_val_string("t.str_bytes").unwrap().as_bytes(),
        b"\xff\xfex"
    );
    let nested = f.get_arr("a.nested_str").unwrap().as_array_slice().unwrap();
    assert_eq!(
        nested[1].as_string_slice().unwrap()[1],
        GgufString::from("z")
    );
    // Every type gguf-py can write is there.
    let types: Vec<Type> = f.tensors().iter().map(|t| t.ty()).collect();
    let expected: Vec<Type> = Type::ALL
        .iter()
        .copied()
        .filter(|t| py_can_write(*t))
        .collect();
    assert_eq!(types, expected);
    let a = GgufFile::open(fixture("py_aligned.gguf")).unwrap();
    assert_eq!(a.alignment(), 64);
    assert_eq!(a.tensor_info("t2").unwrap().shape(), &[7, 1, 1, 1]);
}

// ---- (b) files written by our writer ----

struct Fixture {
    name: &'static str,
    writer: GgufWriter<'static>,
    tensors: Vec<(String, Type, Vec<i64>, Vec<u8>)>,
}

impl Fixture {
    fn tensor(&mut self, name: &str, ty: Type, ne: &[i64], rng: &mut Rng) {
        let data = gguf_support::tensor_bytes(ty, ne, rng);
        self.writer.add_tensor(name, ty, ne, data.clone()).unwrap();
        self.tensors.push((name.to_string(), ty, ne.to_vec(), data));
    }

    /// The dump gguf-py should produce, computed from what we asked the writer to write.
    fn expected_json(&self) -> J {
        let align = self.writer.alignment() as u64;
        let mut offset = 0u64;
        let tensors: Vec<J> = self
            .tensors
            .iter()
            .map(|(name, ty, ne, data)| {
                let mut shape = ne.clone();
                while shape.len() > 1 && shape.last() == Some(&1) {
                    shape.pop(); // the writer stores GGML's n_dims
                }
                let j = json!({
                    "name": name, "type_id": *ty as u32, "ne": shape, "offset": offset,
                    "n_bytes": data.len(), "data_hex": hex(data),
                });
                offset += (data.len() as u64).div_ceil(align) * align;
                j
            })
            .collect();
        json!({
            "version": 3,
            "alignment": align,
            "data_offset": self.writer.meta_size().unwrap(),
            "kv": kv_json(self.writer.metadata()),
            "tensors": tensors,
        })
    }
}

fn our_fixtures() -> Vec<Fixture> {
    let mut rng = Rng(0x1f0);
    let mut every = Fixture {
        name: "ours_every_type",
        writer: GgufWriter::new(),
        tensors: Vec::new(),
    };
    gguf_support::add_every_value_type(&mut every.writer, &mut rng);
    // Every type gguf-py handles like GGML, with 1 to 4 dims.
    for (i, ty) in Type::ALL.iter().filter(|t| py_can_write(**t)).enumerate() {
        let b = ty.blck_size() as i64;
        let ne: Vec<i64> = match i % 4 {
            0 => vec![b],
            1 => vec![2 * b, 2],
            2 => vec![b, 1, 2],
            _ => vec![b, 2, 1, 2],
        };
        every.tensor(&format!("blk.{i}.{}", ty.name()), *ty, &ne, &mut rng);
    }

    let mut aligned = Fixture {
        name: "ours_aligned",
        writer: GgufWriter::new(),
        tensors: Vec::new(),
    };
    aligned
        .writer
        .set_val_str("general.architecture", "aligned")
        .unwrap();
    aligned
        .writer
        .set_val_u32("general.alignment", 128)
        .unwrap();
    aligned.tensor("token_embd.weight", Type::F16, &[6, 3], &mut rng);
    aligned.tensor("blk.0.ffn.weight", Type::Q4_K, &[256, 1, 1, 2], &mut rng);
    aligned.tensor("output_norm.weight", Type::F32, &[7], &mut rng);
    vec![every, aligned]
}

#[test]
fn gguf_py_reads_what_we_wrote() {
    let regen = std::env::var_os("GGML_GGUF_REGEN").is_some();
    for fx in our_fixtures() {
        let path = fixture(&format!("{}.gguf", fx.name));
        if regen {
            fx.writer.write_to_file(&path).unwrap();
            continue;
        }
        // The committed file is what the writer produces today ...
        let committed = std::fs::read(&path).unwrap();
        assert!(
            committed == fx.writer.to_bytes().unwrap(),
            "{}: writer output changed",
            fx.name
        );
        // ... and gguf-py read back exactly what we asked to write.
        let python = load_json(&format!("{}.json", fx.name));
        assert_same_dump(&fx.expected_json(), &python, fx.name);
    }
}
