//! SET_ROWS: rows written into a destination at indices (`ggml_set_rows`).

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

/// SET_ROWS: the rows of `b` (F32, F16 or BF16) `[n, ne1, ne2, ne3]` written into `a` at the
/// I32/I64 indices `c` `[n, C1, C2]` (broadcast over `b`'s dimensions 2 and 3); the result is
/// `a` itself. GGML's slot order: `b`, `c`, then `a`.
pub(crate) struct SetRows;

impl OpSpec for SetRows {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("b"), req("c"), req("a")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let (b, c, a) = (src.get(0), src.get(1), src.get(2));
        src.want_float(0)?;
        src.want_type(1, &[Type::I32, Type::I64])?;
        if a.ne[0] != b.ne[0] || a.ne[2] != b.ne[2] || a.ne[3] != b.ne[3] || a.ne[4] != b.ne[4] {
            return Err(src.bad(
                0,
                format!("its ne0, ne2, ne3 and ne4 must be a's {:?}", a.ne),
            ));
        }
        let divides = |n: i64, m: i64| if m == 0 { n == 0 } else { n % m == 0 };
        if c.ne[0] != b.ne[1]
            || !divides(b.ne[2], c.ne[1])
            || !divides(b.ne[3], c.ne[2])
            || c.ne[3] != 1
            || c.ne[4] != 1
        {
            return Err(src.bad(
                1,
                format!(
                    "it does not fit b's shape {:?}: c.ne0 must be b.ne1, c.ne1 and c.ne2 must \
                     divide b.ne2 and b.ne3, c.ne3 and c.ne4 must be 1",
                    b.ne
                ),
            ));
        }
        if !a.rows_packed() {
            return Err(src.bad(2, "its rows must be packed (nb0 = element size)"));
        }
        if !b.rows_packed() {
            return Err(src.bad(0, "its rows must be packed (nb0 = element size)"));
        }
        Ok(Shape::Into { slot: 2 })
    }
}

impl Context {
    /// `ggml_set_rows`: writes row `i` of `b` into row `c[i, j % C1, k % C2]` of `a` for every
    /// `(i, j, k)` over `b`'s dimensions 1, 2 and 3 (plane `(j, k)` of `a`), converting to
    /// `a`'s type (F32, F16, BF16 or a quantized type with a quantizer); rows of `a` not
    /// indexed keep their values. The result is `a` itself (a view of it).
    ///
    /// Shapes: `a` `[n0, N, ne2, ne3]`, `b` (F32, F16 or BF16) `[n0, n, ne2, ne3]`, `c` (I32
    /// or I64) `[n, C1, C2]` with `C1` dividing `ne2` and `C2` dividing `ne3`; both `a` and
    /// `b` with packed rows. An index outside `0..N` writes nothing and makes the computation
    /// fail with an error naming the node and the index (GGML asserts). When two rows go to the same place, the later one (in `b`'s row
    /// order) wins.
    pub fn set_rows(&self, a: &Tensor, b: &Tensor, c: &Tensor) -> Result<Tensor> {
        self.build::<SetRows>(
            Op::SetRows,
            &[Some(b), Some(c), Some(a)],
            NoParams {},
            false,
        )
    }
}
