// MUL_MAT's dot products for quantized weights (after mul_mat.wgsl): row `ra` of `a` by the
// `nc` activation rows from `r0` of the scratch `b` (`rb` unused), which `mul_mat_q8.wgsl`
// rounded to the 8-bit levels the CPU quantizes activations to for these weights (GGML's
// vec_dot_type), so both compute the same products.

// Values per block of the activations' 8-bit rounding: 32 (Q8_0 and Q8_1) or 256 (Q8_K).
const QB: u32 = {QB}u;

// The first word of block kb of activation row r in the scratch (levels and scales of the
// product's activations, from p.b's shape).
fn act_block(r: u32, kb: u32) -> u32 {
    return (r * (p.a.ne.x / QB) + kb) * (QB / 4u + 1u);
}

fn dots(ra: u32, rb: u32, r0: u32, nc: u32) -> array<f32, NC> {
    var acc: array<f32, NC>;
    for (var kb = 0u; kb < p.a.ne.x / QB; kb = kb + 1u) {
        // Per block: the weights' dot products with the levels, then the level's scale (as
        // the CPU scales its integer block sums).
        var part: array<f32, NC>;
        for (var k = 0u; k < QB; k = k + 4u) {
            let k0 = kb * QB + k;
            let w = vec4<f32>(ld_a(ra, k0), ld_a(ra, k0 + 1u), ld_a(ra, k0 + 2u), ld_a(ra, k0 + 3u));
            for (var c = 0u; c < nc; c = c + 1u) {
                let q = b[act_block(r0 + c, kb) + 1u + k / 4u];
                part[c] = part[c] + dot(w, vec4<f32>(unpack4xI8(q)));
            }
        }
        for (var c = 0u; c < nc; c = c + 1u) {
            acc[c] = acc[c] + part[c] * bitcast<f32>(b[act_block(r0 + c, kb)]);
        }
    }
    return acc;
}
