//! Host tensors of f64 values in logical order — what references read and return — and the
//! conversions between them and a tensor's bytes in any layout.

use ggml::{bf16, f16, Type};

/// Dimensions of every shape here (the library's `MAX_DIMS`).
pub const DIMS: usize = ggml::MAX_DIMS;

/// A full shape: elements per dimension, unused trailing dimensions 1.
pub type Shape = [usize; DIMS];

/// A full shape from up to five dimensions.
pub fn shape(ne: &[i64]) -> Shape {
    let mut s = [1usize; DIMS];
    for (d, &n) in ne.iter().enumerate().take(DIMS) {
        s[d] = n.max(0) as usize;
    }
    s
}

/// Every index of `ne` in logical order (dimension 0 fastest).
pub fn indices(ne: Shape) -> impl Iterator<Item = Shape> {
    let n: usize = ne.iter().product();
    (0..n).map(move |mut k| {
        std::array::from_fn(|d| {
            let i = k % ne[d];
            k /= ne[d];
            i
        })
    })
}

/// A tensor's values as f64 in logical order (dimension 0 fastest).
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    /// The shape.
    pub ne: Shape,
    /// The values, `ne.iter().product()` of them.
    pub v: Vec<f64>,
}

impl Host {
    /// The values `f(index)` at every index of `ne`.
    pub fn from_fn(ne: Shape, f: impl FnMut(Shape) -> f64) -> Host {
        Host {
            ne,
            v: indices(ne).map(f).collect(),
        }
    }

    /// The position of index `i` in [`Host::v`].
    pub fn offset(&self, i: Shape) -> usize {
        (0..DIMS).rev().fold(0, |acc, d| acc * self.ne[d] + i[d])
    }

    /// The value at index `i`.
    pub fn at(&self, i: Shape) -> f64 {
        self.v[self.offset(i)]
    }

    /// The `ne[0]` values of the row whose higher indices are those of `i` (`i[0]` ignored).
    pub fn row(&self, i: Shape) -> &[f64] {
        let start = self.offset([0, i[1], i[2], i[3], i[4]]);
        &self.v[start..start + self.ne[0]]
    }

    /// A result with one row of `n0` values for each row of `self`: `f(index of the row, row)`.
    pub fn map_rows(&self, n0: usize, mut f: impl FnMut(Shape, &[f64]) -> Vec<f64>) -> Host {
        let rows = [1, self.ne[1], self.ne[2], self.ne[3], self.ne[4]];
        let mut ne = self.ne;
        ne[0] = n0;
        let mut v = Vec::with_capacity(ne.iter().product());
        for i in indices(rows) {
            let out = f(i, self.row(i));
            assert_eq!(
                out.len(),
                n0,
                "map_rows: a row of {} values, not {n0}",
                out.len()
            );
            v.extend(out);
        }
        Host { ne, v }
    }
}

/// `v` as a tensor of `ty` stores it (floats rounded to nearest even, integers truncated
/// toward zero and saturated); quantized types keep `v` (their rounding is not per value).
pub fn round_to(ty: Type, v: f64) -> f64 {
    match ty {
        Type::F32 => v as f32 as f64,
        Type::F16 => f16::from_f64(v).to_f64(),
        Type::BF16 => bf16::from_f64(v).to_f64(),
        Type::I8 => v as i8 as f64,
        Type::I16 => v as i16 as f64,
        Type::I32 => v as i32 as f64,
        Type::I64 => v as i64 as f64,
        _ => v,
    }
}

/// `h` as a tensor of `ty` would store it: each value rounded as [`round_to`] does, or, for a
/// quantized type, each row quantized with GGML's reference quantizer and dequantized (what a
/// conversion into that type keeps); a quantized type without a reference quantizer, or rows
/// that are not whole blocks, stay unrounded.
pub fn round_host(ty: Type, h: &mut Host) {
    if is_plain(ty) {
        h.v.iter_mut().for_each(|v| *v = round_to(ty, *v));
        return;
    }
    let n0 = h.ne[0];
    let Ok(row_bytes) = ty.row_size(n0 as i64) else {
        return;
    };
    let mut q = vec![0u8; row_bytes];
    let mut f = vec![0f32; n0];
    for row in h.v.chunks_exact_mut(n0.max(1)) {
        let src: Vec<f32> = row.iter().map(|&v| v as f32).collect();
        let ok = ggml::quants::quantize_row_ref(ty, &src, &mut q).is_ok()
            && ggml::quants::dequantize_row(ty, &q, &mut f).is_ok();
        if !ok {
            return;
        }
        row.iter_mut().zip(&f).for_each(|(v, &x)| *v = x as f64);
    }
}

/// Whether values of `ty` are encoded one by one (not in quantized blocks).
pub fn is_plain(ty: Type) -> bool {
    ty.blck_size() == 1
}

/// Writes `v` as one element of the plain type `ty` into `out` (`ty.type_size()` bytes).
pub(crate) fn encode(ty: Type, v: f64, out: &mut [u8]) {
    match ty {
        Type::F32 => out.copy_from_slice(&(v as f32).to_le_bytes()),
        Type::F64 => out.copy_from_slice(&v.to_le_bytes()),
        Type::F16 => out.copy_from_slice(&f16::from_f64(v).to_bits().to_le_bytes()),
        Type::BF16 => out.copy_from_slice(&bf16::from_f64(v).to_bits().to_le_bytes()),
        Type::I8 => out.copy_from_slice(&(v as i8).to_le_bytes()),
        Type::I16 => out.copy_from_slice(&(v as i16).to_le_bytes()),
        Type::I32 => out.copy_from_slice(&(v as i32).to_le_bytes()),
        Type::I64 => out.copy_from_slice(&(v as i64).to_le_bytes()),
        _ => unreachable!("encode: {ty} is not a plain type"),
    }
}

/// Reads one element of the plain type `ty` from `b`.
pub(crate) fn decode(ty: Type, b: &[u8]) -> f64 {
    let a = |n: usize| -> [u8; 8] {
        let mut x = [0u8; 8];
        x[..n].copy_from_slice(&b[..n]);
        x
    };
    match ty {
        Type::F32 => f32::from_le_bytes(b[..4].try_into().unwrap()) as f64,
        Type::F64 => f64::from_le_bytes(a(8)),
        Type::F16 => f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        Type::BF16 => bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        Type::I8 => b[0] as i8 as f64,
        Type::I16 => i16::from_le_bytes([b[0], b[1]]) as f64,
        Type::I32 => i32::from_le_bytes(b[..4].try_into().unwrap()) as f64,
        Type::I64 => i64::from_le_bytes(a(8)) as f64,
        _ => unreachable!("decode: {ty} is not a plain type"),
    }
}

/// The logical values of a tensor of type `ty`, shape `ne` and byte strides `nb` whose first
/// byte is `bytes[offset]`. Quantized rows are dequantized (their blocks must be packed along
/// dimension 0). `Err` when the layout reaches past `bytes` or a row cannot be dequantized.
pub fn read_strided(
    ty: Type,
    ne: Shape,
    nb: [usize; DIMS],
    bytes: &[u8],
    offset: usize,
) -> Result<Host, String> {
    let ts = ty.type_size();
    let need = |end: usize| {
        if end > bytes.len() {
            Err(format!(
                "a {ty} tensor of shape {ne:?}, strides {nb:?} at offset {offset} reaches byte \
                 {end}, past the {} bytes given",
                bytes.len()
            ))
        } else {
            Ok(())
        }
    };
    if ne.contains(&0) {
        return Ok(Host { ne, v: Vec::new() });
    }
    let start = |i: Shape| offset + (0..DIMS).map(|d| i[d] * nb[d]).sum::<usize>();
    if is_plain(ty) {
        let mut v = Vec::with_capacity(ne.iter().product());
        for i in indices(ne) {
            let at = start(i);
            need(at + ts)?;
            v.push(decode(ty, &bytes[at..at + ts]));
        }
        return Ok(Host { ne, v });
    }
    let row_bytes = ty.row_size(ne[0] as i64).map_err(|e| e.to_string())?;
    let rows = [1, ne[1], ne[2], ne[3], ne[4]];
    let mut v = Vec::with_capacity(ne.iter().product());
    let mut row = vec![0f32; ne[0]];
    for i in indices(rows) {
        let at = start(i);
        need(at + row_bytes)?;
        ggml::quants::dequantize_row(ty, &bytes[at..at + row_bytes], &mut row)
            .map_err(|e| e.to_string())?;
        v.extend(row.iter().map(|&x| x as f64));
    }
    Ok(Host { ne, v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logical_order_and_rows() {
        let h = Host::from_fn([3, 2, 2, 1, 1], |i| (i[0] + 10 * i[1] + 100 * i[2]) as f64);
        assert_eq!(h.at([2, 1, 1, 0, 0]), 112.0);
        assert_eq!(h.row([0, 1, 1, 0, 0]), &[110.0, 111.0, 112.0]);
        let s = h.map_rows(1, |_, r| vec![r.iter().sum()]);
        assert_eq!(s.ne, [1, 2, 2, 1, 1]);
        assert_eq!(s.v, vec![3.0, 33.0, 303.0, 333.0]);
    }

    #[test]
    fn strided_reads_follow_strides() {
        // A 2×3 F32 matrix stored transposed: element (i0, i1) at byte 4·(3·i0 + i1).
        let vals = [0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
        let bytes: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
        let h = read_strided(Type::F32, [2, 3, 1, 1, 1], [12, 4, 24, 24, 24], &bytes, 0).unwrap();
        assert_eq!(h.v, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        let e = read_strided(Type::F32, [2, 3, 1, 1, 1], [12, 4, 24, 24, 24], &bytes, 4);
        assert!(e.unwrap_err().contains("past the 24 bytes"));
    }

    #[test]
    fn plain_types_round_trip() {
        for ty in [
            Type::F32,
            Type::F16,
            Type::BF16,
            Type::I8,
            Type::I16,
            Type::I32,
            Type::I64,
        ] {
            let mut b = vec![0u8; ty.type_size()];
            encode(ty, -3.0, &mut b);
            assert_eq!(decode(ty, &b), -3.0, "{ty}");
            assert_eq!(round_to(ty, -3.0), -3.0, "{ty}");
        }
        assert_eq!(round_to(Type::F16, 1.0 + 1.0 / 4096.0), 1.0);
        assert_eq!(round_to(Type::I32, -2.7), -2.0);
    }
}
