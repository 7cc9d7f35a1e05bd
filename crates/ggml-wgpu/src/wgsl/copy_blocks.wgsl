// CPY, DUP and CONT between tensors of one quantized type (the result contiguous, rows of the
// same length): one invocation per block of the result, its bytes copied from the block in the
// same place of `a`'s row in its logical order. x0 = blocks, x1 = blocks per row, x2 = a
// block's size.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let t = group_id(wid, nwg) * 64u + lid;
    if (t >= xu(0u)) {
        return;
    }
    let n = xu(2u);
    let ia = unravel((t / xu(1u)) * p.a.ne.x, p.a.ne);
    let src = row_of(p.a, ia) + (t % xu(1u)) * n;
    let o = p.d.off + t * n;
    for (var k = 0u; k < n; k = k + 1u) {
        put_byte(o + k, u8_a(src + k));
    }
    put_flush();
}
