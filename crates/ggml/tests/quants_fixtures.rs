//! Every quantization fixture made by the real GGML (tools/quant_fixtures/gen.py) must be
//! reproduced exactly: quantized bytes identical, dequantized floats identical bit for bit.
//!
//! One test per fixture file. Every check of every case runs; an error from the library
//! (`Unsupported` included) for a case GGML produced is a failure, except Q8_1's dequantization,
//! which GGML does not have either.

use std::path::PathBuf;

use ggml::quants::{dequantize_row, quantize_chunk, quantize_row_ref};
use ggml::{Error, Type};

mod quants_support;
use quants_support::try_quantize;

const KIND_CHUNK: u8 = 0;
const KIND_CHUNK_IMATRIX: u8 = 1;
const KIND_REF: u8 = 2;
const KIND_RANDOM: u8 = 3;

struct Case {
    name: String,
    n_rows: usize,
    n_per_row: usize,
    kind: u8,
    imatrix: Option<Vec<f32>>,
    input: Vec<f32>,
    quantized: Vec<u8>,
    dequantized: Vec<f32>,
}

struct Fixture {
    ty: Type,
    cases: Vec<Case>,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    file: String,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let end = self.pos.checked_add(n).expect("length overflow");
        assert!(
            end <= self.buf.len(),
            "{}: truncated at byte {} (need {n} more)",
            self.file,
            self.pos
        );
        let s = &self.buf[self.pos..end];
        self.pos = end;
        s
    }
    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        self.take(n * 4)
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect()
    }
}

/// The committed fixtures, or the directory named by `GGML_QUANT_FIXTURES` (e.g. the output of
/// `gen.py --stress --out DIR`, a larger differential run).
fn fixture_dir() -> PathBuf {
    match std::env::var_os("GGML_QUANT_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quants"),
    }
}

fn load(name: &str) -> Fixture {
    let path = fixture_dir().join(format!("{name}.bin"));
    let buf = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = Reader {
        buf: &buf,
        pos: 0,
        file: path.display().to_string(),
    };
    let magic = r.take(4).to_vec();
    assert_eq!(magic, b"GQFX", "{}: bad magic", r.file);
    assert_eq!(r.u32(), 1, "{}: unknown version", r.file);
    let ty = Type::from_u32(r.u32()).unwrap();
    assert_eq!(
        ty.name(),
        name,
        "{}: type id does not match file name",
        r.file
    );
    let n_cases = r.u32() as usize;
    let mut cases = Vec::with_capacity(n_cases);
    for _ in 0..n_cases {
        let len = r.u32() as usize;
        let case_name = String::from_utf8(r.take(len).to_vec()).unwrap();
        let n_rows = r.u32() as usize;
        let n_per_row = r.u32() as usize;
        let kind = r.u8();
        assert!(
            kind <= KIND_RANDOM,
            "{}: case {case_name}: kind {kind}",
            r.file
        );
        let imatrix = (kind == KIND_CHUNK_IMATRIX).then(|| r.f32s(n_per_row));
        let n = n_rows * n_per_row;
        let input = r.f32s(n);
        let quantized = r
            .take(n_rows * ty.row_size(n_per_row as i64).unwrap())
            .to_vec();
        let dequantized = r.f32s(n);
        cases.push(Case {
            name: case_name,
            n_rows,
            n_per_row,
            kind,
            imatrix,
            input,
            quantized,
            dequantized,
        });
    }
    assert_eq!(r.pos, buf.len(), "{}: trailing bytes", r.file);
    Fixture { ty, cases }
}

/// Outcome of one check: `Some(message)` on a mismatch or error.
type Check = Option<String>;

fn compare_bytes(ty: Type, c: &Case, got: &[u8], what: &str) -> Check {
    let i = got.iter().zip(&c.quantized).position(|(a, b)| a != b)?;
    let row_size = ty.row_size(c.n_per_row as i64).unwrap();
    Some(format!(
        "{what}: bytes differ from GGML at row {}, block {} (byte {} of the row): got {:#04x}, \
         GGML {:#04x}",
        i / row_size,
        i % row_size / ty.type_size(),
        i % row_size,
        got[i],
        c.quantized[i]
    ))
}

fn check_quantize(ty: Type, c: &Case) -> Check {
    match c.kind {
        KIND_REF => {
            let mut got = vec![0u8; c.quantized.len()];
            match quantize_row_ref(ty, &c.input, &mut got) {
                Ok(()) => compare_bytes(ty, c, &got, "quantize_row_ref"),
                Err(e) => Some(format!("quantize_row_ref failed: {e}")),
            }
        }
        KIND_CHUNK | KIND_CHUNK_IMATRIX => {
            let imatrix = c.imatrix.as_deref();
            let got = match try_quantize(ty, &c.input, c.n_rows, imatrix) {
                Ok(got) => got,
                Err(msg) => return Some(msg),
            };
            if let Some(msg) = compare_bytes(ty, c, &got, "quantize_chunk") {
                return Some(msg);
            }
            // The same rows quantized one chunk (row) at a time land in the same places.
            let row_size = ty.row_size(c.n_per_row as i64).unwrap();
            let mut rowwise = vec![0u8; got.len()];
            for row in 0..c.n_rows {
                let n = quantize_chunk(ty, &c.input, &mut rowwise, row, 1, c.n_per_row, imatrix);
                if n != Ok(row_size) {
                    return Some(format!("quantize_chunk of row {row} returned {n:?}"));
                }
            }
            compare_bytes(ty, c, &rowwise, "quantize_chunk row by row")
        }
        _ => None,
    }
}

fn check_dequantize(ty: Type, c: &Case) -> Check {
    let mut got = vec![f32::NAN; c.dequantized.len()];
    let result = dequantize_row(ty, &c.quantized, &mut got);
    if ty == Type::Q8_1 {
        // GGML has no dequantizer for Q8_1 (the fixture holds the script's d·q).
        return match result {
            Err(Error::Unsupported(_)) => None,
            other => Some(format!("q8_1 must have no dequantizer, got {other:?}")),
        };
    }
    if let Err(e) = result {
        return Some(format!("dequantize_row failed: {e}"));
    }
    let i = got
        .iter()
        .zip(&c.dequantized)
        .position(|(a, b)| a.to_bits() != b.to_bits())?;
    Some(format!(
        "dequantize_row: value differs from GGML at row {}, block {} (element {}): got {:e} \
         ({:#010x}), GGML {:e} ({:#010x})",
        i / c.n_per_row,
        i % c.n_per_row / ty.blck_size(),
        i % c.n_per_row,
        got[i],
        got[i].to_bits(),
        c.dequantized[i],
        c.dequantized[i].to_bits()
    ))
}

fn run_fixture(name: &str) {
    let fx = load(name);
    let ty = fx.ty;
    let failures: Vec<String> = fx
        .cases
        .iter()
        .flat_map(|c| {
            [check_quantize(ty, c), check_dequantize(ty, c)]
                .into_iter()
                .flatten()
                .map(move |msg| format!("{ty} case {:?}: {msg}", c.name))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} mismatches with GGML:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

macro_rules! fixture_tests {
    ($($test:ident => $file:literal,)*) => {
        $(
            #[test]
            fn $test() {
                run_fixture($file);
            }
        )*

        const FIXTURE_FILES: &[&str] = &[$($file),*];
    };
}

fixture_tests! {
    f16 => "f16",
    bf16 => "bf16",
    q4_0 => "q4_0",
    q4_1 => "q4_1",
    q5_0 => "q5_0",
    q5_1 => "q5_1",
    q8_0 => "q8_0",
    q8_1 => "q8_1",
    q2_k => "q2_K",
    q3_k => "q3_K",
    q4_k => "q4_K",
    q5_k => "q5_K",
    q6_k => "q6_K",
    q8_k => "q8_K",
    iq2_xxs => "iq2_xxs",
    iq2_xs => "iq2_xs",
    iq2_s => "iq2_s",
    iq3_xxs => "iq3_xxs",
    iq3_s => "iq3_s",
    iq1_s => "iq1_s",
    iq1_m => "iq1_m",
    iq4_nl => "iq4_nl",
    iq4_xs => "iq4_xs",
    tq1_0 => "tq1_0",
    tq2_0 => "tq2_0",
    mxfp4 => "mxfp4",
    nvfp4 => "nvfp4",
    q1_0 => "q1_0",
    q2_0 => "q2_0",
}

/// Every quantized type has a fixture, and every fixture file has a test above.
#[test]
fn fixture_set_is_complete() {
    for ty in Type::ALL.iter().filter(|t| t.is_quantized()) {
        assert!(
            FIXTURE_FILES.contains(&ty.name()),
            "no fixture test for {ty}"
        );
    }
    for entry in std::fs::read_dir(fixture_dir()).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        assert!(
            FIXTURE_FILES.contains(&stem.as_str()),
            "fixture {} has no test",
            path.display()
        );
    }
}
