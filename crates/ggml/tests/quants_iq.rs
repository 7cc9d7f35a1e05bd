//! The grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) beyond the fixture
//! comparisons of `quants_fixtures.rs` (which check every GGML fixture case of these types:
//! quantized bytes identical, dequantized values bit-identical): the dispatcher must offer
//! exactly GGML's functions for each, hostile input must not panic, and the lazily built grid
//! tables must be safe to build from several threads at once.

use ggml::quants::{
    dequantize_row, has_from_float_ref, has_quantizer, has_to_float, quantize_chunk,
    quantize_requires_imatrix, quantize_row_ref,
};
use ggml::{Error, Type, QK_K};

mod quants_support;
use quants_support::{quantize, GRID_IQUANTS};

/// Every grid i-quant has GGML's functions: a dequantizer and a quantizer for all, the
/// reference quantizer exactly for IQ2_S, IQ3_XXS and IQ3_S, and a refusal without an imatrix
/// exactly for IQ2_XXS, IQ2_XS and IQ1_S.
#[test]
fn grid_iquants_are_dispatched() {
    let x = vec![0.5f32; QK_K];
    for t in GRID_IQUANTS {
        assert!(has_to_float(t) && has_quantizer(t), "{t}");
        let has_ref = matches!(t, Type::IQ2_S | Type::IQ3_XXS | Type::IQ3_S);
        assert_eq!(has_from_float_ref(t), has_ref, "{t}");
        let mut q = vec![0u8; t.type_size()];
        assert_eq!(quantize_row_ref(t, &x, &mut q).is_ok(), has_ref, "{t}");
        let without = quantize_chunk(t, &x, &mut q, 0, 1, QK_K, None);
        if quantize_requires_imatrix(t) {
            assert!(
                matches!(without, Err(Error::InvalidArgument(_))),
                "{t}: {without:?}"
            );
        } else {
            assert_eq!(without, Ok(t.type_size()), "{t}");
        }
    }
}

/// Non-finite, huge and subnormal inputs, and arbitrary block bytes, must not panic (GGML
/// aborts on some of them).
#[test]
fn hostile_inputs_do_not_panic() {
    let specials = [
        f32::NAN,
        f32::INFINITY,
        -f32::INFINITY,
        3e38,
        -3e38,
        1e-45,
        -0.0,
        0.0,
    ];
    let x: Vec<f32> = (0..2 * QK_K)
        .map(|i| specials[i % 8] * ((i % 5) as f32 - 2.0))
        .collect();
    let spiky: Vec<f32> = (0..2 * QK_K)
        .map(|i| if i % 37 == 0 { 1e30 } else { i as f32 * 1e-3 })
        .collect();
    let imatrix = vec![1.0f32; 2 * QK_K];
    for t in GRID_IQUANTS {
        for input in [&x, &spiky] {
            let q = quantize(t, input, 1, Some(&imatrix));
            let mut y = vec![0f32; 2 * QK_K];
            dequantize_row(t, &q, &mut y).unwrap();
        }
        for fill in [0x00u8, 0xff, 0x7c] {
            let mut y = vec![0f32; QK_K];
            dequantize_row(t, &vec![fill; t.type_size()], &mut y).unwrap();
        }
    }
}

/// The grid tables are built on first use; concurrent first use must agree with itself.
#[test]
fn concurrent_quantization_agrees() {
    let x: Vec<f32> = (0..4 * QK_K)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    let imatrix: Vec<f32> = (0..QK_K).map(|i| 0.5 + (i % 3) as f32).collect();
    let results: Vec<Vec<Vec<u8>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    GRID_IQUANTS
                        .iter()
                        .map(|&t| quantize(t, &x, 4, Some(&imatrix)))
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(results.windows(2).all(|w| w[0] == w[1]));
}
