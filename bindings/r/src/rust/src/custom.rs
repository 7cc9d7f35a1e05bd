//! Custom ops with R functions (`ggml_map_custom1/2/3`, their `_inplace` forms,
//! `ggml_custom_4d`, `ggml_custom_inplace`; GGML's C names, ggmlR has none).
//!
//! The library computes a custom op on a backend's worker thread, where R cannot run. The
//! kernel copies its operands, hands the R function's call to R's thread (waiting in
//! `ggml_backend_graph_compute` and the other waiting calls, [`crate::rthread::wait`]) and
//! writes the values it returns. So such graphs are computed only by the calls that wait; the
//! asynchronous ones refuse them ([`refuse_async`]). The node runs as one task whatever
//! `n_tasks` says: R runs one function at a time.

use crate::args::{self, bad, dim, ggml_type, lib, Slot};
use crate::rthread::{self, RFun};
use crate::{ctx_arg, tensor_arg};
use extendr_api::prelude::*;
use extendr_api::Result;
use ggml::ops::{CustomDst, CustomSrc, N_TASKS_MAX};
use ggml::{Graph, Op, Tensor, Type, MAX_DIMS};

/// An operand's values (in GGML's order, dimension 0 fastest) and shape.
type Values = (Vec<f32>, [i64; MAX_DIMS]);

/// `Err` naming `arg` unless `n_tasks` is `GGML_N_TASKS_MAX` (-1) or positive (GGML's rule).
fn tasks_arg(obj: &Robj) -> Result<()> {
    let n = args::i32_arg(obj, "n_tasks")?;
    if n == N_TASKS_MAX || n > 0 {
        Ok(())
    } else {
        Err(bad(
            "n_tasks",
            format!("{n}; it must be positive or GGML_N_TASKS_MAX (-1)"),
        ))
    }
}

/// `Err` naming `arg` unless `t` has a type whose elements convert to numbers.
fn numeric_type(ty: Type, arg: &str) -> Result<()> {
    if matches!(ty, Type::F32 | Type::F16 | Type::BF16 | Type::I32) {
        Ok(())
    } else {
        Err(bad(
            arg,
            format!(
                "has type {}; a custom op's tensors must be F32, F16, BF16 or I32",
                ty.name()
            ),
        ))
    }
}

/// The first flat index of row `r` (over dimensions 1 and up) of shape `ne`.
fn row_start(ne: &[i64; MAX_DIMS], r: usize) -> [usize; MAX_DIMS] {
    let mut idx = [0usize; MAX_DIMS];
    let mut rest = r;
    for (slot, &n) in idx.iter_mut().zip(ne).skip(1) {
        *slot = rest % n as usize;
        rest /= n as usize;
    }
    idx
}

fn read(s: &CustomSrc<'_>) -> std::result::Result<Values, String> {
    let ne = s.ne();
    let mut v = vec![0f32; ne.iter().product::<i64>() as usize];
    if ne[0] > 0 {
        for (r, row) in v.chunks_exact_mut(ne[0] as usize).enumerate() {
            s.read_row(r, row).map_err(|e| e.to_string())?;
        }
    }
    Ok((v, ne))
}

fn write(d: &mut CustomDst<'_>, v: &[f32]) -> std::result::Result<(), String> {
    let ne = d.ne();
    let n0 = ne[0].max(0) as usize;
    for r in 0..d.nrows() {
        let mut idx = row_start(&ne, r);
        for i0 in 0..n0 {
            idx[0] = i0;
            d.set(idx, v[r * n0 + i0]).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// An operand as R sees it: a numeric vector, with `dim` when it has more than one dimension.
fn to_r((v, ne): Values) -> std::result::Result<Robj, String> {
    let n_dims = ne.iter().rposition(|&n| n != 1).map_or(1, |i| i + 1);
    let mut r: Robj = v.into_iter().map(f64::from).collect::<Vec<f64>>().into();
    if n_dims > 1 {
        let d: Vec<f64> = ne[..n_dims].iter().map(|&n| n as f64).collect();
        r.set_attrib("dim", d).map_err(|e| e.to_string())?;
    }
    Ok(r)
}

/// Calls R function `id` with the operands (R thread): `want` values for the result.
fn call(id: u64, inputs: Vec<Values>, want: usize) -> std::result::Result<Vec<f32>, String> {
    let args = inputs
        .into_iter()
        .map(to_r)
        .collect::<std::result::Result<Vec<Robj>, String>>()?;
    let out = rthread::call_r(id, args)?;
    let v: Vec<f32> = if let Some(d) = out.as_real_slice() {
        d.iter().map(|&x| x as f32).collect()
    } else if let Some(i) = out.as_integer_slice() {
        i.iter()
            .map(|&x| if x == i32::MIN { f32::NAN } else { x as f32 })
            .collect()
    } else {
        return Err(format!("it returned an R {:?}, not numbers", out.rtype()));
    };
    if v.len() == want {
        Ok(v)
    } else {
        Err(format!(
            "it returned {} values; the result has {want}",
            v.len()
        ))
    }
}

/// A custom op's kernel: the R function of builder `fname`.
struct Kernel {
    fname: &'static str,
    fun: RFun,
}

impl Kernel {
    /// Computes the result from `srcs` by the R function on R's thread. When that fails, or no
    /// R thread is waiting (an interrupted call's work), the result is NaN; a failure is
    /// reported by the waiting call.
    fn run(&self, dst: &mut CustomDst<'_>, srcs: &[&CustomSrc<'_>]) {
        let want = dst.ne().iter().product::<i64>() as usize;
        let res = srcs
            .iter()
            .map(|s| read(s))
            .collect::<std::result::Result<Vec<Values>, String>>()
            .and_then(|inputs| {
                let id = self.fun.id();
                rthread::on_r_thread(move || rthread::as_callback(|| call(id, inputs, want)))
                    .unwrap_or_else(|| Err(String::new()))
            })
            .and_then(|v| write(dst, &v));
        if let Err(why) = res {
            if !why.is_empty() {
                rthread::record_failure(format!("the R function of {} failed: {why}", self.fname));
            }
            // A write cannot fail: the result's type and shape were checked when it was made.
            let _ = write(dst, &vec![f32::NAN; want]);
        }
    }
}

/// The operands of a custom op: tensors read from the R arguments, each checked.
fn operands(items: &[(&Robj, &str)]) -> Result<Vec<Tensor>> {
    items
        .iter()
        .map(|(o, arg)| {
            let t = tensor_arg(o, arg)?;
            numeric_type(t.ty(), arg)?;
            Ok(t)
        })
        .collect()
}

/// The tensors of an R list `args` (a single tensor may be given bare).
fn arg_list(obj: &Robj) -> Result<Vec<Tensor>> {
    let items: Vec<Robj> = match obj.as_list() {
        Some(l) => l.values().collect(),
        None if obj.is_null() => Vec::new(),
        None => vec![obj.clone()],
    };
    let names: Vec<String> = (1..=items.len()).map(|i| format!("args[[{i}]]")).collect();
    let pairs: Vec<(&Robj, &str)> = items
        .iter()
        .zip(&names)
        .map(|(o, n)| (o, n.as_str()))
        .collect();
    operands(&pairs)
}

/// The builders of map_custom1/2/3 and their in-place forms: each reads its tensors, registers
/// the R function and builds the node with one task.
macro_rules! map_custom {
    ($($name:ident($($t:ident),*) $method:ident;)*) => {
        $(
            #[doc = " @rdname ggml_map_custom"]
            #[doc = " @export"]
            #[extendr]
            fn $name(
                ctx: Robj,
                $($t: Robj,)*
                fun: Robj,
                #[extendr(default = "GGML_N_TASKS_MAX")] n_tasks: Robj,
            ) -> Result<Robj> {
                let c = ctx_arg(&ctx)?;
                let ts = operands(&[$((&$t, stringify!($t))),*])?;
                tasks_arg(&n_tasks)?;
                let k = Kernel { fname: stringify!($name), fun: RFun::new(&fun, "fun")? };
                map_custom!(@call c, $method, ts, k, $($t),*)
            }
        )*
    };
    (@call $c:ident, $m:ident, $ts:ident, $k:ident, a) => {
        Ok(Slot::wrap(lib(
            stringify!($m),
            $c.$m(&$ts[0], move |d, a, _, _| $k.run(d, &[a]), 1),
        )?))
    };
    (@call $c:ident, $m:ident, $ts:ident, $k:ident, a, b) => {
        Ok(Slot::wrap(lib(
            stringify!($m),
            $c.$m(&$ts[0], &$ts[1], move |d, a, b, _, _| $k.run(d, &[a, b]), 1),
        )?))
    };
    (@call $c:ident, $m:ident, $ts:ident, $k:ident, a, b, c) => {
        Ok(Slot::wrap(lib(
            stringify!($m),
            $c.$m(&$ts[0], &$ts[1], &$ts[2], move |d, a, b, c, _, _| $k.run(d, &[a, b, c]), 1),
        )?))
    };
}

map_custom! {
    ggml_map_custom1(a) map_custom1;
    ggml_map_custom1_inplace(a) map_custom1_inplace;
    ggml_map_custom2(a, b) map_custom2;
    ggml_map_custom2_inplace(a, b) map_custom2_inplace;
    ggml_map_custom3(a, b, c) map_custom3;
    ggml_map_custom3_inplace(a, b, c) map_custom3_inplace;
}

/// The kernel of the CUSTOM forms (operands as a slice), after checking `n_tasks` and `fun`.
fn list_kernel(
    fname: &'static str,
    fun: &Robj,
    n_tasks: &Robj,
) -> Result<impl Fn(&mut CustomDst<'_>, &[CustomSrc<'_>], usize, usize) + Send + Sync + 'static> {
    tasks_arg(n_tasks)?;
    let k = Kernel {
        fname,
        fun: RFun::new(fun, "fun")?,
    };
    Ok(
        move |d: &mut CustomDst<'_>, s: &[CustomSrc<'_>], _: usize, _: usize| {
            k.run(d, &s.iter().collect::<Vec<_>>())
        },
    )
}

/// @rdname ggml_map_custom
/// @export
#[allow(clippy::too_many_arguments)]
#[extendr]
fn ggml_custom_4d(
    ctx: Robj,
    r#type: Robj,
    ne0: Robj,
    ne1: Robj,
    ne2: Robj,
    ne3: Robj,
    args: Robj,
    fun: Robj,
    #[extendr(default = "GGML_N_TASKS_MAX")] n_tasks: Robj,
) -> Result<Robj> {
    let c = ctx_arg(&ctx)?;
    let ty = ggml_type(&r#type, "type")?;
    numeric_type(ty, "type")?;
    let ne = [
        dim(&ne0, "ne0")?,
        dim(&ne1, "ne1")?,
        dim(&ne2, "ne2")?,
        dim(&ne3, "ne3")?,
    ];
    let ts = arg_list(&args)?;
    let f = list_kernel("ggml_custom_4d", &fun, &n_tasks)?;
    let refs: Vec<&Tensor> = ts.iter().collect();
    let t = c.custom_4d(ty, ne[0], ne[1], ne[2], ne[3], &refs, f, 1);
    Ok(Slot::wrap(lib("ggml_custom_4d", t)?))
}

/// @rdname ggml_map_custom
/// @export
#[extendr]
fn ggml_custom_inplace(
    ctx: Robj,
    a: Robj,
    args: Robj,
    fun: Robj,
    #[extendr(default = "GGML_N_TASKS_MAX")] n_tasks: Robj,
) -> Result<Robj> {
    let c = ctx_arg(&ctx)?;
    let a = operands(&[(&a, "a")])?.remove(0);
    let ts = arg_list(&args)?;
    let f = list_kernel("ggml_custom_inplace", &fun, &n_tasks)?;
    let refs: Vec<&Tensor> = ts.iter().collect();
    Ok(Slot::wrap(lib(
        "ggml_custom_inplace",
        c.custom_inplace(&a, &refs, f, 1),
    )?))
}

/// `Err` naming `fname` when `g` has custom ops: their R functions need R's thread, which an
/// asynchronous call does not wait on.
pub fn refuse_async(fname: &str, g: &Graph) -> Result<()> {
    let custom = |op| {
        matches!(
            op,
            Op::MapCustom1 | Op::MapCustom2 | Op::MapCustom3 | Op::Custom
        )
    };
    match g.nodes().iter().find(|n| custom(n.op())) {
        Some(n) => Err(bad(
            "graph",
            format!(
                "node {:?} is a custom op ({}), whose R function runs on R's thread while a \
                 call waits: compute the graph with a waiting call instead of {fname}",
                n.name(),
                n.op().name()
            ),
        )),
        None => Ok(()),
    }
}

extendr_module! {
    mod custom;
    fn ggml_map_custom1;
    fn ggml_map_custom1_inplace;
    fn ggml_map_custom2;
    fn ggml_map_custom2_inplace;
    fn ggml_map_custom3;
    fn ggml_map_custom3_inplace;
    fn ggml_custom_4d;
    fn ggml_custom_inplace;
}
