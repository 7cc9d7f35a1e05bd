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

// The product of one weight and one (rounded) activation.
fn prod(ra: u32, rb: u32, k: u32) -> f32 {
    return ld_a(ra, k) * round_b(ld_b(rb, k));
}

// GCC's `_mm512_reduce_add_ps` of 16 lanes: the upper 8 onto the lower, then 4, 2, 1.
fn hsum16(l: array<f32, 16>) -> f32 {
    var h = l;
    for (var w = 8u; w > 0u; w = w / 2u) {
        for (var i = 0u; i < w; i = i + 1u) {
            h[i] = h[i] + h[i + w];
        }
    }
    return h[0];
}

// The dot product of F16 weights `ra` with the column `rb` in the float order of the CPU's
// AVX-512 F16 product (`ggml::cpu` matmul_f16.rs; the products are exact in f32). x6 = 2:
// tinyBLAS's (one accumulator of 16 lanes over steps of 16, a last masked step adding 0·0 to
// the lanes it does not cover, `hsum16`); x6 = 1: `ggml_vec_dot_f16`'s (four accumulators of
// 16 lanes over steps of 64, (0 + 2) + (1 + 3), `hsum16`, the last k % 64 products added by
// `tail_sum`: in f64 where the device has it, as the CPU).
fn dot_ordered(ra: u32, rb: u32) -> f32 {
    let k = p.a.ne.x;
    if (xu(6u) == 2u) {
        var l: array<f32, 16>;
        let whole = k - k % 16u;
        for (var i = 0u; i < whole; i = i + 16u) {
            for (var j = 0u; j < 16u; j = j + 1u) {
                l[j] = l[j] + prod(ra, rb, i + j);
            }
        }
        if (whole < k) {
            for (var j = 0u; j < 16u; j = j + 1u) {
                if (whole + j < k) {
                    l[j] = l[j] + prod(ra, rb, whole + j);
                } else {
                    // + 0·0: a -0 lane becomes +0.
                    l[j] = select(l[j], 0.0, l[j] == 0.0);
                }
            }
        }
        return hsum16(l);
    }
    var part: array<f32, 64>;
    let np = k - k % 64u;
    for (var i = 0u; i < np; i = i + 64u) {
        for (var m = 0u; m < 64u; m = m + 1u) {
            part[m] = part[m] + prod(ra, rb, i + m);
        }
    }
    var f: array<f32, 16>;
    for (var l = 0u; l < 16u; l = l + 1u) {
        f[l] = (part[l] + part[32u + l]) + (part[16u + l] + part[48u + l]);
    }
    return tail_sum(hsum16(f), ra, rb, np, k);
}

fn dots(ra: u32, rb: u32, r0: u32, nc: u32) -> array<f32, NC> {
    var acc: array<f32, NC>;
    if (xu(6u) != 0u) {
        for (var c = 0u; c < nc; c = c + 1u) {
            acc[c] = dot_ordered(ra, rb + c * p.b.nb.y);
        }
        return acc;
    }
    for (var k = 0u; k < p.a.ne.x; k = k + 1u) {
        let w = ld_a(ra, k);
        for (var c = 0u; c < nc; c = c + 1u) {
            acc[c] = acc[c] + w * round_b(ld_b(rb + c * p.b.nb.y, k));
        }
    }
    return acc;
}
