// Shared by every kernel: the parameter block, index helpers, conversions and activations.

// A tensor operand: shape, strides in bytes, byte offset in its binding, elements.
struct T {
    ne: vec4<u32>,
    nb: vec4<u32>,
    off: u32,
    ne4: u32,
    nb4: u32,
    n: u32,
}

// The node's parameters: the result, up to five operands, the raw op_params, kernel extras.
struct P {
    d: T,
    a: T,
    b: T,
    c: T,
    e: T,
    f: T,
    op: array<vec4<u32>, 4>,
    x: array<vec4<u32>, 3>,
    // Always (1.0, 0, 0, 0) as f32 bits (`wgsl::KEEP_AT`), for `keep`.
    k: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: P;

// A logical index over five dimensions.
struct Idx {
    i: vec4<u32>,
    i4: u32,
}

fn unravel(t0: u32, ne: vec4<u32>) -> Idx {
    var t = t0;
    var r: Idx;
    r.i.x = t % ne.x;
    t = t / ne.x;
    r.i.y = t % ne.y;
    t = t / ne.y;
    r.i.z = t % ne.z;
    t = t / ne.z;
    r.i.w = t % ne.w;
    r.i4 = t / ne.w;
    return r;
}

// The index of a broadcast operand (each dimension modulo its size).
fn bcast(ix: Idx, t: T) -> Idx {
    return Idx(ix.i % t.ne, ix.i4 % t.ne4);
}

// Byte address of element 0 of the row at `ix` (dimension 0 ignored).
fn row_of(t: T, ix: Idx) -> u32 {
    return t.off + ix.i.y * t.nb.y + ix.i.z * t.nb.z + ix.i.w * t.nb.w + ix.i4 * t.nb4;
}

fn at(t: T, ix: Idx) -> u32 {
    return row_of(t, ix) + ix.i.x * t.nb.x;
}

fn opf(k: u32) -> f32 {
    return bitcast<f32>(p.op[k >> 2u][k & 3u]);
}

fn opi(k: u32) -> i32 {
    return bitcast<i32>(p.op[k >> 2u][k & 3u]);
}

fn xu(k: u32) -> u32 {
    return p.x[k >> 2u][k & 3u];
}

fn xf(k: u32) -> f32 {
    return bitcast<f32>(xu(k));
}

// `v` times the parameter block's 1.0, which no compiler can fold: a sum or difference
// passed through it is not rewritten algebraically with the next one (Mesa's NIR turns
// (a + b) − a into b, and so every two-sum's error into 0, where an operation is not marked
// exact, which WGSL cannot say). `keep64` (with the f64 helpers, wgsl.rs) is its f64 form.
fn keep(v: f32) -> f32 {
    return v * bitcast<f32>(p.k.x);
}

fn group_id(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// IEEE half (low 16 bits) to f32, exactly.
fn f16_f32(h: u32) -> f32 {
    let s = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0u) {
        return select(1.0, -1.0, s != 0u) * f32(m) * 5.9604644775390625e-8;
    }
    if (e == 31u) {
        return bitcast<f32>(s | 0x7f800000u | (m << 13u));
    }
    return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}

// f32 to IEEE half bits, rounded to nearest even.
fn f32_f16(v: f32) -> u32 {
    let u = bitcast<u32>(v);
    let s = (u >> 16u) & 0x8000u;
    let a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return s | 0x7e00u;
    }
    if (a >= 0x477ff000u) {
        return s | 0x7c00u;
    }
    if (a >= 0x38800000u) {
        let r = a - 0x38000000u;
        return s | ((r + 0xfffu + ((r >> 13u) & 1u)) >> 13u);
    }
    let e = a >> 23u;
    if (e < 102u) {
        return s;
    }
    let mant = (a & 0x7fffffu) | 0x800000u;
    let sh = 126u - e;
    let q = mant >> sh;
    let rem = mant & ((1u << sh) - 1u);
    let half = 1u << (sh - 1u);
    let up = rem > half || (rem == half && (q & 1u) == 1u);
    return s | (q + select(0u, 1u, up));
}

// f32 to bfloat16 bits, rounded to nearest even (NaN stays NaN).
fn f32_bf16(v: f32) -> u32 {
    let u = bitcast<u32>(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (u >> 16u) | 0x40u;
    }
    return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}

fn tanh_(x: f32) -> f32 {
    return tanh(clamp(x, -15.0, 15.0));
}

fn sigmoid_(x: f32) -> f32 {
    return 1.0 / (1.0 + exp(-x));
}

fn silu_(x: f32) -> f32 {
    return x / (1.0 + exp(-x));
}

fn gelu_(x: f32) -> f32 {
    return 0.5 * x * (1.0 + tanh_(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)));
}

fn gelu_quick_(x: f32) -> f32 {
    return x * sigmoid_(1.702 * x);
}

// x rounded to F16 and back.
fn via_f16(x: f32) -> f32 {
    return f16_f32(f32_f16(x));
}

// GELU_QUICK of an F32 or F16 value as GGML's CPU computes it: its F16 table, no clamps.
fn gelu_quick_t(x: f32) -> f32 {
    return via_f16(gelu_quick_(via_f16(x)));
}

// erf to about 1.5e-7 (Abramowitz and Stegun 7.1.26).
fn erf_(x: f32) -> f32 {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * z);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-z * z));
}

fn gelu_erf_(x: f32) -> f32 {
    return 0.5 * x * (1.0 + erf_(x * 0.7071067811865476));
}

// exp(x) - 1 without the cancellation near 0 (a Taylor polynomial there, to about 1e-12
// relative).
fn expm1_(x: f32) -> f32 {
    if (abs(x) < 1e-2) {
        return x * (1.0 + x * (0.5 + x * (0.16666666666666666 + x * 0.041666666666666664)));
    }
    return exp(x) - 1.0;
}

// Rounds half away from zero (C's roundf).
fn round_(x: f32) -> f32 {
    let r = trunc(x);
    return select(r, r + sign(x), abs(x - r) >= 0.5);
}

const NEG_INF: f32 = -3.4028234663852886e38;

// ALiBi's slope for head h (op_params[1] = max_bias; x3 = m0, x4 = m1, x5 = n_head_log2).
fn alibi(h: u32) -> f32 {
    if (opf(1u) <= 0.0) {
        return 1.0;
    }
    let nhl2 = xu(5u);
    if (h < nhl2) {
        return pow(xf(3u), f32(h + 1u));
    }
    return pow(xf(4u), f32(2u * (h - nhl2) + 1u));
}

// IQ4_NL's (and IQ4_XS's) levels.
const IQ4NL: array<f32, 16> = array<f32, 16>(-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0,
    -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);

// MXFP4's and NVFP4's E2M1 values, doubled.
const E2M1: array<f32, 16> = array<f32, 16>(0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0,
    -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);

// TQ1_0's trit multipliers.
const POW3: array<u32, 5> = array<u32, 5>(1u, 3u, 9u, 27u, 81u);

// Half of a UE4M3 scale (NVFP4's): 0 and 0x7f are zero.
fn ue4m3_half(x: u32) -> f32 {
    if (x == 0u || x == 0x7fu) {
        return 0.0;
    }
    let e = (x >> 3u) & 15u;
    let m = f32(x & 7u);
    if (e == 0u) {
        return m * 0.001953125 * 0.5;
    }
    return (1.0 + m / 8.0) * exp2(f32(i32(e) - 7)) * 0.5;
}
