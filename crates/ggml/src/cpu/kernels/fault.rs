//! Index faults. An index operand (GET_ROWS' rows, SET_ROWS' destinations, MUL_MAT_ID's and
//! ADD_ID's experts, SSM_SCAN's states) holds values no shape rule can see. A kernel that meets
//! one outside its range writes a neutral value instead of touching memory outside the tensor,
//! and records the fault here; the engine stops after that node and fails the run with an
//! error naming the node, the operand, the position and the value (GGML asserts instead).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// One out-of-range index value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexFault {
    /// The planned node's position (see `Params::node`).
    pub node: usize,
    /// The operand slot holding the index.
    pub operand: usize,
    /// The index element's position in that operand (dims 0..3).
    pub at: [usize; 3],
    /// The value found there.
    pub value: i64,
    /// The values allowed are `0..limit`.
    pub limit: i64,
}

/// The first fault of a run, shared by its threads: the one of the earliest node, and within
/// it the earliest position (dimension 2 slowest), so the error does not depend on how the
/// threads shared the work.
pub(crate) struct Faults {
    /// The earliest node with a fault (`usize::MAX`: none).
    node: AtomicUsize,
    first: Mutex<Option<IndexFault>>,
}

impl Default for Faults {
    fn default() -> Faults {
        Faults {
            node: AtomicUsize::new(usize::MAX),
            first: Mutex::new(None),
        }
    }
}

impl Faults {
    /// Records `fault` if it comes before every fault recorded so far.
    pub fn record(&self, fault: IndexFault) {
        let key = |f: &IndexFault| (f.node, f.at[2], f.at[1], f.at[0]);
        // A poisoned lock still holds a valid Option; take it either way.
        let mut first = self.first.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none_or(|f| key(&fault) < key(&f)) {
            *first = Some(fault);
        }
        self.node.fetch_min(fault.node, Ordering::AcqRel);
    }

    /// Whether a node before `node` faulted. The engine asks after the barrier that ends node
    /// `node - 1`, so every thread gets the same answer however far the others have run on.
    pub fn before(&self, node: usize) -> bool {
        self.node.load(Ordering::Acquire) < node
    }

    /// The first fault recorded, if any.
    pub fn first(&self) -> Option<IndexFault> {
        *self.first.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl IndexFault {
    /// The error for this fault at `node` (the graph's node number `index`).
    pub fn error(&self, node: &crate::tensor::Tensor, index: usize) -> crate::error::Error {
        crate::error::Error::Compute(format!(
            "{} (graph node {index}, {:?}): src{} index {} at {:?} is outside 0..{}",
            node.op().name(),
            node.name(),
            self.operand,
            self.value,
            self.at,
            self.limit
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_fault_is_kept() {
        let f = Faults::default();
        assert!(!f.before(usize::MAX) && f.first().is_none());
        let a = IndexFault {
            node: 3,
            operand: 1,
            at: [2, 0, 0],
            value: 9,
            limit: 5,
        };
        f.record(IndexFault { at: [0, 1, 0], ..a });
        f.record(a);
        f.record(IndexFault { at: [3, 0, 0], ..a });
        f.record(IndexFault {
            node: 4,
            at: [0, 0, 0],
            ..a
        });
        assert!(f.before(4) && !f.before(3));
        assert_eq!(f.first(), Some(a));
    }
}
