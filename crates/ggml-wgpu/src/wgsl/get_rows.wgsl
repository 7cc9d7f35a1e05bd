// One invocation per element of the result: row `b[i1, i2, i3]` of `a` (zeros for an index
// outside `a`, which is recorded as a fault).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = group_id(wid, nwg) * 64u + lid;
    if (xu(2u) == 1u) {
        if (t == 0u) {
            fault_report(false, p.a.ne.y);
        }
        return;
    }
    if (t >= p.d.n) {
        return;
    }
    let ix = unravel(t, p.d.ne);
    let r = bitcast<i32>(w_b(p.b.off + ix.i.y * p.b.nb.x + ix.i.z * p.b.nb.y + ix.i.w * p.b.nb.z));
    var v = 0.0;
    if (r >= 0 && u32(r) < p.a.ne.y) {
        let ia = Idx(vec4<u32>(ix.i.x, u32(r), ix.i.z % p.a.ne.z, ix.i.w % p.a.ne.w), 0u);
        v = ld_a(row_of(p.a, ia), ix.i.x);
    } else if (ix.i.x == 0u) {
        fault_at(ix.i.y, ix.i.z, ix.i.w);
    }
    st(at(p.d, ix), v);
}
