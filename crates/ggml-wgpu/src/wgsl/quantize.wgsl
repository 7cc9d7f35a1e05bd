// CPY, DUP and CONT (the result contiguous) and SET_ROWS into a quantized type: one invocation
// per block of 32 values, elements t·32 + j of `a` in its logical order, quantized as GGML's
// reference quantizers round them and written whole (`put_byte`) at `block_at(t)` (from
// quantize_cpy.wgsl or quantize_rows.wgsl, which precede: NONE when there is no block to write).
// x3 = blocks. QT: 0 Q4_0, 1 Q4_1, 2 Q5_0, 3 Q5_1, 4 Q8_0, 5 IQ4_NL.

const QT: u32 = {QT}u;

// The index of IQ4_NL's level nearest x (the lower one at a tie; NaN: the last).
fn nl_index(x: f32) -> u32 {
    if (x <= IQ4NL[0]) {
        return 0u;
    }
    if (!(x < IQ4NL[15])) {
        return 15u;
    }
    var ml = 0u;
    for (var l = 1u; l < 15u; l = l + 1u) {
        ml = ml + select(0u, 1u, IQ4NL[l] <= x);
    }
    return select(ml + 1u, ml, x - IQ4NL[ml] < IQ4NL[ml + 1u] - x);
}

// C's (int8_t) of a float in range: truncated toward zero.
fn trunc_i(v: f32) -> u32 {
    return u32(max(i32(v), 0));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = group_id(wid, nwg) * 64u + lid;
    let o = block_at(t);
    if (o == NONE) {
        return;
    }
    var x: array<f32, 32>;
    for (var j = 0u; j < 32u; j = j + 1u) {
        let ia = unravel(t * 32u + j, p.a.ne);
        x[j] = ld_a(row_of(p.a, ia), ia.i.x);
    }
    // The block's statistics: the first value of largest magnitude (and that magnitude), the
    // smallest and the largest value (from FLT_MAX and -FLT_MAX).
    var amax = 0.0;
    var vmax = 0.0;
    var lo = 3.4028234663852886e38;
    var hi = -3.4028234663852886e38;
    for (var j = 0u; j < 32u; j = j + 1u) {
        let v = x[j];
        if (abs(v) > amax) {
            amax = abs(v);
            vmax = v;
        }
        if (v < lo) {
            lo = v;
        }
        if (v > hi) {
            hi = v;
        }
    }
    var q: array<u32, 32>;
    var dd = 0.0;
    var m = 0.0;
    if (QT == 0u || QT == 2u) {
        // Q4_0 (levels 0..15 around 8), Q5_0 (0..31 around 16).
        let half = select(8.0, 16.0, QT == 2u);
        dd = vmax / -half;
        let id = select(0.0, 1.0 / dd, dd != 0.0);
        for (var j = 0u; j < 32u; j = j + 1u) {
            q[j] = min(trunc_i(x[j] * id + (half + 0.5)), u32(2.0 * half) - 1u);
        }
    } else if (QT == 1u || QT == 3u) {
        // Q4_1 (0..15), Q5_1 (0..31) from the minimum.
        let top = select(15.0, 31.0, QT == 3u);
        dd = (hi - lo) / top;
        m = lo;
        let id = select(0.0, 1.0 / dd, dd != 0.0);
        for (var j = 0u; j < 32u; j = j + 1u) {
            q[j] = min(trunc_i((x[j] - lo) * id + 0.5), u32(top));
        }
    } else if (QT == 4u) {
        // Q8_0 as GGML's x86 quantizer: levels x · (127 / amax) rounded half to even.
        dd = amax / 127.0;
        let id = select(0.0, 127.0 / amax, amax != 0.0);
        for (var j = 0u; j < 32u; j = j + 1u) {
            q[j] = bitcast<u32>(i32(round(x[j] * id))) & 0xffu;
        }
    } else if (amax >= 1e-15) {
        // IQ4_NL (GGML's reference: no scale search): levels at scale max / -127, then the
        // scale that fits them best (weights x²).
        let id = 1.0 / (vmax / IQ4NL[0]);
        var sqx = 0.0;
        var sq2 = 0.0;
        for (var j = 0u; j < 32u; j = j + 1u) {
            q[j] = nl_index(id * x[j]);
            let w = x[j] * x[j];
            let l = IQ4NL[q[j]];
            sqx = sqx + w * l * x[j];
            sq2 = sq2 + w * l * l;
        }
        dd = select(0.0, sqx / sq2, sq2 > 0.0);
    }
    let dh = f32_f16(dd);
    put_byte(o, dh);
    put_byte(o + 1u, dh >> 8u);
    var at = o + 2u;
    if (QT == 1u || QT == 3u) {
        let mh = f32_f16(m);
        put_byte(at, mh);
        put_byte(at + 1u, mh >> 8u);
        at = at + 2u;
    }
    if (QT == 2u || QT == 3u) {
        var qh = 0u;
        for (var j = 0u; j < 32u; j = j + 1u) {
            qh = qh | (((q[j] >> 4u) & 1u) << j);
        }
        for (var k = 0u; k < 4u; k = k + 1u) {
            put_byte(at + k, qh >> (8u * k));
        }
        at = at + 4u;
    }
    if (QT == 4u) {
        for (var j = 0u; j < 32u; j = j + 1u) {
            put_byte(at + j, q[j]);
        }
    } else {
        for (var j = 0u; j < 16u; j = j + 1u) {
            put_byte(at + j, (q[j] & 15u) | ((q[j + 16u] & 15u) << 4u));
        }
    }
    put_flush();
}
