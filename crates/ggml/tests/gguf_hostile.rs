//! Hostile files: each broken field gives an `Err` naming the field and its byte offset.

mod gguf_support;

use ggml::gguf::GgufFile;
use ggml::Error;
use gguf_support::Bytes;

fn header(n_tensors: u64, n_kv: u64) -> Bytes {
    let mut b = Bytes::default();
    b.raw(b"GGUF").u32(3).u64(n_tensors).u64(n_kv);
    b
}

/// Parses `b` and checks the error is a format error mentioning every `needle` and `offset`.
#[track_caller]
fn expect_err(b: &Bytes, offset: usize, needles: &[&str]) {
    let e = GgufFile::from_bytes(&b.0).unwrap_err();
    assert!(matches!(e, Error::Format(_)), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("at offset {offset}")),
        "want offset {offset}: {msg}"
    );
    for n in needles {
        assert!(msg.contains(n), "want {n:?}: {msg}");
    }
}

/// One valid f32 tensor info, 4 elements at `offset`.
fn f32_info(b: &mut Bytes, name: &str, offset: u64) {
    b.str(name).u32(1).u64(4).u32(0).u64(offset);
}

#[test]
fn header_fields() {
    expect_err(&Bytes(b"GG".to_vec()), 0, &["header: magic", "truncated"]);
    expect_err(&Bytes(b"GGML\x03\0\0\0".to_vec()), 0, &["magic", "GGML"]);
    let mut b = Bytes::default();
    b.raw(b"GGUF").u32(3).u64(u64::MAX).u64(0);
    expect_err(&b, 8, &["n_tensors", "-1 is negative"]);
    let mut b = Bytes::default();
    b.raw(b"GGUF").u32(3).u64(1 << 40).u64(0);
    expect_err(&b, 8, &["n_tensors", "cannot fit"]);
    let mut b = Bytes::default();
    b.raw(b"GGUF").u32(3).u64(0).u64(3);
    expect_err(&b, 16, &["n_kv", "cannot fit"]);
    let mut b = Bytes::default();
    b.raw(b"GGUF").u32(0).u64(0).u64(0);
    expect_err(&b, 4, &["version", "0 is not"]);
}

#[test]
fn key_fields() {
    let mut b = header(0, 1);
    b.u64(1 << 20).raw(&[0; 16]);
    expect_err(&b, 24, &["kv 0: key", "cannot fit"]);
    let mut b = header(0, 1);
    b.u64(u64::MAX / 2).raw(&[0; 16]);
    expect_err(&b, 24, &["kv 0: key", "exceeds the limit"]);

    let mut b = header(0, 1);
    b.u64(2).raw(&[0xc3, 0x28]).u32(0).raw(&[1]);
    expect_err(&b, 24, &["kv 0: key", "not UTF-8"]);

    let mut b = header(0, 1);
    b.str("").u32(0).raw(&[1, 0]);
    expect_err(&b, 24, &["kv 0 ()", "empty"]);

    let mut b = header(0, 2);
    b.str("a.b").u32(0).raw(&[1]);
    let at = b.pos();
    b.str("a.b").u32(0).raw(&[2]);
    expect_err(&b, at, &["kv 1 (a.b)", "duplicate key (also kv 0)"]);

    let mut b = header(0, 1);
    b.str("k");
    let at = b.pos();
    b.u32(13).raw(&[0; 8]);
    expect_err(&b, at, &["kv 0 (k)", "value type 13"]);
}

#[test]
fn value_fields() {
    // String length larger than what is left.
    let mut b = header(0, 1);
    b.str("s").u32(8);
    let at = b.pos();
    b.u64(1000).raw(b"short");
    expect_err(&b, at, &["kv 0 (s)", "string length 1000", "cannot fit"]);

    // Array count larger than what is left, checked before allocating.
    let mut b = header(0, 1);
    b.str("a").u32(9).u32(6);
    let at = b.pos();
    b.u64(1 << 20).raw(&[0; 8]);
    expect_err(&b, at, &["kv 0 (a)", "array count", "cannot fit"]);
    let mut b = header(0, 1);
    b.str("a").u32(9).u32(6);
    let at = b.pos();
    b.u64(1 << 60).raw(&[0; 8]);
    expect_err(&b, at, &["kv 0 (a)", "exceeds the limit"]);

    // Array of strings: each needs at least 8 bytes.
    let mut b = header(0, 1);
    b.str("a").u32(9).u32(8);
    let at = b.pos();
    b.u64(3).raw(&[0; 16]);
    expect_err(&b, at, &["array count 3", "at least 8"]);

    // Bad element type inside an array.
    let mut b = header(0, 1);
    b.str("a").u32(9);
    let at = b.pos();
    b.u32(77).u64(0);
    expect_err(&b, at, &["kv 0 (a)", "value type 77"]);

    // Nesting deeper than the limit.
    let mut b = header(0, 1);
    b.str("deep").u32(9);
    for _ in 0..8 {
        b.u32(9).u64(1);
    }
    let at = b.pos();
    b.u32(0).u64(1).raw(&[5]);
    expect_err(&b, at, &["kv 0 (deep)", "nested deeper than 8"]);
    // Eight levels are fine.
    let mut ok = header(0, 1);
    ok.str("deep").u32(9);
    for _ in 0..7 {
        ok.u32(9).u64(1);
    }
    ok.u32(0).u64(1).raw(&[5]);
    assert_eq!(
        GgufFile::from_bytes(&ok.0)
            .unwrap()
            .get_arr("deep")
            .unwrap()
            .depth(),
        8
    );

    // Truncated scalar.
    let mut b = header(0, 1);
    b.str("x").u32(10);
    let at = b.pos();
    b.raw(&[1, 2, 3]);
    expect_err(&b, at, &["kv 0 (x)", "needs 8 bytes", "3 left"]);
}

#[test]
fn alignment_key() {
    for (ty, val, needle) in [
        (
            4u32,
            48u32.to_le_bytes().to_vec(),
            "48 is not a power of two",
        ),
        (4, 0u32.to_le_bytes().to_vec(), "0 is not a power of two"),
        (4, (1u32 << 21).to_le_bytes().to_vec(), "exceeds the limit"),
        (5, 32i32.to_le_bytes().to_vec(), "has type i32, must be u32"),
    ] {
        let mut b = header(0, 1);
        b.str("general.alignment");
        let at = b.pos();
        b.u32(ty).raw(&val);
        expect_err(&b, at, &["kv 0 (general.alignment)", needle]);
    }
}

#[test]
fn tensor_info_fields() {
    // ne[1] negative.
    let mut b = header(2, 0);
    f32_info(&mut b, "ok", 0);
    b.str("blk.0.attn_q.weight").u32(2).u64(4);
    let at = b.pos();
    b.u64((-5i64) as u64).u32(0).u64(32);
    expect_err(&b, at, &["tensor 1 (blk.0.attn_q.weight): ne[1] = -5"]);

    // Too many dims.
    let mut b = header(1, 0);
    b.str("t");
    let at = b.pos();
    b.u32(5).raw(&[0; 60]);
    expect_err(&b, at, &["tensor 0 (t)", "n_dims = 5"]);

    // Removed and unknown types.
    for bad in [4u32, 99, u32::MAX] {
        let mut b = header(1, 0);
        b.str("t").u32(1).u64(32);
        let at = b.pos();
        b.u32(bad).u64(0);
        expect_err(
            &b,
            at,
            &[
                "tensor 0 (t)",
                &format!("type {} is not a GGML type", bad as i32),
            ],
        );
    }

    // ne[0] not a whole number of blocks.
    let mut b = header(1, 0);
    b.str("q");
    let at = b.pos();
    b.u32(1).u64(33).u32(2).u64(0);
    expect_err(&b, at, &["tensor 0 (q)", "ne[0] = 33", "q4_0"]);

    // Element count overflow.
    let mut b = header(1, 0);
    b.str("big");
    let at = b.pos();
    b.u32(3)
        .u64(1 << 40)
        .u64(1 << 20)
        .u64(1 << 10)
        .u32(0)
        .u64(0);
    expect_err(&b, at, &["tensor 0 (big)", "overflows i64"]);

    // Duplicate name.
    let mut b = header(2, 0);
    f32_info(&mut b, "w", 0);
    let at = b.pos();
    f32_info(&mut b, "w", 32);
    expect_err(
        &b,
        at,
        &["tensor 1 (w)", "duplicate tensor name (also tensor 0)"],
    );

    // Name too long for GGML.
    let mut b = header(1, 0);
    let at = b.pos();
    f32_info(&mut b, &"n".repeat(64), 0);
    expect_err(&b, at, &["tensor 0", "64 bytes", "63"]);
}

/// `n` tensors of 4 f32 at the given offsets, then a data section of `data_len` bytes.
fn placed(offsets: &[u64], data_len: usize) -> (Bytes, Vec<usize>) {
    let mut b = header(offsets.len() as u64, 0);
    let mut fields = Vec::new();
    for (i, off) in offsets.iter().enumerate() {
        b.str(&format!("t{i}")).u32(1).u64(4).u32(0);
        fields.push(b.pos());
        b.u64(*off);
    }
    b.pad(32);
    b.raw(&vec![0; data_len]);
    (b, fields)
}

#[test]
fn tensor_placement() {
    let (b, _) = placed(&[0, 32], 48);
    assert!(GgufFile::from_bytes(&b.0).is_ok());
    // Out of order but disjoint is accepted.
    let (b, _) = placed(&[32, 0], 48);
    assert_eq!(
        GgufFile::from_bytes(&b.0).unwrap().tensors()[0].offset(),
        32
    );

    let (b, f) = placed(&[0, 16], 64);
    expect_err(
        &b,
        f[1],
        &["tensor 1 (t1)", "16 is not a multiple of the alignment 32"],
    );
    let (b, f) = placed(&[0, 32], 40);
    expect_err(
        &b,
        f[1],
        &[
            "tensor 1 (t1)",
            "runs past the end of the 40-byte data section",
        ],
    );
    let (b, f) = placed(&[0, u64::MAX - 31], 64);
    expect_err(&b, f[1], &["tensor 1 (t1)", "runs past the end"]);
    let (b, f) = placed(&[32, 0, 32], 64);
    expect_err(&b, f[2], &["tensor 2 (t2)", "overlaps tensor 0 (t0)"]);

    // The data section itself must start inside the file.
    let mut b = header(1, 0);
    f32_info(&mut b, "t", 0);
    let at = b.pos();
    expect_err(&b, at, &["data section", "past the end"]);
}

#[test]
fn every_prefix_of_a_valid_file_is_handled() {
    let mut rng = gguf_support::Rng(11);
    let w = gguf_support::every_type_writer(&mut rng);
    let bytes = w.to_bytes().unwrap();
    let full = GgufFile::from_bytes(&bytes).unwrap();
    let last_end = full
        .tensors()
        .iter()
        .map(|t| t.file_range().end)
        .max()
        .unwrap();
    for len in 0..bytes.len() {
        match GgufFile::from_bytes(&bytes[..len]) {
            Ok(f) => {
                assert!(len >= last_end, "prefix {len} < {last_end} parsed");
                gguf_support::walk(&f);
            }
            Err(e) => assert!(e.to_string().contains("at offset"), "{e}"),
        }
    }
}
