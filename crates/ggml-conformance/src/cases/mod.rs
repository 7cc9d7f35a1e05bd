//! The case lists, one module per op family. Each module has `pub fn cases() -> Vec<Case>`;
//! [`FAMILIES`] lists them (add a line there for a new family).

use crate::case::Case;

pub mod binary;
pub mod copy;
pub mod matmul;
pub mod norm;
pub mod reduce;
pub mod rows;
pub mod softmax;
pub mod unary;
pub mod view;

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
];

/// Every case of every family, in family order.
pub fn all() -> Vec<Case> {
    FAMILIES.iter().flat_map(|(_, f)| f()).collect()
}
