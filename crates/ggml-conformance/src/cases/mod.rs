//! The case lists, one module per op family. Each module has `pub fn cases() -> Vec<Case>`;
//! [`FAMILIES`] lists them (add a line there for a new family).

use crate::case::Case;

pub mod binary;

/// Every family: its name and its case list.
pub const FAMILIES: &[(&str, fn() -> Vec<Case>)] = &[("binary", binary::cases)];

/// Every case of every family, in family order.
pub fn all() -> Vec<Case> {
    FAMILIES.iter().flat_map(|(_, f)| f()).collect()
}
