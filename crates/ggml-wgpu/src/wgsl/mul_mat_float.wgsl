// MUL_MAT's dot products for float weights (after mul_mat.wgsl): row `ra` of `a` by the `nc`
// columns of `b` from row `rb` (`r0`, the scratch row, unused).

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

fn dots(ra: u32, rb: u32, r0: u32, nc: u32) -> array<f32, NC> {
    var acc: array<f32, NC>;
    for (var k = 0u; k < p.a.ne.x; k = k + 1u) {
        let w = ld_a(ra, k);
        for (var c = 0u; c < nc; c = c + 1u) {
            acc[c] = acc[c] + w * round_b(ld_b(rb + c * p.b.nb.y, k));
        }
    }
    return acc;
}
