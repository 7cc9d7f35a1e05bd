// One invocation per element of `a`: row i1 of `a` goes to row `b[i1, i2 % .., i3 % ..]` of the
// result (indices I32, or I64 when x0 = 1; an index outside the result is skipped).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = group_id(wid, nwg) * 64u + lid;
    if (t >= p.a.n) {
        return;
    }
    let ia = unravel(t, p.a.ne);
    let io = p.b.off + ia.i.y * p.b.nb.x + (ia.i.z % p.b.ne.y) * p.b.nb.y + (ia.i.w % p.b.ne.z) * p.b.nb.z;
    let lo = w_b(io);
    var hi = 0u;
    if (xu(0u) == 1u) {
        hi = w_b(io + 4u);
    }
    if (hi != 0u || lo >= p.d.ne.y) {
        return;
    }
    let v = ld_a(row_of(p.a, ia), ia.i.x);
    st(p.d.off + ia.i.x * p.d.nb.x + lo * p.d.nb.y + ia.i.z * p.d.nb.z + ia.i.w * p.d.nb.w + ia.i4 * p.d.nb4, v);
}
