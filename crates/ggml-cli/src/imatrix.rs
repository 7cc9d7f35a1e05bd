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

/// Importance weights by weight-tensor name.
pub type Imatrix = HashMap<String, Vec<f32>>;

/// Reads an imatrix file in either format.
pub fn load(path: &Path) -> Result<Imatrix, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("imatrix {}: {e}", path.display()))?;
    let imatrix = if bytes.starts_with(b"GGUF") {
        from_gguf(bytes)
    } else {
        from_legacy(&bytes)
    };
    imatrix.map_err(|e| format!("imatrix {}: {e}", path.display()))
}

fn from_gguf(bytes: Vec<u8>) -> Result<Imatrix, String> {
    let f = GgufFile::from_vec(bytes).map_err(|e| e.to_string())?;
    let mut out = Imatrix::new();
    for name in f.tensor_names() {
        let Some(weight) = name.strip_suffix(".in_sum2") else {
            continue;
        };
        let sums = f.tensor_data_f32(name).map_err(|e| e.to_string())?;
        let counts_name = format!("{weight}.counts");
        let counts = f
            .tensor_data_f32(&counts_name)
            .map_err(|e| format!("{counts_name}: {e}"))?;
        let count = counts.first().copied().unwrap_or(0.0);
        if count <= 0.0 {
            return Err(format!("{counts_name}: count {count} is not positive"));
        }
        // Sums may cover several experts (rows of in_sum2); keep the first row's width when
        // counts has one value, else divide row by row.
        let width = sums.len() / counts.len().max(1);
        let values = sums
            .iter()
            .enumerate()
            .map(|(i, s)| s / counts.get(i / width.max(1)).copied().unwrap_or(count))
            .collect();
        out.insert(weight.to_string(), values);
    }
    if out.is_empty() {
        return Err("no `*.in_sum2` tensors: not an imatrix file".into());
    }
    Ok(out)
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

    fn count(&mut self, what: &str) -> Result<usize, String> {
        let at = self.pos;
        let v = i32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes"));
        usize::try_from(v).map_err(|_| format!("{what} at byte {at} is negative ({v})"))
    }
}

fn from_legacy(bytes: &[u8]) -> Result<Imatrix, String> {
    let mut r = Reader { bytes, pos: 0 };
    let n = r.count("the entry count")?;
    let mut out = Imatrix::new();
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
        out.insert(name, values);
    }
    if out.is_empty() {
        return Err("the file holds no entries".into());
    }
    Ok(out)
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
        assert_eq!(m["a"], [2.0, 0.5]);
        assert_eq!(m["b"], [3.0], "zero calls divide by one");
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

    #[test]
    fn gguf_values_are_sums_over_counts_and_need_a_positive_count() {
        let file = |count: f32| {
            let mut w = GgufWriter::new();
            let sums: Vec<u8> = [6.0f32, 3.0].iter().flat_map(|v| v.to_le_bytes()).collect();
            w.add_tensor("w.in_sum2", Type::F32, &[2], sums).unwrap();
            w.add_tensor("w.counts", Type::F32, &[1], count.to_le_bytes().to_vec())
                .unwrap();
            w.to_bytes().unwrap()
        };
        assert_eq!(from_gguf(file(3.0)).unwrap()["w"], [2.0, 1.0]);
        assert!(from_gguf(file(0.0)).unwrap_err().contains("not positive"));
        let mut no_counts = GgufWriter::new();
        no_counts
            .add_tensor("w.in_sum2", Type::F32, &[1], 1f32.to_le_bytes().to_vec())
            .unwrap();
        assert!(from_gguf(no_counts.to_bytes().unwrap())
            .unwrap_err()
            .contains("w.counts"));
        assert!(from_gguf(GgufWriter::new().to_bytes().unwrap())
            .unwrap_err()
            .contains("in_sum2"));
    }
}
