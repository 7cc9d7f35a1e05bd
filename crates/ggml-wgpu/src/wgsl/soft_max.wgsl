// One workgroup per row: softmax(a·scale + slope·mask) with an optional sink logit per head.
// x0 = rows, x1 = has mask (b), x2 = has sinks (c), x3 = m0, x4 = m1, x5 = n_head_log2;
// op_params: scale, max_bias. The exponential `soft_exp_` and the normalisation `soft_inv`
// (1 / the sum of the row's exponentials and the sink's) are SOFT_MAX_F64 or SOFT_MAX_F32
// (wgsl.rs).

fn logit(ra: u32, rm: u32, i: u32, slope: f32) -> f32 {
    var v = ld_a(ra, i) * opf(0u);
    if (xu(1u) == 1u) {
        v = v + slope * ld_b(rm, i);
    }
    return v;
}

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
    var rm = 0u;
    if (xu(1u) == 1u) {
        rm = row_of(p.b, bcast(ir, p.b));
    }
    let n = p.a.ne.x;
    let h = ir.i.z;
    let slope = alibi(h);
    var m = NEG_INF;
    for (var i = lid; i < n; i = i + 64u) {
        m = max(m, logit(ra, rm, i, slope));
    }
    var sink = NEG_INF;
    if (xu(2u) == 1u) {
        sink = ld_c(p.c.off, h);
    }
    let mx = max(wg_max(lid, m), sink);
    let inv = soft_inv(ra, rm, slope, mx, n, lid, sink);
    for (var i = lid; i < n; i = i + 64u) {
        st(rd + i * p.d.nb.x, soft_exp_(logit(ra, rm, i, slope) - mx) * inv);
    }
}
