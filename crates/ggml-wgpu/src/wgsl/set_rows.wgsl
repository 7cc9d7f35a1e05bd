// One invocation per element of `a`: row i1 of `a` goes to row `b[i1, i2 % .., i3 % ..]` of the
// result (indices I32, or I64 when x0 = 1; an index outside the result is skipped and recorded
// as a fault).

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
    let j1 = ia.i.z % p.b.ne.y;
    let j2 = ia.i.w % p.b.ne.z;
    let io = p.b.off + ia.i.y * p.b.nb.x + j1 * p.b.nb.y + j2 * p.b.nb.z;
    let lo = w_b(io);
    var hi = 0u;
    if (xu(0u) == 1u) {
        hi = w_b(io + 4u);
    }
    if (hi != 0u || lo >= p.d.ne.y) {
        if (ia.i.x == 0u) {
            fault_at(ia.i.y, j1, j2);
        }
        return;
    }
    let v = ld_a(row_of(p.a, ia), ia.i.x);
    st(p.d.off + ia.i.x * p.d.nb.x + lo * p.d.nb.y + ia.i.z * p.d.nb.z + ia.i.w * p.d.nb.w + ia.i4 * p.d.nb4, v);
}
