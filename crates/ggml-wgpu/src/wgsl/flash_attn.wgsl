// One workgroup per query row (query i1, head i2, sequence i3) of FLASH_ATTN_EXT: scores of 64
// keys at a time (one per invocation), then GGML's online softmax over them in key order, each
// invocation keeping the output elements j ≡ lid (mod 64). q = a, k = b, v = c, mask = e
// (x1 = present), sinks = f (x2 = present); x0 = rows, x6 = heads per K head, x7 = per V head,
// x8 = the scale applied to q·k (scale / softcap with a softcap); op_params[2] = logit_softcap.
// x9 = the roundings of the CPU's rows path (GGML's `one_chunk`: fewer than 64 query rows, or
// K and V not both F32 or both F16): bit 0 q rounded to F16 (F16 K), bit 1 to BF16 (BF16 K),
// bit 2 the value accumulator F16 (F16 V: each scaling and each multiply-add rounded to F16),
// bit 3 (with bit 2) as the CPU does on AVX-512 FP16 (GGML built for it): over whole steps of
// 128 values, the weights rounded to F16 and each multiply-add rounded once.
// The updates are the CPU's: on a new maximum the accumulator is scaled first, then the value
// row added by fused multiply-adds, and S = fma(S, ms, vs); the exponentials are `exp_`
// (wgsl.rs: glibc's `expf` bit for bit where the device has f64). The tiled
// path's softmax (GGML's vector exponential, f64 sums) is not reproduced.

const MAX_D: u32 = 512u;
const SKIP: f32 = -3.0e38;

var<workgroup> qs: array<f32, 512>;
var<workgroup> sc: array<f32, 64>;

fn round_q(v: f32) -> f32 {
    if ((xu(9u) & 1u) != 0u) {
        return f16_f32(f32_f16(v));
    }
    if ((xu(9u) & 2u) != 0u) {
        return bitcast<f32>(f32_bf16(v) << 16u);
    }
    return v;
}

fn round_acc(v: f32) -> f32 {
    if ((xu(9u) & 4u) != 0u) {
        return via_f16(v);
    }
    return v;
}

// x·v + y (F16 values; the product exact in f32) rounded once to F16, as AVX-512 FP16's
// `vfmadd…ph`: the f32 sum's error from a two-sum moves it to round-to-odd first.
fn fma_f16_once(x: f32, v: f32, y: f32) -> f32 {
    let pr = x * v;
    let s = keep(pr + y);
    let bb = keep(s - pr);
    let e = (pr - (s - bb)) + (y - bb);
    var bits = bitcast<u32>(s);
    if (e != 0.0 && (bits & 1u) == 0u) {
        bits = select(bits - 1u, bits + 1u, (e > 0.0) == (s > 0.0));
    }
    return via_f16(bitcast<f32>(bits));
}

// q·k for the key row at `kr` in the CPU's order: on its rows path GGML's `ggml_vec_dot_f16`
// (AVX-512: four partial sums of 16 lanes, each a chain of fused multiply-adds over the whole
// steps of 64 values, added as (0 + 2) + (1 + 3) lane by lane, the 16 lanes folded by halving,
// then the rest one product at a time: in f32 here, where the CPU adds them in f64, so exact
// for head sizes that are multiples of 64); on its tiled path one chain of fused multiply-adds
// in order of the head dimension.
fn score(kr: u32, dk: u32) -> f32 {
    if (xu(9u) == 0u) {
        var dot = 0.0;
        for (var i = 0u; i < dk; i = i + 1u) {
            dot = fma_(qs[i], ld_b(kr, i), dot);
        }
        return dot;
    }
    var part: array<f32, 64>;
    let np = dk - dk % 64u;
    for (var i = 0u; i < np; i = i + 64u) {
        for (var m = 0u; m < 64u; m = m + 1u) {
            part[m] = fma_(ld_b(kr, i + m), qs[i + m], part[m]);
        }
    }
    var f: array<f32, 16>;
    for (var l = 0u; l < 16u; l = l + 1u) {
        f[l] = (part[l] + part[32u + l]) + (part[16u + l] + part[48u + l]);
    }
    for (var w = 8u; w > 0u; w = w / 2u) {
        for (var l = 0u; l < w; l = l + 1u) {
            f[l] = f[l] + f[l + w];
        }
    }
    var dot = f[0];
    for (var i = np; i < dk; i = i + 1u) {
        dot = dot + qs[i] * ld_b(kr, i);
    }
    return dot;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = group_id(wid, nwg);
    if (g >= xu(0u)) {
        return;
    }
    let n_q = p.a.ne.y;
    let n_head = p.a.ne.z;
    let iq1 = g % n_q;
    let iq2 = (g / n_q) % n_head;
    let iq3 = g / (n_q * n_head);
    let dk = p.b.ne.x;
    let dv = p.c.ne.x;
    let n_kv = p.b.ne.y;
    let rq = p.a.off + iq1 * p.a.nb.y + iq2 * p.a.nb.z + iq3 * p.a.nb.w;
    for (var i = lid; i < dk; i = i + 64u) {
        qs[i] = round_q(ld_a(rq, i));
    }
    workgroupBarrier();
    let slope = alibi(iq2);
    let rm = p.e.off + iq1 * p.e.nb.y + (iq2 % p.e.ne.z) * p.e.nb.z + (iq3 % p.e.ne.w) * p.e.nb.w;
    let kb = p.b.off + (iq2 / xu(6u)) * p.b.nb.z + iq3 * p.b.nb.w;
    let vb = p.c.off + (iq2 / xu(7u)) * p.c.nb.z + iq3 * p.c.nb.w;
    let scale = xf(8u);
    let softcap = opf(2u);
    var acc: array<f32, 8>;
    var big_m = NEG_INF;
    var big_s = 0.0;
    for (var base = 0u; base < n_kv; base = base + 64u) {
        let ic = base + lid;
        var s = SKIP;
        if (ic < n_kv) {
            var mv = 0.0;
            if (xu(1u) == 1u) {
                mv = slope * ld_e(rm, ic);
            }
            if (mv > SKIP) {
                s = score(kb + ic * p.b.nb.y, dk) * scale;
                if (softcap != 0.0) {
                    s = softcap * tanh_(s);
                }
                s = s + mv;
            }
        }
        sc[lid] = s;
        workgroupBarrier();
        let n = min(64u, n_kv - base);
        for (var c = 0u; c < n; c = c + 1u) {
            let sv = sc[c];
            if (sv <= SKIP) {
                continue;
            }
            var ms = 1.0;
            var vs = 1.0;
            let grows = sv > big_m;
            if (grows) {
                ms = exp_(big_m - sv);
                big_m = sv;
            } else {
                vs = exp_(sv - big_m);
            }
            let vr = vb + (base + c) * p.c.nb.y;
            // With native F16 steps, the whole steps of 128 values take F16 weights, each
            // update rounded once.
            let native = select(0u, dv & ~127u, (xu(9u) & 8u) != 0u);
            for (var t = 0u; t < 8u; t = t + 1u) {
                let j = lid + 64u * t;
                if (j < native) {
                    var a = acc[t];
                    if (grows) {
                        a = via_f16(a * via_f16(ms));
                    }
                    acc[t] = fma_f16_once(ld_c(vr, j), via_f16(vs), a);
                } else if (j < dv) {
                    var a = acc[t];
                    if (grows) {
                        a = round_acc(a * ms);
                    }
                    acc[t] = round_acc(fma_(ld_c(vr, j), vs, a));
                }
            }
            big_s = fma_(big_s, ms, vs);
        }
        workgroupBarrier();
    }
    if (xu(2u) == 1u) {
        let sv = ld_f(p.f.off, iq2);
        var ms = 1.0;
        var vs = 1.0;
        if (sv > big_m) {
            ms = exp_(big_m - sv);
        } else {
            vs = exp_(sv - big_m);
        }
        for (var t = 0u; t < 8u; t = t + 1u) {
            acc[t] = acc[t] * ms;
        }
        big_s = fma_(big_s, ms, vs);
    }
    var inv = 0.0;
    if (big_s != 0.0) {
        inv = 1.0 / big_s;
    }
    let rd = p.d.off + iq2 * p.d.nb.y + iq1 * p.d.nb.z + iq3 * p.d.nb.w;
    for (var t = 0u; t < 8u; t = t + 1u) {
        let j = lid + 64u * t;
        if (j < dv) {
            st(rd + j * p.d.nb.x, acc[t] * inv);
        }
    }
}
