// PAD (x0 = 0; op_params: before and after each of dimensions 0..3, then 1 for circular) and
// PAD_REFLECT_1D (x0 = 1; op_params p0, p1): the element of `a` a result element comes from,
// or 0 in zero padding.

fn value(t: u32, ix: Idx) -> f32 {
    var s = ix;
    if (xu(0u) == 1u) {
        // The row mirrored at its ends, without repeating the edge element.
        let n = i32(p.a.ne.x);
        var j = i32(ix.i.x) - opi(0u);
        if (j < 0) {
            j = -j;
        } else if (j >= n) {
            j = 2 * (n - 1) - j;
        }
        s.i.x = u32(j);
        return ld_a(row_of(p.a, s), s.i.x);
    }
    let circular = opi(8u) != 0;
    for (var k = 0u; k < 4u; k = k + 1u) {
        let len = i32(p.a.ne[k]);
        var j = i32(ix.i[k]) - opi(2u * k);
        if (circular) {
            j = ((j % len) + len) % len;
        } else if (j < 0 || j >= len) {
            return 0.0;
        }
        s.i[k] = u32(j);
    }
    return ld_a(row_of(p.a, s), s.i.x);
}
