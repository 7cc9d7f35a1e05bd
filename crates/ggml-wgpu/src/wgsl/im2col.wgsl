// IM2COL and IM2COL_3D over the result seen as (j, ox, oy, oz, n) and the input `b` as
// (x, y, z, channel, n) (the host rewrites both descriptors; unused axes have length 1):
// element j = (c, kz, ky, kx) of the patch under output (ox, oy, oz) is input element
// (ox·s + kx·d − p, …) of channel c, 0 outside the input. Per axis (x, y, z): taps x0..x2,
// strides x3..x5, paddings x6..x8, dilations x9..x11. The kernel `a` is not read.

fn value(t: u32, ix: Idx) -> f32 {
    let k = vec3<u32>(xu(0u), xu(1u), xu(2u));
    let j = ix.i.x;
    let tap = vec3<u32>(j % k.x, (j / k.x) % k.y, (j / (k.x * k.y)) % k.z);
    let o = ix.i.yzw;
    var src: Idx;
    src.i.w = j / (k.x * k.y * k.z);
    src.i4 = ix.i4;
    for (var a = 0u; a < 3u; a = a + 1u) {
        let i = i32(o[a]) * i32(xu(3u + a)) + i32(tap[a]) * i32(xu(9u + a)) - i32(xu(6u + a));
        if (i < 0 || u32(i) >= p.b.ne[a]) {
            return 0.0;
        }
        src.i[a] = u32(i);
    }
    return ld_b(row_of(p.b, src), src.i.x);
}
