// One invocation per row i0 of `a` and block of up to 16 columns of `b`: it walks k once,
// reading each weight once for the 16 dot products (no workgroup memory, no barriers).
// Workgroups cover 64 consecutive rows. x0 = workgroups, x1 = column blocks,
// x2 = b.ne2 / a.ne2, x3 = b.ne3 / a.ne3, x4 = row groups (ceil(ne0 / 64)). `dots` (the
// products for float or for quantized weights) follows: mul_mat_float.wgsl or mul_mat_quant.wgsl.

const NC: u32 = 16u;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = group_id(wid, nwg);
    if (g >= xu(0u)) {
        return;
    }
    var h = g;
    let i0 = (h % xu(4u)) * 64u + lid;
    h = h / xu(4u);
    let jb = h % xu(1u);
    h = h / xu(1u);
    let i2 = h % p.d.ne.z;
    let i3 = h / p.d.ne.z;
    if (i0 >= p.d.ne.x) {
        return;
    }
    let ra = p.a.off + i0 * p.a.nb.y + (i2 / xu(2u)) * p.a.nb.z + (i3 / xu(3u)) * p.a.nb.w;
    let j0 = jb * NC;
    let nc = min(NC, p.d.ne.y - j0);
    // For float weights, b's row; for quantized ones, its row in the scratch.
    let rb = p.b.off + j0 * p.b.nb.y + i2 * p.b.nb.z + i3 * p.b.nb.w;
    let acc = dots(ra, rb, j0 + p.b.ne.y * (i2 + p.b.ne.z * i3), nc);
    let od = p.d.off + i0 * p.d.nb.x + j0 * p.d.nb.y + i2 * p.d.nb.z + i3 * p.d.nb.w;
    for (var c = 0u; c < nc; c = c + 1u) {
        st(od + c * p.d.nb.y, acc[c]);
    }
}
