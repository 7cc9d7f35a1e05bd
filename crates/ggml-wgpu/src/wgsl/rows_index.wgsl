// SET_ROWS' destination row for the row of `a` at `ia` (after fault.wgsl): `b[i1, i2 % ..,
// i3 % ..]` (indices I32, or I64 when x0 = 1), or NONE for an index outside the result, which
// is recorded as a fault (at the row's element 0).

const NONE: u32 = 0xffffffffu;

fn dst_row(ia: Idx) -> u32 {
    let j1 = ia.i.z % p.b.ne.y;
    let j2 = ia.i.w % p.b.ne.z;
    let io = p.b.off + ia.i.y * p.b.nb.x + j1 * p.b.nb.y + j2 * p.b.nb.z;
    let lo = w_b(io);
    var hi = 0u;
    if (xu(0u) == 1u) {
        hi = w_b(io + 4u);
    }
    if (hi != 0u || lo >= p.d.ne.y) {
        if (ia.i.x == 0u) {
            fault_at(ia.i.y, j1, j2);
        }
        return NONE;
    }
    return lo;
}
