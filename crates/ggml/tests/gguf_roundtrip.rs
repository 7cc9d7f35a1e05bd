//! Reader and writer: a hand-assembled file, and write → read round trips of every value type
//! and every tensor type.

mod gguf_support;

use ggml::gguf::{self, Array, GgufFile, GgufString, GgufWriter, Value, ValueType};
use ggml::Type;
use gguf_support::{every_type_writer, tmp_dir, Bytes, Rng};

/// A two-tensor file with three keys, assembled byte by byte.
fn hand_file() -> Vec<u8> {
    let mut b = Bytes::default();
    b.raw(b"GGUF").u32(3).u64(2).u64(3);
    b.str("general.name").u32(8).str("tiny");
    b.str("x.scores")
        .u32(9)
        .u32(6)
        .u64(2)
        .raw(&1.5f32.to_le_bytes())
        .raw(&(-2.0f32).to_le_bytes());
    b.str("x.flag").u32(7).raw(&[1]);
    // tensor "w": 2 dims (4, 2) f32, offset 0 (32 bytes)
    b.str("w").u32(2).u64(4).u64(2).u32(0).u64(0);
    // tensor "q": 1 dim (32) q8_0, offset 32 (34 bytes)
    b.str("q").u32(1).u64(32).u32(8).u64(32);
    b.pad(32);
    for i in 0..8 {
        b.raw(&(i as f32).to_le_bytes());
    }
    b.raw(&[7u8; 34]).pad(32);
    b.0
}

#[test]
fn reads_hand_assembled_file() {
    let bytes = hand_file();
    let f = GgufFile::from_bytes(&bytes).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 32);
    assert_eq!(f.n_kv(), 3);
    assert_eq!(f.get_val_str("general.name").unwrap(), "tiny");
    assert_eq!(
        f.get_arr("x.scores").unwrap().as_f32_slice().unwrap(),
        &[1.5, -2.0]
    );
    assert_eq!(f.get_arr_type("x.scores").unwrap(), ValueType::F32);
    assert!(f.get_val_bool("x.flag").unwrap());
    assert_eq!(f.key(1), Some("x.scores"));
    assert_eq!(f.find_key("x.flag"), Some(2));
    assert_eq!(f.n_tensors(), 2);
    let w = f.tensor_info("w").unwrap();
    assert_eq!(
        (w.n_dims(), w.ne(), w.ty(), w.offset(), w.size()),
        (2, [4, 2, 1, 1, 1], Type::F32, 0, 32)
    );
    assert_eq!(w.shape(), &[4, 2]);
    let q = f.tensor_info("q").unwrap();
    assert_eq!((q.ty(), q.offset(), q.size()), (Type::Q8_0, 32, 34));
    // Header: 4+4+8+8; kvs; infos; then padding to 32.
    assert_eq!(f.data_offset() % 32, 0);
    assert_eq!(w.file_range(), f.data_offset()..f.data_offset() + 32);
    assert_eq!(f.tensor_data("q").unwrap(), &[7u8; 34]);
    assert_eq!(
        f.tensor_data_f32("w").unwrap(),
        (0..8).map(|i| i as f32).collect::<Vec<_>>()
    );
    // Quantized data is dequantized: every quant is 7, the f16 scale has bits 0x0707.
    let d = ggml::f16::from_bits(0x0707).to_f32();
    assert_eq!(f.tensor_data_f32("q").unwrap(), vec![7.0 * d; 32]);
    assert_eq!(f.tensor_names().collect::<Vec<_>>(), ["w", "q"]);

    // The writer produces exactly these bytes from the same content.
    let mut wr = GgufWriter::new();
    wr.set_val_str("general.name", "tiny").unwrap();
    wr.set("x.scores", vec![1.5f32, -2.0]).unwrap();
    wr.set_val_bool("x.flag", true).unwrap();
    wr.add_tensor("w", Type::F32, &[4, 2], f.tensor_data("w").unwrap())
        .unwrap();
    wr.add_tensor("q", Type::Q8_0, &[32], vec![7u8; 34])
        .unwrap();
    assert_eq!(wr.to_bytes().unwrap(), bytes);
    assert_eq!(wr.meta_size().unwrap(), f.data_offset() as u64);
}

#[test]
fn version_2_is_read_and_1_is_refused() {
    let mut bytes = hand_file();
    bytes[4] = 2;
    assert_eq!(GgufFile::from_bytes(&bytes).unwrap().version(), 2);
    bytes[4] = 1;
    let e = GgufFile::from_bytes(&bytes).unwrap_err().to_string();
    assert!(
        e.contains("v1 is no longer supported") && e.contains("offset 4"),
        "{e}"
    );
    bytes[4] = 4;
    assert!(GgufFile::from_bytes(&bytes)
        .unwrap_err()
        .to_string()
        .contains("newer"));
    bytes[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(GgufFile::from_bytes(&bytes)
        .unwrap_err()
        .to_string()
        .contains("byte-swapped"));
}

fn assert_same_content(w_bytes: &[u8], f: &GgufFile, rng_seed: u64) {
    // Rebuild the writer from the same seed and compare every key and tensor.
    let w = every_type_writer(&mut Rng(rng_seed));
    let again = GgufFile::from_bytes(&w.to_bytes().unwrap()).unwrap();
    assert_eq!(w_bytes, again.as_bytes());
    assert_eq!(f.n_kv(), w.n_kv());
    for (k, v) in f.metadata() {
        assert_eq!(Some(v), w.get(k), "key {k}");
    }
    assert_eq!(f.n_tensors(), Type::ALL.len());
}

#[test]
fn every_value_and_tensor_type_round_trips() {
    let seed = 42;
    let w = every_type_writer(&mut Rng(seed));
    let bytes = w.to_bytes().unwrap();
    let f = GgufFile::from_bytes(&bytes).unwrap();
    assert_same_content(&bytes, &f, seed);
    assert_eq!(f.get_val_u8("t.u8").unwrap(), 200);
    assert_eq!(f.get_val_i8("t.i8").unwrap(), -100);
    assert_eq!(f.get_val_u16("t.u16").unwrap(), 60000);
    assert_eq!(f.get_val_i16("t.i16").unwrap(), -30000);
    assert_eq!(f.get_val_u32("t.u32").unwrap(), 4_000_000_000);
    assert_eq!(f.get_val_i32("t.i32").unwrap(), -2_000_000_000);
    assert_eq!(f.get_val_f32("t.f32").unwrap(), 0.15625);
    assert!(f.get_val_bool("t.bool").unwrap());
    assert_eq!(f.get_val_str("t.str").unwrap(), "héllo wörld");
    assert_eq!(f.get_val_u64("t.u64").unwrap(), u64::MAX - 5);
    assert_eq!(f.get_val_i64("t.i64").unwrap(), i64::MIN + 7);
    assert_eq!(f.get_val_f64("t.f64").unwrap(), -1.0e300);
    // Non-UTF-8 string values are kept byte for byte; as_str refuses them.
    let raw = f.get_val_string("t.str_bytes").unwrap();
    assert_eq!(raw.as_bytes(), &[0xff, 0xfe, b'x']);
    assert!(f
        .get_val_str("t.str_bytes")
        .unwrap_err()
        .to_string()
        .contains("not UTF-8"));
    assert_eq!(f.get_arr_n("a.u32").unwrap(), 50);
    assert_eq!(f.get_arr_str("a.str", 2).unwrap(), "ünï");
    assert!(f.get_arr_str("a.str", 3).is_err());
    assert!(f.get_arr_str("a.u32", 0).is_err());
    assert_eq!(f.get_arr("a.empty_u32").unwrap(), &Array::U32(vec![]));
    let nested = f.get_arr("a.nested").unwrap();
    assert_eq!(nested.depth(), 3);
    assert_eq!(
        nested.as_array_slice().unwrap()[1]
            .as_string_slice()
            .unwrap()[1],
        GgufString::from("y")
    );
    // Typed getters name the key and both types when the type is wrong, and missing keys.
    let e = f.get_val_u32("t.i32").unwrap_err().to_string();
    assert!(
        e.contains("t.i32") && e.contains("i32") && e.contains("u32"),
        "{e}"
    );
    assert!(f
        .get_val_u8("nope")
        .unwrap_err()
        .to_string()
        .contains("nope"));

    let mut data_end = 0;
    for (i, t) in f.tensors().iter().enumerate() {
        let ty = Type::ALL[i];
        assert_eq!(t.ty(), ty);
        assert_eq!(t.name(), format!("blk.{i}.{}", ty.name()));
        assert_eq!(t.offset() % 32, 0);
        assert_eq!(t.offset() as usize, data_end, "tensors are packed in order");
        assert_eq!(
            t.size(),
            ty.row_size(t.ne()[0]).unwrap() * (t.n_elements() / t.ne()[0]) as usize
        );
        assert_eq!(f.data_of(t).len(), t.size());
        data_end = (t.offset() as usize + t.size()).div_ceil(32) * 32;
    }
    // Trailing padding after the last tensor, as GGML writes it.
    assert_eq!(bytes.len(), f.data_offset() + data_end);
}

#[test]
fn tensor_data_round_trips_byte_for_byte() {
    let mut rng = Rng(7);
    let mut w = GgufWriter::new();
    let mut expected = Vec::new();
    for (i, ty) in Type::ALL.iter().enumerate() {
        let shape = gguf_support::small_shape(*ty, &mut rng);
        let data = gguf_support::tensor_bytes(*ty, &shape, &mut rng);
        expected.push((format!("t{i}"), *ty, shape.clone(), data.clone()));
        w.add_tensor(&format!("t{i}"), *ty, &shape, data).unwrap();
    }
    let f = GgufFile::from_vec(w.to_bytes().unwrap()).unwrap();
    for (name, ty, shape, data) in expected {
        let t = f.tensor_info(&name).unwrap();
        assert_eq!(t.ty(), ty);
        let mut ne = [1i64; 5];
        ne[..shape.len()].copy_from_slice(&shape);
        assert_eq!(t.ne(), ne);
        assert_eq!(f.tensor_data(&name).unwrap(), &data[..]);
    }
}

#[test]
fn deferred_tensor_data_writes_the_same_file() {
    let mut rng = Rng(11);
    let mut given = GgufWriter::new();
    let mut deferred = GgufWriter::new();
    let mut datas = Vec::new();
    for (i, ty) in [Type::F32, Type::Q4_K, Type::I8, Type::F16]
        .iter()
        .enumerate()
    {
        let shape = gguf_support::small_shape(*ty, &mut rng);
        let data = gguf_support::tensor_bytes(*ty, &shape, &mut rng);
        let name = format!("t{i}");
        given.add_tensor(&name, *ty, &shape, data.clone()).unwrap();
        // Mixed: every other tensor has its bytes now.
        if i % 2 == 0 {
            deferred.add_tensor_info(&name, *ty, &shape).unwrap();
        } else {
            deferred
                .add_tensor(&name, *ty, &shape, data.clone())
                .unwrap();
        }
        datas.push(data);
    }
    let mut made = Vec::new();
    deferred
        .write_to_with(&mut made, |i| Ok(datas[i].clone()))
        .unwrap();
    assert_eq!(given.to_bytes().unwrap(), made);
    let e = deferred.to_bytes().unwrap_err().to_string();
    assert!(e.contains("\"t0\"") && e.contains("without data"), "{e}");

    // The closure's error, or bytes of the wrong length, stop the write; no file is left.
    let dir = tmp_dir("deferred");
    let path = dir.join("bad.gguf");
    let mut w = GgufWriter::new();
    w.add_tensor_info("w", Type::F32, &[4]).unwrap();
    let e = w
        .write_to_file_with(&path, |_| Ok(vec![0; 12]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"w\"") && e.contains("12") && e.contains("16"),
        "{e}"
    );
    let e = w
        .write_to_file_with(&path, |_| {
            Err(ggml::Error::Compute("no bytes today".into()))
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("no bytes today"), "{e}");
    assert!(w.write_to_file(&path).is_err());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    // Names and shapes are checked when the tensor is added, as for add_tensor.
    assert!(w.add_tensor_info("w", Type::F32, &[4]).is_err());
    assert!(w.add_tensor_info("q", Type::Q4_0, &[33]).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn file_round_trip_is_atomic_and_mapped() {
    let dir = tmp_dir("file-round-trip");
    let path = dir.join("model.gguf");
    let w = every_type_writer(&mut Rng(3));
    w.write_to_file(&path).unwrap();
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["model.gguf"], "no temporary file is left behind");
    let f = gguf::load(&path).unwrap();
    assert!(f.file_bytes().is_mapped());
    assert_same_content(&std::fs::read(&path).unwrap(), &f, 3);
    // The bytes outlive the GgufFile through the Arc.
    let keep = f.file_bytes().clone();
    let range = f.tensors()[0].file_range();
    let copy = f.data_of(&f.tensors()[0]).to_vec();
    drop(f);
    assert_eq!(&keep[range], &copy[..]);
    // Overwriting replaces the whole file.
    let mut small = GgufWriter::new();
    small.set_val_u32("only", 1).unwrap();
    small.write_to_file(&path).unwrap();
    assert_eq!(GgufFile::open(&path).unwrap().n_kv(), 1);
    // Errors name the path.
    let missing = dir.join("missing.gguf");
    assert!(GgufFile::open(&missing)
        .unwrap_err()
        .to_string()
        .contains("missing.gguf"));
    std::fs::write(&missing, b"").unwrap();
    let e = GgufFile::open(&missing).unwrap_err().to_string();
    assert!(e.contains("missing.gguf") && e.contains("magic"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn alignment_key_is_honoured() {
    let mut w = GgufWriter::new();
    w.set_val_u32("general.alignment", 256).unwrap();
    w.add_tensor("a", Type::F32, &[3], vec![1u8; 12]).unwrap();
    w.add_tensor("b", Type::I8, &[5], vec![2u8; 5]).unwrap();
    let bytes = w.to_bytes().unwrap();
    let f = GgufFile::from_bytes(&bytes).unwrap();
    assert_eq!(f.alignment(), 256);
    assert_eq!(f.data_offset() % 256, 0);
    assert_eq!(f.tensor_info("b").unwrap().offset(), 256);
    assert_eq!(bytes.len(), f.data_offset() + 512);
    // Writer refuses bad alignments and wrong types for the key.
    for bad in [
        Value::U32(0),
        Value::U32(48),
        Value::U32(1 << 21),
        Value::I32(32),
    ] {
        let e = w
            .set("general.alignment", bad.clone())
            .unwrap_err()
            .to_string();
        assert!(e.contains("general.alignment"), "{bad:?}: {e}");
    }
}

#[test]
fn writer_validates_input() {
    let mut w = GgufWriter::new();
    assert!(w.set("", 1u8).is_err());
    let e = w
        .add_tensor("x", Type::Q4_0, &[33], vec![0u8; 18])
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"x\"") && e.contains("ne[0] = 33"), "{e}");
    let e = w
        .add_tensor("x", Type::F32, &[2, 2], vec![0u8; 15])
        .unwrap_err()
        .to_string();
    assert!(e.contains("15") && e.contains("16"), "{e}");
    assert!(w
        .add_tensor("x", Type::F32, &[1, 1, 1, 1, 2], vec![0u8; 8])
        .is_err());
    assert!(w.add_tensor("x", Type::F32, &[-1], vec![]).is_err());
    assert!(w
        .add_tensor(&"n".repeat(64), Type::F32, &[1], vec![0u8; 4])
        .is_err());
    w.add_tensor(&"n".repeat(63), Type::F32, &[1, 1, 1, 1, 1], vec![0u8; 4])
        .unwrap();
    let e = w
        .add_tensor(&"n".repeat(63), Type::F32, &[1], vec![0u8; 4])
        .unwrap_err()
        .to_string();
    assert!(e.contains("duplicate"), "{e}");
    // Deep nesting is refused.
    let mut a = Array::U8(vec![1]);
    for _ in 0..8 {
        a = Array::Array(vec![a]);
    }
    assert!(w.set("deep", a).is_err());
    // Setting a key twice keeps one, moved to the end (as GGML).
    w.set_val_u8("k1", 1).unwrap();
    w.set_val_u8("k2", 2).unwrap();
    w.set_val_u8("k1", 3).unwrap();
    let f = GgufFile::from_bytes(&w.to_bytes().unwrap()).unwrap();
    assert_eq!(
        f.metadata().map(|(k, _)| k).collect::<Vec<_>>(),
        ["k2", "k1"]
    );
    assert_eq!(f.get_val_u8("k1").unwrap(), 3);
    assert_eq!(f.tensors()[0].n_dims(), 1);
    // set_kv copies a file's metadata.
    let mut copy = GgufWriter::new();
    copy.set_kv(&f).unwrap();
    assert_eq!(copy.get("k1"), Some(&Value::U8(3)));
    assert_eq!(copy.remove_key("k2"), Some(Value::U8(2)));
}

#[test]
fn empty_file_has_unpadded_data_offset() {
    // With no tensors GGML's reader does not seek to an aligned data section.
    let w = GgufWriter::new();
    let bytes = w.to_bytes().unwrap();
    assert_eq!(bytes.len(), 32, "24-byte header padded to 32 by the writer");
    let f = GgufFile::from_bytes(&bytes).unwrap();
    assert_eq!(f.data_offset(), 24);
    assert_eq!((f.n_kv(), f.n_tensors()), (0, 0));
    assert!(GgufFile::from_bytes(&bytes[..24]).is_ok());
}

#[test]
fn writer_refuses_what_the_reader_would_refuse() {
    use ggml::gguf::limits::{MAX_ARRAY_LEN, MAX_STRING_LEN};
    use ggml::gguf::{Array, Value};
    let mut wr = GgufWriter::new();
    let long = Value::Array(Array::U8(vec![0; MAX_ARRAY_LEN as usize + 1]));
    let e = wr.set("too.long", long).unwrap_err().to_string();
    assert!(e.contains("too.long") && e.contains("elements"), "{e}");
    let s = "x".repeat(MAX_STRING_LEN as usize + 1);
    let e = wr
        .set("too.long.string", s.as_str())
        .unwrap_err()
        .to_string();
    assert!(e.contains("too.long.string") && e.contains("bytes"), "{e}");
    assert_eq!(wr.n_kv(), 0);
}
