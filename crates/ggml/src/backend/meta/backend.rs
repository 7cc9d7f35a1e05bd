//! The meta backend: one stream per member. A graph becomes one graph per member (each node
//! replaced by the member's slice), cut after every node whose partial sums must be combined;
//! between the pieces the members all-reduce that node.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::tensor::{flags, Tensor};

use super::device::{Entry, MetaBuffer, Shared};
use super::plan::plan;
use crate::backend::traits::BackendImpl;
use crate::backend::{Backend, Buffer, Event, PlacedGraph};

/// The engine of a meta device's stream.
pub(crate) struct MetaBackend {
    shared: Arc<Shared>,
    members: Vec<Backend>,
    /// Per member, per reduction step: the buffer a partner's values are copied into.
    tmp: Vec<Vec<Option<Buffer>>>,
}

/// Reduction steps for `n` members: ⌈log2 n⌉.
fn n_steps(n: usize) -> usize {
    n.next_power_of_two().trailing_zeros() as usize
}

impl MetaBackend {
    pub(crate) fn new(shared: Arc<Shared>, params: Option<&str>) -> Result<MetaBackend> {
        let members = shared
            .members
            .iter()
            .map(|d| d.init(params))
            .collect::<Result<Vec<Backend>>>()?;
        let steps = n_steps(members.len());
        Ok(MetaBackend {
            tmp: vec![vec![None; steps]; members.len()],
            shared,
            members,
        })
    }

    /// The entries of the graph's nodes; `Err` for a node outside this device's buffers.
    fn entries(&self, g: &PlacedGraph<'_>) -> Result<Vec<Arc<Entry>>> {
        (0..g.len())
            .map(|i| {
                let node = &g.nodes()[i];
                let ours = g
                    .place(i)
                    .and_then(|p| p.downcast::<MetaBuffer>())
                    .is_some_and(|(b, _)| Arc::ptr_eq(&b.shared, &self.shared));
                if !ours {
                    return Err(Error::invalid(format!(
                        "meta backend {}: node {:?} is not in a buffer of this meta device",
                        self.shared.name,
                        node.name()
                    )));
                }
                self.shared.entry(node)
            })
            .collect()
    }

    /// Queues each member's collected nodes as one graph.
    fn flush(&self, pieces: &mut [Vec<Tensor>]) -> Result<()> {
        for (m, nodes) in self.members.iter().zip(pieces.iter_mut()) {
            if !nodes.is_empty() {
                m.graph_compute_async(&Graph::from_parts(std::mem::take(nodes), Vec::new()))?;
            }
        }
        Ok(())
    }

    fn run(&mut self, g: &PlacedGraph<'_>) -> Result<()> {
        let entries = self.entries(g)?;
        let p = plan(&self.shared, g.nodes(), &entries)?;
        let mut pieces: Vec<Vec<Tensor>> = vec![Vec::new(); self.members.len()];
        for (i, node) in g.nodes().iter().enumerate() {
            let e = &entries[i];
            e.set_partial(p.partial[i]);
            for (piece, sub) in pieces.iter_mut().zip(&e.subs) {
                sub.add_flags(node.flags());
                piece.push(sub.clone());
            }
            if p.reduce[i] {
                self.flush(&mut pieces)?;
                self.all_reduce(&e.subs)?;
            }
        }
        self.flush(&mut pieces)
    }

    /// Sums the members' slices `x` in place, all of them ending with the total: the first
    /// member's device's own all-reduce if it has one, else a butterfly of copies and adds.
    fn all_reduce(&mut self, x: &[Tensor]) -> Result<()> {
        let n = self.members.len();
        if n < 2 || self.shared.members[0].imp().all_reduce(&self.members, x)? {
            return Ok(());
        }
        let p = 1 << (usize::BITS - 1 - n.leading_zeros()); // the largest power of two ≤ n
        let ctx = crate::Context::init((3 * n * n_steps(n) + 8) * crate::tensor_overhead(), true)?;
        let mut step = 0;
        // Fold the members past the power of two into the first ones.
        for j in p..n {
            let add = self.push(&ctx, x, j, j - p, step)?;
            self.compute(j - p, add)?;
        }
        if n > p {
            step += 1;
        }
        let mut off = p / 2;
        while off >= 1 {
            let adds = (0..p)
                .map(|k| self.push(&ctx, x, k ^ off, k, step))
                .collect::<Result<Vec<Tensor>>>()?;
            // Member k overwrites its values only after its partner has copied them.
            for k in 0..p {
                self.order(k ^ off, k)?;
            }
            for (k, add) in adds.into_iter().enumerate() {
                self.compute(k, add)?;
            }
            step += 1;
            off /= 2;
        }
        // Hand the total back to the folded members.
        for j in p..n {
            crate::backend::tensor_copy_async(
                &self.members[j - p],
                &self.members[j],
                &x[j - p],
                &x[j],
            )?;
            self.order(j, j - p)?;
        }
        Ok(())
    }

    /// Queues a copy of member `from`'s values into member `to`'s buffer for `step`, and
    /// returns the in-place add of them into `to`'s values.
    fn push(
        &mut self,
        ctx: &crate::Context,
        x: &[Tensor],
        from: usize,
        to: usize,
        step: usize,
    ) -> Result<Tensor> {
        let size = x[to].nbytes();
        let slot = &mut self.tmp[to][step];
        if slot
            .as_ref()
            .is_none_or(|b| b.get_size() < size || b.is_freed())
        {
            *slot = Some(self.members[to].alloc_buffer(size)?);
        }
        let buf = slot.as_ref().expect("allocated above");
        let tmp = x[to].dup_layout("meta_allreduce_in");
        crate::alloc::tensor_alloc(buf, &tmp, 0)?;
        crate::backend::tensor_copy_async(&self.members[from], &self.members[to], &x[from], &tmp)?;
        let add = ctx.add_inplace(&x[to], &tmp)?;
        add.add_flags(flags::COMPUTE);
        Ok(add)
    }

    /// Queues node `add` on member `k`.
    fn compute(&self, k: usize, add: Tensor) -> Result<()> {
        self.members[k].graph_compute_async(&Graph::from_parts(vec![add], Vec::new()))
    }

    /// Work queued later on member `later` waits for the work queued so far on `first`.
    fn order(&self, first: usize, later: usize) -> Result<()> {
        let ev = Event::for_device(self.members[first].get_device());
        ev.record(&self.members[first])?;
        self.members[later].event_wait(&ev)
    }
}

impl BackendImpl for MetaBackend {
    fn name(&self) -> String {
        self.shared.name.clone()
    }

    fn graph_compute(&mut self, graph: &PlacedGraph<'_>) -> Result<()> {
        let r = self.run(graph);
        // Wait for every member, whatever happened, and report the first error.
        let mut first = r.err();
        for m in &self.members {
            if let Err(e) = m.synchronize() {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    fn set_n_threads(&mut self, n: usize) -> Result<()> {
        self.members.iter().try_for_each(|m| m.set_n_threads(n))
    }
}
