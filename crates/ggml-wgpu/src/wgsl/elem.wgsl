// The element-wise ops: `EXPR(x[, y])`, with `x` from `a` (broadcast to the result, or read in
// the result's linear order `t` for copies) and `y` from `b` (broadcast). `per_elem.wgsl`
// stores it for every element of the result.

fn value(t: u32, ix: Idx) -> f32 {
    let ia = {A_INDEX};
    let x = ld_a(row_of(p.a, ia), ia.i.x);
    {B}
    return {EXPR};
}
