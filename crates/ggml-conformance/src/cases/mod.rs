//! The case lists, one module per op family. Each module has `pub fn cases() -> Vec<Case>`;
//! [`FAMILIES`] lists them (add a line there for a new family).

use crate::case::Case;

pub mod arith;
pub mod attention;
pub mod binary;
pub mod conv;
pub mod copy;
pub mod custom;
pub mod dsv4;
pub mod glu;
pub mod matmul;
pub mod moe;
pub mod norm;
pub mod pool;
pub mod reduce;
pub mod rope;
pub mod rows;
pub mod scan;
pub mod seq;
pub mod set_rows;
pub mod softmax;
pub mod sort;
pub mod unary;
pub mod view;
pub mod window;

/// A family: its name and the function listing its cases.
pub type Family = (&'static str, fn() -> Vec<Case>);

/// Every family.
pub const FAMILIES: &[Family] = &[
    ("binary", binary::cases),
    ("unary", unary::cases),
    ("reduce", reduce::cases),
    ("norm", norm::cases),
    ("softmax", softmax::cases),
    ("matmul", matmul::cases),
    ("rows", rows::cases),
    ("copy", copy::cases),
    ("view", view::cases),
    ("arith", arith::cases),
    ("glu", glu::cases),
    ("moe", moe::cases),
    ("set_rows", set_rows::cases),
    ("rope", rope::cases),
    ("attention", attention::cases),
    ("sort", sort::cases),
    ("scan", scan::cases),
    ("conv", conv::cases),
    ("pool", pool::cases),
    ("seq", seq::cases),
    ("window", window::cases),
    ("dsv4", dsv4::cases),
    ("custom", custom::cases),
];

/// Every case of every family, in family order.
pub fn all() -> Vec<Case> {
    FAMILIES.iter().flat_map(|(_, f)| f()).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use ggml::ops::GluOp;
    use ggml::{Op, Tensor, UnaryOp};

    /// GGML's `ggml_op_desc`: the unary or GLU op's own name for UNARY and GLU nodes, else
    /// the op's name.
    fn op_desc(t: &Tensor) -> &'static str {
        match t.op() {
            Op::Unary => UnaryOp::from_i32(t.op_params()[0]).map_or("UNARY", UnaryOp::name),
            Op::Glu => GluOp::from_i32(t.op_params()[0]).map_or("GLU", GluOp::name),
            op => op.name(),
        }
    }

    /// Case names are unique (fixtures find cases by name), every case builds, and its graph
    /// has a node of the op the case names.
    #[test]
    fn names_are_unique_and_graphs_compute_their_op() {
        let mut seen = HashSet::new();
        for case in super::all() {
            assert!(
                seen.insert(case.name().to_string()),
                "{} twice",
                case.name()
            );
            assert!(
                case.name().starts_with(&format!("{}(", case.op())),
                "{}",
                case.name()
            );
            let inst = crate::instance::instantiate(&case, 1)
                .unwrap_or_else(|e| panic!("{}: {e}", case.name()));
            let ops: Vec<&str> = inst.graph.nodes().iter().map(op_desc).collect();
            assert!(
                ops.contains(&case.op()),
                "{}: the graph computes {ops:?}",
                case.name()
            );
        }
    }
}
