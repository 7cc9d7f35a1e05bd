// ARGSORT: one workgroup per row (x0 = rows), a bitonic sort of the row's indices in workgroup
// memory, the row padded to x1 elements (a power of two, at most MAX_N) by indices past it,
// which sort last. The order is the CPU's stable sort: op_params[0] 0 ascending, 1
// descending; NaN above every number; equal values in index order.

const MAX_N: u32 = 2048u;

var<workgroup> key: array<f32, 2048>;
var<workgroup> idx: array<u32, 2048>;

// x < y with NaN above every number (and equal to NaN).
fn less(x: f32, y: f32) -> bool {
    if (y != y) {
        return x == x;
    }
    return x < y;
}

// Whether element (vi, i) of the row goes before (vj, j) (i != j).
fn before(vi: f32, i: u32, vj: f32, j: u32) -> bool {
    if (i >= p.a.ne.x || j >= p.a.ne.x) {
        return i < j;
    }
    var x = vi;
    var y = vj;
    if (p.op[0].x == 1u) {
        x = vj;
        y = vi;
    }
    if (less(x, y)) {
        return true;
    }
    return !less(y, x) && i < j;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = group_id(wid, nwg);
    if (g >= xu(0u)) {
        return;
    }
    let n = p.a.ne.x;
    let np = xu(1u);
    let ir = unravel(g * n, p.a.ne);
    let ra = row_of(p.a, ir);
    for (var i = lid; i < np; i = i + 64u) {
        idx[i] = i;
        key[i] = 0.0;
        if (i < n) {
            key[i] = ld_a(ra, i);
        }
    }
    workgroupBarrier();
    for (var k = 2u; k <= np; k = k << 1u) {
        for (var j = k >> 1u; j > 0u; j = j >> 1u) {
            for (var i = lid; i < np; i = i + 64u) {
                let l = i ^ j;
                // Within blocks of k, ascending where bit k of i is clear, else descending.
                if (l > i && before(key[i], idx[i], key[l], idx[l]) != ((i & k) == 0u)) {
                    let kv = key[i];
                    let iv = idx[i];
                    key[i] = key[l];
                    idx[i] = idx[l];
                    key[l] = kv;
                    idx[l] = iv;
                }
            }
            workgroupBarrier();
        }
    }
    let rd = row_of(p.d, ir);
    for (var i = lid; i < n; i = i + 64u) {
        st(rd + i * p.d.nb.x, f32(idx[i]));
    }
}
