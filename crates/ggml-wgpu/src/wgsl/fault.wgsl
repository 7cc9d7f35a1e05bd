// Index faults (GET_ROWS, SET_ROWS, MUL_MAT_ID): slot x1 of `fault` is four words: the
// smallest linear position (dimension 2 slowest) of an element of the index operand `§` outside
// 0..limit, the index's value (low and high word) and the limit. The node's dispatch records
// positions with atomicMin; a second dispatch of the same node (x2 = 1, one invocation) then
// reads the value at the smallest one, which no other invocation can race with. The host reads
// the slots back when the stream synchronizes.
@group(0) @binding({FB}) var<storage, read_write> fault: array<atomic<u32>>;

// Records a fault at element (i0, i1, i2) of the index operand.
fn fault_at(i0: u32, i1: u32, i2: u32) {
    atomicMin(&fault[4u * xu(1u)], i0 + p.§.ne.x * (i1 + p.§.ne.y * i2));
}

// The second dispatch: the value at the recorded position (`wide`: I64 indices) and `limit`.
fn fault_report(wide: bool, limit: u32) {
    let s = 4u * xu(1u);
    let pos = atomicLoad(&fault[s]);
    if (pos == 0xffffffffu) {
        return;
    }
    let i0 = pos % p.§.ne.x;
    let i1 = (pos / p.§.ne.x) % p.§.ne.y;
    let i2 = pos / (p.§.ne.x * p.§.ne.y);
    let o = p.§.off + i0 * p.§.nb.x + i1 * p.§.nb.y + i2 * p.§.nb.z;
    let lo = w_§(o);
    var hi = select(0u, 0xffffffffu, (lo >> 31u) == 1u);
    if (wide) {
        hi = w_§(o + 4u);
    }
    atomicStore(&fault[s + 1u], lo);
    atomicStore(&fault[s + 2u], hi);
    atomicStore(&fault[s + 3u], limit);
}
