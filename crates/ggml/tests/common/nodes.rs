//! `Op::validate` on nodes the builders made, as if they had come from outside (the RPC
//! server's view): the node's own description, its operands' and its op_params.

use ggml::ops::{Meta, NodeMeta};
use ggml::Tensor;

/// Validates `t` with its op_params replaced by `edit(params)`.
pub fn validate_with(t: &Tensor, edit: impl FnOnce(&mut [i32; 16])) -> ggml::Result<()> {
    let src: Vec<Option<Meta>> = (0..t.n_src_slots())
        .map(|i| t.src(i).map(Meta::of))
        .collect();
    let mut params = t.op_params();
    edit(&mut params);
    let node = NodeMeta {
        dst: Meta::of(t),
        view_offs: t.view_src().map(|_| t.view_offs()),
        src: &src,
        op_params: &params,
    };
    t.op().validate(&node)
}

/// Validates `t` as it is; panics naming the op if it is refused.
pub fn assert_valid(t: &Tensor) {
    validate_with(t, |_| {}).unwrap_or_else(|e| panic!("{} refused: {e}", t.op().name()));
}
