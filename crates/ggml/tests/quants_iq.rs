//! The grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) against fixtures
//! made by the real GGML (`tests/fixtures/quants/<type>.bin`, format in the fixture script):
//! quantized bytes must be identical and dequantized values bit-identical.

use std::path::PathBuf;

use ggml::{quants, Type, QK_K};

/// One fixture case.
struct Case {
    name: String,
    n_rows: usize,
    n_per_row: usize,
    /// 0: quantized without imatrix, 1: with `imatrix`, 2: GGML's reference quantizer,
    /// 3: dequantize only.
    kind: u8,
    imatrix: Option<Vec<f32>>,
    input: Vec<f32>,
    quantized: Vec<u8>,
    dequantized: Vec<f32>,
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn bytes(&mut self, n: usize) -> &[u8] {
        let s = &self.data[self.at..self.at + n];
        self.at += n;
        s
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.bytes(4).try_into().unwrap())
    }
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        self.bytes(4 * n)
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
}

fn load(t: Type) -> Vec<Case> {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", "quants"]
        .iter()
        .collect::<PathBuf>()
        .join(format!("{}.bin", t.name()));
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = Reader { data: &data, at: 0 };
    assert_eq!(r.bytes(4), b"GQFX", "{}", path.display());
    assert_eq!(r.u32(), 1, "fixture version");
    assert_eq!(r.u32(), t as u32, "fixture type id");
    let n_cases = r.u32();
    let cases: Vec<Case> = (0..n_cases)
        .map(|_| {
            let len = r.u32() as usize;
            let name = String::from_utf8(r.bytes(len).to_vec()).unwrap();
            let n_rows = r.u32() as usize;
            let n_per_row = r.u32() as usize;
            let kind = r.bytes(1)[0];
            let imatrix = (kind == 1).then(|| r.f32s(n_per_row));
            let n = n_rows * n_per_row;
            let input = r.f32s(n);
            let quantized = r.bytes(n / QK_K * t.type_size()).to_vec();
            let dequantized = r.f32s(n);
            Case {
                name,
                n_rows,
                n_per_row,
                kind,
                imatrix,
                input,
                quantized,
                dequantized,
            }
        })
        .collect();
    assert_eq!(r.at, data.len(), "{}: trailing bytes", path.display());
    assert!(!cases.is_empty());
    cases
}

/// Panics naming the type, case, row and first differing block when `got != want`.
fn compare<T: PartialEq + std::fmt::Debug>(
    t: Type,
    case: &Case,
    what: &str,
    per_block: usize,
    got: &[T],
    want: &[T],
) {
    assert_eq!(got.len(), want.len(), "{t} {}: {what} length", case.name);
    let per_row = case.n_per_row / QK_K * per_block;
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        let (row, block) = (i / per_row, i % per_row / per_block);
        let at = i - i % per_block;
        panic!(
            "{t} case {:?}: {what} differ at row {row}, block {block} (element {i})\n got: {:?}\nwant: {:?}",
            case.name,
            &got[at..at + per_block],
            &want[at..at + per_block]
        );
    }
}

fn check_dequantize(t: Type) {
    for case in load(t) {
        let mut out = vec![0f32; case.n_rows * case.n_per_row];
        quants::dequantize(t, &case.quantized, &mut out).unwrap();
        let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
        let want: Vec<u32> = case.dequantized.iter().map(|v| v.to_bits()).collect();
        compare(t, &case, "dequantized values (bits)", QK_K, &got, &want);
    }
}

fn check_quantize(t: Type) {
    let mut n_checked = 0;
    for case in load(t).iter().filter(|c| c.kind != 3) {
        let imatrix = if case.kind == 1 {
            case.imatrix.as_deref()
        } else {
            None
        };
        let got = quants::quantize(t, &case.input, case.n_rows, case.n_per_row, imatrix).unwrap();
        compare(
            t,
            case,
            "quantized bytes",
            t.type_size(),
            &got,
            &case.quantized,
        );
        n_checked += 1;
    }
    assert!(n_checked > 0, "{t}: no quantizer case in the fixtures");
}

macro_rules! fixture_tests {
    ($($t:ident: $deq:ident, $q:ident;)*) => {$(
        #[test]
        fn $deq() {
            check_dequantize(Type::$t);
        }
        #[test]
        fn $q() {
            check_quantize(Type::$t);
        }
    )*};
}

fixture_tests! {
    IQ2_XXS: iq2_xxs_dequantize, iq2_xxs_quantize;
    IQ2_XS: iq2_xs_dequantize, iq2_xs_quantize;
    IQ2_S: iq2_s_dequantize, iq2_s_quantize;
    IQ3_XXS: iq3_xxs_dequantize, iq3_xxs_quantize;
    IQ3_S: iq3_s_dequantize, iq3_s_quantize;
    IQ1_S: iq1_s_dequantize, iq1_s_quantize;
    IQ1_M: iq1_m_dequantize, iq1_m_quantize;
}

const ALL: [Type; 7] = [
    Type::IQ2_XXS,
    Type::IQ2_XS,
    Type::IQ2_S,
    Type::IQ3_XXS,
    Type::IQ3_S,
    Type::IQ1_S,
    Type::IQ1_M,
];

/// Non-finite, huge and subnormal inputs must not panic (GGML may abort on some of them).
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
    for t in ALL {
        for input in [&x, &spiky] {
            let q = quants::quantize(t, input, 1, 2 * QK_K, Some(&imatrix)).unwrap();
            assert_eq!(q.len(), 2 * t.type_size());
            let mut y = vec![0f32; 2 * QK_K];
            quants::dequantize(t, &q, &mut y).unwrap();
        }
        for fill in [0x00u8, 0xff, 0x7c] {
            let mut y = vec![0f32; QK_K];
            quants::dequantize(t, &vec![fill; t.type_size()], &mut y).unwrap();
        }
    }
}

/// The grid tables are built lazily; concurrent first use must agree with sequential use.
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
                    ALL.iter()
                        .map(|&t| quants::quantize(t, &x, 4, QK_K, Some(&imatrix)).unwrap())
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(results.windows(2).all(|w| w[0] == w[1]));
}
