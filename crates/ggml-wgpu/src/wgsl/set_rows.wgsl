// One invocation per element of `a` (after rows_index.wgsl): row i1 of `a` goes to row
// `dst_row` of the result (an index outside it is skipped).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = group_id(wid, nwg) * 64u + lid;
    if (xu(2u) == 1u) {
        if (t == 0u) {
            fault_report(xu(0u) == 1u, p.d.ne.y);
        }
        return;
    }
    if (t >= p.a.n) {
        return;
    }
    let ia = unravel(t, p.a.ne);
    let lo = dst_row(ia);
    if (lo == NONE) {
        return;
    }
    let v = ld_a(row_of(p.a, ia), ia.i.x);
    st(p.d.off + ia.i.x * p.d.nb.x + lo * p.d.nb.y + ia.i.z * p.d.nb.z + ia.i.w * p.d.nb.w + ia.i4 * p.d.nb4, v);
}
