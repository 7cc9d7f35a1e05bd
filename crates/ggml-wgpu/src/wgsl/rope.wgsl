// One invocation per rotated pair or copied element of each row (NORMAL and NEOX modes).
// x0 = invocations, x1 = per row, x2 = n_dims, x3 = 1 for NEOX, x4 = n_offs, x5 = theta_scale,
// x6, x7 = YaRN's corr_dims, x8 = has frequency factors (c), x9 = YaRN's mscale factor;
// op_params: freq_scale [6], ext_factor [7], attn_factor [8]. Positions: I32 `b[i2]`. The
// angles' cosine and sine times mscale: for positions below x10, the host's table `e` (the
// CPU's values: `ops::RopeTable`, pairs (cos, sin) by position and pair), else `cos_sin_`
// (wgsl.rs: rounded from f64 where the device has it, which the CPU's C library's cosf/sinf
// are at about 98% of the angles).

fn copy_elem(ra: u32, rd: u32, e: u32) {
    st(rd + e * p.d.nb.x, ld_a(ra, e));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = group_id(wid, nwg) * 64u + lid;
    if (t >= xu(0u)) {
        return;
    }
    let per_row = xu(1u);
    let row = t / per_row;
    let q = t % per_row;
    let ir = unravel(row * p.a.ne.x, p.a.ne);
    let ra = row_of(p.a, ir);
    let rd = row_of(p.d, ir);
    let n_dims = xu(2u);
    let n_offs = xu(4u);
    let half = n_dims / 2u;
    if (q < n_offs) {
        copy_elem(ra, rd, q);
        return;
    }
    if (q >= n_offs + half) {
        copy_elem(ra, rd, q + half);
        return;
    }
    let j = q - n_offs;
    var i0 = n_offs + 2u * j;
    var i1 = i0 + 1u;
    if (xu(3u) == 1u) {
        i0 = n_offs + j;
        i1 = i0 + half;
    }
    let pos = bitcast<i32>(w_b(p.b.off + ir.i.z * p.b.nb.x));
    var theta = f32(pos);
    let ts = xf(5u);
    for (var k = 0u; k < j; k = k + 1u) {
        theta = theta * ts;
    }
    if (xu(8u) == 1u) {
        theta = theta / ld_c(p.c.off, j);
    }
    let freq_scale = opf(6u);
    let ext_factor = opf(7u);
    let theta_interp = freq_scale * theta;
    var th = theta_interp;
    var mscale = opf(8u);
    if (ext_factor != 0.0) {
        let low = xf(6u);
        let high = xf(7u);
        let y = (f32(j) - low) / max(0.001, high - low);
        let ramp = 1.0 - min(1.0, max(0.0, y));
        let mix = ramp * ext_factor;
        th = fma_(theta_interp, 1.0 - mix, theta * mix);
        mscale = mscale * xf(9u);
    }
    var cs = 0.0;
    var sn = 0.0;
    if (pos >= 0 && u32(pos) < xu(10u)) {
        let o = 2u * (u32(pos) * half + j);
        cs = bitcast<f32>(e[o]);
        sn = bitcast<f32>(e[o + 1u]);
    } else {
        let cos_sin = cos_sin_(th);
        cs = cos_sin.x * mscale;
        sn = cos_sin.y * mscale;
    }
    let x0 = ld_a(ra, i0);
    let x1 = ld_a(ra, i1);
    // GGML's x86 roundings: each first product fused with the sum.
    st(rd + i0 * p.d.nb.x, fma_(x0, cs, -(x1 * sn)));
    st(rd + i1 * p.d.nb.x, fma_(x0, sn, x1 * cs));
}
