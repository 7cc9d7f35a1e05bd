//! Where a graph on the meta device needs all-reduces. A product of two tensors split along
//! their shared axis 0 leaves partial sums on the members (GGML's PARTIAL); linear ops (add and
//! subtract of partial sums, scaling, multiplying by whole values, views and copies) carry them
//! on; every other op needs the sums combined first. Each partial result that some op needs
//! whole is all-reduced right after it is computed, so every op that reads it sees the total;
//! partial results nothing needs whole stay partial (a read sums them).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::Tensor;

use super::device::{Entry, Shared};

/// How an op treats partial sums in its operands.
enum Rule {
    /// It makes partial sums of operands that hold none (a product over a split axis 0).
    Makes,
    /// Linear in these operand slots (`usize::MAX`: the view source): partial sums in all of
    /// them give partial sums; the other operands must be whole.
    Linear(&'static [usize]),
    /// Every operand must be whole.
    Whole,
}

const VIEW_SRC: usize = usize::MAX;

fn rule(node: &Tensor, e: &Entry, src: &[Option<Arc<Entry>>]) -> Rule {
    if e.state.dim().is_some() {
        return Rule::Whole; // split results never hold partial sums
    }
    let axis0 = |i: usize| {
        src.get(i)
            .and_then(Option::as_ref)
            .is_some_and(|s| s.state.dim() == Some(0))
    };
    match node.op() {
        Op::MulMat if axis0(0) && axis0(1) => Rule::Makes,
        Op::Add | Op::Sub => Rule::Linear(&[0, 1]),
        Op::Mul | Op::Div | Op::GetRows | Op::Cpy => Rule::Linear(&[0]),
        Op::Scale if node.get_op_params_f32(1).is_ok_and(|b| b == 0.0) => Rule::Linear(&[0]),
        Op::View | Op::Reshape | Op::Permute | Op::Transpose | Op::Cont | Op::Dup => {
            Rule::Linear(&[0])
        }
        Op::None => Rule::Linear(&[VIEW_SRC]),
        _ => Rule::Whole,
    }
}

/// The decision for one graph: which nodes to all-reduce right after computing them, and
/// which end up holding partial sums.
pub(crate) struct Plan {
    pub(crate) reduce: Vec<bool>,
    pub(crate) partial: Vec<bool>,
}

/// Plans `nodes` (with their entries). `Err` when a partial tensor the graph does not compute
/// (a partial weight) would have to be combined.
pub(crate) fn plan(shared: &Shared, nodes: &[Tensor], entries: &[Arc<Entry>]) -> Result<Plan> {
    let index: HashMap<u64, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id(), i)).collect();
    let srcs: Vec<Vec<Option<Arc<Entry>>>> = nodes
        .iter()
        .map(|n| {
            (0..n.n_src_slots())
                .map(|i| n.src(i).map(|s| shared.entry(s)).transpose())
                .collect()
        })
        .collect::<Result<_>>()?;
    let mut reduced: HashSet<usize> = HashSet::new();
    loop {
        let mut partial = vec![false; nodes.len()];
        let mut want: Vec<usize> = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            let holds = |t: &Tensor, e: &Entry, partial: &[bool]| match index.get(&t.id()) {
                Some(&k) => partial[k] && !reduced.contains(&k),
                None => e.is_partial(),
            };
            let operands: Vec<(usize, &Tensor, bool)> = (0..n.n_src_slots())
                .filter_map(|s| {
                    let (t, e) = (n.src(s)?, srcs[i][s].as_ref()?);
                    Some((s, t, holds(t, e, &partial)))
                })
                .chain(n.view_src().filter(|_| n.op() == Op::None).map(|v| {
                    let held = shared.entry(v).map(|e| holds(v, &e, &partial));
                    (VIEW_SRC, v, held.unwrap_or(false))
                }))
                .collect();
            let mut need: Vec<&Tensor> = Vec::new();
            match rule(n, &entries[i], &srcs[i]) {
                Rule::Makes => partial[i] = true,
                Rule::Linear(slots) => {
                    let lin = |s: usize| slots.contains(&s);
                    // CPY's destination is overwritten: what it held does not matter.
                    let ignored = |s: usize| n.op() == Op::Cpy && s == 1;
                    need.extend(
                        operands
                            .iter()
                            .filter(|o| o.2 && !lin(o.0) && !ignored(o.0))
                            .map(|o| o.1),
                    );
                    let linear: Vec<_> = operands.iter().filter(|o| lin(o.0)).collect();
                    let n_partial = linear.iter().filter(|o| o.2).count();
                    if n_partial > 0 && n_partial == linear.len() {
                        partial[i] = true;
                    } else {
                        need.extend(linear.iter().filter(|o| o.2).map(|o| o.1));
                    }
                }
                Rule::Whole => need.extend(operands.iter().filter(|o| o.2).map(|o| o.1)),
            }
            for t in need {
                want.push(owner(nodes, &index, t, &partial)?);
            }
        }
        let before = reduced.len();
        reduced.extend(want);
        if reduced.len() == before {
            let reduce = (0..nodes.len()).map(|i| reduced.contains(&i)).collect();
            let partial = (0..nodes.len())
                .map(|i| partial[i] && !reduced.contains(&i))
                .collect();
            return Ok(Plan { reduce, partial });
        }
    }
}

/// The node whose memory holds `t`'s partial sums: `t` itself, or for a view the node it views
/// (views of a partial result are combined by combining that result).
fn owner(
    nodes: &[Tensor],
    index: &HashMap<u64, usize>,
    t: &Tensor,
    partial: &[bool],
) -> Result<usize> {
    let mut cur = t.clone();
    loop {
        let Some(&k) = index.get(&cur.id()) else {
            return Err(Error::unsupported(format!(
                "meta device: tensor {:?} holds partial sums that must be combined here, but \
                 this graph does not compute it (a partial weight can only be added to partial \
                 results, scaled, or viewed)",
                cur.name()
            )));
        };
        let is_view = matches!(
            nodes[k].op(),
            Op::View | Op::Reshape | Op::Permute | Op::Transpose | Op::None
        );
        let next = match nodes[k].op() {
            Op::None => nodes[k].view_src().cloned(),
            _ => nodes[k].src(0).cloned(),
        };
        match next {
            Some(n) if is_view && partial[k] => cur = n,
            _ => return Ok(k),
        }
    }
}
