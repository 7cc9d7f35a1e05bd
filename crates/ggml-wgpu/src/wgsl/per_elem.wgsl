// One invocation per element of the result, in its linear order `t`: `value(t, ix)`, from the
// op's part of the kernel (`elem.wgsl`, `concat.wgsl`, `pad.wgsl`).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = group_id(wid, nwg) * 64u + lid;
    if (t >= p.d.n) {
        return;
    }
    let ix = unravel(t, p.d.ne);
    st(at(p.d, ix), value(t, ix));
}
