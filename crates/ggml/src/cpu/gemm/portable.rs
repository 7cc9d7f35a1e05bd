//! The portable micro-kernel: a 16 × 4 tile in arrays the compiler vectorises for whatever
//! the compile target has (products and sums rounded separately: no FMA assumed).

use super::{pack_panel_tail, Kernel};
use crate::types::Type;

/// Rows of `a` per tile.
const MR: usize = 16;
/// Columns of `b` per tile.
const NR: usize = 4;

/// The portable path.
pub(super) const KERNEL: Kernel = Kernel {
    mr: MR,
    nr: NR,
    micro,
    pack_panel,
};

/// The [`PanelFn`](super::PanelFn): element by element.
///
/// # Safety
/// As `PanelFn`.
unsafe fn pack_panel(ty: Type, base: *const u8, rs: usize, kc: usize, out: *mut f32) {
    // SAFETY: forwarded from the caller.
    unsafe { pack_panel_tail(ty, base, rs, 0..kc, MR, out) }
}

/// The micro-kernel ([`MicroFn`](super::MicroFn)).
///
/// # Safety
/// As `MicroFn`.
unsafe fn micro(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, acc: bool) {
    // SAFETY: the caller's panels hold kc · MR and kc · NR values.
    let (a, b) = unsafe {
        (
            std::slice::from_raw_parts(a, kc * MR),
            std::slice::from_raw_parts(b, kc * NR),
        )
    };
    let mut sum = [[0f32; MR]; NR];
    for (ap, bp) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        for (s, &bv) in sum.iter_mut().zip(bp) {
            for (x, &av) in s.iter_mut().zip(ap) {
                *x += av * bv;
            }
        }
    }
    for (j, s) in sum.iter().enumerate() {
        for (i, &v) in s.iter().enumerate() {
            // SAFETY: (j, i) is in the caller's tile.
            unsafe {
                let o = c.add(j * ldc + i);
                *o = if acc { *o + v } else { v };
            }
        }
    }
}
