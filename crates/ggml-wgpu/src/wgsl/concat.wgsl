// CONCAT: `a` followed by `b` along dimension op_params[0] (0..3; the others agree).

fn value(t: u32, ix: Idx) -> f32 {
    let dim = p.op[0].x;
    let na = p.a.ne[dim];
    var s = ix;
    if (ix.i[dim] >= na) {
        s.i[dim] = ix.i[dim] - na;
        return ld_b(row_of(p.b, s), s.i.x);
    }
    return ld_a(row_of(p.a, s), s.i.x);
}
