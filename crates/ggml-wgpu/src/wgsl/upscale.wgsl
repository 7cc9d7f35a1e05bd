// UPSCALE (F32) as the CPU computes it: x0..x3 = the scale factors of dimensions 0..3, x4 =
// the sampling offset (0.5, 0 with align-corners), x5 = the mode (0 nearest, 1 bilinear, 2
// bicubic), x6 = 1 for antialiased bilinear. Dimensions 2 and 3 take the nearest source plane;
// source coordinates are clamped into it.

fn nearest_(i: u32, sf: f32, n: u32) -> u32 {
    return u32(clamp(i32(f32(i) / sf), 0, i32(n) - 1));
}

// Element (x, y) of source plane (i2, i3), both clamped into the plane.
fn src_at(x: i32, y: i32, i2: u32, i3: u32) -> f32 {
    let xc = u32(clamp(x, 0, i32(p.a.ne.x) - 1));
    let yc = u32(clamp(y, 0, i32(p.a.ne.y) - 1));
    return ld_a(p.a.off + yc * p.a.nb.y + i2 * p.a.nb.z + i3 * p.a.nb.w, xc);
}

// Cubic convolution weights (a = -0.75) of the four taps around fraction `t`.
fn cubic_w(t: f32) -> vec4<f32> {
    let a = -0.75;
    let x = vec4<f32>(t + 1.0, t, 1.0 - t, 2.0 - t);
    let near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    let far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    return vec4<f32>(far.x, near.y, near.z, far.w);
}

fn triangle(x: f32) -> f32 {
    return max(1.0 - abs(x), 0.0);
}

fn value(t: u32, ix: Idx) -> f32 {
    let sf = vec4<f32>(xf(0u), xf(1u), xf(2u), xf(3u));
    let off = xf(4u);
    let mode = xu(5u);
    let n0 = i32(p.a.ne.x);
    let n1 = i32(p.a.ne.y);
    let i2 = nearest_(ix.i.z, sf.z, p.a.ne.z);
    let i3 = nearest_(ix.i.w, sf.w, p.a.ne.w);
    if (mode == 0u) {
        let x = nearest_(ix.i.x, sf.x, p.a.ne.x);
        let y = nearest_(ix.i.y, sf.y, p.a.ne.y);
        return src_at(i32(x), i32(y), i2, i3);
    }
    if (mode == 1u && xu(6u) == 1u) {
        let y = (f32(ix.i.y) + off) / sf.y;
        let x = (f32(ix.i.x) + off) / sf.x;
        let sx = max(1.0, 1.0 / sf.x);
        let sy = max(1.0, 1.0 / sf.y);
        let inv_x = 1.0 / sx;
        let inv_y = 1.0 / sy;
        let x0 = max(i32(x - sx + off), 0);
        let x1 = min(i32(x + sx + off), n0);
        let y0 = max(i32(y - sy + off), 0);
        let y1 = min(i32(y + sy + off), n1);
        var val = 0.0;
        var total = 0.0;
        for (var yy = y0; yy < y1; yy = yy + 1) {
            let wy = triangle((f32(yy) - y + off) * inv_y);
            for (var xx = x0; xx < x1; xx = xx + 1) {
                let w = triangle((f32(xx) - x + off) * inv_x) * wy;
                if (w > 0.0) {
                    val = val + src_at(xx, yy, i2, i3) * w;
                    total = total + w;
                }
            }
        }
        return select(val, val / total, total > 0.0);
    }
    let y = (f32(ix.i.y) + off) / sf.y - off;
    let x = (f32(ix.i.x) + off) / sf.x - off;
    let fy = floor(y);
    let fx = floor(x);
    let y0 = i32(fy);
    let x0 = i32(fx);
    if (mode == 1u) {
        let yc = clamp(y0, 0, n1 - 1);
        let xc = clamp(x0, 0, n0 - 1);
        let dy = clamp(y - f32(yc), 0.0, 1.0);
        let dx = clamp(x - f32(xc), 0.0, 1.0);
        let y1 = clamp(y0 + 1, 0, n1 - 1);
        let x1 = clamp(x0 + 1, 0, n0 - 1);
        return src_at(xc, yc, i2, i3) * (1.0 - dx) * (1.0 - dy)
            + src_at(x1, yc, i2, i3) * dx * (1.0 - dy)
            + src_at(xc, y1, i2, i3) * (1.0 - dx) * dy
            + src_at(x1, y1, i2, i3) * dx * dy;
    }
    let wx = cubic_w(x - fx);
    let wy = cubic_w(y - fy);
    var val = 0.0;
    for (var j = 0; j < 4; j = j + 1) {
        var row = 0.0;
        for (var i = 0; i < 4; i = i + 1) {
            row = row + src_at(x0 + i - 1, y0 + j - 1, i2, i3) * wx[i];
        }
        val = val + row * wy[j];
    }
    return val;
}
