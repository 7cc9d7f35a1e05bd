// SET_ROWS into a quantized type (before quantize.wgsl): block t of `a`, in row i1, goes to
// row `b[i1, i2 % .., i3 % ..]` of the result (indices I32, or I64 when x0 = 1; an index
// outside the result is skipped and recorded as a fault, as set_rows.wgsl does).

const BYTES: u32 = {BYTES}u;
const NONE: u32 = 0xffffffffu;

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
    return p.d.off + (ia.i.x / 32u) * BYTES + lo * p.d.nb.y + ia.i.z * p.d.nb.z + ia.i.w * p.d.nb.w
        + ia.i4 * p.d.nb4;
}
