// One workgroup per row: x0 = rows; x1 = 0 RMS_NORM, 1 NORM, 2 L2_NORM (eps = op_params[0]),
// 3 SUM_ROWS, 4 MEAN (one value per row). RMS_NORM's mean square is `sq_mean` (NORM_F64 or
// NORM_F32 in wgsl.rs).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = group_id(wid, nwg);
    if (g >= xu(0u)) {
        return;
    }
    let ir = unravel(g * p.a.ne.x, p.a.ne);
    let ra = row_of(p.a, ir);
    let rd = row_of(p.d, ir);
    let n = p.a.ne.x;
    let mode = xu(1u);
    let eps = opf(0u);
    var s = 0.0;
    for (var i = lid; i < n; i = i + 64u) {
        let v = ld_a(ra, i);
        s = s + select(v * v, v, mode == 1u || mode >= 3u);
    }
    let sum = wg_sum(lid, s);
    if (mode >= 3u) {
        if (lid == 0u) {
            st(rd, select(sum, sum / f32(n), mode == 4u));
        }
        return;
    }
    var mean = 0.0;
    var scale = 1.0;
    if (mode == 1u) {
        mean = sum / f32(n);
        var s2 = 0.0;
        for (var i = lid; i < n; i = i + 64u) {
            let v = ld_a(ra, i) - mean;
            s2 = s2 + v * v;
        }
        scale = 1.0 / sqrt(wg_sum(lid, s2) / f32(n) + eps);
    } else if (mode == 0u) {
        scale = 1.0 / sqrt(sq_mean(ra, n, lid, sum) + eps);
    } else {
        scale = 1.0 / max(sqrt(sum), eps);
    }
    for (var i = lid; i < n; i = i + 64u) {
        st(rd + i * p.d.nb.x, (ld_a(ra, i) - mean) * scale);
    }
}
