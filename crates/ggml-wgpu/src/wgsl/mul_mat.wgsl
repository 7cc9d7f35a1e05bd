// One workgroup per result element of `a`'s row i0 and up to 8 columns of `b`: the dot products
// over k, split among the 64 invocations and summed in workgroup memory. x0 = workgroups,
// x1 = column blocks, x2 = b.ne2 / a.ne2, x3 = b.ne3 / a.ne3.

const NC: u32 = 8u;

var<workgroup> part: array<f32, 512>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = group_id(wid, nwg);
    if (g >= xu(0u)) {
        return;
    }
    var h = g;
    let i0 = h % p.d.ne.x;
    h = h / p.d.ne.x;
    let jb = h % xu(1u);
    h = h / xu(1u);
    let i2 = h % p.d.ne.z;
    let i3 = h / p.d.ne.z;
    let ra = p.a.off + i0 * p.a.nb.y + (i2 / xu(2u)) * p.a.nb.z + (i3 / xu(3u)) * p.a.nb.w;
    let j0 = jb * NC;
    let nc = min(NC, p.d.ne.y - j0);
    let rb = p.b.off + j0 * p.b.nb.y + i2 * p.b.nb.z + i3 * p.b.nb.w;
    var acc: array<f32, 8>;
    for (var k = lid; k < p.a.ne.x; k = k + 64u) {
        let w = ld_a(ra, k);
        for (var c = 0u; c < nc; c = c + 1u) {
            acc[c] = acc[c] + w * ld_b(rb + c * p.b.nb.y, k);
        }
    }
    for (var c = 0u; c < NC; c = c + 1u) {
        part[c * 64u + lid] = acc[c];
    }
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            for (var c = 0u; c < NC; c = c + 1u) {
                part[c * 64u + lid] = part[c * 64u + lid] + part[c * 64u + lid + s];
            }
        }
        workgroupBarrier();
    }
    if (lid < nc) {
        st(p.d.off + i0 * p.d.nb.x + (j0 + lid) * p.d.nb.y + i2 * p.d.nb.z + i3 * p.d.nb.w, part[lid * 64u]);
    }
}
