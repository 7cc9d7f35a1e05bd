// One invocation per element of the result: `d = EXPR(x[, y])`, with `x` from `a` (broadcast
// to the result, or read in the result's linear order for copies) and `y` from `b` (broadcast).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = group_id(wid, nwg) * 64u + lid;
    if (t >= p.d.n) {
        return;
    }
    let ix = unravel(t, p.d.ne);
    let ia = {A_INDEX};
    let x = ld_a(row_of(p.a, ia), ia.i.x);
    {B}
    st(at(p.d, ix), {EXPR});
}
