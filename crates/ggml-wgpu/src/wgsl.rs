//! WGSL kernels: a kernel's source is the common part, the result's binding with its store
//! function, one binding per operand with a loader for its type, and the kernel's body. Each
//! (kernel, types) source is compiled once per device into a pipeline, kept in a [`Cache`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ggml::{Error, Result, Type};

use crate::{lock, Gpu};

const COMMON: &str = include_str!("wgsl/common.wgsl");
const REDUCE: &str = include_str!("wgsl/reduce.wgsl");
pub(crate) const ELEM: &str = include_str!("wgsl/elem.wgsl");
pub(crate) const PER_ELEM: &str = include_str!("wgsl/per_elem.wgsl");
pub(crate) const CONCAT: &str = include_str!("wgsl/concat.wgsl");
pub(crate) const PAD: &str = include_str!("wgsl/pad.wgsl");
pub(crate) const IM2COL: &str = include_str!("wgsl/im2col.wgsl");
pub(crate) const UPSCALE: &str = include_str!("wgsl/upscale.wgsl");
pub(crate) const ARGSORT: &str = include_str!("wgsl/argsort.wgsl");
pub(crate) const GET_ROWS: &str = include_str!("wgsl/get_rows.wgsl");
const FAULT: &str = include_str!("wgsl/fault.wgsl");
pub(crate) const SET_ROWS: &str = include_str!("wgsl/set_rows.wgsl");
pub(crate) const ROWS_INDEX: &str = include_str!("wgsl/rows_index.wgsl");
pub(crate) const NORM: &str = include_str!("wgsl/norm.wgsl");
pub(crate) const SOFT_MAX: &str = include_str!("wgsl/soft_max.wgsl");
pub(crate) const ROPE: &str = include_str!("wgsl/rope.wgsl");
pub(crate) const MUL_MAT: &str = include_str!("wgsl/mul_mat.wgsl");
pub(crate) const FLASH_ATTN: &str = include_str!("wgsl/flash_attn.wgsl");
pub(crate) const MUL_MAT_ID: &str = include_str!("wgsl/mul_mat_id.wgsl");
pub(crate) const MUL_MAT_FLOAT: &str = include_str!("wgsl/mul_mat_float.wgsl");
pub(crate) const MUL_MAT_QUANT: &str = include_str!("wgsl/mul_mat_quant.wgsl");
pub(crate) const MUL_MAT_LANES: &str = include_str!("wgsl/mul_mat_lanes.wgsl");
pub(crate) const MUL_MAT_Q8: &str = include_str!("wgsl/mul_mat_q8.wgsl");
pub(crate) const QUANTIZE: &str = include_str!("wgsl/quantize.wgsl");
pub(crate) const QUANTIZE_CPY: &str = include_str!("wgsl/quantize_cpy.wgsl");
pub(crate) const QUANTIZE_ROWS: &str = include_str!("wgsl/quantize_rows.wgsl");
pub(crate) const COPY_BLOCKS: &str = include_str!("wgsl/copy_blocks.wgsl");

/// The largest row ARGSORT sorts (`MAX_N` in `argsort.wgsl`: the row's values and indices fill
/// WebGPU's guaranteed 16 KiB of workgroup memory).
pub(crate) const ARGSORT_MAX: u32 = 2048;

/// The index-fault part of a kernel (`fault.wgsl`) whose index operand is operand `slot` (0 is
/// `a`) of `n_operands`: its fault slots are bound after the operands.
pub(crate) fn fault(slot: usize, n_operands: usize) -> String {
    FAULT
        .replace("{FB}", &(n_operands + 2).to_string())
        .replace('§', OPERANDS[slot])
}

/// The operands' binding names, in binding order after the result's.
pub(crate) const OPERANDS: [&str; 5] = ["a", "b", "c", "e", "f"];

/// Words of a tensor's descriptor (`struct T` in `common.wgsl`).
pub(crate) const DESC_WORDS: usize = 12;

/// Where op_params start in the parameter block (`struct P`): after the result's and the
/// operands' descriptors.
pub(crate) const OP_AT: usize = (1 + OPERANDS.len()) * DESC_WORDS;

/// Where the kernel's extra words start (after the 16 words of op_params).
pub(crate) const X_AT: usize = OP_AT + 16;

/// Where the parameter block's constant words start (after the 12 extras): 1.0 as f32 bits,
/// then zeros (`keep` in `common.wgsl`).
pub(crate) const KEEP_AT: usize = X_AT + 12;

/// The constant words at [`KEEP_AT`].
pub(crate) const KEEP: [u32; 4] = [0x3f80_0000, 0, 0, 0];

/// Words of the parameter block: descriptors, op_params, 12 extras and the constant words.
pub(crate) const PARAM_WORDS: usize = KEEP_AT + 4;

/// Whether the loaders can read `ty` as values (integer types are read as indices only).
pub(crate) fn loadable(ty: Type) -> bool {
    loader_body(ty).is_some() && !matches!(ty, Type::I32 | Type::I64)
}

/// Whether the store function can write `ty` as a value (I32 results are indices, stored only
/// by the kernels that make them).
pub(crate) fn storable(ty: Type) -> bool {
    matches!(ty, Type::F32 | Type::F16 | Type::BF16)
}

/// The code of `quantize.wgsl` for results of `ty` (its QT), if it quantizes to it.
pub(crate) fn quantizer(ty: Type) -> Option<u32> {
    Some(match ty {
        Type::Q4_0 => 0,
        Type::Q4_1 => 1,
        Type::Q5_0 => 2,
        Type::Q5_1 => 3,
        Type::Q8_0 => 4,
        Type::IQ4_NL => 5,
        _ => return None,
    })
}

/// The result's binding for kernels writing blocks of a quantized type: `put_byte(o, v)` for
/// each byte in increasing order, then `put_flush()`. A word's bytes are gathered and stored
/// at once; a word shared with another invocation's block (blocks need not fill words) is
/// merged into with atomics, which touch only this invocation's bytes.
const BYTE_STORE: &str = "@group(0) @binding(1) var<storage, read_write> d: array<atomic<u32>>;
var<private> pw: u32 = 0xffffffffu;
var<private> pbits: u32;
var<private> pmask: u32;
fn put_flush() {
    if (pmask == 0xffffffffu) {
        atomicStore(&d[pw], pbits);
    } else if (pmask != 0u) {
        atomicAnd(&d[pw], ~pmask);
        atomicOr(&d[pw], pbits);
    }
    pbits = 0u;
    pmask = 0u;
}
fn put_byte(o: u32, v: u32) {
    if ((o >> 2u) != pw) {
        put_flush();
        pw = o >> 2u;
    }
    let sh = (o & 3u) * 8u;
    pbits = pbits | ((v & 0xffu) << sh);
    pmask = pmask | (0xffu << sh);
}
";

/// The body of `ld_§(row, k)`: element `k` of the row whose first byte is `row`, as f32.
fn loader_body(ty: Type) -> Option<&'static str> {
    Some(match ty {
        Type::F32 => "return bitcast<f32>(§[(row + k * p.§.nb.x) >> 2u]);",
        Type::F16 => "return h_§(row + k * p.§.nb.x);",
        Type::BF16 => {
            "let o = row + k * p.§.nb.x;
    return bitcast<f32>(((§[o >> 2u] >> ((o & 2u) * 8u)) & 0xffffu) << 16u);"
        }
        // Integer operands are indices, read word by word (`w_§`); I64 as its low word.
        Type::I32 | Type::I64 => "return f32(bitcast<i32>(§[(row + k * p.§.nb.x) >> 2u]));",
        Type::Q4_0 => {
            "let blk = row + (k / 32u) * 18u;
    let j = k % 32u;
    let q = u8_§(blk + 2u + (j & 15u));
    return h_§(blk) * (f32(select(q & 15u, q >> 4u, j >= 16u)) - 8.0);"
        }
        Type::Q4_1 => {
            "let blk = row + (k / 32u) * 20u;
    let j = k % 32u;
    let q = u8_§(blk + 4u + (j & 15u));
    return h_§(blk) * f32(select(q & 15u, q >> 4u, j >= 16u)) + h_§(blk + 2u);"
        }
        Type::Q5_0 => {
            "let blk = row + (k / 32u) * 22u;
    let j = k % 32u;
    let q = u8_§(blk + 6u + (j & 15u));
    let hb = (u8_§(blk + 2u + (j >> 3u)) >> (j & 7u)) & 1u;
    return h_§(blk) * (f32(select(q & 15u, q >> 4u, j >= 16u) | (hb << 4u)) - 16.0);"
        }
        Type::Q5_1 => {
            "let blk = row + (k / 32u) * 24u;
    let j = k % 32u;
    let q = u8_§(blk + 8u + (j & 15u));
    let hb = (u8_§(blk + 4u + (j >> 3u)) >> (j & 7u)) & 1u;
    return h_§(blk) * f32(select(q & 15u, q >> 4u, j >= 16u) | (hb << 4u)) + h_§(blk + 2u);"
        }
        Type::Q8_0 => {
            "let blk = row + (k / 32u) * 34u;
    return h_§(blk) * i8_§(blk + 2u + k % 32u);"
        }
        Type::Q4_K => {
            "let blk = row + (k / 256u) * 144u;
    let j = k % 256u;
    let il = j / 64u;
    let r = j % 64u;
    let sm = smk_§(2u * il + r / 32u, blk + 4u);
    let q = u8_§(blk + 16u + 32u * il + r % 32u);
    return h_§(blk) * f32(sm.x) * f32(select(q & 15u, q >> 4u, r >= 32u)) - h_§(blk + 2u) * f32(sm.y);"
        }
        Type::Q5_K => {
            "let blk = row + (k / 256u) * 176u;
    let j = k % 256u;
    let il = j / 64u;
    let r = j % 64u;
    let sm = smk_§(2u * il + r / 32u, blk + 4u);
    let q = u8_§(blk + 48u + 32u * il + r % 32u);
    let hb = (u8_§(blk + 16u + r % 32u) >> (2u * il + r / 32u)) & 1u;
    let n = select(q & 15u, q >> 4u, r >= 32u) + 16u * hb;
    return h_§(blk) * f32(sm.x) * f32(n) - h_§(blk + 2u) * f32(sm.y);"
        }
        Type::Q6_K => {
            "let blk = row + (k / 256u) * 210u;
    let j = k % 256u;
    let hf = j / 128u;
    let r = j % 128u;
    let qd = r / 32u;
    let l = r % 32u;
    let qlb = u8_§(blk + 64u * hf + l + 32u * (qd & 1u));
    let lo = select(qlb & 15u, qlb >> 4u, qd >= 2u);
    let hi = (u8_§(blk + 128u + 32u * hf + l) >> (2u * qd)) & 3u;
    let sc = i8_§(blk + 192u + 8u * hf + l / 16u + 2u * qd);
    return h_§(blk + 208u) * sc * f32(i32(lo | (hi << 4u)) - 32);"
        }
        Type::Q2_K => {
            "let blk = row + (k / 256u) * 84u;
    let j = k % 256u;
    let sc = u8_§(blk + j / 16u);
    let q = (u8_§(blk + 16u + 32u * (j / 128u) + j % 32u) >> (2u * ((j % 128u) / 32u))) & 3u;
    return h_§(blk + 80u) * f32(sc & 15u) * f32(q) - h_§(blk + 82u) * f32(sc >> 4u);"
        }
        Type::Q3_K => {
            "let blk = row + (k / 256u) * 110u;
    let j = k % 256u;
    let is = j / 16u;
    let lo = select(u8_§(blk + 96u + is - 8u) >> 4u, u8_§(blk + 96u + is) & 15u, is < 8u);
    let sc = lo | (((u8_§(blk + 104u + is % 4u) >> (2u * (is / 4u))) & 3u) << 4u);
    let sh = (j % 128u) / 32u;
    let q = (u8_§(blk + 32u + 32u * (j / 128u) + j % 32u) >> (2u * sh)) & 3u;
    let hb = (u8_§(blk + j % 32u) >> (4u * (j / 128u) + sh)) & 1u;
    return h_§(blk + 108u) * f32(i32(sc) - 32) * f32(i32(q) - select(4, 0, hb == 1u));"
        }
        Type::IQ4_NL => {
            "let blk = row + (k / 32u) * 18u;
    let j = k % 32u;
    let q = u8_§(blk + 2u + j % 16u);
    return h_§(blk) * IQ4NL[select(q & 15u, q >> 4u, j >= 16u)];"
        }
        Type::IQ4_XS => {
            "let blk = row + (k / 256u) * 136u;
    let ib = (k % 256u) / 32u;
    let j = k % 32u;
    let ls = ((u8_§(blk + 4u + ib / 2u) >> (4u * (ib % 2u))) & 15u)
        | (((u8_§(blk + 2u + ib / 4u) >> (2u * (ib % 4u))) & 3u) << 4u);
    let q = u8_§(blk + 8u + 16u * ib + j % 16u);
    return h_§(blk) * f32(i32(ls) - 32) * IQ4NL[select(q & 15u, q >> 4u, j >= 16u)];"
        }
        Type::TQ1_0 => {
            "let blk = row + (k / 256u) * 54u;
    let j = k % 256u;
    var b = 0u;
    var n = 0u;
    if (j < 160u) {
        b = u8_§(blk + j % 32u);
        n = j / 32u;
    } else if (j < 240u) {
        b = u8_§(blk + 32u + (j - 160u) % 16u);
        n = (j - 160u) / 16u;
    } else {
        b = u8_§(blk + 48u + (j - 240u) % 4u);
        n = (j - 240u) / 4u;
    }
    let t = (((b * POW3[n]) & 0xffu) * 3u) >> 8u;
    return f32(i32(t) - 1) * h_§(blk + 52u);"
        }
        Type::TQ2_0 => {
            "let blk = row + (k / 256u) * 66u;
    let j = k % 256u;
    let q = (u8_§(blk + 32u * (j / 128u) + j % 32u) >> (2u * ((j % 128u) / 32u))) & 3u;
    return f32(i32(q) - 1) * h_§(blk + 64u);"
        }
        Type::Q1_0 => {
            "let blk = row + (k / 128u) * 18u;
    let j = k % 128u;
    let d = h_§(blk);
    return select(-d, d, ((u8_§(blk + 2u + j / 8u) >> (j % 8u)) & 1u) == 1u);"
        }
        Type::Q2_0 => {
            "let blk = row + (k / 64u) * 18u;
    let j = k % 64u;
    let q = (u8_§(blk + 2u + j / 4u) >> (2u * (j % 4u))) & 3u;
    return f32(i32(q) - 1) * h_§(blk);"
        }
        Type::MXFP4 => {
            "let blk = row + (k / 32u) * 17u;
    let j = k % 32u;
    let e = u8_§(blk);
    let q = u8_§(blk + 1u + j % 16u);
    let half = bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << e, e < 2u));
    return E2M1[select(q & 15u, q >> 4u, j >= 16u)] * half;"
        }
        Type::NVFP4 => {
            "let blk = row + (k / 64u) * 36u;
    let j = k % 64u;
    let s = u8_§(blk + j / 16u);
    let q = u8_§(blk + 4u + 8u * (j / 16u) + j % 8u);
    return E2M1[select(q & 15u, q >> 4u, j % 16u >= 8u)] * ue4m3_half(s);"
        }
        _ => return None,
    })
}

/// The byte helpers of an operand binding `§`: a word, a byte, a signed byte, a half, the
/// 6-bit scale and min of a K-quant block.
const HELPERS: &str = "
fn w_§(o: u32) -> u32 {
    return §[o >> 2u];
}
fn u8_§(o: u32) -> u32 {
    return (§[o >> 2u] >> ((o & 3u) * 8u)) & 0xffu;
}
fn i8_§(o: u32) -> f32 {
    return f32(bitcast<i32>(u8_§(o) << 24u) >> 24u);
}
fn h_§(o: u32) -> f32 {
    return f16_f32((§[o >> 2u] >> ((o & 2u) * 8u)) & 0xffffu);
}
fn smk_§(j: u32, s: u32) -> vec2<u32> {
    if (j < 4u) {
        return vec2<u32>(u8_§(s + j) & 63u, u8_§(s + j + 4u) & 63u);
    }
    return vec2<u32>((u8_§(s + j + 4u) & 15u) | ((u8_§(s + j - 4u) >> 6u) << 4u),
                     (u8_§(s + j + 4u) >> 4u) | ((u8_§(s + j) >> 6u) << 4u));
}
";

/// The result's binding and `st(byte, value)` for `ty`: F32 as words; F16 and BF16 as halves
/// of words, written with atomics (the other half may be another invocation's) — F16 as
/// `f16` elements of their own when `f16` (the adapter's `SHADER_F16`: 16-bit storage), with
/// the same rounding (to nearest even; overflow to infinity).
fn store(ty: Type, f16: bool) -> Result<String> {
    if f16 && ty == Type::F16 {
        return Ok(
            "@group(0) @binding(1) var<storage, read_write> d: array<f16>;
fn st(o: u32, v: f32) {
    // Rounded first (exactly as without the feature), so the conversion is exact.
    d[o >> 1u] = f16(f16_f32(f32_f16(v)));
}
"
            .to_string(),
        );
    }
    let half = |convert: &str| {
        format!(
            "@group(0) @binding(1) var<storage, read_write> d: array<atomic<u32>>;
fn st(o: u32, v: f32) {{
    let sh = (o & 2u) * 8u;
    atomicAnd(&d[o >> 2u], ~(0xffffu << sh));
    atomicOr(&d[o >> 2u], {convert}(v) << sh);
}}
"
        )
    };
    Ok(match ty {
        Type::F32 => "@group(0) @binding(1) var<storage, read_write> d: array<u32>;
fn st(o: u32, v: f32) {
    d[o >> 2u] = bitcast<u32>(v);
}
"
        .to_string(),
        Type::F16 => half("f32_f16"),
        Type::BF16 => half("f32_bf16"),
        // An index (exact below 2^24, which the kernels storing I32 stay under).
        Type::I32 => "@group(0) @binding(1) var<storage, read_write> d: array<u32>;
fn st(o: u32, v: f32) {
    d[o >> 2u] = bitcast<u32>(i32(v));
}
"
        .to_string(),
        _ if ty.is_quantized() => BYTE_STORE.to_string(),
        _ => {
            return Err(Error::unsupported(format!(
                "wgpu kernels cannot store {ty}"
            )))
        }
    })
}

/// An F16 operand `§` bound as `f16` elements (with `SHADER_F16`): its loads need no unpacking.
const F16_HELPERS: &str = "
fn h_§(o: u32) -> f32 {
    return f32(§[o >> 1u]);
}
";

/// GGML's GELU constants (`GELU_COEF_A`, `SQRT_2_OVER_PI`, as f32).
const GELU_COEF_A: f32 = 0.044_715;
const SQRT_2_OVER_PI: f32 = 0.797_884_6;

/// GGML's CPU table of GELU (`GGML_GELU_FP16`), which its F32 and F16 GELU and GEGLU read at
/// `x` rounded to F16: for each F16 value h (by bits), the F16 rounding of
/// `0.5·h·(1 + tanh(√(2/π)·h·(1 + 0.044715·h·h)))` as its build computes it (the C library's
/// `tanhf`, the inner `0.044715·h·h + 1` fused), as f32. Built on the host, where the same
/// `tanhf` is, and bound to the kernels that use it ([`gelu_table_fns`]).
pub(crate) fn gelu_table() -> Vec<f32> {
    (0..=u16::MAX)
        .map(|b| {
            let x = ggml::f16::from_bits(b).to_f32();
            let inner = SQRT_2_OVER_PI * x * (GELU_COEF_A * x).mul_add(x, 1.0);
            ggml::f16::from_f32(0.5 * x * (1.0 + inner.tanh())).to_f32()
        })
        .collect()
}

/// Whether the kernel expression `expr` reads the GELU table (`gelu_h`, `gelu_t`, `geglu_t`).
pub(crate) fn uses_gelu_table(expr: &str) -> bool {
    ["gelu_h(", "gelu_t(", "geglu_t("]
        .iter()
        .any(|f| expr.contains(f))
}

/// The GELU functions of GGML's CPU over the table [`gelu_table`] bound as operand `name`:
/// `gelu_h` (an F16 value, or x rounded to F16: the table entry, no clamps), `gelu_t` (F32:
/// 0 at or below −10, x at or above 10, else the table) and `geglu_t` (F32 GEGLU: 0 at or
/// below −10 whatever the gate, else `gelu_t(x)·y`).
pub(crate) fn gelu_table_fns(name: &str) -> String {
    "
fn gelu_h(x: f32) -> f32 {
    return bitcast<f32>(w_§(4u * f32_f16(x)));
}
fn gelu_t(x: f32) -> f32 {
    if (x <= -10.0) {
        return 0.0;
    }
    if (x >= 10.0) {
        return x;
    }
    return gelu_h(x);
}
fn geglu_t(x: f32, y: f32) -> f32 {
    return select(gelu_t(x) * y, 0.0, x <= -10.0);
}
"
    .replace('§', name)
}

/// `fma_(a, b, c)`: `a·b + c` rounded once, as the CPU's fused multiply-adds, where the
/// device computes in f64 (lavapipe's `fma` rounds the product first): the product is exact in
/// f64, the sum is rounded to f64 with its error kept (TwoSum), and where that rounding left
/// the sum on the midpoint of two f32 values the error says which way the exact sum rounds
/// (no double rounding).
const FMA_F64: &str = "
fn keep64(v: f64) -> f64 {
    return v * f64(bitcast<f32>(p.k.x));
}
// The positive double y rounded to f32 once, subnormal results included (devices may flush
// them in f32).
fn f32_of_(y: f64) -> f32 {
    if (y >= f64(0x1p-126)) {
        return f32(y);
    }
    return bitcast<f32>(u32(round(y * f64(0x1p149))));
}
fn fma_(a: f32, b: f32, c: f32) -> f32 {
    let pr = f64(a) * f64(b);
    let s = keep64(pr + f64(c));
    let bb = keep64(s - pr);
    let e = (pr - (s - bb)) + (f64(c) - bb);
    let r = f32(s);
    let diff = s - f64(r);
    let other = f64(r) + 2.0 * diff;
    if (e != 0.0 && diff != 0.0 && f64(f32(other)) == other && (e > 0.0) == (diff > 0.0)) {
        return f32(other);
    }
    return r;
}
";

/// `fma_` without f64: the adapter's `fma` (fused on GPUs with a hardware FMA).
const FMA_F32: &str = "
fn fma_(a: f32, b: f32, c: f32) -> f32 {
    return fma(a, b, c);
}
";

/// `cos_sin_(x)`: cos and sin of `x` rounded to nearest from f64 (as the CPU's C library's
/// `cosf`/`sinf` give them, but where the exact value lies next to a midpoint): `x` less the
/// nearest multiple k of π/2 (Cody and Waite: π/2 in three parts, whose products with k are
/// exact), then Taylor series on |r| ≤ π/4 to r^21 (error below 1e-24), by k's quadrant.
const COS_SIN_F64: &str = "
fn cos_sin_(x32: f32) -> vec2<f32> {
    let x = f64(x32);
    let k = round(x * f64(0.63661977236758134308));
    var r = x - k * f64(1.57079632673412561417);
    r = r - k * f64(6.07710050630396597660e-11);
    r = r - k * f64(2.02226624871116645580e-21);
    let r2 = r * r;
    var s = f64(1.0 / 51090942171709440000.0);
    s = s * r2 - f64(1.0 / 121645100408832000.0);
    s = s * r2 + f64(1.0 / 355687428096000.0);
    s = s * r2 - f64(1.0 / 1307674368000.0);
    s = s * r2 + f64(1.0 / 6227020800.0);
    s = s * r2 - f64(1.0 / 39916800.0);
    s = s * r2 + f64(1.0 / 362880.0);
    s = s * r2 - f64(1.0 / 5040.0);
    s = s * r2 + f64(1.0 / 120.0);
    s = s * r2 - f64(1.0 / 6.0);
    s = r + r * r2 * s;
    var c = f64(1.0 / 2432902008176640000.0);
    c = c * r2 - f64(1.0 / 6402373705728000.0);
    c = c * r2 + f64(1.0 / 20922789888000.0);
    c = c * r2 - f64(1.0 / 87178291200.0);
    c = c * r2 + f64(1.0 / 479001600.0);
    c = c * r2 - f64(1.0 / 3628800.0);
    c = c * r2 + f64(1.0 / 40320.0);
    c = c * r2 - f64(1.0 / 720.0);
    c = c * r2 + f64(1.0 / 24.0);
    c = c * r2 - f64(0.5);
    c = f64(1.0) + r2 * c;
    let q = ((i32(k) % 4) + 4) % 4;
    if (q == 0) {
        return vec2<f32>(f32(c), f32(s));
    }
    if (q == 1) {
        return vec2<f32>(f32(-s), f32(c));
    }
    if (q == 2) {
        return vec2<f32>(f32(-c), f32(-s));
    }
    return vec2<f32>(f32(s), f32(-c));
}
";

/// The double 2^(i/32) of glibc's `expf` table (`__exp2f_data.tab[i] + (i << 47)`: glibc stores
/// each entry with i/32 taken out of its exponent bits), for i in 0..32.
pub(crate) const EXPF_TABLE: [u64; 32] = [
    0x3ff0000000000000,
    0x3ff059b0d3158574,
    0x3ff0b5586cf9890f,
    0x3ff11301d0125b51,
    0x3ff172b83c7d517b,
    0x3ff1d4873168b9aa,
    0x3ff2387a6e756238,
    0x3ff29e9df51fdee1,
    0x3ff306fe0a31b715,
    0x3ff371a7373aa9cb,
    0x3ff3dea64c123422,
    0x3ff44e086061892d,
    0x3ff4bfdad5362a27,
    0x3ff5342b569d4f82,
    0x3ff5ab07dd485429,
    0x3ff6247eb03a5585,
    0x3ff6a09e667f3bcd,
    0x3ff71f75e8ec5f74,
    0x3ff7a11473eb0187,
    0x3ff82589994cce13,
    0x3ff8ace5422aa0db,
    0x3ff93737b0cdc5e5,
    0x3ff9c49182a3f090,
    0x3ffa5503b23e255d,
    0x3ffae89f995ad3ad,
    0x3ffb7f76f2fb5e47,
    0x3ffc199bdd85529c,
    0x3ffcb720dcef9069,
    0x3ffd5818dcfba487,
    0x3ffdfc97337b9b5f,
    0x3ffea4afa2a490da,
    0x3fff50765b6e4540,
];

/// glibc's `expf` constants (`__exp2f_data`): 32/ln 2, and the polynomial
/// `C0·r³ + C1·r² + C2·r + 1` ≈ 2^(r/32) on |r| ≤ 1/2.
pub(crate) const EXPF_INV_LN2_N: u64 = 0x40471547652b82fe;
/// `C0`, `C1`, `C2` of [`EXPF_INV_LN2_N`]'s polynomial.
pub(crate) const EXPF_POLY: [u64; 3] = [0x3ebc6af84b912394, 0x3f2ebfce50fac4f3, 0x3f962e42ff0c52d6];

/// glibc's `expf` thresholds, as f32 bits: above the first +∞, below the second 0, below the
/// third (and above the second) the smallest subnormal (its `__math_may_uflowf`).
pub(crate) const EXPF_LIMITS: [u32; 3] = [0x42b17217, 0xc2cff1b4, 0xc2ce8ecf];

/// 32/ln 2 as two doubles of 29 and 24 significant bits, so that their products with an f32
/// are exact.
pub(crate) fn expf_inv_ln2_parts() -> (f64, f64) {
    let hi = f64::from_bits(EXPF_INV_LN2_N & !((1u64 << 24) - 1));
    (hi, f64::from_bits(EXPF_INV_LN2_N) - hi)
}

/// `f64(…)` of the double `v` as an exact WGSL hexadecimal literal (finite, normal, nonzero).
fn f64_literal(v: f64) -> String {
    let b = v.to_bits();
    let sign = if b >> 63 == 1 { "-" } else { "" };
    let e = ((b >> 52) & 0x7ff) as i64 - 1023;
    format!("f64({sign}0x1.{:013x}p{e})", b & ((1u64 << 52) - 1))
}

/// `exp_(x)` where the device computes in f64: glibc's `expf` bit for bit, as its FMA build
/// (the CPU's `f32::exp` here) computes it. `k = round(x·32/ln 2)` and `r = x·32/ln 2 − k`
/// (one rounding: glibc fuses the product), `2^(k/32)` from the table times `2^⌊k/32⌋`, the
/// polynomial in `r` by three fused multiply-adds, the product with the power rounded to f32
/// (subnormal results rounded here, as devices may flush them). Fused multiply-adds are
/// emulated (`fma64_`: Dekker's exact product, then the sum rounded once), as lavapipe's
/// `fma` is not fused. Assumes f64 additions and products rounded to nearest and not
/// contracted, as lavapipe computes them.
fn exp_f64() -> String {
    let (hi, lo) = expf_inv_ln2_parts();
    let table: Vec<String> = EXPF_TABLE
        .iter()
        .map(|&b| f64_literal(f64::from_bits(b)))
        .collect();
    let [c0, c1, c2] = EXPF_POLY.map(|b| f64_literal(f64::from_bits(b)));
    let [over, under, may_under] = EXPF_LIMITS;
    format!(
        "
const EXPF_T: array<f64, 32> = array<f64, 32>({table});

// Veltkamp's split of `a` into two halves of 26 significant bits, for Dekker's product.
fn split64_(a0: f64) -> vec2<f64> {{
    let a = keep64(a0);
    let c = f64(134217729.0) * a;
    let h = c - keep64(c - a);
    return vec2<f64>(h, a - h);
}}

// `a·b + c` rounded once, for |a·b| well below |c| (the polynomial's steps): the product
// exactly as ph + pl (Dekker), c + ph exactly as s + e, e + pl as t + f (TwoSum), then s + t
// rounded, unless s + t lies on a midpoint of doubles, where f decides.
fn fma64_(a: f64, b: f64, c: f64) -> f64 {{
    let ph = a * b;
    let sa = split64_(a);
    let sb = split64_(b);
    let pl = (((sa.x * sb.x - ph) + sa.x * sb.y) + sa.y * sb.x) + sa.y * sb.y;
    let s = keep64(c + ph);
    let bs = keep64(s - c);
    let e = (c - (s - bs)) + (ph - bs);
    let t = keep64(e + pl);
    let bt = keep64(t - e);
    let f = (e - (t - bt)) + (pl - bt);
    let v = keep64(s + t);
    let g = t - keep64(v - s);
    let w = keep64(v + f64(2.0) * g);
    if (f != f64(0.0) && g != f64(0.0) && w - v == f64(2.0) * g && (f > f64(0.0)) == (g > f64(0.0))) {{
        return w;
    }}
    return v;
}}

fn exp_(x32: f32) -> f32 {{
    let ux = bitcast<u32>(x32);
    let top = (ux >> 20u) & 0x7ffu;
    if (top >= 0x42bu) {{
        if (ux == 0xff800000u) {{
            return 0.0;
        }}
        if (top >= 0x7f8u) {{
            return x32 + x32;
        }}
        if (x32 > bitcast<f32>({over:#x}u)) {{
            return bitcast<f32>(0x7f800000u);
        }}
        if (x32 < bitcast<f32>({under:#x}u)) {{
            return 0.0;
        }}
        if (x32 < bitcast<f32>({may_under:#x}u)) {{
            return bitcast<f32>(1u);
        }}
    }}
    // x·32/ln 2 = p1 + p2 exactly, = z + ez (TwoSum); k its nearest integer (never a tie).
    let xd = f64(x32);
    let p1 = xd * {hi};
    let p2 = xd * {lo};
    let z = keep64(p1 + p2);
    let bz = keep64(z - p1);
    let ez = (p1 - (z - bz)) + (p2 - bz);
    var kd = round(z);
    var d = z - kd;
    if (d == f64(0.5) && ez > f64(0.0)) {{
        kd = kd + f64(1.0);
        d = f64(-0.5);
    }} else if (d == f64(-0.5) && ez < f64(0.0)) {{
        kd = kd - f64(1.0);
        d = f64(0.5);
    }}
    let r = d + ez;
    let ki = i32(kd);
    let e = ki >> 5u;
    let e1 = e / 2;
    let p = f64(bitcast<f32>(u32(e1 + 127) << 23u)) * f64(bitcast<f32>(u32(e - e1 + 127) << 23u));
    let sc = EXPF_T[ki & 31] * p;
    let zc = fma64_({c0}, r, {c1});
    let y0 = fma64_({c2}, r, f64(1.0));
    return f32_of_(fma64_(zc, r * r, y0) * sc);
}}
",
        table = table.join(", ")
    )
}

/// `exp_` without f64: the adapter's `exp`.
const EXP_F32: &str = "
fn exp_(x: f32) -> f32 {
    return exp(x);
}
";

/// `cos_sin_` without f64: the adapter's `cos` and `sin`.
const COS_SIN_F32: &str = "
fn cos_sin_(x: f32) -> vec2<f32> {
    return vec2<f32>(cos(x), sin(x));
}
";

/// `sq_mean(ra, n, lid, sum)` for `norm.wgsl` where the device computes in f64: RMS_NORM's
/// mean square of row `ra` as the CPU takes it (GGML's `ggml_float` sum): the squares in f32,
/// summed in f64 in 16 lanes (lane l the elements ≡ l mod 16 of the whole groups of 16, in
/// order, then the tail's element l), the lanes added pairwise (8, 4, 2, 1 apart), the mean
/// rounded to f32. Invocations 0..16 sum a lane each; `sum` (the workgroup's f32 sum) unused.
const NORM_F64: &str = "
var<workgroup> lanes64: array<f64, 16>;
fn sq_mean(ra: u32, n: u32, lid: u32, sum: f32) -> f32 {
    let whole = n - n % 16u;
    if (lid < 16u) {
        var acc = f64(0.0);
        for (var i = lid; i < whole; i = i + 16u) {
            let v = ld_a(ra, i);
            acc = acc + f64(v * v);
        }
        if (whole + lid < n) {
            let v = ld_a(ra, whole + lid);
            acc = acc + f64(v * v);
        }
        lanes64[lid] = acc;
    }
    workgroupBarrier();
    if (lid == 0u) {
        for (var w = 8u; w > 0u; w = w / 2u) {
            for (var l = 0u; l < w; l = l + 1u) {
                lanes64[l] = lanes64[l] + lanes64[l + w];
            }
        }
    }
    workgroupBarrier();
    let r = f32(lanes64[0] / f64(n));
    workgroupBarrier();
    return r;
}
";

/// `sq_mean` without f64: the workgroup's f32 sum of squares over the row's length.
const NORM_F32: &str = "
fn sq_mean(ra: u32, n: u32, lid: u32, sum: f32) -> f32 {
    return sum / f32(n);
}
";

/// `soft_exp_` and `soft_inv` for `soft_max.wgsl` where the device computes in f64: the CPU's
/// SOFT_MAX (`ggml::cpu` softmax.rs): its exponential (`exp_fma`: `n = round(x·log2 e)`,
/// `r = x − n·ln 2` with ln 2 in two parts, a degree-5 polynomial, each step one fused
/// multiply-add (`fma_`), `2^n` in two halves, the last product rounded once through f64 so
/// that subnormal results are the CPU's), the row's exponentials summed in f64 in 16 lanes
/// (as `sq_mean` of NORM_F64), the sink's (the C library's `expf`, `exp_`) added after, and
/// `1 / sum` in f64 rounded to f32. Invocations 0..16 sum a lane each.
fn soft_max_f64() -> String {
    let bits = |v: f32| format!("bitcast<f32>({:#010x}u)", v.to_bits());
    // The CPU's constants (vec.rs): ln 2 as the f32 nearest it and the rest; the polynomial's
    // coefficients from r⁴'s down to the constant term.
    let coef: Vec<String> = [0.041_897_93f32, 0.166_676_36, 0.499_991_5, 0.999_999_7, 1.0]
        .iter()
        .map(|&k| format!("    q = fma_(q, r, {});\n", bits(k)))
        .collect();
    format!(
        "
fn soft_exp_(x: f32) -> f32 {{
    if (x < {lo}) {{
        return 0.0;
    }}
    let xc = clamp(x, {lo}, {hi});
    let n = round(xc * {log2e});
    let ni = i32(n);
    let r = fma_(-n, {ln2_lo}, fma_(-n, {ln2_hi}, xc));
    var q = {c5};
{coef}    let n1 = ni >> 1u;
    let s1 = bitcast<f32>(u32(n1 + 127) << 23u);
    let s2 = bitcast<f32>(u32(ni - n1 + 127) << 23u);
    return f32_of_(f64(q * s1) * f64(s2));
}}

var<workgroup> soft_lanes: array<f64, 16>;
fn soft_inv(ra: u32, rm: u32, slope: f32, mx: f32, n: u32, lid: u32, sink: f32) -> f32 {{
    let whole = n - n % 16u;
    if (lid < 16u) {{
        var acc = f64(0.0);
        for (var i = lid; i < whole; i = i + 16u) {{
            acc = acc + f64(soft_exp_(logit(ra, rm, i, slope) - mx));
        }}
        if (whole + lid < n) {{
            acc = acc + f64(soft_exp_(logit(ra, rm, whole + lid, slope) - mx));
        }}
        soft_lanes[lid] = acc;
    }}
    workgroupBarrier();
    if (lid == 0u) {{
        for (var w = 8u; w > 0u; w = w / 2u) {{
            for (var l = 0u; l < w; l = l + 1u) {{
                soft_lanes[l] = soft_lanes[l] + soft_lanes[l + w];
            }}
        }}
    }}
    workgroupBarrier();
    var sum = soft_lanes[0];
    if (xu(2u) == 1u) {{
        sum = sum + f64(exp_(sink - mx));
    }}
    workgroupBarrier();
    return f32(f64(1.0) / sum);
}}
",
        log2e = bits(std::f32::consts::LOG2_E),
        ln2_hi = bits(std::f32::consts::LN_2),
        ln2_lo = bits(-1.904_654_3e-9),
        c5 = bits(0.008_290_315),
        lo = bits(-104.0),
        hi = bits(88.8),
        coef = coef.concat()
    )
}

/// `soft_exp_` and `soft_inv` without f64: the adapter's `exp`, the row's sum in f32.
const SOFT_MAX_F32: &str = "
fn soft_exp_(x: f32) -> f32 {
    return exp(x);
}
fn soft_inv(ra: u32, rm: u32, slope: f32, mx: f32, n: u32, lid: u32, sink: f32) -> f32 {
    var s = 0.0;
    for (var i = lid; i < n; i = i + 64u) {
        s = s + exp(logit(ra, rm, i, slope) - mx);
    }
    var sum = wg_sum(lid, s);
    if (xu(2u) == 1u) {
        sum = sum + exp(sink - mx);
    }
    return 1.0 / sum;
}
";

/// SOFT_MAX's exponential and normalisation for `soft_max.wgsl` on `gpu` (the CPU's where it
/// has `SHADER_F64`).
pub(crate) fn soft_max_sum(gpu: &Gpu) -> String {
    if gpu.f64 {
        soft_max_f64()
    } else {
        SOFT_MAX_F32.to_string()
    }
}

/// `tail_sum(h, ra, rb, i0, k)` for `mul_mat_float.wgsl` where the device computes in f64:
/// `h` plus the products `i0..k`, one at a time in f64, rounded to f32 last.
const TAIL_F64: &str = "
fn tail_sum(h: f32, ra: u32, rb: u32, i0: u32, k: u32) -> f32 {
    var s = f64(h);
    for (var i = i0; i < k; i = i + 1u) {
        s = s + f64(prod(ra, rb, i));
    }
    return f32(s);
}
";

/// `tail_sum` without f64: the products added in f32.
const TAIL_F32: &str = "
fn tail_sum(h: f32, ra: u32, rb: u32, i0: u32, k: u32) -> f32 {
    var s = h;
    for (var i = i0; i < k; i = i + 1u) {
        s = s + prod(ra, rb, i);
    }
    return s;
}
";

/// MUL_MAT's float dot products for `gpu` (`mul_mat_float.wgsl` with its `tail_sum`) for
/// weights of `ty`.
pub(crate) fn mul_mat_float(gpu: &Gpu, br: u32) -> String {
    let tail = if gpu.f64 { TAIL_F64 } else { TAIL_F32 };
    format!("{}{tail}", MUL_MAT_FLOAT.replace("{BR}", &br.to_string()))
}

/// RMS_NORM's mean square for `norm.wgsl` on `gpu` (in f64 where it has `SHADER_F64`).
pub(crate) fn norm_sq_mean(gpu: &Gpu) -> &'static str {
    if gpu.f64 {
        NORM_F64
    } else {
        NORM_F32
    }
}

/// The source of a kernel with body `body` storing `dst` and reading operands of `srcs` types
/// (bound as `a`, `b`, … in order), for `gpu`. Bodies that give one workgroup a row get the
/// reductions. Where the device has `SHADER_F16`, F16 operands and results are bound as `f16`
/// arrays instead of words; where it has `SHADER_F64`, `fma_` and the other helpers that keep
/// the CPU's roundings compute in f64.
pub(crate) fn source(body: &str, dst: Type, srcs: &[Type], gpu: &Gpu) -> Result<String> {
    let f16 = gpu.f16;
    let mut s = String::with_capacity(16 << 10);
    if f16 {
        s.push_str("enable f16;\n");
    }
    s.push_str(COMMON);
    if gpu.f64 {
        s.push_str(FMA_F64);
        s.push_str(COS_SIN_F64);
        s.push_str(&exp_f64());
    } else {
        s.push_str(FMA_F32);
        s.push_str(COS_SIN_F32);
        s.push_str(EXP_F32);
    }
    s.push_str(&store(dst, f16)?);
    for (k, (&ty, name)) in srcs.iter().zip(OPERANDS).enumerate() {
        let halves = f16 && ty == Type::F16;
        s.push_str(&format!(
            "@group(0) @binding({}) var<storage, read_write> {name}: array<{}>;\n",
            k + 2,
            if halves { "f16" } else { "u32" }
        ));
        let helpers = if halves { F16_HELPERS } else { HELPERS };
        s.push_str(&helpers.replace('§', name));
        // Types without a loader are only copied as bytes.
        if let Some(ld) = loader_body(ty) {
            s.push_str(
                &format!("fn ld_§(row: u32, k: u32) -> f32 {{\n    {ld}\n}}\n").replace('§', name),
            );
        }
    }
    if body.contains("wg_sum(") || body.contains("wg_max(") {
        s.push_str(REDUCE);
    }
    s.push_str(body);
    Ok(s)
}

/// The bind group layout of kernels with `n` operands and their pipeline layout.
struct Layout {
    group: wgpu::BindGroupLayout,
    pipeline: wgpu::PipelineLayout,
}

/// A device's compiled kernels, by key, and the layouts they share.
#[derive(Default)]
pub(crate) struct Cache {
    pipelines: Mutex<HashMap<String, std::result::Result<Arc<wgpu::ComputePipeline>, String>>>,
    layouts: Mutex<HashMap<usize, Arc<Layout>>>,
}

/// A compiled kernel and the bind group layout its nodes' bindings follow.
#[derive(Clone)]
pub(crate) struct Kernel {
    pub(crate) pipeline: Arc<wgpu::ComputePipeline>,
    pub(crate) group: wgpu::BindGroupLayout,
}

impl Cache {
    fn layout(&self, gpu: &Gpu, n: usize) -> Arc<Layout> {
        let mut layouts = lock(&self.layouts);
        layouts
            .entry(n)
            .or_insert_with(|| {
                let entry =
                    |binding: u32, ty: wgpu::BufferBindingType| wgpu::BindGroupLayoutEntry {
                        binding,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: wgpu::BindingType::Buffer {
                            ty,
                            has_dynamic_offset: false,
                            min_binding_size: None,
                        },
                        count: None,
                    };
                let storage = wgpu::BufferBindingType::Storage { read_only: false };
                let mut entries = vec![entry(0, wgpu::BufferBindingType::Uniform)];
                entries.extend((0..=n as u32).map(|k| entry(k + 1, storage)));
                let group = gpu
                    .device
                    .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: Some("ggml kernel"),
                        entries: &entries,
                    });
                let pipeline = gpu
                    .device
                    .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                        label: Some("ggml kernel"),
                        bind_group_layouts: &[Some(&group)],
                        immediate_size: 0,
                    });
                Arc::new(Layout { group, pipeline })
            })
            .clone()
    }

    /// The kernel `key` with `n` operands, compiled from `source()` the first time; a kernel
    /// that failed to compile fails again without a new attempt.
    pub(crate) fn kernel(
        &self,
        gpu: &Gpu,
        key: &str,
        n: usize,
        source: impl FnOnce() -> Result<String>,
    ) -> Result<Kernel> {
        let layout = self.layout(gpu, n);
        let found = lock(&self.pipelines).get(key).cloned();
        let compiled = match found {
            Some(c) => c,
            None => {
                let c = compile(gpu, key, &layout.pipeline, source()?);
                lock(&self.pipelines).insert(key.to_string(), c.clone());
                c
            }
        };
        let pipeline = compiled.map_err(|e| {
            Error::Compute(format!("{}: kernel {key} does not compile: {e}", gpu.name))
        })?;
        Ok(Kernel {
            pipeline,
            group: layout.group.clone(),
        })
    }

    /// How many kernels have been compiled (or have failed to).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.pipelines).len()
    }
}

fn compile(
    gpu: &Gpu,
    key: &str,
    layout: &wgpu::PipelineLayout,
    source: String,
) -> std::result::Result<Arc<wgpu::ComputePipeline>, String> {
    let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = gpu
        .device
        .create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(key),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
    let pipeline = gpu
        .device
        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(key),
            layout: Some(layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
    match crate::block_on(scope.pop()) {
        Some(e) => Err(e.to_string()),
        None => Ok(Arc::new(pipeline)),
    }
}

#[cfg(test)]
mod tests {
    use super::{expf_inv_ln2_parts, EXPF_INV_LN2_N, EXPF_LIMITS, EXPF_POLY, EXPF_TABLE};

    /// How `exp_f64`'s multiply-adds are computed in [`expf`]'s host mirror.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Fma {
        /// The hardware's fused multiply-add (`f64::mul_add`), as glibc's FMA build.
        Fused,
        /// The kernel's emulation (`fma64_`), transcribed.
        Emulated,
        /// A product rounded, then a sum rounded (an unfused `fma`, as lavapipe's).
        Unfused,
        /// As `Unfused`, and `r` rounded twice (`x·32/ln 2` rounded, less k): the kernel
        /// as compiled when its two-sums' errors are simplified to 0.
        Collapsed,
    }

    /// `fma64_` of `exp_f64`, transcribed.
    fn fma64(a: f64, b: f64, c: f64) -> f64 {
        let split = |a: f64| {
            let c = 134217729.0 * a;
            let h = c - (c - a);
            (h, a - h)
        };
        let ph = a * b;
        let (ah, al) = split(a);
        let (bh, bl) = split(b);
        let pl = (((ah * bh - ph) + ah * bl) + al * bh) + al * bl;
        let s = c + ph;
        let bs = s - c;
        let e = (c - (s - bs)) + (ph - bs);
        let t = e + pl;
        let bt = t - e;
        let f = (e - (t - bt)) + (pl - bt);
        let v = s + t;
        let g = t - (v - s);
        let w = v + 2.0 * g;
        if f != 0.0 && g != 0.0 && w - v == 2.0 * g && (f > 0.0) == (g > 0.0) {
            w
        } else {
            v
        }
    }

    /// `exp_f64`'s `exp_` on the host, its multiply-adds computed as `fma` says (`Fused` is
    /// glibc's own order of operations).
    fn expf(x: f32, fma: Fma) -> f32 {
        let madd = |a: f64, b: f64, c: f64| match fma {
            Fma::Fused => a.mul_add(b, c),
            Fma::Emulated => fma64(a, b, c),
            Fma::Unfused | Fma::Collapsed => a * b + c,
        };
        let [over, under, may_under] = EXPF_LIMITS.map(f32::from_bits);
        let top = (x.to_bits() >> 20) & 0x7ff;
        if top >= 0x42b {
            if x == f32::NEG_INFINITY {
                return 0.0;
            }
            if top >= 0x7f8 {
                return x + x;
            }
            if x > over {
                return f32::INFINITY;
            }
            if x < under {
                return 0.0;
            }
            if x < may_under {
                return f32::from_bits(1);
            }
        }
        let xd = f64::from(x);
        let (kd, r) = if fma == Fma::Fused {
            let inv = f64::from_bits(EXPF_INV_LN2_N);
            let kd = inv.mul_add(xd, 6755399441055744.0) - 6755399441055744.0;
            (kd, inv.mul_add(xd, -kd))
        } else {
            let (hi, lo) = expf_inv_ln2_parts();
            let (p1, p2) = (xd * hi, xd * lo);
            let z = p1 + p2;
            let bz = z - p1;
            let ez = if fma == Fma::Collapsed {
                0.0
            } else {
                (p1 - (z - bz)) + (p2 - bz)
            };
            let mut kd = z.round_ties_even();
            let mut d = z - kd;
            if d == 0.5 && ez > 0.0 {
                kd += 1.0;
                d = -0.5;
            } else if d == -0.5 && ez < 0.0 {
                kd -= 1.0;
                d = 0.5;
            }
            (kd, d + ez)
        };
        let ki = kd as i32;
        let sc = f64::from_bits(EXPF_TABLE[(ki & 31) as usize]) * 2f64.powi(ki >> 5);
        let [c0, c1, c2] = EXPF_POLY.map(f64::from_bits);
        let z = madd(c0, r, c1);
        let y0 = madd(c2, r, 1.0);
        (madd(z, r * r, y0) * sc) as f32
    }

    /// Every 61st f32 from 0 down to −104 (so every residue of the low mantissa bits), every
    /// f32 within 2^12 of each threshold and of the subnormal results' edge, the specials.
    fn inputs() -> impl Iterator<Item = f32> {
        let dense = (0x8000_0000u32..0xc2d0_0000).step_by(61);
        let edges = [
            EXPF_LIMITS[1],
            EXPF_LIMITS[2],
            0xc2ae_ac50, // ln 2^-126
            0x3300_0000, // 2^-25
            0xb300_0000,
        ]
        .into_iter()
        .flat_map(|b| b - 4096..b + 4096);
        let over = EXPF_LIMITS[0] - 4096..EXPF_LIMITS[0] + 4096;
        let special = [0, 1, 0x8000_0001, 0x7f80_0000, 0xff80_0000, 0x7fc0_0000];
        dense
            .chain(edges)
            .chain(over)
            .chain(special)
            .map(f32::from_bits)
    }

    /// The host mirror of the kernel's `exp_` gives `f32::exp`'s bits (glibc's `expf` on
    /// Linux): glibc's own form with fused multiply-adds, and the kernel's emulation of them.
    /// Prints how many an unfused form (lavapipe's `fma`) and a collapsed one (the kernel
    /// with its two-sums simplified away) get wrong.
    #[test]
    fn the_kernels_expf_is_the_c_librarys_on_the_host() {
        if !cfg!(all(target_os = "linux", target_env = "gnu")) {
            return;
        }
        let (mut n, mut unfused, mut collapsed) = (0usize, 0usize, 0usize);
        for x in inputs() {
            let want = x.exp();
            for fma in [Fma::Fused, Fma::Emulated] {
                let got = expf(x, fma);
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "{fma:?} exp({x:e} = {:#x}) = {got:e}, expf gives {want:e}",
                    x.to_bits()
                );
            }
            unfused += usize::from(expf(x, Fma::Unfused).to_bits() != want.to_bits());
            collapsed += usize::from(expf(x, Fma::Collapsed).to_bits() != want.to_bits());
            n += 1;
        }
        eprintln!(
            "{n} inputs: the unfused form differs from expf at {unfused}, the collapsed one \
             at {collapsed}"
        );
    }
}
