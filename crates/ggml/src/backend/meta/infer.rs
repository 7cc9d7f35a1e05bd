//! The split state of a computed tensor, inferred from its operands' op by op as GGML's meta
//! backend does (`ggml_backend_meta_get_split_state`). Here mirrored and partial operands are
//! both "whole" (every member holds the full shape); which whole tensors hold partial sums, and
//! where they are all-reduced, is decided per graph when it is computed (see `plan`).

use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::{Tensor, MAX_DIMS};

use super::state::SplitState;

/// What a handler decides: whole, or split along an axis whose pattern repeats `nr` times; the
/// lengths per member are then taken over from the first split operand.
enum Out {
    Whole,
    Axis(usize, u32),
}

/// The inference of one node: the tensor, its operands' states by slot, and the member count.
struct Node<'a> {
    t: &'a Tensor,
    src: &'a [Option<SplitState>],
    n: usize,
}

impl Node<'_> {
    fn s(&self, i: usize) -> Option<&SplitState> {
        self.src.get(i).and_then(Option::as_ref)
    }

    fn dim(&self, i: usize) -> Option<usize> {
        self.s(i).and_then(SplitState::dim)
    }

    fn whole(&self, i: usize) -> bool {
        self.s(i).is_some_and(SplitState::is_whole)
    }

    fn err(&self, why: &str) -> Error {
        let states: Vec<String> = self
            .src
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let s = s.as_ref()?;
                let name = self.t.src(i).map(Tensor::name).unwrap_or_default();
                Some(format!("{name:?}: {:?}", s.split_axis()))
            })
            .collect();
        Error::unsupported(format!(
            "meta device: node {:?} ({}) cannot be computed split over the members: {why} \
             (operands {})",
            self.t.name(),
            self.t.op().name(),
            states.join(", ")
        ))
    }

    fn of(&self, s: &SplitState) -> Out {
        match s.dim() {
            Some(a) => Out::Axis(a, s.nr().first().copied().unwrap_or(1)),
            None => Out::Whole,
        }
    }

    /// Every operand split the same way (`handle_generic`); with `whole_only`, only whole
    /// operands are accepted.
    fn generic(&self, whole_only: bool) -> Result<Out> {
        let mut first: Option<&SplitState> = None;
        for s in self.src.iter().flatten() {
            match first {
                None => first = Some(s),
                Some(f) if !f.same_split(s, self.n) => {
                    return Err(self.err("its operands are split differently"));
                }
                Some(_) => {}
            }
        }
        let Some(f) = first else {
            return Ok(Out::Whole);
        };
        if whole_only && !f.is_whole() {
            return Err(self.err("the op needs whole operands"));
        }
        Ok(self.of(f))
    }

    /// Ops on whole rows (`handle_per_row`): the rows must not be cut.
    /// Other operands (a mask, positions) must be whole or split as operand 0.
    fn per_row(&self) -> Result<Out> {
        let Some(s0) = self.s(0) else {
            return Ok(Out::Whole);
        };
        if s0.dim() == Some(0) {
            return Err(self.err("the op needs whole rows"));
        }
        let fits = |s: &SplitState| s.is_whole() || s.same_split(s0, self.n);
        if !self.src.iter().flatten().all(fits) {
            return Err(self.err("an operand is split differently from the rows"));
        }
        Ok(self.of(s0))
    }

    /// ADD, SUB, MUL, DIV (`handle_bin_bcast`): a whole operand broadcast along the split axis
    /// keeps the split.
    fn bin_bcast(&self) -> Result<Out> {
        if let (Some(a), Some(b)) = (self.dim(0), self.t.src(1)) {
            if b.ne()[a] == 1 && self.whole(1) {
                return Ok(self.of(self.s(0).expect("operand 0 has a state")));
            }
        }
        self.generic(false)
    }

    /// MUL_MAT (`handle_mul_mat`).
    fn mul_mat(&self) -> Result<Out> {
        let (a, b) = (self.dim(0), self.dim(1));
        let same = || {
            let (s0, s1) = (self.s(0), self.s(1));
            s0.zip(s1).is_some_and(|(x, y)| x.same_split(y, self.n))
        };
        match (a, b) {
            (None, None) => Ok(Out::Whole),
            (Some(1), None) => Ok(Out::Axis(0, 1)),
            (None, Some(1)) => Ok(self.of(self.s(1).expect("operand 1 has a state"))),
            (Some(0), Some(0)) if same() => Ok(Out::Whole), // partial sums
            (Some(k), Some(l)) if k >= 2 && k == l && same() => Ok(Out::Axis(k, 1)),
            (Some(k), None) if k >= 2 => Ok(Out::Axis(k, 1)),
            _ => Err(self.err("no split of the product matches these operands")),
        }
    }

    /// RESHAPE, CONT, and contiguous VIEW and CPY (`handle_reshape`): the split axis of the
    /// result is the first whose elements below it are a whole number of the source's.
    fn reshape(&self, src: &Tensor, s: &SplitState) -> Result<Out> {
        let Some(a) = s.dim() else {
            return Ok(Out::Whole);
        };
        let (sne, ne) = (src.ne(), self.t.ne());
        let nr0 = s.nr().first().copied().unwrap_or(1);
        let mut base_in: i64 = sne[..=a].iter().product();
        if s.n_segments() == 1 {
            base_in /= nr0 as i64;
            if a + 1 == src.n_dims() && nr0 == 1 {
                return Ok(Out::Axis(self.t.n_dims() - 1, 1));
            }
        }
        let mut base_out = 1i64;
        for (d, &x) in ne.iter().enumerate() {
            base_out *= x;
            if base_in > 0 && base_out % base_in == 0 {
                return Ok(Out::Axis(d, (base_out / base_in) as u32));
            }
            if base_out > base_in {
                if s.n_segments() == 1 && nr0 == 1 {
                    return Ok(Out::Axis(d, 1));
                }
                break;
            }
        }
        Err(self.err("the reshape cuts through the split"))
    }

    /// VIEW, and leaves that view another tensor (`handle_view`).
    fn view(&self, src: &Tensor, s: &SplitState) -> Result<Out> {
        let t = self.t;
        if t.is_contiguous() && src.is_contiguous() {
            return self.reshape(src, s);
        }
        let (ne, nb, sne, snb) = (t.ne(), t.nb(), src.ne(), src.nb());
        let same_strides = (0..MAX_DIMS).all(|d| (ne[d] == 1 && sne[d] == 1) || nb[d] == snb[d]);
        if same_strides {
            return Ok(self.of(s));
        }
        match s.dim() {
            None => Ok(Out::Whole),
            Some(a) if !t.is_permuted() && !src.is_permuted() && a + 1 < MAX_DIMS => (0..MAX_DIMS
                - 1)
                .find(|&d| nb[d + 1] == snb[a + 1])
                .map(|d| Out::Axis(d, 1))
                .ok_or_else(|| self.err("the view cuts through the split")),
            Some(_) => Err(self.err("a strided view of a permuted split tensor")),
        }
    }

    fn permute(&self) -> Result<Out> {
        let s = self.s(0).expect("operand 0 has a state");
        match s.dim() {
            None => Ok(Out::Whole),
            Some(a) => {
                let to = self.t.op_params()[a] as usize;
                Ok(Out::Axis(to, s.nr().first().copied().unwrap_or(1)))
            }
        }
    }

    fn transpose(&self) -> Result<Out> {
        let s = self.s(0).expect("operand 0 has a state");
        match s.dim() {
            Some(a) if a < 2 => Ok(Out::Axis(a ^ 1, s.nr().first().copied().unwrap_or(1))),
            _ => Ok(self.of(s)),
        }
    }

    fn concat(&self) -> Result<Out> {
        let dim = self.t.op_params()[0] as usize;
        match (self.dim(0), self.dim(1)) {
            (None, Some(b)) if b != dim => Ok(self.of(self.s(1).expect("state"))),
            (Some(a), None) if a != dim => Ok(self.of(self.s(0).expect("state"))),
            (Some(a), Some(b)) if a == b && a != dim => Ok(Out::Axis(a, 1)),
            _ => self.generic(true),
        }
    }

    fn cpy(&self) -> Result<Out> {
        let (Some(src), Some(s)) = (self.t.src(0), self.s(0)) else {
            return self.generic(false);
        };
        let out = self.reshape(src, s)?;
        let dst_ok = match (&out, self.s(1)) {
            (Out::Whole, Some(d)) => d.is_whole(),
            (Out::Axis(a, _), Some(d)) => d.dim() == Some(*a),
            (_, None) => true,
        };
        if !dst_ok {
            return Err(self.err("the destination is split differently from the source"));
        }
        Ok(out)
    }

    fn handle(&self) -> Result<Out> {
        use Op::*;
        match self.t.op() {
            Add | Sub | Mul | Div => self.bin_bcast(),
            MulMat => self.mul_mat(),
            Sqr | Sqrt | Log | Sin | Cos | Scale | Unary | Clamp | LeakyRelu | Fill | Dup => {
                self.generic(false)
            }
            Glu if self.t.src(1).is_none() && self.dim(0) == Some(0) => {
                Err(self.err("a fused GLU needs whole rows"))
            }
            Glu => self.generic(false),
            SumRows | Cumsum | Mean | Argmax | CountEqual | Norm | RmsNorm | L2Norm | GroupNorm
            | SoftMax | Argsort | TopK => self.per_row(),
            Rope if !self.whole(1) => Err(self.err("the positions must be whole")),
            Rope => self.per_row(),
            GetRows if self.dim(0) == Some(0) && self.whole(1) => Ok(Out::Axis(0, 1)),
            Cont | Reshape => {
                let src = self.t.src(0).expect("operand 0");
                self.reshape(src, self.s(0).expect("state"))
            }
            View => {
                let src = self.t.src(0).expect("operand 0");
                self.view(src, self.s(0).expect("state"))
            }
            Permute => self.permute(),
            Transpose => self.transpose(),
            Concat => self.concat(),
            Cpy => self.cpy(),
            _ => self.generic(true),
        }
    }
}

/// The state of `t`, computed by its op from operands in states `src` (by slot), over `n`
/// members; `view_of` is set for a leaf that views another tensor (op NONE), whose state it
/// is. `Err` naming the node when GGML's meta backend has no split for it.
pub(crate) fn infer(
    t: &Tensor,
    src: &[Option<SplitState>],
    view_of: Option<(&Tensor, &SplitState)>,
    n: usize,
) -> Result<SplitState> {
    let node = Node { t, src, n };
    let (out, from) = match view_of {
        Some((v, s)) => (node.view(v, s)?, Some((v, s))),
        None => {
            let out = node.handle()?;
            let from = src
                .iter()
                .enumerate()
                .find_map(|(i, s)| s.as_ref().filter(|s| !s.is_whole()).map(|s| (i, s)))
                .and_then(|(i, s)| t.src(i).map(|x| (x, s)));
            (out, from)
        }
    };
    let Out::Axis(axis, nr) = out else {
        return Ok(SplitState::mirrored());
    };
    // Take over the ratio of the first split operand (GGML's rule), in whole repeats.
    let Some((x, xs)) = from.filter(|(_, s)| !s.is_whole()) else {
        return Err(node.err("a split result needs a split operand"));
    };
    let xa = xs.dim().expect("a split state");
    if t.ne()[axis] == x.ne()[xa] && xs.nr().first() == Some(&nr) {
        // The same length along the axis: the operand's segments carry over as they are.
        return Ok(SplitState::segments(axis, xs.ne(), xs.nr()));
    }
    let div = x.ne()[xa] as i128 * nr as i128;
    let mut ne = Vec::with_capacity(n);
    for j in 0..n {
        let num = xs.device_len(j) as i128 * t.ne()[axis] as i128;
        if div == 0 || num % div != 0 || num == 0 {
            return Err(node.err("the split does not divide the result's dimension evenly"));
        }
        ne.push((num / div) as i64);
    }
    let state = SplitState::resolved_axis(axis, ne, nr);
    let total: i64 = (0..n).map(|j| state.device_len(j)).sum();
    if total != t.ne()[axis] {
        return Err(node.err("the members' slices do not add up to the result"));
    }
    // Every other split operand must be cut in the same ratio.
    for (i, s) in src.iter().enumerate() {
        let (Some(s), Some(x)) = (s.as_ref(), t.src(i)) else {
            continue;
        };
        let Some(a) = s.dim() else { continue };
        let consistent = (0..n).all(|j| {
            state.device_len(j) as i128 * x.ne()[a] as i128
                == s.device_len(j) as i128 * t.ne()[axis] as i128
        });
        if !consistent {
            return Err(node.err("its split operands are cut in different ratios"));
        }
    }
    Ok(state)
}
