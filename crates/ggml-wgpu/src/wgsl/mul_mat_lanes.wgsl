// MUL_MAT's dot products in GGML's x86 float order (after mul_mat.wgsl), for the weight types
// whose CPU kernels follow it: row `ra` of `a` by the `nc` activation rows from `r0` of the
// scratch `b` (`rb` unused), rounded by `mul_mat_q8.wgsl` to the CPU's 8-bit levels. The
// integer sums are exact (any order gives the same); the f32 steps are the CPU's, step for
// step, so each output has its bits (lavapipe: IEEE f32 with a fused `fma`):
// - blocks of 32 (Q4_0, Q5_0, Q8_0, IQ4_NL against Q8_0): eight lanes, lane k the block's
//   Σ x·y over values 4k..4k + 4, `fma_(xd·yd, lane, acc_k)`, the lanes added at the end as
//   GGML's `hsum_float_8` (its row dots and tinyBLAS batches alike);
// - super-blocks of 256 (Q4_K, Q6_K against Q8_K), below 8 columns (x5 = 0), GGML's row dot:
//   eight lanes as above with the group scales (Q6_K's level offset folded into them as
//   integers), Q4_K's minimums in four more lanes; from 8 columns on (x5 = 1), GGML's tiled
//   product: per super-block one integer sum and one correction, scaled in f32 and added with
//   one `fma`.

// The weight type: 0 Q4_0, 1 Q5_0, 2 Q8_0, 3 IQ4_NL, 4 Q4_K, 5 Q6_K.
const LT: u32 = {LT}u;
// Values per block (32, or 256 for the super-blocks) and bytes per block.
const QB: u32 = {QB}u;
const BS: u32 = {BS}u;

// Level j of the weight block at byte `blk`, as the CPU's integer dots take it (the signed
// types' levels signed, the k-quants' unsigned: Q6_K's offset of 32 comes off as a correction).
fn level(blk: u32, j: u32) -> i32 {
    if (LT == 0u) {
        let q = u8_a(blk + 2u + (j & 15u));
        return i32(select(q & 15u, q >> 4u, j >= 16u)) - 8;
    }
    if (LT == 1u) {
        let q = u8_a(blk + 6u + (j & 15u));
        let hb = (u8_a(blk + 2u + (j >> 3u)) >> (j & 7u)) & 1u;
        return i32(select(q & 15u, q >> 4u, j >= 16u) | (hb << 4u)) - 16;
    }
    if (LT == 2u) {
        return i32(i8_a(blk + 2u + j));
    }
    if (LT == 3u) {
        let q = u8_a(blk + 2u + (j & 15u));
        return i32(IQ4NL[select(q & 15u, q >> 4u, j >= 16u)]);
    }
    if (LT == 4u) {
        let r = j % 64u;
        let q = u8_a(blk + 16u + 32u * (j / 64u) + r % 32u);
        return i32(select(q & 15u, q >> 4u, r >= 32u));
    }
    let hf = j / 128u;
    let r = j % 128u;
    let qd = r / 32u;
    let l = r % 32u;
    let qlb = u8_a(blk + 64u * hf + l + 32u * (qd & 1u));
    let lo = select(qlb & 15u, qlb >> 4u, qd >= 2u);
    let hi = (u8_a(blk + 128u + 32u * hf + l) >> (2u * qd)) & 3u;
    return i32(lo | (hi << 4u));
}

// The first word of block kb of activation row r in the scratch (its scale, then its levels).
fn act_block(r: u32, kb: u32) -> u32 {
    return (r * (p.a.ne.x / QB) + kb) * (QB / 4u + 1u);
}

// Eight lanes added as GGML's `hsum_float_8`.
fn hsum8(l: array<f32, 8>) -> f32 {
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

fn dots(ra: u32, rb: u32, r0: u32, nc: u32) -> array<f32, NC> {
    let tiled = xu(5u) == 1u;
    var acc: array<array<f32, 8>, NC>;
    var accm: array<array<f32, 4>, NC>;
    var out: array<f32, NC>;
    var wl: array<vec4<i32>, QB / 4u>;
    for (var kb = 0u; kb < p.a.ne.x / QB; kb = kb + 1u) {
        let blk = ra + kb * BS;
        for (var q = 0u; q < QB / 4u; q = q + 1u) {
            let j = 4u * q;
            wl[q] = vec4<i32>(level(blk, j), level(blk, j + 1u), level(blk, j + 2u), level(blk, j + 3u));
        }
        if (QB == 32u) {
            let xd = h_a(blk);
            for (var c = 0u; c < nc; c = c + 1u) {
                let ab = act_block(r0 + c, kb);
                let d = xd * bitcast<f32>(b[ab]);
                for (var k = 0u; k < 8u; k = k + 1u) {
                    let s = dot(wl[k], unpack4xI8(b[ab + 1u + k]));
                    acc[c][k] = fma_(d, f32(s), acc[c][k]);
                }
            }
            continue;
        }
        // Per group of 16 values: the scale and the weight of its activation sum in the
        // correction (Q4_K: its minimum; Q6_K: its scale, times the offset 32).
        var sc: array<i32, 16>;
        var cw: array<i32, 16>;
        var d = 0.0;
        var dmin = 0.0;
        if (LT == 4u) {
            d = h_a(blk);
            dmin = h_a(blk + 2u);
            for (var s = 0u; s < 8u; s = s + 1u) {
                let sm = smk_a(s, blk + 4u);
                sc[2u * s] = i32(sm.x);
                sc[2u * s + 1u] = i32(sm.x);
                cw[2u * s] = i32(sm.y);
                cw[2u * s + 1u] = i32(sm.y);
            }
        } else {
            d = h_a(blk + 208u);
            for (var g = 0u; g < 16u; g = g + 1u) {
                sc[g] = i32(i8_a(blk + 192u + g));
                cw[g] = sc[g];
            }
        }
        for (var c = 0u; c < nc; c = c + 1u) {
            let ab = act_block(r0 + c, kb);
            let yd = bitcast<f32>(b[ab]);
            // lane[k]: Σ scale·level·y over values 4k..4k + 4 of every 32; corr[s]: Σ of the
            // correction weights times y over the 32 values of sub-block s.
            var lane: array<i32, 8>;
            var corr: array<i32, 8>;
            for (var s = 0u; s < 8u; s = s + 1u) {
                for (var k = 0u; k < 8u; k = k + 1u) {
                    let qa = unpack4xI8(b[ab + 1u + 8u * s + k]);
                    let g = 2u * s + k / 4u;
                    lane[k] = lane[k] + sc[g] * dot(wl[8u * s + k], qa);
                    corr[s] = corr[s] + cw[g] * dot(qa, vec4<i32>(1));
                }
            }
            if (tiled) {
                var si = 0;
                var ci = 0;
                for (var k = 0u; k < 8u; k = k + 1u) {
                    si = si + lane[k];
                    ci = ci + corr[k];
                }
                var r = 0.0;
                if (LT == 4u) {
                    r = fma_(-dmin, f32(ci), f32(si) * d);
                } else {
                    r = f32(si - 32 * ci) * d;
                }
                out[c] = fma_(r, yd, out[c]);
            } else if (LT == 4u) {
                for (var k = 0u; k < 8u; k = k + 1u) {
                    acc[c][k] = fma_(yd * d, f32(lane[k]), acc[c][k]);
                }
                for (var j = 0u; j < 4u; j = j + 1u) {
                    let m = f32(corr[2u * j] + corr[2u * j + 1u]);
                    accm[c][j] = fma_(yd * -dmin, m, accm[c][j]);
                }
            } else {
                for (var k = 0u; k < 8u; k = k + 1u) {
                    acc[c][k] = fma_(yd * d, f32(lane[k] - 32 * corr[k]), acc[c][k]);
                }
            }
        }
    }
    if (QB == 32u || !tiled) {
        for (var c = 0u; c < nc; c = c + 1u) {
            out[c] = hsum8(acc[c]);
            if (LT == 4u) {
                let m = accm[c];
                out[c] = out[c] + ((m[0] + m[2]) + (m[1] + m[3]));
            }
        }
    }
    return out;
}
