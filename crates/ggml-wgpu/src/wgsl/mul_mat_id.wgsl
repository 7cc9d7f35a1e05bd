// MUL_MAT_ID: one invocation per element (i, e, t) of the result: row i of expert `c[e, t]` of
// `a` dotted with row (e mod b.ne1, t) of `b`, in f32 (as the CPU: `b` is not rounded). An
// expert outside 0..a.ne2 gives 0 and is recorded as a fault (`fault.wgsl`, operand `c`).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = group_id(wid, nwg) * 64u + lid;
    if (xu(2u) == 1u) {
        if (t == 0u) {
            fault_report(false, p.a.ne.z);
        }
        return;
    }
    if (t >= p.d.n) {
        return;
    }
    let ix = unravel(t, p.d.ne);
    let id = bitcast<i32>(w_c(p.c.off + ix.i.y * p.c.nb.x + ix.i.z * p.c.nb.y));
    var acc = 0.0;
    if (id >= 0 && u32(id) < p.a.ne.z) {
        let ra = p.a.off + ix.i.x * p.a.nb.y + u32(id) * p.a.nb.z;
        let rb = p.b.off + (ix.i.y % p.b.ne.y) * p.b.nb.y + ix.i.z * p.b.nb.z;
        for (var k = 0u; k < p.a.ne.x; k = k + 1u) {
            acc = acc + ld_a(ra, k) * ld_b(rb, k);
        }
    } else if (ix.i.x == 0u) {
        fault_at(ix.i.y, ix.i.z, 0u);
    }
    st(at(p.d, ix), acc);
}
