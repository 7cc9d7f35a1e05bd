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

// With quantized weights `b` is the scratch `mul_mat_q8.wgsl` wrote (levels and scales of the
// product's activations, from p.b's shape): the first word of block kb of activation row r.
fn act_block(r: u32, kb: u32) -> u32 {
    return (r * (p.a.ne.x / max(QB, 1u)) + kb) * (QB / 4u + 1u);
}

// Level j (0..3) of a word of four, as a value.
fn level(w: u32, j: u32) -> f32 {
    return f32(bitcast<i32>(w << (24u - 8u * j)) >> 24u);
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
        // The weights are quantized: b's blocks were rounded to the 8-bit levels the CPU
        // quantizes activations to for them (GGML's vec_dot_type), so both compute the same
        // products.
        let r0 = j0 + p.b.ne.y * (i2 + p.b.ne.z * i3);
        for (var kb = 0u; kb < p.a.ne.x / max(QB, 1u); kb = kb + 1u) {
            var sc: array<f32, 8>;
            for (var c = 0u; c < nc; c = c + 1u) {
                sc[c] = bitcast<f32>(b[act_block(r0 + c, kb)]);
            }
            for (var k = 0u; k < QB; k = k + 4u) {
                let k0 = kb * QB + k;
                let w = vec4<f32>(ld_a(ra, k0), ld_a(ra, k0 + 1u), ld_a(ra, k0 + 2u), ld_a(ra, k0 + 3u));
                for (var c = 0u; c < nc; c = c + 1u) {
                    let q = b[act_block(r0 + c, kb) + 1u + k / 4u];
                    var s = acc[c];
                    for (var j = 0u; j < 4u; j = j + 1u) {
                        s = s + w[j] * (level(q, j) * sc[c]);
                    }
                    acc[c] = s;
                }
            }
        }
    }
    let od = p.d.off + i0 * p.d.nb.x + j0 * p.d.nb.y + i2 * p.d.nb.z + i3 * p.d.nb.w;
    for (var c = 0u; c < nc; c = c + 1u) {
        st(od + c * p.d.nb.y, acc[c]);
    }
}
