// SET_ROWS into a quantized type (after rows_index.wgsl, before quantize.wgsl): block t of
// `a` goes to the same place in row `dst_row` of the result (x2 = 1: the second, fault-reading
// dispatch).

const BYTES: u32 = {BYTES}u;

fn block_at(t: u32) -> u32 {
    if (xu(2u) == 1u) {
        if (t == 0u) {
            fault_report(xu(0u) == 1u, p.d.ne.y);
        }
        return NONE;
    }
    if (t >= xu(3u)) {
        return NONE;
    }
    let ia = unravel(t * 32u, p.a.ne);
    let r = dst_row(ia);
    if (r == NONE) {
        return NONE;
    }
    return p.d.off + (ia.i.x / 32u) * BYTES + r * p.d.nb.y + ia.i.z * p.d.nb.z + ia.i.w * p.d.nb.w
        + ia.i4 * p.d.nb4;
}
