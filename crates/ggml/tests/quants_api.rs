//! The quantization API's argument checking and chunking, against GGML's documented contract.

use ggml::quants::{
    dequantize_row, has_from_float_ref, has_quantizer, has_to_float, quantize_chunk,
    quantize_requires_imatrix, quantize_row_ref,
};
use ggml::{Error, Type};

mod quants_support;
use quants_support::ramp;

fn invalid(r: Result<impl std::fmt::Debug, Error>, words: &[&str]) {
    match r {
        Err(Error::InvalidArgument(msg)) => {
            for w in words {
                assert!(msg.contains(w), "message {msg:?} should mention {w:?}");
            }
        }
        other => panic!("expected InvalidArgument mentioning {words:?}, got {other:?}"),
    }
}

fn unsupported(r: Result<impl std::fmt::Debug, Error>, ty: Type) {
    match r {
        Err(Error::Unsupported(msg)) => assert!(msg.contains(ty.name()), "{msg}"),
        other => panic!("expected Unsupported for {ty}, got {other:?}"),
    }
}

#[test]
fn dequantize_checks_lengths() {
    let src = vec![0u8; 18];
    let mut dst = vec![0f32; 33];
    invalid(
        dequantize_row(Type::Q4_0, &src, &mut dst),
        &["dst", "33", "32"],
    );
    let mut dst = vec![0f32; 32];
    invalid(
        dequantize_row(Type::Q4_0, &src[..17], &mut dst),
        &["src", "17", "18"],
    );
    invalid(
        dequantize_row(Type::Q4_0, &[0u8; 36], &mut dst),
        &["src", "36"],
    );
    assert!(dequantize_row(Type::Q4_0, &src, &mut dst).is_ok());
    assert!(dequantize_row(Type::Q4_0, &[], &mut []).is_ok());
}

#[test]
fn quantize_ref_checks_lengths() {
    let src = ramp(256);
    let mut dst = vec![0u8; 144];
    invalid(
        quantize_row_ref(Type::Q4_K, &src[..255], &mut dst),
        &["src", "255", "256"],
    );
    invalid(
        quantize_row_ref(Type::Q4_K, &src, &mut dst[..143]),
        &["dst", "143", "144"],
    );
    assert!(quantize_row_ref(Type::Q4_K, &src, &mut dst).is_ok());
}

#[test]
fn unsupported_conversions() {
    let mut f = vec![0f32; 32];
    unsupported(dequantize_row(Type::Q8_1, &[0u8; 36], &mut f), Type::Q8_1);
    unsupported(dequantize_row(Type::I32, &[0u8; 128], &mut f), Type::I32);
    unsupported(quantize_row_ref(Type::F64, &f, &mut [0u8; 256]), Type::F64);
    unsupported(quantize_row_ref(Type::F32, &f, &mut [0u8; 128]), Type::F32);
    let src = ramp(256);
    let mut dst = vec![0u8; 292];
    unsupported(
        quantize_chunk(Type::Q8_K, &src, &mut dst, 0, 1, 256, None),
        Type::Q8_K,
    );
    unsupported(
        quantize_chunk(Type::Q8_1, &src, &mut dst, 0, 1, 256, None),
        Type::Q8_1,
    );
    // IQ2_XXS has no reference quantizer in GGML at all.
    unsupported(
        quantize_row_ref(Type::IQ2_XXS, &src, &mut [0u8; 66]),
        Type::IQ2_XXS,
    );
}

#[test]
fn introspection() {
    for ty in Type::ALL {
        if ty.is_quantized() && ty != Type::Q8_1 && has_to_float(ty) {
            assert!(has_from_float_ref(ty) || has_quantizer(ty), "{ty}");
        }
    }
    assert!(has_to_float(Type::Q4_0) && has_from_float_ref(Type::Q4_0));
    assert!(has_quantizer(Type::BF16) && has_to_float(Type::BF16));
    assert!(!has_to_float(Type::I8));
    assert_eq!(
        Type::ALL
            .iter()
            .filter(|t| quantize_requires_imatrix(**t))
            .count(),
        3
    );
}

#[test]
fn chunk_checks_arguments() {
    let src = ramp(2 * 256);
    let mut dst = vec![0u8; 2 * 144];
    let imatrix = vec![1.0f32; 256];
    let q = |src: &[f32], dst: &mut [u8], start, rows, n, w| {
        quantize_chunk(Type::Q4_K, src, dst, start, rows, n, w)
    };
    invalid(q(&src, &mut dst, 0, 2, 0, None), &["n_per_row", "0"]);
    invalid(
        q(&src, &mut dst, 0, 1, 100, None),
        &["n_per_row", "100", "256"],
    );
    invalid(q(&src, &mut dst, 0, 3, 256, None), &["src", "512", "768"]);
    invalid(q(&src[..300], &mut dst, 1, 1, 256, None), &["src", "300"]);
    invalid(
        q(&src, &mut dst[..200], 0, 2, 256, None),
        &["dst", "200", "288"],
    );
    invalid(q(&src, &mut dst, usize::MAX, 2, 256, None), &["overflow"]);
    invalid(
        q(&src, &mut dst, 1, usize::MAX / 256, 256, None),
        &["overflow"],
    );
    invalid(
        q(&src, &mut dst, 0, 2, 256, Some(&imatrix[..255])),
        &["imatrix", "255", "256"],
    );
    assert_eq!(q(&src, &mut dst, 0, 2, 256, Some(&imatrix)), Ok(288));
    assert_eq!(q(&src, &mut dst, 0, 0, 256, None), Ok(0));
}

#[test]
fn chunk_requires_imatrix_where_ggml_does() {
    let src = ramp(256);
    let mut dst = vec![0u8; 256];
    for ty in [Type::IQ2_XXS, Type::IQ2_XS, Type::IQ1_S] {
        invalid(
            quantize_chunk(ty, &src, &mut dst, 0, 1, 256, None),
            &["imatrix", ty.name()],
        );
    }
}

#[test]
fn chunk_writes_only_its_rows() {
    let n = 256;
    let src = ramp(4 * n);
    let row = Type::Q6_K.row_size(n as i64).unwrap();
    let mut whole = vec![0u8; 4 * row];
    quantize_chunk(Type::Q6_K, &src, &mut whole, 0, 4, n, None).unwrap();
    let mut part = vec![0xAAu8; 4 * row];
    assert_eq!(
        quantize_chunk(Type::Q6_K, &src, &mut part, 1, 2, n, None),
        Ok(2 * row)
    );
    assert!(part[..row].iter().all(|&b| b == 0xAA));
    assert_eq!(part[row..3 * row], whole[row..3 * row]);
    assert!(part[3 * row..].iter().all(|&b| b == 0xAA));
}

#[test]
fn float_rows_round_trip() {
    let src = ramp(64);
    for ty in [Type::F32, Type::F16, Type::BF16] {
        let mut q = vec![0u8; ty.row_size(64).unwrap()];
        assert_eq!(
            quantize_chunk(ty, &src, &mut q, 0, 2, 32, None),
            Ok(q.len())
        );
        let mut back = vec![0f32; 64];
        dequantize_row(ty, &q, &mut back).unwrap();
        for (a, b) in src.iter().zip(&back) {
            let tol = match ty {
                Type::F32 => 0.0,
                Type::F16 => a.abs() * 1e-3,
                _ => a.abs() * 8e-3,
            };
            assert!((a - b).abs() <= tol, "{ty}: {a} -> {b}");
        }
    }
}

/// Block views work at any address: the block structs have alignment 1.
#[test]
fn unaligned_buffers() {
    let src = ramp(512);
    let mut aligned = vec![0u8; 292 * 2];
    let mut shifted = vec![0u8; 292 * 2 + 1];
    quantize_row_ref(Type::Q8_K, &src, &mut aligned).unwrap();
    quantize_row_ref(Type::Q8_K, &src, &mut shifted[1..]).unwrap();
    assert_eq!(aligned, shifted[1..]);
    let (mut a, mut b) = (vec![0f32; 512], vec![0f32; 512]);
    dequantize_row(Type::Q8_K, &aligned, &mut a).unwrap();
    dequantize_row(Type::Q8_K, &shifted[1..], &mut b).unwrap();
    assert_eq!(a, b);
}

/// Q8_0 against a plain f64 model of its definition: d = amax/127, q = round(x/d).
#[test]
fn q8_0_matches_its_definition() {
    let src = ramp(64);
    let mut q = vec![0u8; 68];
    quantize_row_ref(Type::Q8_0, &src, &mut q).unwrap();
    let mut back = vec![0f32; 64];
    dequantize_row(Type::Q8_0, &q, &mut back).unwrap();
    for (block, out) in src.chunks(32).zip(back.chunks(32)) {
        let amax = block.iter().fold(0f64, |m, &v| m.max((v as f64).abs()));
        let d = amax / 127.0;
        for (&x, &y) in block.iter().zip(out) {
            let model = (x as f64 / d).round() * d;
            assert!(
                (model - y as f64).abs() <= d * 1e-2 + amax * 1e-3,
                "{x} -> {y}"
            );
        }
    }
}

/// Every supported type, every entry point: non-finite, huge, subnormal and signed-zero inputs,
/// hostile imatrix weights (NaN, infinite, negative, zero) and arbitrary block bytes return
/// without panicking (GGML aborts or reads garbage on some of them; here any bytes may come out,
/// but the call must not fail or panic).
#[test]
fn every_type_survives_hostile_input() {
    const N: usize = 512;
    let specials = [
        f32::NAN,
        f32::INFINITY,
        -f32::INFINITY,
        f32::MAX,
        -f32::MAX,
        3e38,
        1e-45,
        -1e-40,
        -0.0,
        0.0,
        1e30,
        -7.5,
    ];
    let inputs: Vec<Vec<f32>> = vec![
        (0..N).map(|i| specials[i % specials.len()]).collect(),
        (0..N)
            .map(|i| specials[(i * 7) % specials.len()] * ((i % 5) as f32 - 2.0))
            .collect(),
        vec![f32::NAN; N],
        vec![f32::INFINITY; N],
        vec![-f32::MAX; N],
        vec![1e-45; N],
        (0..N)
            .map(|i| if i % 37 == 0 { 1e30 } else { i as f32 * 1e-3 })
            .collect(),
        (0..N)
            .map(|i| if i % 3 == 0 { f32::MAX } else { -f32::MAX })
            .collect(),
    ];
    let imatrices: Vec<Vec<f32>> = vec![
        vec![1.0; N],
        vec![0.0; N],
        vec![f32::NAN; N],
        vec![f32::INFINITY; N],
        vec![-1.0; N],
        (0..N).map(|i| specials[i % specials.len()]).collect(),
    ];
    for ty in Type::ALL {
        if ty.blck_size() > N || N % ty.blck_size() != 0 {
            continue;
        }
        let row_size = ty.row_size(N as i64).unwrap();
        let mut q = vec![0u8; row_size];
        let mut y = vec![0f32; N];
        for x in &inputs {
            if has_from_float_ref(ty) {
                quantize_row_ref(ty, x, &mut q).unwrap_or_else(|e| panic!("{ty}: {e}"));
            }
            if has_quantizer(ty) {
                if !quantize_requires_imatrix(ty) {
                    quantize_chunk(ty, x, &mut q, 0, 1, N, None)
                        .unwrap_or_else(|e| panic!("{ty}: {e}"));
                }
                for w in &imatrices {
                    quantize_chunk(ty, x, &mut q, 0, 1, N, Some(w))
                        .unwrap_or_else(|e| panic!("{ty}: {e}"));
                    if has_to_float(ty) {
                        dequantize_row(ty, &q, &mut y).unwrap();
                    }
                }
            }
        }
        if has_to_float(ty) {
            let mut seed = 0x1234_5678u32;
            for fill in [None, Some(0x00u8), Some(0xff), Some(0x7c), Some(0x80)] {
                let bytes: Vec<u8> = (0..row_size)
                    .map(|_| {
                        fill.unwrap_or_else(|| {
                            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                            (seed >> 16) as u8
                        })
                    })
                    .collect();
                dequantize_row(ty, &bytes, &mut y).unwrap();
            }
        }
    }
}
