//! MAP_CUSTOM1/2/3 and CUSTOM: the node's closure, called once per task with GGML's split
//! (`n_tasks` of [`crate::ops::N_TASKS_MAX`] uses every thread, else at most `n_tasks`).

use super::{operand, NodePtrs, Params, Planned};
use crate::error::{Error, Result};
use crate::ops::custom::{CustomDst, CustomSrc};
use crate::ops::{CustomParams, N_TASKS_MAX};
use crate::tensor::{Tensor, MAX_SRC};

/// The custom kernel; `Err` for a node without a closure (one a builder did not make).
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    if t.custom_fn().is_none() {
        return Err(Error::invalid(format!(
            "CPU: {} node {:?} has no closure (custom nodes come only from their builders)",
            t.op().name(),
            t.name()
        )));
    }
    // The map forms read their operands by position; check they are all there.
    let want = match t.op() {
        crate::ops::Op::MapCustom1 => 1,
        crate::ops::Op::MapCustom2 => 2,
        crate::ops::Op::MapCustom3 => 3,
        _ => 0,
    };
    for i in 0..want {
        operand(t, i)?;
    }
    Ok(Planned::new(run, 0))
}

/// Calls the closure for this thread's task, if it has one.
unsafe fn run(n: &NodePtrs, p: &Params) {
    let Some(f) = &n.custom else { return };
    let CustomParams { n_tasks } = n.params();
    let tasks = match n_tasks {
        N_TASKS_MAX => p.nth,
        k => (k.max(1) as usize).min(p.nth),
    };
    if p.ith >= tasks {
        return;
    }
    let d = &n.dst;
    let count = n.src.iter().take_while(|s| !s.data.is_null()).count();
    let shared = n.src[..count].iter().any(|s| s.overlaps(d));
    // SAFETY: the result's memory is reserved; its rows are disjoint unless the node runs on
    // one thread (the engine's `needs_one_thread`), each task owns its own share, and
    // `shared` says whether an operand overlaps it.
    let mut dst = unsafe { CustomDst::new(d.data, d.ty, d.ne, d.nb, (p.ith, tasks), shared) };
    let own = dst.rows();
    let srcs: [CustomSrc<'_>; MAX_SRC] = std::array::from_fn(|i| {
        let s = &n.src[i.min(count.saturating_sub(1))];
        let same = s.data == d.data && s.ty == d.ty && s.ne == d.ne && s.nb == d.nb;
        // SAFETY: an operand in reserved memory; `shared` tells whether the result overlaps
        // it, and an operand that is the result's own elements is limited to the task's rows.
        unsafe {
            CustomSrc::new(
                s.data,
                s.ty,
                s.ne,
                s.nb,
                s.overlaps(d),
                same.then(|| own.clone()),
            )
        }
    });
    f(&mut dst, &srcs[..count], p.ith, tasks);
}
