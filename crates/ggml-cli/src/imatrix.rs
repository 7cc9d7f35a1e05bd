//! Importance matrices (llama.cpp's `--imatrix` files), as per-tensor f32 weights over a row.
//!
//! Two formats are read: the GGUF one (for each weight `W`, tensors `W.in_sum2` (sum of squared
//! activations per column) and `W.counts` (how many activations were summed); the importance is
//! their quotient), and the legacy binary `.dat` one (i32 entry count; per entry an i32 name
//! length, the name, i32 call count, i32 value count and that many f32 sums; the importance is
//! sum / calls).

use std::collections::HashMap;
use std::path::Path;

use ggml::gguf::GgufFile;

/// An importance matrix: per-tensor f32 weights over a row (one row per expert for MoE
/// tensors), and the facts about its making that llama-quantize records in its output.
#[derive(Debug, Default, PartialEq)]
pub struct Imatrix {
    /// Importance weights by weight-tensor name.
    pub entries: HashMap<String, Vec<f32>>,
    /// The datasets it was computed on (`imatrix.datasets`; the legacy format has at most one).
    pub datasets: Vec<String>,
    /// How many chunks of text it was computed on (`imatrix.chunk_count`); 0 when unknown.
    pub chunk_count: u32,
}

impl Imatrix {
    /// The entry for the tensor named `name`.
    pub fn get(&self, name: &str) -> Option<&[f32]> {
        self.entries.get(name).map(Vec::as_slice)
    }
}

/// Reads an imatrix file in either format. As llama-quantize, a GGUF one must carry its
/// metadata (`imatrix.datasets`, `imatrix.chunk_count`, `imatrix.chunk_size`), and no value may
/// be infinite or NaN.
pub fn load(path: &Path) -> Result<Imatrix, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("imatrix {}: {e}", path.display()))?;
    let imatrix = if bytes.starts_with(b"GGUF") {
        from_gguf(bytes)
    } else {
        from_legacy(&bytes)
    };
    let imatrix = imatrix.map_err(|e| format!("imatrix {}: {e}", path.display()))?;
    for (name, values) in &imatrix.entries {
        if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
            return Err(format!(
                "imatrix {}: entry {name} holds the non-finite value {bad}",
                path.display()
            ));
        }
    }
    Ok(imatrix)
}

fn from_gguf(bytes: Vec<u8>) -> Result<Imatrix, String> {
    let f = GgufFile::from_vec(bytes).map_err(|e| e.to_string())?;
    for key in [
        "imatrix.datasets",
        "imatrix.chunk_count",
        "imatrix.chunk_size",
    ] {
        if f.get(key).is_none() {
            return Err(format!(
                "gguf key {key:?} is missing (llama.cpp's imatrix files have it)"
            ));
        }
    }
    let datasets = f
        .get("imatrix.datasets")
        .and_then(|v| v.as_array())
        .and_then(|a| a.as_string_slice())
        .map(|s| s.iter().map(|g| g.to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    let chunk_count = f
        .get_val_u32("imatrix.chunk_count")
        .map_err(|e| e.to_string())?;
    let mut entries = HashMap::new();
    for name in f.tensor_names() {
        let Some(weight) = name.strip_suffix(".in_sum2") else {
            continue;
        };
        let counts_name = format!("{weight}.counts");
        let sums = f.tensor_data_f32(name).map_err(|e| e.to_string())?;
        let counts = f
            .tensor_data_f32(&counts_name)
            .map_err(|e| format!("{counts_name}: {e}"))?;
        // One count per row of sums (per expert); counts are whole numbers stored as f32.
        if counts.is_empty() || sums.len() % counts.len() != 0 {
            return Err(format!(
                "{counts_name} has {} values, which do not divide the {} sums of {name}",
                counts.len(),
                sums.len()
            ));
        }
        let width = sums.len() / counts.len();
        let values = sums
            .chunks(width.max(1))
            .zip(&counts)
            .flat_map(|(row, &count)| {
                let count = count.round();
                // A row no activation reached gets weight 1 everywhere, as in llama-quantize.
                row.iter()
                    .map(move |s| if count > 0.0 { s / count } else { 1.0 })
            })
            .collect();
        entries.insert(weight.to_string(), values);
    }
    if entries.is_empty() {
        return Err("no `*.in_sum2` tensors: not an imatrix file".into());
    }
    Ok(Imatrix {
        entries,
        datasets,
        chunk_count,
    })
}

/// A little-endian reader over the legacy format that names the byte offset of any failure.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], String> {
        let start = self.pos;
        let b = start
            .checked_add(n)
            .and_then(|end| self.bytes.get(start..end))
            .ok_or_else(|| format!("truncated at byte {start} reading {what}"))?;
        self.pos += n;
        Ok(b)
    }

    fn i32(&mut self, what: &str) -> Result<i32, String> {
        Ok(i32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }

    fn count(&mut self, what: &str) -> Result<usize, String> {
        let at = self.pos;
        let v = self.i32(what)?;
        usize::try_from(v).map_err(|_| format!("{what} at byte {at} is negative ({v})"))
    }
}

fn from_legacy(bytes: &[u8]) -> Result<Imatrix, String> {
    let mut r = Reader { bytes, pos: 0 };
    let n = r.count("the entry count")?;
    let mut entries = HashMap::new();
    for e in 0..n {
        let len = r.count("a name length")?;
        let at = r.pos;
        let name = String::from_utf8(r.take(len, "a name")?.to_vec())
            .map_err(|_| format!("entry {e}: the name at byte {at} is not UTF-8"))?;
        let ncall = r.count("a call count")?;
        let nval = r.count("a value count")?;
        let raw = r.take(nval.saturating_mul(4), "the values")?;
        let div = ncall.max(1) as f32;
        let values = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")) / div)
            .collect();
        entries.insert(name, values);
    }
    if entries.is_empty() {
        return Err("the file holds no entries".into());
    }
    // Optionally, the chunk count and the dataset's name.
    let mut imatrix = Imatrix {
        entries,
        ..Imatrix::default()
    };
    if let Ok(chunks) = r.i32("the chunk count") {
        imatrix.chunk_count = chunks.max(0) as u32;
        if let Ok(len) = r.count("the dataset name length") {
            if let Ok(name) = r.take(len, "the dataset name") {
                imatrix
                    .datasets
                    .push(String::from_utf8_lossy(name).into_owned());
            }
        }
    }
    Ok(imatrix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ggml::gguf::GgufWriter;
    use ggml::Type;

    fn legacy(entries: &[(&str, i32, &[f32])]) -> Vec<u8> {
        let mut b = (entries.len() as i32).to_le_bytes().to_vec();
        for (name, calls, sums) in entries {
            b.extend((name.len() as i32).to_le_bytes());
            b.extend(name.as_bytes());
            b.extend(calls.to_le_bytes());
            b.extend((sums.len() as i32).to_le_bytes());
            sums.iter().for_each(|s| b.extend(s.to_le_bytes()));
        }
        b
    }

    #[test]
    fn legacy_values_are_sums_over_calls() {
        let m = from_legacy(&legacy(&[("a", 4, &[8.0, 2.0]), ("b", 0, &[3.0])])).unwrap();
        assert_eq!(m.get("a").unwrap(), [2.0, 0.5]);
        assert_eq!(m.get("b").unwrap(), [3.0], "zero calls divide by one");
        assert_eq!((m.chunk_count, m.datasets.len()), (0, 0));
        // The optional tail: chunk count and dataset name.
        let mut b = legacy(&[("a", 1, &[1.0])]);
        b.extend(7i32.to_le_bytes());
        b.extend(4i32.to_le_bytes());
        b.extend(b"wiki");
        let m = from_legacy(&b).unwrap();
        assert_eq!(
            (m.chunk_count, m.datasets.as_slice()),
            (7, &["wiki".to_string()][..])
        );
    }

    #[test]
    fn hostile_legacy_files_are_errors() {
        let good = legacy(&[("blk.0.w", 2, &[1.0, 2.0, 3.0])]);
        for cut in 0..good.len() {
            assert!(from_legacy(&good[..cut]).is_err(), "cut at {cut}");
        }
        // Counts and lengths far beyond the file, or negative.
        let mut huge = good.clone();
        huge[..4].copy_from_slice(&i32::MAX.to_le_bytes());
        assert!(from_legacy(&huge).unwrap_err().contains("truncated"));
        // Name length and value count: past the end, or negative; call count: negative.
        for (field_at, v) in [(4, i32::MAX), (4, -1), (15, -1), (19, i32::MAX), (19, -1)] {
            let mut bad = good.clone();
            bad[field_at..field_at + 4].copy_from_slice(&v.to_le_bytes());
            assert!(from_legacy(&bad).is_err(), "field at {field_at} = {v}");
        }
    }

    fn gguf_imatrix(sums: &[f32], counts: &[f32], metadata: bool) -> Vec<u8> {
        let le = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let mut w = GgufWriter::new();
        if metadata {
            w.set(
                "imatrix.datasets",
                ggml::gguf::Array::String(vec!["d.txt".into()]),
            )
            .unwrap();
            w.set("imatrix.chunk_count", 3u32).unwrap();
            w.set("imatrix.chunk_size", 512u32).unwrap();
        }
        w.add_tensor("w.in_sum2", Type::F32, &[sums.len() as i64], le(sums))
            .unwrap();
        w.add_tensor("w.counts", Type::F32, &[counts.len() as i64], le(counts))
            .unwrap();
        w.to_bytes().unwrap()
    }

    #[test]
    fn gguf_values_are_sums_over_rounded_counts_per_expert() {
        let m = from_gguf(gguf_imatrix(&[6.0, 3.0], &[2.9], true)).unwrap();
        assert_eq!(m.get("w").unwrap(), [2.0, 1.0], "counts are rounded to 3");
        assert_eq!(
            (m.chunk_count, m.datasets.as_slice()),
            (3, &["d.txt".to_string()][..])
        );
        // Two experts; the second was never reached and gets weight 1.
        let m = from_gguf(gguf_imatrix(&[4.0, 8.0, 5.0, 7.0], &[4.0, 0.0], true)).unwrap();
        assert_eq!(m.get("w").unwrap(), [1.0, 2.0, 1.0, 1.0]);
        assert!(from_gguf(gguf_imatrix(&[1.0, 2.0, 3.0], &[1.0, 1.0], true))
            .unwrap_err()
            .contains("do not divide"));
        assert!(from_gguf(gguf_imatrix(&[1.0], &[1.0], false))
            .unwrap_err()
            .contains("imatrix.datasets"));
        let mut no_counts = GgufWriter::new();
        no_counts
            .set("imatrix.datasets", ggml::gguf::Array::String(vec![]))
            .unwrap();
        no_counts.set("imatrix.chunk_count", 0u32).unwrap();
        no_counts.set("imatrix.chunk_size", 0u32).unwrap();
        no_counts
            .add_tensor("w.in_sum2", Type::F32, &[1], 1f32.to_le_bytes().to_vec())
            .unwrap();
        assert!(from_gguf(no_counts.to_bytes().unwrap())
            .unwrap_err()
            .contains("w.counts"));
    }

    #[test]
    fn non_finite_values_are_refused() {
        let dir = std::env::temp_dir().join(format!("ggml-imatrix-nan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("nan.gguf");
        std::fs::write(&path, gguf_imatrix(&[f32::NAN], &[1.0], true)).unwrap();
        assert!(load(&path).unwrap_err().contains("non-finite value NaN"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
