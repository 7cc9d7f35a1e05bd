// One invocation per row i0 of `a` and block of up to 8 columns of `b`: it walks k once,
// reading each weight once for the 8 dot products (no workgroup memory, no barriers).
// Workgroups cover 64 consecutive rows. x0 = workgroups, x1 = column blocks,
// x2 = b.ne2 / a.ne2, x3 = b.ne3 / a.ne3, x4 = row groups (ceil(ne0 / 64)).

const NC: u32 = 8u;

// Values per block of b's 8-bit rounding: 0 (none: float weights), 32 (Q8_0 and Q8_1, for the
// legacy quantized weights) or 256 (Q8_K, for the k-quants).
const QB: u32 = {QB}u;

// The rounding of b for float weights (GGML's vec_dot_type): 0 none (F32), 1 to F16 (F16
// weights), 2 to BF16 (BF16 weights), so the products are the CPU's.
const BR: u32 = {BR}u;

fn round_b(v: f32) -> f32 {
    if (BR == 1u) {
        return f16_f32(f32_f16(v));
    }
    if (BR == 2u) {
        return bitcast<f32>(f32_bf16(v) << 16u);
    }
    return v;
}

// The rounding of b's block of QB values at k0 of the row at rb: (multiplier to levels, scale
// of a level). Q8_0/Q8_1: scale amax / 127 (rounded to f16, as the block stores it), levels
// rounded half away from zero. Q8_K: multiplier -127 / max with max the value of largest
// magnitude (the first), scale its inverse, levels rounded half to even, at most 127.
fn act_scale(rb: u32, k0: u32) -> vec2<f32> {
    var amax = 0.0;
    var vmax = 0.0;
    for (var k = k0; k < k0 + QB; k = k + 1u) {
        let v = ld_b(rb, k);
        if (abs(v) > amax) {
            amax = abs(v);
            vmax = v;
        }
    }
    if (QB == 32u) {
        let d = amax / 127.0;
        return vec2<f32>(select(0.0, 1.0 / d, d != 0.0), f16_f32(f32_f16(d)));
    }
    if (amax == 0.0) {
        return vec2<f32>(0.0, 0.0);
    }
    let iscale = -127.0 / vmax;
    return vec2<f32>(iscale, 1.0 / iscale);
}

// `v` rounded to a level of `sc` (from `act_scale`), as a value.
fn act_level(v: f32, sc: vec2<f32>) -> f32 {
    if (QB == 32u) {
        return round_(v * sc.x) * sc.y;
    }
    return min(round(v * sc.x), 127.0) * sc.y;
}

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
    let rb = p.b.off + j0 * p.b.nb.y + i2 * p.b.nb.z + i3 * p.b.nb.w;
    var acc: array<f32, 8>;
    if (QB == 0u) {
        for (var k = 0u; k < p.a.ne.x; k = k + 1u) {
            let w = ld_a(ra, k);
            for (var c = 0u; c < nc; c = c + 1u) {
                acc[c] = acc[c] + w * round_b(ld_b(rb + c * p.b.nb.y, k));
            }
        }
    } else {
        // The weights are quantized: b is rounded block by block to the 8-bit levels the CPU
        // quantizes activations to for them (GGML's vec_dot_type), so both compute the same
        // products.
        for (var k0 = 0u; k0 < p.a.ne.x; k0 = k0 + QB) {
            var sc: array<vec2<f32>, 8>;
            for (var c = 0u; c < nc; c = c + 1u) {
                sc[c] = act_scale(rb + c * p.b.nb.y, k0);
            }
            for (var k = k0; k < k0 + QB; k = k + 1u) {
                let w = ld_a(ra, k);
                for (var c = 0u; c < nc; c = c + 1u) {
                    acc[c] = acc[c] + w * act_level(ld_b(rb + c * p.b.nb.y, k), sc[c]);
                }
            }
        }
    }
    let od = p.d.off + i0 * p.d.nb.x + j0 * p.d.nb.y + i2 * p.d.nb.z + i3 * p.d.nb.w;
    for (var c = 0u; c < nc; c = c + 1u) {
        st(od + c * p.d.nb.y, acc[c]);
    }
}
