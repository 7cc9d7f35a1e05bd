//! Nodes that no builder made: a tensor described field by field (a graph received over the
//! wire), checked against its op's description before it exists.

use crate::context::{Context, NewTensor};
use crate::error::{Error, Result};
use crate::ops::{Meta, NodeMeta, Op};
use crate::tensor::{flags, span_bytes, Tensor, MAX_DIMS, MAX_OP_PARAMS, MAX_SRC};
use crate::types::Type;

/// Everything a node is, as another process describes it (GGML's `ggml_tensor` fields).
#[derive(Clone, Debug)]
pub struct NodeDesc<'a> {
    /// Element type.
    pub ty: Type,
    /// Elements per dimension.
    pub ne: [i64; MAX_DIMS],
    /// Byte strides.
    pub nb: [usize; MAX_DIMS],
    /// The op.
    pub op: Op,
    /// The raw parameters.
    pub op_params: [i32; MAX_OP_PARAMS / 4],
    /// Operands by slot (`None` for an empty slot).
    pub src: [Option<&'a Tensor>; MAX_SRC],
    /// The tensor this one views and the byte offset in it, for views.
    pub view: Option<(&'a Tensor, usize)>,
    /// Flag bits ([`crate::tensor::flags`]); bits outside them are dropped.
    pub flags: u32,
    /// The tensor's name.
    pub name: &'a str,
}

/// Every flag bit GGML defines.
const ALL_FLAGS: u32 = flags::INPUT | flags::OUTPUT | flags::PARAM | flags::LOSS | flags::COMPUTE;

/// Ops whose behaviour is a function pointer or closure of the process that built the node:
/// never accepted from a description.
fn is_custom(op: Op) -> bool {
    matches!(
        op,
        Op::Custom | Op::MapCustom1 | Op::MapCustom2 | Op::MapCustom3
    )
}

impl Context {
    /// Creates a node from a description (`d`), after checking it as [`Op::validate`] does:
    /// the operands fit the op's slots and shape rule, the node's type, shape and layout are
    /// the ones the rule gives, its strides span addressable memory (a quantized tensor's
    /// blocks are packed along dimension 0), and a view lies inside what it views. Custom and
    /// map ops are always refused. `Err` names the op, the field and the value that do not fit.
    pub fn new_node(&self, d: &NodeDesc<'_>) -> Result<Tensor> {
        let what = |why: String| Error::invalid(format!("new_node {}: {why}", d.op.name()));
        if is_custom(d.op) {
            return Err(what(
                "custom ops run code of the process that built them; refused".into(),
            ));
        }
        if let Some(i) = d.ne.iter().position(|&n| n < 0) {
            return Err(what(format!("ne[{i}] = {} is negative", d.ne[i])));
        }
        if d.ty.blck_size() > 1 && d.nb[0] != d.ty.type_size() {
            return Err(what(format!(
                "nb[0] = {} for {}: a quantized row's blocks must be packed ({} bytes)",
                d.nb[0],
                d.ty,
                d.ty.type_size()
            )));
        }
        if span_bytes(d.ty, &d.ne, &d.nb).is_none() {
            return Err(what(format!(
                "shape {:?} with strides {:?} spans more bytes than memory can address",
                d.ne, d.nb
            )));
        }
        let src_meta: Vec<Option<Meta>> = d.src.iter().map(|s| s.map(Meta::of)).collect();
        let used = src_meta
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |i| i + 1);
        let node = NodeMeta {
            dst: Meta {
                ty: d.ty,
                ne: d.ne,
                nb: d.nb,
            },
            view_offs: d.view.map(|(_, offs)| offs),
            src: &src_meta[..used],
            op_params: &d.op_params,
        };
        if d.op != Op::None || d.view.is_none() {
            d.op.validate(&node)?;
        }
        let src = d.src[..used].iter().map(|s| s.cloned()).collect();
        let mut n = NewTensor::op_slots(d.ty, &d.ne, d.op, src)
            .params(&d.op_params)
            .strides(d.nb);
        if let Some((of, offs)) = d.view {
            n = n.view_of(of, offs);
        }
        let t = self.new_tensor_impl(n)?;
        t.set_name(d.name);
        t.add_flags(d.flags & ALL_FLAGS);
        Ok(t)
    }
}
