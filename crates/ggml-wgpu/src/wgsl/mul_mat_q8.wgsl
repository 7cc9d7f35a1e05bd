// MUL_MAT's activations rounded once per product, before it (`mul_mat.wgsl` with quantized
// weights reads them): one invocation per block of QB values of a row of `a` (the product's
// `b`), rounded to the 8-bit levels the CPU quantizes activations to for the weights (GGML's
// vec_dot_type): Q8_0/Q8_1 (QB = 32) or Q8_K (QB = 256). The scratch `d` holds, per row and
// block, a level's scale (f32) and then the QB levels as i8, four to a word. x0 = blocks in
// all (rows × blocks per row), x1 = blocks per row.

const QB: u32 = {QB}u;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = group_id(wid, nwg) * 64u + lid;
    if (t >= xu(0u)) {
        return;
    }
    let kb = t % xu(1u);
    let r = t / xu(1u);
    let r1 = r % p.a.ne.y;
    let r2 = (r / p.a.ne.y) % p.a.ne.z;
    let r3 = r / (p.a.ne.y * p.a.ne.z);
    let row = p.a.off + r1 * p.a.nb.y + r2 * p.a.nb.z + r3 * p.a.nb.w;
    let k0 = kb * QB;
    // Q8_0/Q8_1, as GGML's x86 quantizer: scale amax / 127 (rounded to f16, as the block
    // stores it), levels v · (127 / amax) rounded half to even. Q8_K: multiplier -127 / max
    // with max the value of largest magnitude (the first), scale its inverse, levels rounded
    // half to even, at most 127.
    var amax = 0.0;
    var vmax = 0.0;
    for (var k = k0; k < k0 + QB; k = k + 1u) {
        let v = ld_a(row, k);
        if (abs(v) > amax) {
            amax = abs(v);
            vmax = v;
        }
    }
    var mul = 0.0;
    var scale = 0.0;
    if (QB == 32u) {
        let dd = amax / 127.0;
        mul = select(0.0, 127.0 / amax, amax != 0.0);
        scale = f16_f32(f32_f16(dd));
    } else if (amax != 0.0) {
        mul = -127.0 / vmax;
        scale = 1.0 / mul;
    }
    let o = t * (QB / 4u + 1u);
    d[o] = bitcast<u32>(scale);
    for (var k = 0u; k < QB; k = k + 4u) {
        var w = 0u;
        for (var j = 0u; j < 4u; j = j + 1u) {
            let v = ld_a(row, k0 + k + j) * mul;
            let l = min(round(v), 127.0);
            w = w | ((bitcast<u32>(i32(l)) & 0xffu) << (8u * j));
        }
        d[o + 1u + k / 4u] = w;
    }
}
